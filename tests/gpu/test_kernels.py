"""framelens.core.gpu.kernels against the CPU path, on fresh random frames of odd sizes.

Every test draws a new seed (printed, so a failure shows it; FRAMELENS_TEST_SEED=<seed>
replays it), gives its frames row pitches wider than their rows with junk in the
gaps, poisons its outputs before each launch (NaN for float tensors; two different
byte values for uint8 images, whose results must agree) and checks that every
element was written and nothing outside the outputs was. Every launch goes to a
stream of its own and is awaited on that stream only.

References: ``core.preprocess.Preprocessor`` and cv2, never a second implementation.
Error bounds are in 0..255 pixel units (before a model's scaling):
- BGR and NV12 preprocessing vs Preprocessor (NV12: after cv2 YUV2BGR_NV12):
  max 1e-3, mean under 1e-5 (float32). Both resize the uint8 frame in float32 with
  the same taps, weights and arithmetic (x86 OpenCV runs its float resize through
  IPP): identical when downscaling, 1 float ulp (3e-5) on a few edge pixels when
  upscaling. Where cv2 has no IPP its own loop rounds the source coordinate to
  float first, off by up to ~0.03: there the bounds are max 0.05, mean 0.005.
  Unresized frames are identical; so is the NV12 colour conversion (OpenCV's
  fixed-point formula), before any resize;
- display: 1:1 BGR and NV12 exact, stretched max 2, mean under 0.25;
- YCrCb split and unresized merge: exact (OpenCV's integer formulas);
- bicubic chroma: max 1 on under 1% of pixels; merged with it: max 2;
- rectangles: identical to cv2.rectangle except the outer corners, which cv2 rounds;
- fp16 tensors: the same bounds plus one fp16 rounding step (0.13): both sides are
  rounded to fp16 from float32 values that agree to within the bounds above.
The kernels are built both ways (nvcc for this GPU, and the shipped PTX through the
driver) and every test runs on both.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import cv2
import numpy as np
import numpy.typing as npt
import pytest
from framelens.core.gpu.buffers import DeviceBuffer
from framelens.core.gpu.context import GpuContext
from framelens.core.gpu.kernels import (
    BT601_LIMITED,
    GpuKernels,
    KernelError,
    PreprocessLayout,
    find_nvcc,
    pack_rects,
    rect_half_width,
    yuv_matrix,
)
from framelens.core.models.spec import ModelSpec
from framelens.core.stages.preprocess.cpu import Preprocessor

pytestmark = pytest.mark.gpu

cuda = pytest.importorskip("pycuda.driver")

U8 = npt.NDArray[np.uint8]
F32 = npt.NDArray[np.float32]
GUARD = 4096  # bytes after every output that must stay untouched
FP16_SLACK = 0.13  # one fp16 step at 255 (or at 1.0 after / 255), in 0..255 units

# cv2.resize of float32 images: IPP's (x86 builds), which the kernels reproduce, or,
# without IPP, OpenCV's own loop with its source coordinate rounded to float.
CV2_RESIZE_IS_IPP = bool(cv2.ipp.useIPP())
PRE_MAX = 1e-3 if CV2_RESIZE_IS_IPP else 0.05  # preprocessing vs Preprocessor, max
PRE_MEAN = 1e-5 if CV2_RESIZE_IS_IPP else 5e-3  # and mean, in 0..255 units (float32)

ODD_SIZES = [(641, 479), (1917, 1079), (33, 17)]  # (width, height)
NV12_SIZES = [(642, 478), (1918, 1080), (34, 18)]  # NV12 is even; half-width stays odd


# ---- fixtures and device helpers ------------------------------------------------------------


@pytest.fixture(scope="module", params=["nvcc", "ptx"])
def kernels(request: pytest.FixtureRequest, gpu_ctx: GpuContext) -> GpuKernels:
    """The kernels built for this GPU by nvcc, then loaded from the shipped PTX."""
    if request.param == "nvcc" and find_nvcc() is None:
        pytest.skip("nvcc is not installed here")
    k = GpuKernels(gpu_ctx, build=request.param)
    print(f"kernels: {k.origin}")
    return k


@pytest.fixture
def rng() -> np.random.Generator:
    seed = int(os.environ.get("FRAMELENS_TEST_SEED") or secrets.randbits(63))
    print(f"random seed {seed} (FRAMELENS_TEST_SEED={seed} replays it)")
    return np.random.default_rng(seed)


class Buffer:
    """A device output of ``rows`` rows of ``row_bytes``, ``pitch`` apart, plus a guard."""

    def __init__(self, rows: int, row_bytes: int, pitch: int | None = None) -> None:
        self.rows, self.row_bytes = rows, row_bytes
        self.pitch = pitch if pitch is not None else row_bytes
        self.nbytes = rows * self.pitch
        self.alloc = cuda.mem_alloc(self.nbytes + GUARD)
        self.ptr = int(self.alloc)
        self._pad = self._guard = 0xAB

    def poison(self, byte: int) -> None:
        cuda.memset_d8(self.alloc, byte, self.nbytes + GUARD)
        self._pad = self._guard = byte

    def poison_nan(self, dtype: str) -> None:
        if dtype == "float16":
            cuda.memset_d16(self.alloc, 0x7E00, self.nbytes // 2)
        else:
            cuda.memset_d32(self.alloc, 0x7FC00000, self.nbytes // 4)
        cuda.memset_d8(self.ptr + self.nbytes, 0xAB, GUARD)
        self._guard = 0xAB

    def read(self) -> U8:
        """The payload, (rows, row_bytes); fails if a guard or a row gap was written."""
        host = np.empty(self.nbytes + GUARD, np.uint8)
        cuda.memcpy_dtoh(host, self.alloc)
        assert (host[self.nbytes :] == self._guard).all(), "a kernel wrote past its output"
        grid = host[: self.nbytes].reshape(self.rows, self.pitch)
        if self.pitch > self.row_bytes:
            assert (grid[:, self.row_bytes :] == self._pad).all(), "a kernel wrote a row gap"
        return grid[:, : self.row_bytes].copy()

    def free(self) -> None:
        self.alloc.free()


class Device:
    """Allocations of one test, freed at its end; the context stays current meanwhile."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self._keep: list[Any] = []
        self.stream = cuda.Stream()

    def upload(self, array: npt.NDArray[Any]) -> int:
        alloc = cuda.to_device(np.ascontiguousarray(array))
        self._keep.append(alloc)
        return int(alloc)

    def upload_pitched(self, rows: U8, align: int = 1) -> tuple[int, int]:
        """A (h, row_bytes) image uploaded with a wider pitch, junk in the gaps."""
        h, row_bytes = rows.shape
        extra = int(self.rng.choice([0, 1, 3, 64, 131]))
        pitch = -(-(row_bytes + extra) // align) * align
        host = self.rng.integers(0, 256, (h, pitch), dtype=np.uint8)
        host[:, :row_bytes] = rows
        return self.upload(host), pitch

    def buffer(self, rows: int, row_bytes: int, pitch: int | None = None) -> Buffer:
        b = Buffer(rows, row_bytes, pitch)
        self._keep.append(b)
        return b

    def wait(self) -> None:
        self.stream.synchronize()

    def free(self) -> None:
        self.stream.synchronize()
        for item in self._keep:
            item.free()


@pytest.fixture
def dev(gpu_ctx: GpuContext, rng: np.random.Generator) -> Iterator[Device]:
    with gpu_ctx.active():
        d = Device(rng)
        try:
            yield d
        finally:
            d.free()


def written_twice(dev: Device, launch: Callable[[], None], *outs: Buffer) -> list[U8]:
    """Run ``launch`` over two different poisons; equal results mean every byte was written."""
    results: list[list[U8]] = []
    for byte in (0xAB, 0x54):
        for out in outs:
            out.poison(byte)
        launch()
        dev.wait()
        results.append([out.read() for out in outs])
    for first, second in zip(*results, strict=True):
        assert np.array_equal(first, second), "some bytes were never written (poison kept)"
    return results[0]


def image(rng: np.random.Generator, w: int, h: int, c: int = 3) -> U8:
    return rng.integers(0, 256, (h, w, c), dtype=np.uint8)


def nv12_frame(rng: np.random.Generator, w: int, h: int) -> tuple[U8, U8]:
    """Random Y (h, w) and interleaved UV (h/2, w) planes."""
    return (
        rng.integers(0, 256, (h, w), dtype=np.uint8),
        rng.integers(0, 256, (h // 2, w), dtype=np.uint8),
    )


def diff_stats(got: npt.NDArray[Any], ref: npt.NDArray[Any]) -> tuple[float, float, float]:
    """max abs, mean abs, fraction of elements that differ."""
    d = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    return float(d.max()), float(d.mean()), float((d > 0).mean())


def model(
    input_hw: tuple[int, int] = (416, 416),
    *,
    color_order: str = "bgr",
    scale: float = 1.0,
    letterbox: str = "topleft",
    pad: int = 114,
    dynamic: bool = False,
) -> ModelSpec:
    return ModelSpec(
        name="test",
        path=Path("test.onnx"),
        layout="yolox",
        task="detect",
        input_size=input_hw,
        color_order=color_order,
        input_scale=scale,
        letterbox=letterbox,
        pad_value=pad,
        dynamic_input=dynamic,
    )


def read_tensor(out: Buffer, layout: PreprocessLayout) -> F32:
    raw = out.read().reshape(-1).view(layout.numpy_dtype)
    return raw.reshape(layout.shape).astype(np.float32)


def check_tensor(
    got: F32, ref: F32, layout: PreprocessLayout, *, max_units: float, mean_units: float
) -> None:
    """got vs the CPU tensor in 0..255 units; padding identical; every element written."""
    assert np.isfinite(got).all(), "tensor elements left unwritten (NaN poison kept)"
    if layout.dtype == "float16":
        ref = ref.astype(np.float16).astype(np.float32)
    s = layout.scale[0]
    units = np.abs(got.astype(np.float64) - ref.astype(np.float64)) / s
    # fp16 adds a rounding step unless the float32 values must be identical anyway
    slack = FP16_SLACK if layout.dtype == "float16" and max_units > 0 else 0.0
    stats = (float(units.max()), float(units.mean()), float((units > 1e-6).mean()))
    assert stats[0] <= max_units + slack, f"max {stats[0]:.3g} units (mean, frac: {stats[1:]})"
    assert stats[1] <= mean_units, f"mean {stats[1]:.3g} units (max, frac: {stats})"
    inside = np.zeros(layout.shape, bool)
    rows = slice(layout.pad_y, layout.pad_y + layout.new_h)
    inside[..., rows, layout.pad_x : layout.pad_x + layout.new_w] = True
    assert np.array_equal(got[~inside], ref[~inside]), "padding differs from the CPU's"


# ---- fused preprocessing -------------------------------------------------------------------


def run_preprocess_bgr(
    kernels: GpuKernels, dev: Device, spec: ModelSpec, frame: U8, dtype: str
) -> tuple[F32, F32, PreprocessLayout]:
    """(GPU tensor, Preprocessor's tensor, layout) for one BGR frame."""
    h, w = frame.shape[:2]
    layout = PreprocessLayout.from_spec(spec, w, h, dtype)
    ref = Preprocessor(spec, w, h)(frame).copy()
    src, pitch = dev.upload_pitched(frame.reshape(h, w * 3))
    out = dev.buffer(1, layout.nbytes)
    out.poison_nan(dtype)
    kernels.preprocess_bgr(src, pitch, w, h, out.ptr, layout, dev.stream)
    dev.wait()
    return read_tensor(out, layout), ref, layout


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("letterbox", ["topleft", "center"])
@pytest.mark.parametrize(("color_order", "scale", "pad"), [("bgr", 1.0, 114), ("rgb", 1 / 255, 0)])
@pytest.mark.parametrize(("w", "h"), ODD_SIZES)
def test_preprocess_bgr_matches_preprocessor(
    kernels: GpuKernels,
    dev: Device,
    w: int,
    h: int,
    color_order: str,
    scale: float,
    pad: int,
    letterbox: str,
    dtype: str,
) -> None:
    spec = model((416, 416), color_order=color_order, scale=scale, letterbox=letterbox, pad=pad)
    got, ref, layout = run_preprocess_bgr(kernels, dev, spec, image(dev.rng, w, h), dtype)
    check_tensor(got, ref, layout, max_units=PRE_MAX, mean_units=PRE_MEAN)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_preprocess_rgb_source(kernels: GpuKernels, dev: Device, dtype: str) -> None:
    """An RGB frame gives what its BGR twin gives, for a BGR and an RGB model."""
    w, h = 513, 387
    frame = image(dev.rng, w, h)
    rgb = np.ascontiguousarray(frame[..., ::-1])
    src, pitch = dev.upload_pitched(rgb.reshape(h, w * 3))
    for order in ("bgr", "rgb"):
        spec = model((320, 320), color_order=order, scale=1 / 255, letterbox="center")
        layout = PreprocessLayout.from_spec(spec, w, h, dtype)
        ref = Preprocessor(spec, w, h)(frame).copy()
        out = dev.buffer(1, layout.nbytes)
        out.poison_nan(dtype)
        kernels.preprocess_bgr(src, pitch, w, h, out.ptr, layout, dev.stream, src_order="rgb")
        dev.wait()
        check_tensor(read_tensor(out, layout), ref, layout, max_units=PRE_MAX, mean_units=PRE_MEAN)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_preprocess_unresized_is_exact(kernels: GpuKernels, dev: Device, dtype: str) -> None:
    """A frame of the input's size, and a dynamic (YuNet-like) model that only pads it."""
    for spec, (w, h) in [
        (model((417, 333), color_order="rgb", scale=1 / 255), (333, 417)),
        (model((640, 640), dynamic=True, pad=0), (608, 321)),
    ]:
        got, ref, layout = run_preprocess_bgr(kernels, dev, spec, image(dev.rng, w, h), dtype)
        assert (layout.new_w, layout.new_h) == (w, h)
        check_tensor(got, ref, layout, max_units=0, mean_units=0)


@pytest.mark.parametrize(("w", "h"), [(611, 347), (1917, 1079)])
def test_preprocess_dynamic_input(kernels: GpuKernels, dev: Device, w: int, h: int) -> None:
    """YuNet-like: the input follows the frame, padded to a multiple of 32 (and scaled)."""
    spec = model((640, 640), dynamic=True, pad=0)
    got, ref, layout = run_preprocess_bgr(kernels, dev, spec, image(dev.rng, w, h), "float32")
    assert layout.input_w % 32 == 0 and layout.input_h % 32 == 0
    check_tensor(got, ref, layout, max_units=PRE_MAX, mean_units=PRE_MEAN)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("letterbox", ["topleft", "center"])
@pytest.mark.parametrize(("color_order", "scale"), [("bgr", 1.0), ("rgb", 1 / 255)])
@pytest.mark.parametrize(("w", "h"), NV12_SIZES)
def test_preprocess_nv12_matches_cv2_then_preprocessor(
    kernels: GpuKernels,
    dev: Device,
    w: int,
    h: int,
    color_order: str,
    scale: float,
    letterbox: str,
    dtype: str,
) -> None:
    spec = model((640, 640), color_order=color_order, scale=scale, letterbox=letterbox)
    y, uv = nv12_frame(dev.rng, w, h)
    bgr = cv2.cvtColor(np.vstack([y, uv]), cv2.COLOR_YUV2BGR_NV12)
    ref = Preprocessor(spec, w, h)(bgr).copy()
    layout = PreprocessLayout.from_spec(spec, w, h, dtype)
    y_ptr, y_pitch = dev.upload_pitched(y)
    uv_ptr, uv_pitch = dev.upload_pitched(uv)
    out = dev.buffer(1, layout.nbytes)
    out.poison_nan(dtype)
    kernels.preprocess_nv12(y_ptr, y_pitch, uv_ptr, uv_pitch, w, h, out.ptr, layout, dev.stream)
    dev.wait()
    check_tensor(read_tensor(out, layout), ref, layout, max_units=PRE_MAX, mean_units=PRE_MEAN)


def test_preprocess_nv12_unresized(kernels: GpuKernels, dev: Device) -> None:
    w, h = 418, 334
    spec = model((334, 418))
    y, uv = nv12_frame(dev.rng, w, h)
    ref = Preprocessor(spec, w, h)(cv2.cvtColor(np.vstack([y, uv]), cv2.COLOR_YUV2BGR_NV12))
    layout = PreprocessLayout.from_spec(spec, w, h)
    y_ptr, y_pitch = dev.upload_pitched(y)
    uv_ptr, uv_pitch = dev.upload_pitched(uv)
    out = dev.buffer(1, layout.nbytes)
    out.poison_nan("float32")
    kernels.preprocess_nv12(y_ptr, y_pitch, uv_ptr, uv_pitch, w, h, out.ptr, layout, dev.stream)
    dev.wait()
    check_tensor(read_tensor(out, layout), ref, layout, max_units=0, mean_units=0)


# ---- display -------------------------------------------------------------------------------


def rgba_buffer(dev: Device, w: int, h: int) -> Buffer:
    return dev.buffer(h, w * 4, w * 4 + 4 * int(dev.rng.choice([0, 1, 7])))


@pytest.mark.parametrize("bgra", [False, True])
@pytest.mark.parametrize(("w", "h"), NV12_SIZES)
def test_nv12_to_rgba_matches_cv2(
    kernels: GpuKernels, dev: Device, w: int, h: int, bgra: bool
) -> None:
    y, uv = nv12_frame(dev.rng, w, h)
    code = cv2.COLOR_YUV2BGRA_NV12 if bgra else cv2.COLOR_YUV2RGBA_NV12
    ref = cv2.cvtColor(np.vstack([y, uv]), code)
    y_ptr, y_pitch = dev.upload_pitched(y)
    uv_ptr, uv_pitch = dev.upload_pitched(uv)
    out = rgba_buffer(dev, w, h)

    def launch() -> None:
        kernels.nv12_to_rgba(
            y_ptr, y_pitch, uv_ptr, uv_pitch, w, h, out.ptr, out.pitch, w, h, dev.stream,
            bgra=bgra,
        )  # fmt: skip

    (got,) = written_twice(dev, launch, out)
    got = got.reshape(h, w, 4)
    assert (got[..., 3] == 255).all()
    max_err, _, frac = diff_stats(got, ref)
    assert max_err == 0, (max_err, frac)  # OpenCV's fixed-point conversion, bit for bit


@pytest.mark.parametrize(("w", "h", "dw", "dh"), [(642, 478, 879, 291), (34, 18, 101, 55)])
def test_nv12_to_rgba_stretched(
    kernels: GpuKernels, dev: Device, w: int, h: int, dw: int, dh: int
) -> None:
    y, uv = nv12_frame(dev.rng, w, h)
    rgba = cv2.cvtColor(np.vstack([y, uv]), cv2.COLOR_YUV2RGBA_NV12)
    ref = cv2.resize(rgba, (dw, dh), interpolation=cv2.INTER_LINEAR)
    y_ptr, y_pitch = dev.upload_pitched(y)
    uv_ptr, uv_pitch = dev.upload_pitched(uv)
    out = rgba_buffer(dev, dw, dh)

    def launch() -> None:
        kernels.nv12_to_rgba(
            y_ptr, y_pitch, uv_ptr, uv_pitch, w, h, out.ptr, out.pitch, dw, dh, dev.stream
        )

    (got,) = written_twice(dev, launch, out)
    max_err, mean_err, _ = diff_stats(got.reshape(dh, dw, 4), ref)
    assert max_err <= 2 and mean_err <= 0.25, (max_err, mean_err)


@pytest.mark.parametrize(("standard", "full"), [("bt601", True), ("bt709", False), ("bt709", True)])
def test_nv12_matrices(kernels: GpuKernels, dev: Device, standard: str, full: bool) -> None:
    """Other matrices against their defining formula (float64), and their black and white."""
    w, h = 258, 66
    y, uv = nv12_frame(dev.rng, w, h)
    lo, hi = (0, 255) if full else (16, 235)
    y[0, :4] = [lo, lo, hi, hi]  # first 2x2 block: black then white with neutral chroma
    y[1, :4] = [lo, lo, hi, hi]
    uv[0, :4] = 128
    m = yuv_matrix(standard, full)
    yy = np.maximum(y.astype(np.float64) - m.y_offset, 0) * m.y_scale
    u = np.repeat(np.repeat(uv[:, 0::2].astype(np.float64) - 128, 2, 0), 2, 1)
    v = np.repeat(np.repeat(uv[:, 1::2].astype(np.float64) - 128, 2, 0), 2, 1)
    rgb = np.stack([yy + m.r_v * v, yy + m.g_u * u + m.g_v * v, yy + m.b_u * u], -1)
    ref = np.clip(np.rint(rgb), 0, 255)
    y_ptr, y_pitch = dev.upload_pitched(y)
    uv_ptr, uv_pitch = dev.upload_pitched(uv)
    out = rgba_buffer(dev, w, h)

    def launch() -> None:
        kernels.nv12_to_rgba(
            y_ptr, y_pitch, uv_ptr, uv_pitch, w, h, out.ptr, out.pitch, w, h, dev.stream,
            matrix=m,
        )  # fmt: skip

    (got,) = written_twice(dev, launch, out)
    got = got.reshape(h, w, 4)
    assert (got[0, 0, :3] == 0).all() and (got[0, 2, :3] == 255).all()
    max_err, _, frac = diff_stats(got[..., :3], ref)
    assert max_err <= 1 and frac < 1e-3, (max_err, frac)


@pytest.mark.parametrize("src_order", ["bgr", "rgb"])
@pytest.mark.parametrize("bgra", [False, True])
@pytest.mark.parametrize(("w", "h"), ODD_SIZES)
def test_bgr_to_rgba_is_exact(
    kernels: GpuKernels, dev: Device, w: int, h: int, bgra: bool, src_order: str
) -> None:
    frame = image(dev.rng, w, h)
    ref = cv2.cvtColor(frame, cv2.COLOR_BGR2BGRA if bgra else cv2.COLOR_BGR2RGBA)
    src_img = frame if src_order == "bgr" else np.ascontiguousarray(frame[..., ::-1])
    src, pitch = dev.upload_pitched(src_img.reshape(h, w * 3))
    out = rgba_buffer(dev, w, h)

    def launch() -> None:
        kernels.bgr_to_rgba(
            src, pitch, w, h, out.ptr, out.pitch, w, h, dev.stream, src_order=src_order,
            bgra=bgra,
        )  # fmt: skip

    (got,) = written_twice(dev, launch, out)
    assert np.array_equal(got.reshape(h, w, 4), ref)


@pytest.mark.parametrize(("w", "h", "dw", "dh"), [(641, 479, 1003, 277), (33, 17, 8, 5)])
def test_bgr_to_rgba_stretched(
    kernels: GpuKernels, dev: Device, w: int, h: int, dw: int, dh: int
) -> None:
    frame = image(dev.rng, w, h)
    ref = cv2.resize(cv2.cvtColor(frame, cv2.COLOR_BGR2RGBA), (dw, dh))
    src, pitch = dev.upload_pitched(frame.reshape(h, w * 3))
    out = rgba_buffer(dev, dw, dh)

    def launch() -> None:
        kernels.bgr_to_rgba(src, pitch, w, h, out.ptr, out.pitch, dw, dh, dev.stream)

    (got,) = written_twice(dev, launch, out)
    max_err, mean_err, _ = diff_stats(got.reshape(dh, dw, 4), ref)
    assert max_err <= 1 and mean_err <= 0.25, (max_err, mean_err)


# ---- super-resolution colour ---------------------------------------------------------------


@pytest.mark.parametrize("src_order", ["bgr", "rgb"])
@pytest.mark.parametrize(("w", "h"), ODD_SIZES)
def test_ycrcb_split_is_exact(
    kernels: GpuKernels, dev: Device, w: int, h: int, src_order: str
) -> None:
    frame = image(dev.rng, w, h)
    ycrcb = cv2.cvtColor(frame, cv2.COLOR_BGR2YCrCb)
    src_img = frame if src_order == "bgr" else np.ascontiguousarray(frame[..., ::-1])
    src, pitch = dev.upload_pitched(src_img.reshape(h, w * 3))
    y_out, cr_out, cb_out = dev.buffer(h, w * 4), dev.buffer(h, w), dev.buffer(h, w)

    def launch() -> None:
        kernels.bgr_to_ycrcb_planes(
            src, pitch, w, h, y_out.ptr, cr_out.ptr, cb_out.ptr, dev.stream, src_order=src_order
        )

    y_raw, cr, cb = written_twice(dev, launch, y_out, cr_out, cb_out)
    y = y_raw.reshape(-1).view(np.float32).reshape(h, w)
    assert np.array_equal(y, ycrcb[..., 0].astype(np.float32) / 255)
    assert np.array_equal(cr, ycrcb[..., 1])
    assert np.array_equal(cb, ycrcb[..., 2])

    # Y alone: the chroma planes may be skipped.
    y_out.poison_nan("float32")
    kernels.bgr_to_ycrcb_planes(src, pitch, w, h, y_out.ptr, 0, 0, dev.stream, src_order=src_order)
    dev.wait()
    assert np.array_equal(y_out.read().reshape(-1).view(np.float32).reshape(h, w), y)


@pytest.mark.parametrize(
    ("w", "h", "dw", "dh"),
    [(641, 479, 1282, 958), (33, 17, 99, 51), (161, 91, 644, 364), (37, 23, 50, 41)],
)
def test_upscale_chroma_matches_cv2_cubic(
    kernels: GpuKernels, dev: Device, w: int, h: int, dw: int, dh: int
) -> None:
    cr = dev.rng.integers(0, 256, (h, w), dtype=np.uint8)
    cb = cv2.GaussianBlur(dev.rng.integers(0, 256, (h, w), dtype=np.uint8), (0, 0), 2)
    cr_in, cb_in = dev.upload(cr), dev.upload(cb)
    cr_out, cb_out = dev.buffer(dh, dw), dev.buffer(dh, dw)

    def launch() -> None:
        kernels.upscale_chroma(cr_in, cb_in, w, h, cr_out.ptr, cb_out.ptr, dw, dh, dev.stream)

    got_cr, got_cb = written_twice(dev, launch, cr_out, cb_out)
    for got, plane in ((got_cr, cr), (got_cb, cb)):
        ref = cv2.resize(plane, (dw, dh), interpolation=cv2.INTER_CUBIC)
        max_err, _, frac = diff_stats(got, ref)
        assert max_err <= 1 and frac < 0.01, (max_err, frac)


def merge_reference(y: F32, cr_hi: U8, cb_hi: U8) -> U8:
    y8 = np.clip(np.rint(y * np.float32(255)), 0, 255).astype(np.uint8)
    return cv2.cvtColor(np.dstack([y8, cr_hi, cb_hi]), cv2.COLOR_YCrCb2BGR)


_ORDER_FROM_BGR = {
    "bgr": None,
    "rgb": cv2.COLOR_BGR2RGB,
    "bgra": cv2.COLOR_BGR2BGRA,
    "rgba": cv2.COLOR_BGR2RGBA,
}


@pytest.mark.parametrize("order", ["bgr", "rgb", "bgra", "rgba"])
@pytest.mark.parametrize(("w", "h", "s"), [(321, 239, 2), (33, 17, 3), (161, 91, 4)])
def test_merge_upscales_chroma_and_matches_cv2(
    kernels: GpuKernels, dev: Device, w: int, h: int, s: int, order: str
) -> None:
    W, H = w * s, h * s
    y = dev.rng.uniform(-0.1, 1.1, (H, W)).astype(np.float32)  # the model overshoots a little
    cr = dev.rng.integers(0, 256, (h, w), dtype=np.uint8)
    cb = dev.rng.integers(0, 256, (h, w), dtype=np.uint8)
    bgr = merge_reference(
        y,
        cv2.resize(cr, (W, H), interpolation=cv2.INTER_CUBIC),
        cv2.resize(cb, (W, H), interpolation=cv2.INTER_CUBIC),
    )
    code = _ORDER_FROM_BGR[order]
    ref = bgr if code is None else cv2.cvtColor(bgr, code)
    channels = ref.shape[2]
    y_in, cr_in, cb_in = dev.upload(y), dev.upload(cr), dev.upload(cb)
    pad = int(dev.rng.choice([0, 4, 12]))
    out = dev.buffer(H, W * channels, W * channels + pad)

    def launch() -> None:
        kernels.merge_ycrcb_to_bgr(
            y_in, W, H, cr_in, cb_in, w, h, out.ptr, out.pitch, dev.stream, order=order
        )

    (got,) = written_twice(dev, launch, out)
    max_err, _, frac = diff_stats(got.reshape(H, W, channels), ref)
    assert max_err <= 2 and frac < 0.01, (max_err, frac)


@pytest.mark.parametrize(("w", "h"), ODD_SIZES)
def test_split_then_merge_is_cv2_round_trip(
    kernels: GpuKernels, dev: Device, w: int, h: int
) -> None:
    """Unresized chroma: split and merge are OpenCV's integer arithmetic, exactly."""
    frame = image(dev.rng, w, h)
    ref = cv2.cvtColor(cv2.cvtColor(frame, cv2.COLOR_BGR2YCrCb), cv2.COLOR_YCrCb2BGR)
    src, pitch = dev.upload_pitched(frame.reshape(h, w * 3))
    y, cr, cb = dev.buffer(h, w * 4), dev.buffer(h, w), dev.buffer(h, w)
    kernels.bgr_to_ycrcb_planes(src, pitch, w, h, y.ptr, cr.ptr, cb.ptr, dev.stream)
    out = dev.buffer(h, w * 4, w * 4 + 8)

    def launch() -> None:
        kernels.merge_ycrcb_to_rgba(y.ptr, w, h, cr.ptr, cb.ptr, w, h, out.ptr, out.pitch,
                                    dev.stream)  # fmt: skip

    (got,) = written_twice(dev, launch, out)
    assert np.array_equal(got.reshape(h, w, 4), cv2.cvtColor(ref, cv2.COLOR_BGR2RGBA))


# ---- rectangles ----------------------------------------------------------------------------


@pytest.mark.parametrize("channels", [3, 4])
@pytest.mark.parametrize("thickness", [1, 2, 3, 4, 5])
def test_draw_rects_match_cv2_rectangle(
    kernels: GpuKernels, dev: Device, thickness: int, channels: int
) -> None:
    w, h = 643, 359
    frame = image(dev.rng, w, h, channels)
    n = 12
    x1 = dev.rng.uniform(-20, w - 30, n)
    y1 = dev.rng.uniform(-20, h - 30, n)
    boxes = np.stack(
        [x1, y1, x1 + dev.rng.uniform(25, 300, n), y1 + dev.rng.uniform(25, 200, n)], 1
    )
    boxes[3] = [np.nan, 0, 10, 10]  # dropped, as annotate() drops it
    colours = dev.rng.integers(0, 256, (n, channels))
    rects = pack_rects(boxes, colours, w, h, thickness)
    filled = pack_rects(np.array([[50.4, 60.6, 80.5, 71.0]]), colours[0], w, h, 1, filled=True)
    rects = np.vstack([rects, filled])
    assert len(rects) == n  # one of the n + 1 dropped

    ref = frame.copy()
    outer_corners = np.zeros((h, w), bool)
    half = rect_half_width(thickness)
    yy, xx = np.mgrid[0:h, 0:w]
    for r in rects:
        colour = tuple(int(c) for c in (int(r[4]) & 0xFFFFFFFF).to_bytes(4, "little")[:channels])
        t = -1 if r[5] < 0 else thickness
        cv2.rectangle(ref, (int(r[0]), int(r[1])), (int(r[2]), int(r[3])), colour, t, cv2.LINE_8)
        if r[5] > 0:  # cv2 rounds the outer corners of thick outlines
            outer_corners |= (
                ((xx < r[0]) | (xx > r[2]))
                & ((yy < r[1]) | (yy > r[3]))
                & (np.abs(xx - np.clip(xx, r[0], r[2])) <= half)
                & (np.abs(yy - np.clip(yy, r[1], r[3])) <= half)
            )

    img = dev.buffer(h, w * channels, w * channels + int(dev.rng.choice([0, 5, 16])))
    rect_ptr = dev.upload(rects)
    host = np.full((h, img.pitch), 0xAB, np.uint8)
    host[:, : w * channels] = frame.reshape(h, -1)
    img.poison(0xAB)
    cuda.memcpy_htod(img.alloc, host)
    kernels.draw_rects(img.ptr, img.pitch, w, h, channels, rect_ptr, len(rects), dev.stream)
    dev.wait()
    got = img.read().reshape(h, w, channels)
    differs = np.any(got != ref, axis=2)
    assert not (differs & ~outer_corners).any(), f"{int((differs & ~outer_corners).sum())} px"
    assert differs.sum() <= outer_corners.sum()


# ---- arguments, streams, bandwidth ---------------------------------------------------------


def test_bad_arguments_raise_before_launch(kernels: GpuKernels, dev: Device) -> None:
    layout = PreprocessLayout.from_spec(model(), 64, 48)
    src = dev.upload(np.zeros(64 * 48 * 3, np.uint8))
    out = dev.buffer(1, layout.nbytes)
    with pytest.raises(KernelError, match="pitch"):
        kernels.preprocess_bgr(src, 64 * 3 - 1, 64, 48, out.ptr, layout, dev.stream)
    with pytest.raises(KernelError, match="layout"):
        kernels.preprocess_bgr(src, 64 * 3, 63, 48, out.ptr, layout, dev.stream)
    with pytest.raises(KernelError, match="multiples of 4"):
        kernels.bgr_to_rgba(src, 64 * 3, 64, 48, out.ptr, 64 * 4 + 2, 64, 48, dev.stream)
    with pytest.raises(KernelError, match="order"):
        kernels.merge_ycrcb_to_bgr(src, 8, 8, src, src, 8, 8, out.ptr, 64, order="yuv")


def test_default_stream_and_bt601_default(kernels: GpuKernels, dev: Device) -> None:
    """stream=None launches on the default stream; the default matrix is OpenCV's."""
    w, h = 66, 34
    y, uv = nv12_frame(dev.rng, w, h)
    y_ptr, uv_ptr = dev.upload(y), dev.upload(uv)
    out = dev.buffer(h, w * 4)
    out.poison(0xAB)
    kernels.nv12_to_rgba(y_ptr, w, uv_ptr, w, w, h, out.ptr, w * 4, w, h, None)
    cuda.Context.synchronize()
    ref = cv2.cvtColor(np.vstack([y, uv]), cv2.COLOR_YUV2RGBA_NV12)
    assert np.array_equal(out.read().reshape(h, w, 4), ref)
    assert yuv_matrix() is BT601_LIMITED


def test_host_frames_of_mixed_sizes_share_one_upload(
    gpu_ctx: GpuContext, kernels: GpuKernels, dev: Device
) -> None:
    """Host sources of different sizes on one worker: every frame converts exactly as
    alone, and the upload buffers are allocated again only when a frame is larger."""
    from framelens.core.stages.preprocess.cuda import CudaPreprocessor
    from framelens.core.types import Frame

    pre = CudaPreprocessor(gpu_ctx, kernels)
    spec = model((416, 416))
    pools: list[object] = []
    try:
        sizes = [(641, 479), (33, 17), (641, 479), (1917, 1079), (2000, 100), (33, 17)]
        for i, (w, h) in enumerate(sizes):
            frame = Frame(image(dev.rng, w, h), i, i / 30)
            layout = PreprocessLayout.from_spec(spec, w, h, "float32")
            tensor = dev.buffer(1, layout.nbytes)
            tensor.poison_nan("float32")
            pre.model_input(frame, layout, tensor.ptr, dev.stream)
            shown = rgba_buffer(dev, w, h)
            shown.poison(0xAB)
            pre.rgba(frame, cast(DeviceBuffer, shown), dev.stream)
            dev.wait()
            ref = Preprocessor(spec, w, h)(frame.image).copy()
            check_tensor(
                read_tensor(tensor, layout), ref, layout, max_units=PRE_MAX, mean_units=PRE_MEAN
            )
            rgba = cv2.cvtColor(frame.image, cv2.COLOR_BGR2RGBA)
            assert np.array_equal(shown.read().reshape(h, w, 4), rgba), (w, h)
            pools.append(pre._bgr)
    finally:
        pre.free()
    # smaller frames reuse the buffers; a wider or taller one allocates again (2000x100
    # after 1917x1079: the buffers grow to 2000x1079, never shrink to a frame)
    assert pools[0] is pools[1] is pools[2]
    assert pools[3] is not pools[0] and pools[4] is not pools[3]
    assert pools[4] is pools[5]


@pytest.mark.slow
@pytest.mark.parametrize(("source", "dtype"), [("nv12", "float16"), ("bgr", "float32")])
def test_preprocess_bandwidth_vs_copy(
    gpu_ctx: GpuContext, kernels: GpuKernels, source: str, dtype: str
) -> None:
    """The issue's target: the fused kernel moves bytes at >= 50% of a same-size copy's rate."""
    from framelens.core.gpu.kernel_bench import measure_preprocess_bandwidth

    r = measure_preprocess_bandwidth(
        gpu_ctx, 1920, 1080, 200, source=source, dtype=dtype, kernels=kernels
    )
    print({k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()})
    assert r["ratio"] >= 0.5, r
