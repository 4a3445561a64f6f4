"""Super-resolution, the second task: real frames of the bundled sample through the real
bundled models (ESPCN, FSRCNN) in ONNX Runtime, the host pipeline and the CLI.

Stated bounds (tiling): Y-channel models tiled and untiled agree to 1e-5 in the model's
output (both are the same float computation wherever a tile's weight is non-zero), so
the 8-bit frames differ by at most one level; ESRGAN (from ../shared, not bundled)
within one level and at least 60 dB PSNR.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import av
import cv2
import numpy as np
import pytest
from framelens.core.errors import ConfigError, ModelError
from framelens.core.models.catalog import load_catalog, resolve_model
from framelens.core.models.spec import ModelSpec
from framelens.core.pipeline import build
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.stages.engines.onnxruntime_cpu import OnnxRuntimeEngine
from framelens.core.stages.tasks import SuperResParams, SuperResTask, task_for
from framelens.core.stages.tasks.superres.color import (
    bicubic_downscale,
    bicubic_upscale,
    output_size,
)
from framelens.core.stages.tasks.superres.metrics import psnr
from framelens.core.stages.tasks.superres.tiling import TiledEngine, tile_starts
from framelens.core.types import Frame, Image, StageTimes
from media_factory import sample_frames
from onnx_factory import upscaling_model

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
SHARED = ROOT.parent / "shared" / "models"
FRAMES = (0, 150, 300, 330)  # empty room, the person walking in, across, close
SR_MODELS = [name for name, spec in load_catalog().items() if spec.task == "superres"]


@pytest.fixture(scope="module")
def images() -> list[Image]:
    return sample_frames(SAMPLE, FRAMES)


def upscale(spec: ModelSpec, image: Image, **params: int) -> Image:
    settings = PipelineSettings(spec, params=SuperResParams(**params))
    pipeline = build.host_pipeline(settings)
    try:
        out = pipeline.infer(Frame(image, 0, 0.0), StageTimes()).output.image
    finally:
        pipeline.close()
    assert out is not None
    return out


def reference_y_merge(image: Image, model_path: Path, scale: int) -> Image:
    """The Y-channel arithmetic written out step by step, with ONNX Runtime directly."""
    h, w = image.shape[:2]
    pad_h, pad_w = -h % scale, -w % scale  # padded to a multiple of the scale, edges repeated
    crop = cv2.copyMakeBorder(image, 0, pad_h, 0, pad_w, cv2.BORDER_REPLICATE)
    ycrcb = cv2.cvtColor(crop, cv2.COLOR_BGR2YCrCb)
    y = (ycrcb[..., 0].astype(np.float32) / np.float32(255.0))[None, None]
    engine = OnnxRuntimeEngine(model_path)
    try:
        out = engine.infer(np.ascontiguousarray(y))[0][0, 0]
    finally:
        engine.close()
    y_up = np.clip(np.rint(255.0 * out), 0, 255).astype(np.uint8)
    size = (crop.shape[1] * scale, crop.shape[0] * scale)
    cr = cv2.resize(ycrcb[..., 1], size, interpolation=cv2.INTER_CUBIC)
    cb = cv2.resize(ycrcb[..., 2], size, interpolation=cv2.INTER_CUBIC)
    merged = np.asarray(cv2.cvtColor(np.dstack([y_up, cr, cb]), cv2.COLOR_YCrCb2BGR))
    return np.ascontiguousarray(merged[: h * scale, : w * scale])  # the padding's output goes


@pytest.mark.parametrize("name", SR_MODELS)
def test_every_bundled_model_upscales_by_its_scale(name: str, images: list[Image]) -> None:
    spec = resolve_model(name)
    frame = images[2][:101, :203]  # odd sizes: padded inside, nothing lost
    out = upscale(spec, frame)
    assert out.shape == (101 * spec.scale, 203 * spec.scale, 3)
    assert task_for(spec).output_size(203, 101) == (203 * spec.scale, 101 * spec.scale)


def test_an_rgb_model_is_recognised_from_its_shapes_and_upscales_exactly(
    tmp_path: Path, images: list[Image]
) -> None:
    path = upscaling_model(tmp_path / "nearest_x3.onnx", 3)
    spec = resolve_model(str(path))  # no sidecar: the shapes (and one probe run) say it
    assert (spec.task, spec.scale, spec.channels, spec.color_order) == ("superres", 3, 3, "rgb")
    frame = images[1][:63, :90]  # multiples of 3: nothing cropped
    out = upscale(spec, frame)
    # nearest-neighbour in RGB, 0..1 and back: the frame's pixels repeated 3x3
    assert np.array_equal(out, np.repeat(np.repeat(frame, 3, axis=0), 3, axis=1))


def test_a_sidecar_describes_what_the_shapes_cannot(tmp_path: Path) -> None:
    path = upscaling_model(tmp_path / "gray.onnx", 2, channels=1)
    (tmp_path / "gray.onnx.toml").write_text('task = "superres"\nscale = 2\nchannels = 1\n')
    spec = resolve_model(str(path))
    assert (spec.scale, spec.channels) == (2, 1)
    (tmp_path / "gray.onnx.toml").write_text('task = "superres"\nscale = 9\n')
    with pytest.raises(ModelError, match=r"scale must be an integer 2\.\.8"):
        resolve_model(str(path))


def test_a_detector_is_not_taken_for_super_resolution() -> None:
    yolox = resolve_model("yolox-nano")
    with pytest.raises(ModelError, match="not a super-resolution model"):
        resolve_model(str(yolox.path), task="superres")


def test_y_channel_merge_is_the_stated_arithmetic_exactly(images: list[Image]) -> None:
    for name in ("espcn-x2", "fsrcnn-x2", "espcn-x3"):
        spec = resolve_model(name)
        frame = images[3][:211, :317]
        expected = reference_y_merge(frame, spec.path, spec.scale)
        assert np.array_equal(upscale(spec, frame), expected), name


def test_x2_models_beat_bicubic_on_the_sample(images: list[Image]) -> None:
    """Downscale by the scale (bicubic), upscale with the model and with bicubic, PSNR
    against the original (measured: +1.0 to +1.9 dB for ESPCN/FSRCNN x2 on these)."""
    for name in ("espcn-x2", "fsrcnn-x2", "espcn-x4"):
        spec = resolve_model(name)
        gains = []
        for image in images:
            low = bicubic_downscale(image, spec.scale)
            model, bicubic = upscale(spec, low), bicubic_upscale(low, spec.scale)
            ref = image[: model.shape[0], : model.shape[1]]
            gains.append(
                psnr(ref, model) - psnr(ref[: bicubic.shape[0], : bicubic.shape[1]], bicubic)
            )
        assert min(gains) > 0.5, (name, gains)


def test_tile_starts_cover_the_axis_with_the_overlap() -> None:
    assert tile_starts(100, 128, 32) == [0]
    starts = tile_starts(1000, 256, 32)
    assert starts[0] == 0 and starts[-1] == 1000 - 256
    assert all(b - a <= 256 - 32 for a, b in itertools.pairwise(starts))


def test_tiled_equals_untiled_for_y_channel_models(images: list[Image]) -> None:
    frame = images[2]  # 768x432 in tiles of at most 160 px: 24 tiles
    for name in ("espcn-x2", "fsrcnn-x2"):
        spec = resolve_model(name)
        untiled, tiled = upscale(spec, frame), upscale(spec, frame, tile=160)
        assert np.abs(untiled.astype(int) - tiled.astype(int)).max() <= 1, name
        engine = OnnxRuntimeEngine(spec.path)
        y = np.random.default_rng(1).random((1, 1, 300, 500), dtype=np.float32)
        full = engine.infer(y)[0]
        tiles = TiledEngine(engine, spec.scale, (100, 100))
        assert np.abs(tiles.infer(y)[0] - full).max() <= 1e-5
        assert tiles.tiles_run > 1
        tiles.close()


@pytest.mark.skipif(not (SHARED / "esrgan_thick_x2.onnx").is_file(), reason="no ../shared")
def test_tiled_esrgan_within_one_level(images: list[Image]) -> None:
    spec = resolve_model(str(SHARED / "esrgan_thick_x2.onnx"))
    assert spec.channels == 3 and spec.scale == 2
    frame = images[2][150:310, 300:460]  # 160x160: 4 tiles of 96 px, overlap 32
    untiled, tiled = upscale(spec, frame, tile=400), upscale(spec, frame, tile=96)
    assert np.abs(untiled.astype(int) - tiled.astype(int)).max() <= 1
    assert psnr(untiled, tiled) >= 60.0


def test_a_tile_too_small_for_the_overlap_is_refused() -> None:
    spec = resolve_model("espcn-x2")
    with pytest.raises(ConfigError, match="more than twice the overlap"):
        SuperResTask(spec).host_engine(OnnxRuntimeEngine(spec.path), "cpu", SuperResParams(48))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "framelens", *args], capture_output=True, text=True, timeout=300
    )


def test_cli_exports_the_upscaled_video_with_its_provenance(tmp_path: Path) -> None:
    out = tmp_path / "up.mp4"
    done = _cli(
        "run",
        str(SAMPLE),
        "--task",
        "superres",
        "--export",
        str(out),
        "--frames",
        "6",
        "--device",
        "cpu",
        "--quiet",
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["model"] == "espcn-x2" and summary["frames"] == 6
    with av.open(str(out)) as container:
        stream = container.streams.video[0]
        assert (stream.width, stream.height) == (1536, 864)  # 768x432 x2
        assert sum(1 for _ in container.decode(stream)) == 6
        tags = dict(container.metadata)
    assert tags["framelens_task"] == "superres" and tags["framelens_scale"] == "2"
    assert "super-resolution x2" in tags["comment"]


def test_cli_refuses_detections_for_super_resolution_in_one_line(tmp_path: Path) -> None:
    done = _cli(
        "run",
        str(SAMPLE),
        "--task",
        "superres",
        "--detections",
        str(tmp_path / "d.json"),
        "--frames",
        "2",
        "--device",
        "cpu",
        "--quiet",
    )
    assert done.returncode == 2
    assert "no detections to write" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())
    done = _cli("run", str(SAMPLE), "--tile", "256", "--frames", "2", "--quiet")
    assert done.returncode == 2 and "--tile applies to super-resolution" in done.stderr


def test_compare_measures_models_against_bicubic(tmp_path: Path) -> None:
    user = upscaling_model(tmp_path / "nearest_x2.onnx", 2)  # a user's file: named by its stem
    report = tmp_path / "report"
    done = _cli(
        "compare",
        str(SAMPLE),
        "--task",
        "superres",
        "--models",
        f"espcn-x2,{user}",
        "--precisions",
        "fp32,fp16",
        "--start",
        "290",
        "--frames",
        "3",
        "--report",
        str(report),
        "--quiet",
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads((report / "summary.json").read_text())
    assert set(summary["variants"]) == {
        "espcn-x2@fp32",
        "espcn-x2@fp16",
        "nearest_x2@fp32",
        "nearest_x2@fp16",
    }
    espcn, nearest = summary["variants"]["espcn-x2@fp32"], summary["variants"]["nearest_x2@fp32"]
    bicubic = summary["bicubic"]
    for v in summary["variants"].values():
        assert {"psnr_db", "ssim", "latency_ms_median"} <= set(v) and v["latency_ms_median"] > 0
    # ESPCN beats bicubic here; nearest-neighbour loses to it: the report says both
    assert espcn["psnr_db"] > bicubic["psnr_db"] > nearest["psnr_db"]
    assert espcn["ssim"] > nearest["ssim"]
    assert abs(summary["variants"]["espcn-x2@fp16"]["psnr_db"] - espcn["psnr_db"]) < 0.2
    assert "bicubic is better" in (report / "index.html").read_text()
    rows = (report / "frames.csv").read_text().splitlines()
    assert len(rows) == 4 and rows[1].startswith("290,")


def test_compare_refuses_a_detector_as_super_resolution(tmp_path: Path) -> None:
    done = _cli(
        "compare",
        str(SAMPLE),
        "--task",
        "superres",
        "--models",
        "espcn-x2,yolox-nano",
        "--frames",
        "2",
        "--report",
        str(tmp_path / "r"),
        "--quiet",
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "yolox-nano" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_a_region_of_interest_upscales_only_that_region_and_follows_live_changes(
    images: list[Image],
) -> None:
    """ROI mode: the region (clamped to a multiple of the scale) upscaled exactly as if it
    were the whole frame; a new region applies from the next frame of the same pipeline."""
    spec = resolve_model("espcn-x2")
    image = images[3]
    pipeline = build.host_pipeline(
        PipelineSettings(spec, params=SuperResParams(region=(101, 40, 161, 90)))
    )
    try:
        first = pipeline.infer(Frame(image, 0, 0.0), StageTimes()).output
        assert first.region == (101, 40, 160, 90)  # width cut to a multiple of 2
        crop = np.ascontiguousarray(image[40:130, 101:261])
        assert first.image is not None and first.image.shape == (180, 320, 3)
        assert np.array_equal(first.image, reference_y_merge(crop, spec.path, 2))
        # a region hanging off the bottom right moves inside the frame
        pipeline.update(
            params=SuperResParams(region=(image.shape[1] - 20, image.shape[0] - 10, 64, 64))
        )
        second = pipeline.infer(Frame(image, 1, 0.0), StageTimes()).output
        assert second.region is not None
        x, y, w, h = second.region
        assert (w, h) == (20, 10) and x + w <= image.shape[1] and y + h <= image.shape[0]
        assert second.size == (40, 20)
        pipeline.update(params=SuperResParams())  # back to the whole frame
        whole = pipeline.infer(Frame(image, 2, 0.0), StageTimes()).output
        assert whole.region is None
        assert whole.size == output_size(image.shape[1], image.shape[0], 2)
    finally:
        pipeline.close()


def test_heavy_sr_models_run_nhwc_on_cuda_and_light_ones_do_not(tmp_path: Path) -> None:
    """The layout measured on the H200: NHWC helps ESRGAN-sized graphs, hurts ESPCN."""
    from dataclasses import replace

    from framelens.core.stages.tasks.superres.tiling import HEAVY_MODEL_BYTES, cuda_options

    light = resolve_model("espcn-x2")
    heavy_file = tmp_path / "heavy.onnx"
    heavy_file.write_bytes(b"\0" * (HEAVY_MODEL_BYTES + 1))
    assert cuda_options(light) == {"cuda_graphs": "0"}
    assert cuda_options(replace(light, path=heavy_file)) == {
        "prefer_nhwc": "1",
        "fuse_conv_bias": "1",
        "cuda_graphs": "0",
    }
    assert cuda_options(replace(resolve_model("yolox-nano"), path=heavy_file)) == {}
