"""CUDA-GL interop under headless EGL: what CUDA writes into a GL buffer, GL reads back equal.

Needs pycuda built with CUDA_ENABLE_GL, a CUDA device and an NVIDIA EGL
context (the H200 test machine has all three); skips with the reason otherwise.
Run tests/gpu in a pytest process of its own: PyOpenGL must load for EGL.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from egl import (
    EglContext,
    EglUnavailable,
    gl_error,
    new_texture,
    open_context,
    read_buffer,
    read_texture,
)
from framelens.core.gpu import interop
from framelens.core.gpu.context import GpuContext
from framelens.core.gpu.interop import (
    INTEROP_PATH,
    DeviceFrame,
    DeviceFrameUploader,
    GlPixelBuffer,
    InteropError,
)

pytestmark = pytest.mark.gpu

Rgba = npt.NDArray[np.uint8]
MiB = 1 << 20

# odd sizes: rows are no power of two, the grid has partial blocks
SIZES = [(333, 197), (1280, 720)]


# ---- fixtures ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cuda_ctx(gpu_ctx: GpuContext) -> GpuContext:
    """gpu_ctx (conftest), when pycuda can also register GL buffers.

    Checked before any OpenGL is loaded, so that machines without a GPU never
    load PyOpenGL for EGL in this process.
    """
    reason = interop.pycuda_gl_reason()
    if reason is not None:
        pytest.skip(reason)
    return gpu_ctx


@pytest.fixture(scope="module")
def egl(cuda_ctx: GpuContext) -> EglContext:
    """A current NVIDIA OpenGL context on the GPU of cuda_ctx, through EGL."""
    try:
        context = open_context(cuda_ctx.index)
    except EglUnavailable as exc:
        pytest.skip(f"no EGL OpenGL context: {exc}")
    if not context.nvidia:
        pytest.skip(f"EGL gives {context.describe()}: no NVIDIA OpenGL to share buffers with")
    return context


@pytest.fixture
def gl(egl: EglContext) -> Iterator[EglContext]:
    """The EGL context, current, with no GL error left over by a test."""
    egl.make_current()
    gl_error()  # clear
    yield egl
    assert gl_error() == 0, "a GL call failed"


def random_rgba(width: int, height: int, seed: int = 0) -> Rgba:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 4), dtype=np.uint8)


def free_texture(texture: int) -> None:
    from OpenGL import GL

    GL.glDeleteTextures(1, [texture])


# ---- a tiny kernel and a device-side frame ------------------------------------------------

_PATTERN_SOURCE = r"""
__global__ void fill_pattern(unsigned char* out, int width, int height, int pitch,
                             unsigned int seed)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    unsigned int v = (unsigned int)(y * width + x) * 2654435761u ^ seed;
    v ^= v >> 13; v *= 0x5bd1e995u; v ^= v >> 15;
    uchar4* row = (uchar4*)(out + (size_t)y * pitch);
    row[x] = make_uchar4(v & 255u, (v >> 8) & 255u, (v >> 16) & 255u, v >> 24);
}
"""


def pattern_reference(width: int, height: int, seed: int) -> Rgba:
    """fill_pattern on the CPU (uint32 arithmetic wraps like the kernel's)."""
    v = np.arange(width * height, dtype=np.uint32) * np.uint32(2654435761) ^ np.uint32(seed)
    v ^= v >> np.uint32(13)
    v *= np.uint32(0x5BD1E995)
    v ^= v >> np.uint32(15)
    return v.astype("<u4").view(np.uint8).reshape(height, width, 4)


@pytest.fixture(scope="module")
def fill_pattern(cuda_ctx: GpuContext) -> Any:
    from pycuda.compiler import SourceModule

    with cuda_ctx.active():
        return SourceModule(_PATTERN_SOURCE).get_function("fill_pattern")


def launch_pattern(
    kernel: Any, ptr: int, width: int, height: int, pitch: int, seed: int, stream: Any
) -> None:
    block = (32, 8, 1)
    grid = ((width + block[0] - 1) // block[0], (height + block[1] - 1) // block[1])
    kernel(
        np.uintp(ptr), np.int32(width), np.int32(height), np.int32(pitch), np.uint32(seed),
        block=block, grid=grid, stream=stream,
    )  # fmt: skip


class DeviceRgba:
    """A DeviceFrame already RGBA in device memory: write_rgba is a pitched copy."""

    def __init__(self, context: GpuContext, rgba: Rgba) -> None:
        import pycuda.driver as cuda

        self.context = context
        self.height, self.width = int(rgba.shape[0]), int(rgba.shape[1])
        with context.active():
            self.memory = cuda.mem_alloc(rgba.nbytes)
            cuda.memcpy_htod(self.memory, np.ascontiguousarray(rgba))

    def write_rgba(self, dst_ptr: int, dst_pitch: int, stream: Any) -> None:
        import pycuda.driver as cuda

        copy = cuda.Memcpy2D()
        copy.set_src_device(self.memory)
        copy.src_pitch = self.width * 4
        copy.set_dst_device(dst_ptr)
        copy.dst_pitch = dst_pitch
        copy.width_in_bytes = self.width * 4
        copy.height = self.height
        copy(stream)

    def free(self) -> None:
        with self.context.active():
            self.memory.free()


class FailingFrame(DeviceRgba):
    def write_rgba(self, dst_ptr: int, dst_pitch: int, stream: Any) -> None:
        raise ValueError("the display kernel failed")


# ---- the checks ------------------------------------------------------------------------------


def test_interop_is_available_on_nvidia_egl(gl: EglContext, cuda_ctx: GpuContext) -> None:
    assert interop.interop_unavailable_reason(cuda_ctx.index) is None, gl.describe()


@pytest.mark.parametrize(("width", "height"), SIZES)
def test_buffer_written_by_copy_reads_back_equal(
    gl: EglContext, cuda_ctx: GpuContext, width: int, height: int
) -> None:
    import pycuda.driver as cuda

    expected = random_rgba(width, height, seed=width)
    texture = new_texture(width, height)
    with GlPixelBuffer.create(width, height, cuda_ctx) as pbo:
        with pbo.map() as (ptr, size):
            assert size >= expected.nbytes
            cuda.memcpy_htod(ptr, expected)
        assert np.array_equal(read_buffer(pbo.buffer, expected.nbytes), expected.reshape(-1))
        pbo.upload_to_texture(texture, width, height)
    assert np.array_equal(read_texture(texture, width, height), expected)
    free_texture(texture)


@pytest.mark.parametrize(("width", "height"), SIZES)
def test_buffer_written_by_kernel_reads_back_equal(
    gl: EglContext, cuda_ctx: GpuContext, fill_pattern: Any, width: int, height: int
) -> None:
    import pycuda.driver as cuda

    seed = 0x9E3779B9 ^ width
    expected = pattern_reference(width, height, seed)
    texture = new_texture(width, height)
    with GlPixelBuffer.create(width, height, cuda_ctx) as pbo:
        with cuda_ctx.active():
            stream = cuda.Stream()
        with pbo.map(stream) as (ptr, _size):
            launch_pattern(fill_pattern, ptr, width, height, width * 4, seed, stream)
        # no host synchronisation: unmapping orders the kernel before GL's reads
        pbo.upload_to_texture(texture, width, height)
        assert np.array_equal(read_texture(texture, width, height), expected)
        assert np.array_equal(read_buffer(pbo.buffer, expected.nbytes), expected.reshape(-1))
    free_texture(texture)
    with cuda_ctx.active():
        del stream


def test_someone_elses_buffer_stays_theirs(gl: EglContext, cuda_ctx: GpuContext) -> None:
    """A wrapped GL buffer is registered and unregistered, never deleted."""
    import pycuda.driver as cuda
    from OpenGL import GL

    width, height = 64, 48
    expected = random_rgba(width, height, seed=7)
    buffer = int(GL.glGenBuffers(1))
    GL.glBindBuffer(GL.GL_PIXEL_UNPACK_BUFFER, buffer)
    GL.glBufferData(GL.GL_PIXEL_UNPACK_BUFFER, expected.nbytes, None, GL.GL_STREAM_DRAW)
    GL.glBindBuffer(GL.GL_PIXEL_UNPACK_BUFFER, 0)
    with GlPixelBuffer(buffer, expected.nbytes, cuda_ctx) as pbo, pbo.map() as (ptr, _size):
        cuda.memcpy_htod(ptr, expected)
    assert GL.glIsBuffer(buffer)
    assert np.array_equal(read_buffer(buffer, expected.nbytes), expected.reshape(-1))
    GL.glDeleteBuffers(1, [buffer])


def test_uploader_draws_device_frames_through_interop(gl: EglContext, cuda_ctx: GpuContext) -> None:
    uploader = DeviceFrameUploader()
    try:
        for width, height in [*SIZES, SIZES[0]]:  # size changes re-create the buffer
            expected = random_rgba(width, height, seed=width + height)
            frame = DeviceRgba(cuda_ctx, expected)
            assert isinstance(frame, DeviceFrame)
            texture = new_texture(width, height)
            assert uploader.upload(frame, texture) is True, uploader.reason
            assert uploader.path == INTEROP_PATH
            assert np.array_equal(read_texture(texture, width, height), expected)
            free_texture(texture)
            frame.free()
    finally:
        uploader.close()


def test_frame_errors_propagate_without_dropping_interop(
    gl: EglContext, cuda_ctx: GpuContext
) -> None:
    uploader = DeviceFrameUploader()
    width, height = SIZES[0]
    texture = new_texture(width, height)
    bad = FailingFrame(cuda_ctx, random_rgba(width, height))
    good = DeviceRgba(cuda_ctx, random_rgba(width, height, seed=3))
    try:
        with pytest.raises(ValueError, match="display kernel failed"):
            uploader.upload(bad, texture)
        assert uploader.reason is None
        assert uploader.upload(good, texture) is True
    finally:
        uploader.close()
        bad.free()
        good.free()
        free_texture(texture)


def test_uploader_falls_back_to_host_when_registration_is_refused(
    gl: EglContext, cuda_ctx: GpuContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> GlPixelBuffer:
        raise InteropError("refused for the test")

    monkeypatch.setattr(GlPixelBuffer, "create", refuse)
    uploader = DeviceFrameUploader()
    width, height = SIZES[0]
    expected = random_rgba(width, height, seed=11)
    frame = DeviceRgba(cuda_ctx, expected)
    texture = new_texture(width, height)
    try:
        assert uploader.upload(frame, texture) is False
        assert uploader.reason == "interop failed: refused for the test"
        assert uploader.path == "texture upload (interop failed: refused for the test)"
        assert np.array_equal(read_texture(texture, width, height), expected)
        assert uploader.upload(frame, texture) is False  # for good, without trying again
    finally:
        uploader.close()
        frame.free()
        free_texture(texture)


# ---- the display kernels (core/gpu/kernels.py) into the interop buffer -------------------


@pytest.fixture(scope="module")
def display_kernels(cuda_ctx: GpuContext) -> Any:
    """framelens' GpuKernels (nvcc for this GPU, else the shipped PTX)."""
    kernels = pytest.importorskip("framelens.core.gpu.kernels")
    return kernels.GpuKernels(cuda_ctx)


class BgrDeviceFrame:
    """A BGR frame in device memory, drawn by the display kernel ``bgr_to_rgba``."""

    def __init__(self, context: GpuContext, kernels: Any, bgr: Rgba) -> None:
        import pycuda.driver as cuda

        self.context, self.kernels = context, kernels
        self.height, self.width = int(bgr.shape[0]), int(bgr.shape[1])
        with context.active():
            self.memory = cuda.mem_alloc(bgr.nbytes)
            cuda.memcpy_htod(self.memory, np.ascontiguousarray(bgr))

    def write_rgba(self, dst_ptr: int, dst_pitch: int, stream: Any) -> None:
        w, h = self.width, self.height
        self.kernels.bgr_to_rgba(int(self.memory), w * 3, w, h, dst_ptr, dst_pitch, w, h, stream)

    def free(self) -> None:
        with self.context.active():
            self.memory.free()


class Nv12DeviceFrame:
    """An NV12 frame (luma plane, then interleaved chroma) drawn by ``nv12_to_rgba``."""

    def __init__(self, context: GpuContext, kernels: Any, nv12: Rgba) -> None:
        import pycuda.driver as cuda

        self.context, self.kernels = context, kernels
        self.height, self.width = int(nv12.shape[0]) * 2 // 3, int(nv12.shape[1])
        with context.active():
            self.memory = cuda.mem_alloc(nv12.nbytes)
            cuda.memcpy_htod(self.memory, np.ascontiguousarray(nv12))

    def write_rgba(self, dst_ptr: int, dst_pitch: int, stream: Any) -> None:
        w, h = self.width, self.height
        luma = int(self.memory)
        self.kernels.nv12_to_rgba(
            luma, w, luma + w * h, w, w, h, dst_ptr, dst_pitch, w, h, stream
        )  # BT.601 limited range, cv2's matrix, by default

    def free(self) -> None:
        with self.context.active():
            self.memory.free()


@pytest.mark.parametrize(("width", "height"), [(334, 198), (1280, 720)])
def test_display_kernel_bgr_into_interop_buffer_equals_cv2(
    gl: EglContext, cuda_ctx: GpuContext, display_kernels: Any, width: int, height: int
) -> None:
    cv2 = pytest.importorskip("cv2")
    bgr = np.random.default_rng(width).integers(0, 256, (height, width, 3), dtype=np.uint8)
    frame = BgrDeviceFrame(cuda_ctx, display_kernels, bgr)
    uploader = DeviceFrameUploader()
    texture = new_texture(width, height)
    try:
        assert uploader.upload(frame, texture) is True, uploader.reason
        got = read_texture(texture, width, height)
    finally:
        uploader.close()
        frame.free()
        free_texture(texture)
    assert np.array_equal(got, cv2.cvtColor(bgr, cv2.COLOR_BGR2RGBA))


@pytest.mark.parametrize(("width", "height"), [(334, 198), (1280, 720)])
def test_display_kernel_nv12_into_interop_buffer_matches_cv2(
    gl: EglContext, cuda_ctx: GpuContext, display_kernels: Any, width: int, height: int
) -> None:
    cv2 = pytest.importorskip("cv2")
    rng = np.random.default_rng(height)
    luma = rng.integers(16, 236, (height, width), dtype=np.uint8)
    chroma = rng.integers(16, 241, (height // 2, width), dtype=np.uint8)
    nv12 = np.vstack([luma, chroma])
    frame = Nv12DeviceFrame(cuda_ctx, display_kernels, nv12)
    uploader = DeviceFrameUploader()
    texture = new_texture(width, height)
    try:
        assert uploader.upload(frame, texture) is True, uploader.reason
        got = read_texture(texture, width, height)
    finally:
        uploader.close()
        frame.free()
        free_texture(texture)
    expected = cv2.cvtColor(nv12, cv2.COLOR_YUV2RGBA_NV12)
    diff = np.abs(got.astype(np.int16) - expected.astype(np.int16))
    assert diff[..., 3].max() == 0  # alpha 255
    assert diff.max() <= 1, f"max difference {diff.max()} against cv2 (its fixed point rounds)"


def _settled_memory(cuda_ctx: GpuContext) -> int:
    from OpenGL import GL

    GL.glFinish()
    cuda_ctx.synchronize()
    return cuda_ctx.memory_used()


def test_register_unregister_cycles_do_not_leak(gl: EglContext, cuda_ctx: GpuContext) -> None:
    import pycuda.driver as cuda

    width, height = 1280, 720  # 3.5 MiB: a buffer leaked per cycle would be 350 MiB
    data = random_rgba(width, height)

    def cycle() -> None:
        with GlPixelBuffer.create(width, height, cuda_ctx) as pbo, pbo.map() as (ptr, _):
            cuda.memcpy_htod(ptr, data)

    for _ in range(5):  # warm up: driver pools, first-use allocations
        cycle()
    before = _settled_memory(cuda_ctx)
    for _ in range(100):
        cycle()
    grown = _settled_memory(cuda_ctx) - before
    assert grown < 16 * MiB, f"device memory grew by {grown / MiB:.1f} MiB over 100 cycles"


def test_reregistering_one_buffer_does_not_leak(gl: EglContext, cuda_ctx: GpuContext) -> None:
    from OpenGL import GL

    size = 1280 * 720 * 4
    buffer = int(GL.glGenBuffers(1))
    GL.glBindBuffer(GL.GL_PIXEL_UNPACK_BUFFER, buffer)
    GL.glBufferData(GL.GL_PIXEL_UNPACK_BUFFER, size, None, GL.GL_STREAM_DRAW)
    GL.glBindBuffer(GL.GL_PIXEL_UNPACK_BUFFER, 0)
    try:
        for _ in range(5):
            GlPixelBuffer(buffer, size, cuda_ctx).close()
        before = _settled_memory(cuda_ctx)
        for _ in range(100):
            with GlPixelBuffer(buffer, size, cuda_ctx) as pbo, pbo.map():
                pass
        grown = _settled_memory(cuda_ctx) - before
    finally:
        GL.glDeleteBuffers(1, [buffer])
    assert grown < 16 * MiB, f"device memory grew by {grown / MiB:.1f} MiB over 100 cycles"


def test_pipeline_frames_reach_a_gl_texture_through_interop(
    gl: EglContext, cuda_ctx: GpuContext
) -> None:
    """The product's path end to end: NVDEC frame -> GPU pipeline (display kernel's RGBA
    frame) -> the canvas's uploader -> GL texture, with no host copy; what GL holds equals
    the frame downloaded the slow way, and the CPU decode of the same frame."""
    from pathlib import Path

    import pycuda.driver as cuda
    from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
    from framelens.core.pipeline import build
    from framelens.core.pipeline.settings import PipelineSettings
    from framelens.core.stages.sources import open_source
    from framelens.core.stages.sources.nvdec import open_gpu_source
    from framelens.core.types import StageTimes

    samples = Path(__file__).resolve().parents[2] / "resources" / "samples"
    sample = samples / "one-by-one-person-detection.mp4"
    pipeline = build.gpu_pipelines(
        PipelineSettings(resolve_model(DEFAULT_MODEL), device="cuda:0"), 1
    )[0]
    with cuda_ctx.active():
        stream = cuda.Stream()
    source = open_gpu_source(str(sample), cuda_ctx, stream)
    uploader = DeviceFrameUploader()
    texture = 0
    try:
        source.seek(330)
        frame = source.read()
        assert frame is not None
        result = pipeline.infer(frame, StageTimes())
        image = result.frame.device
        assert image is not None and not result.frame.on_host
        texture = new_texture(image.width, image.height)
        assert uploader.upload(image, texture) is True, uploader.reason  # type: ignore[arg-type]
        shown = read_texture(texture, image.width, image.height)
        downloaded = image.to_host_rgba()  # type: ignore[attr-defined]
        with open_source(str(sample)) as cpu:
            cpu.seek(330)
            ref = cpu.read()
        assert ref is not None
    finally:
        uploader.close()
        if texture:
            free_texture(texture)
        pipeline.close()
        source.close()
    assert np.array_equal(shown, downloaded)
    import cv2

    assert np.array_equal(shown, cv2.cvtColor(ref.image, cv2.COLOR_BGR2RGBA))
