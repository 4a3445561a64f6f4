"""Super-resolution is exactly scale x the input at any size: odd and non-multiple sizes
are padded inside (the last column and row repeated) and the output cut back, so no
column or row of the frame is lost and the picture does not move.

Real frames of the bundled sample, cut to odd sizes, through the bundled models in ONNX
Runtime (the host pipeline, the crop upscaler and ``framelens run --export``). Stated
bounds: against a bicubic upscale of the same frame the model's output is >= 30 dB PSNR
over the frame and >= 27 dB over its last 4 rows and columns (input pixels; the ones
padding touches); comparing those border strips with bicubic's shifted by up to the scale
in output pixels, across or along the edge, the unshifted comparison is the closest.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest
from framelens.core.models.catalog import load_catalog, resolve_model
from framelens.core.models.spec import ModelSpec
from framelens.core.pipeline import build
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.stages.engines.onnxruntime_cpu import OnnxRuntimeEngine
from framelens.core.stages.tasks import SuperResParams, SuperResTask, task_for
from framelens.core.stages.tasks.superres.color import bicubic_upscale
from framelens.core.stages.tasks.superres.crops import HostUpscaler
from framelens.core.stages.tasks.superres.metrics import psnr
from framelens.core.types import Frame, Image, StageTimes
from media_factory import sample_frames
from onnx_factory import upscaling_model

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
SR_MODELS = [name for name, spec in load_catalog().items() if spec.task == "superres"]
SIZES = ((241, 135), (240, 135), (99, 77))  # (width, height): odd, 16:9 at 135 lines, both odd
BORDER = 4  # input pixels of the right and bottom edges checked on their own


@pytest.fixture(scope="module")
def frame() -> Image:
    return sample_frames(SAMPLE, (330,))[0]  # the person close: edges everywhere


def cut(image: Image, width: int, height: int) -> Image:
    """A ``width`` x ``height`` part of the frame whose right and bottom edges cross the
    person (texture there, so that a shift would show)."""
    return np.ascontiguousarray(image[200 : 200 + height, 350 : 350 + width])


def upscale(spec: ModelSpec, image: Image) -> Image:
    pipeline = build.host_pipeline(PipelineSettings(spec, params=SuperResParams()))
    try:
        out = pipeline.infer(Frame(image, 0, 0.0), StageTimes()).output.image
    finally:
        pipeline.close()
    assert out is not None
    return out


def best_shift(got: Image, want: Image, axis: int, reach: int) -> int:
    """The shift along ``axis`` (-reach..reach pixels) that brings ``want`` closest to
    ``got`` (mean squared difference)."""
    errors = {}
    n = got.shape[axis]
    for d in range(-reach, reach + 1):
        a = np.take(got, range(reach, n - reach), axis=axis).astype(np.float64)
        b = np.take(want, range(reach + d, n - reach + d), axis=axis).astype(np.float64)
        errors[d] = float(np.mean((a - b) ** 2))
    return min(errors, key=lambda d: errors[d])


def assert_lines_up(out: Image, image: Image, scale: int) -> None:
    bicubic = bicubic_upscale(image, scale)
    assert out.shape == bicubic.shape
    assert psnr(bicubic, out) >= 30.0
    edge = BORDER * scale
    right, bottom = (slice(None), slice(-edge, None)), (slice(-edge, None), slice(None))
    assert psnr(bicubic[right], out[right]) >= 27.0
    assert psnr(bicubic[bottom], out[bottom]) >= 27.0
    # the last rows and columns are where they belong: the model's output lines up with
    # bicubic's there, across the edge and along it
    for strip in (right, bottom):
        for axis in (0, 1):
            assert best_shift(out[strip], bicubic[strip], axis, scale) == 0, (strip, axis)


@pytest.mark.parametrize("name", SR_MODELS)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_output_is_exactly_scale_times_the_input(
    frame: Image, name: str, size: tuple[int, int]
) -> None:
    spec = resolve_model(name)
    w, h = size
    image = cut(frame, w, h)
    out = upscale(spec, image)
    assert out.shape == (h * spec.scale, w * spec.scale, 3)
    assert task_for(spec).output_size(w, h) == (w * spec.scale, h * spec.scale)
    assert_lines_up(out, image, spec.scale)


def test_a_colour_model_keeps_every_pixel_where_it_was(frame: Image, tmp_path: Path) -> None:
    """A nearest-neighbour x3 graph: its output is known exactly, every input pixel as a
    3x3 block at 3x its place, the last column and row included."""
    spec = resolve_model(str(upscaling_model(tmp_path / "nearest_x3.onnx", 3)))
    for w, h in SIZES:
        image = cut(frame, w, h)
        expected = np.repeat(np.repeat(image, 3, axis=0), 3, axis=1)
        assert np.array_equal(upscale(spec, image), expected)


def test_the_crop_upscaler_keeps_every_pixel_too(frame: Image) -> None:
    spec = resolve_model("espcn-x3")
    upscaler = HostUpscaler(SuperResTask(spec), OnnxRuntimeEngine(spec.path))
    try:
        for w, h in SIZES:
            image = cut(frame, w, h)
            out = upscaler(image)
            assert out.shape == (h * 3, w * 3, 3)
            assert_lines_up(out, image, 3)
    finally:
        upscaler.close()


def write_lossless(path: Path, images: list[Image]) -> Path:
    """Frames of any size (odd ones too, which 4:2:0 H.264 refuses) as FFV1 in Matroska."""
    with av.open(str(path), "w") as out:
        stream = out.add_stream("ffv1", rate=10)
        stream.width, stream.height = images[0].shape[1], images[0].shape[0]
        stream.pix_fmt = "bgr0"
        for image in images:
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def test_run_exports_a_240x135_video_at_480x270(frame: Image, tmp_path: Path) -> None:
    images = [cut(frame, 240, 135), cut(np.roll(frame, 7, axis=1), 240, 135)]
    clip = write_lossless(tmp_path / "small.mkv", images)
    out = tmp_path / "up.mp4"
    done = subprocess.run(
        [sys.executable, "-m", "framelens", "run", str(clip), "--task", "superres",
         "--model", "espcn-x2", "--export", str(out), "--device", "cpu", "--quiet"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["frames"] == 2
    with av.open(str(out)) as container:
        stream = container.streams.video[0]
        assert (stream.width, stream.height) == (480, 270)
        decoded = [f.to_ndarray(format="bgr24") for f in container.decode(stream)]
    assert len(decoded) == 2
    for got, image in zip(decoded, images, strict=True):
        assert got.shape == (270, 480, 3)
        assert psnr(bicubic_upscale(image, 2), got) >= 27.0  # H.264 on top of the model
