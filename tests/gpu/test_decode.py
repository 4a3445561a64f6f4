"""GPU decoding into device NV12 frames, against PyAV's CPU decode and FileSource.

Each decoder path of ``open_gpu_source`` is forced with ``prefer=`` and must then be the
one that runs (a silent fallback fails the test with its reason); a path whose library
is missing on the machine is skipped with the reason instead.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import av
import numpy as np
import numpy.typing as npt
import pytest
from av.codec.hwaccel import hwdevices_available
from framelens.core.errors import SourceError
from framelens.core.gpu.context import GpuContext
from framelens.core.stages.sources.file import FileSource
from framelens.core.stages.sources.nvdec import (
    DECODER_NAMES,
    DecoderChoice,
    DeviceNV12Frame,
    GpuVideoSource,
    open_gpu_source,
)

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"  # 768x432, 10 fps
BOTTLE = ROOT / "tests" / "data" / "bottle-detection.mp4"  # 640x360, B-frames, GOP 250
FILES = {"sample": SAMPLE, "bottle": BOTTLE}
FIRST = 60
MiB = 1 << 20
CYCLES = int(os.environ.get("FRAMELENS_LEAK_CYCLES", "200"))

U8 = npt.NDArray[np.uint8]


# ---- references ---------------------------------------------------------------------------


@dataclass
class Ref:
    index: int
    pts: float
    y: U8
    uv: U8  # interleaved U,V: NV12's chroma plane


@cache
def cpu_reference(path: Path, count: int) -> tuple[Ref, ...]:
    """Index/pts from FileSource, planes from PyAV's CPU decode (yuv420p repacked)."""
    with FileSource(path) as src:
        stamps = []
        while len(stamps) < count and (decoded := src.read_decoded()) is not None:
            stamps.append((decoded.index, decoded.pts))
    refs = []
    with av.open(str(path)) as container:
        for frame, (index, pts) in zip(container.decode(video=0), stamps, strict=False):
            w, h = frame.width, frame.height
            y = np.frombuffer(frame.planes[0], np.uint8).reshape(h, -1)[:, :w]
            u = np.frombuffer(frame.planes[1], np.uint8).reshape(h // 2, -1)[:, : w // 2]
            v = np.frombuffer(frame.planes[2], np.uint8).reshape(h // 2, -1)[:, : w // 2]
            uv = np.empty((h // 2, w), np.uint8)
            uv[:, 0::2], uv[:, 1::2] = u, v
            refs.append(Ref(index, pts, y.copy(), uv))
    assert len(refs) == len(stamps) == count
    return tuple(refs)


def planes(frame: DeviceNV12Frame) -> tuple[U8, U8]:
    nv12 = frame.to_host_nv12()
    h, w = frame.height, frame.width
    return nv12[:h, :w], nv12[h:, :w]


# ---- decoder selection --------------------------------------------------------------------


def _pynvvideocodec_missing() -> str | None:
    try:
        import PyNvVideoCodec  # noqa: F401
    except Exception as exc:
        return f"PyNvVideoCodec does not import here: {str(exc).splitlines()[0]}"
    return None


def _hwaccel_missing() -> str | None:
    if "cuda" not in hwdevices_available():
        return "this PyAV/FFmpeg build has no CUDA hwaccel"
    return None


MISSING = {
    "pynvvideocodec": _pynvvideocodec_missing,
    "pyav-hwaccel": _hwaccel_missing,
    "pyav-cpu": lambda: None,
}


@pytest.fixture(params=list(MISSING))
def decoder(request: pytest.FixtureRequest) -> DecoderChoice:
    choice: DecoderChoice = request.param
    if (reason := MISSING[choice]()) is not None:
        pytest.skip(reason)
    return choice


def open_exactly(
    path: Path, ctx: GpuContext, stream: Any, choice: DecoderChoice, **kwargs: Any
) -> GpuVideoSource:
    """open_gpu_source with ``choice`` first; fails if it fell back to a slower one."""
    src = open_gpu_source(path, ctx, stream, prefer=choice, **kwargs)
    if src.decoder_name != DECODER_NAMES[choice]:
        reason = src.fallback_reason
        src.close()
        pytest.fail(f"{choice} was not usable: {reason}")
    return src


def frames(src: GpuVideoSource, count: int) -> Iterator[DeviceNV12Frame]:
    for _ in range(count):
        frame = src.read()
        assert frame is not None
        with frame:
            yield frame


# ---- tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(FILES))
def test_samples_are_8_bit_420_h264(name: str) -> None:
    with av.open(str(FILES[name])) as container:
        stream = container.streams.video[0]
        assert (stream.codec_context.name, stream.codec_context.pix_fmt) == ("h264", "yuv420p")


def test_auto_picks_pynvvideocodec(gpu_ctx: GpuContext, gpu_stream: Any) -> None:
    if (reason := _pynvvideocodec_missing()) is not None:
        pytest.skip(reason)
    with open_gpu_source(SAMPLE, gpu_ctx, gpu_stream) as src:
        assert (src.decoder_name, src.fallback_reason) == (DECODER_NAMES["pynvvideocodec"], None)


@pytest.mark.parametrize("name", list(FILES))
def test_first_frames_match_cpu_decode(
    gpu_ctx: GpuContext, gpu_stream: Any, decoder: DecoderChoice, name: str
) -> None:
    """Index and pts equal to FileSource; luma bit-exact, chroma within +-2 (NVDEC's
    chroma may round differently from FFmpeg's), exact on the CPU path."""
    refs = cpu_reference(FILES[name], FIRST)
    chroma_tolerance = 0 if decoder == "pyav-cpu" else 2
    with open_exactly(FILES[name], gpu_ctx, gpu_stream, decoder) as src:
        with FileSource(FILES[name]) as cpu:
            assert src.info == cpu.info
        for ref, frame in zip(refs, frames(src, FIRST), strict=True):
            assert (frame.index, frame.pts) == (ref.index, ref.pts)
            assert frame.y_pitch >= frame.width and frame.uv_pitch >= frame.width
            y, uv = planes(frame)
            if not np.array_equal(y, ref.y):
                bad = np.count_nonzero(y != ref.y)
                pytest.fail(f"frame {ref.index}: {bad} luma samples differ from the CPU decode")
            worst = int(np.abs(uv.astype(int) - ref.uv).max())
            assert worst <= chroma_tolerance, f"frame {ref.index}: chroma off by {worst}"


@pytest.mark.parametrize("name", list(FILES))
def test_whole_file_numbering_matches_file_source(
    gpu_ctx: GpuContext, gpu_stream: Any, decoder: DecoderChoice, name: str
) -> None:
    with FileSource(FILES[name]) as cpu:
        want = []
        while (decoded := cpu.read_decoded()) is not None:
            want.append((decoded.index, decoded.pts))
    with open_exactly(FILES[name], gpu_ctx, gpu_stream, decoder) as src:
        got = []
        while (frame := src.read()) is not None:
            got.append((frame.index, frame.pts))
            frame.release()
        assert (src.decode_errors, src.truncated) == (0, False)
    assert len(got) == len(want) == src.info.frame_count
    assert got == want


def test_seek_gives_the_linear_frame(
    gpu_ctx: GpuContext, gpu_stream: Any, decoder: DecoderChoice
) -> None:
    """Forward, across the keyframe at 250, and back; luma equal to this decoder's own
    linear decode (bit-exact) and to the CPU decode."""
    targets = (100, 300, 5, 250, 249)
    linear: dict[int, U8] = {}
    with open_exactly(BOTTLE, gpu_ctx, gpu_stream, decoder) as src:
        for frame in frames(src, max(targets) + 1):
            if frame.index in targets:
                linear[frame.index] = planes(frame)[0].copy()
    refs = {r.index: r for r in cpu_reference(BOTTLE, max(targets) + 1)}
    with open_exactly(BOTTLE, gpu_ctx, gpu_stream, decoder) as src:
        for target in targets:
            src.seek(target)
            frame = src.read()
            assert frame is not None
            with frame:
                assert (frame.index, frame.pts) == (target, refs[target].pts)
                y = planes(frame)[0]
            np.testing.assert_array_equal(y, linear[target])
            np.testing.assert_array_equal(y, refs[target].y)
            after = src.read()
            assert after is not None and after.index == target + 1
            after.release()


def test_frames_can_be_used_on_another_stream(gpu_ctx: GpuContext, gpu_stream: Any) -> None:
    import pycuda.driver as cuda

    with gpu_ctx.active():
        other = cuda.Stream()
    with open_gpu_source(SAMPLE, gpu_ctx, gpu_stream) as src:
        frame = src.read()
        assert frame is not None
        host = np.empty((frame.height, frame.width), np.uint8)
        with gpu_ctx.active():
            frame.wait(other)
            copy = cuda.Memcpy2D()
            copy.set_src_device(frame.y_ptr)
            copy.src_pitch = frame.y_pitch
            copy.set_dst_host(host)
            copy.dst_pitch = frame.width
            copy.width_in_bytes = frame.width
            copy.height = frame.height
            copy(other)
            frame.release(other)  # the copy on `other` may still read it
            other.synchronize()
    np.testing.assert_array_equal(host, cpu_reference(SAMPLE, FIRST)[0].y)


def test_held_frames_exhaust_the_pool(gpu_ctx: GpuContext, gpu_stream: Any) -> None:
    with open_gpu_source(SAMPLE, gpu_ctx, gpu_stream, pool_size=2, acquire_timeout_s=0.1) as src:
        first, second = src.read(), src.read()
        assert first is not None and second is not None
        with pytest.raises(SourceError, match="no free frame buffer") as info:
            src.read()
        assert "\n" not in str(info.value)
        first.release()
        third = src.read()
        assert third is not None and third.y_ptr == first.y_ptr
        second.release()
        third.release()


def test_host_bgr_is_close_to_file_source(gpu_ctx: GpuContext, gpu_stream: Any) -> None:
    with FileSource(SAMPLE) as cpu:
        want = [f.image for f, _ in zip(cpu, range(5), strict=False)]
    with open_gpu_source(SAMPLE, gpu_ctx, gpu_stream) as src:
        got = [f.to_host_bgr() for f in frames(src, 5)]
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        assert np.abs(g.astype(int) - w).mean() < 2.0  # OpenCV vs swscale rounding


def test_errors_are_one_line_source_errors(gpu_ctx: GpuContext, gpu_stream: Any) -> None:
    with pytest.raises(SourceError, match=r"^no such file: ") as info:
        open_gpu_source(ROOT / "nope.mp4", gpu_ctx, gpu_stream)
    assert "\n" not in str(info.value)
    src = open_gpu_source(SAMPLE, gpu_ctx, gpu_stream)
    with pytest.raises(SourceError, match="out of range"):
        src.seek(1_000_000)
    src.close()
    src.close()
    with pytest.raises(SourceError, match="closed"):
        src.read()


@pytest.mark.slow
def test_open_close_cycles_leak_no_device_memory(
    gpu_ctx: GpuContext, gpu_stream: Any, decoder: DecoderChoice
) -> None:
    """``CYCLES`` times: open (decoder, frame pool, upload buffers), read 4 frames, close.

    Device memory is measured for the whole device (cuMemGetInfo) after 3 warm-up cycles
    (CUDA loads kernels and the decoder its libraries lazily, once per process). The
    tolerance, 16 MiB, covers the driver's 2 MiB allocation granularity and allocator
    caches; a leak of one frame buffer (~0.5 MiB here) per cycle would show as 100 MiB.
    """

    def cycle() -> None:
        with open_exactly(SAMPLE, gpu_ctx, gpu_stream, decoder) as src:
            for _ in frames(src, 4):
                pass

    for _ in range(3):
        cycle()
    gc.collect()
    gpu_ctx.synchronize()
    before = gpu_ctx.memory_used()
    for _ in range(CYCLES):
        cycle()
    gc.collect()
    gpu_ctx.synchronize()
    grown = gpu_ctx.memory_used() - before
    assert grown <= 16 * MiB, f"{grown / MiB:.1f} MiB more device memory after {CYCLES} cycles"
