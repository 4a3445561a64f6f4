"""INT8 for super-resolution: calibrated on patches of the user's frames, sensitivity and
the mixed-precision search measured by PSNR against FP32, run by the same pipelines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from framelens.core.models.catalog import resolve_model
from framelens.core.pipeline import build
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.precision import CalibrationSettings, VariantInfo, prepare_variant
from framelens.core.precision.calibration import read_calibration_frames
from framelens.core.stages.tasks.superres.color import output_size
from framelens.core.stages.tasks.superres.metrics import psnr
from framelens.core.types import Frame, Image, StageTimes
from media_factory import sample_frames

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4")
SPEC = resolve_model("espcn-x2")
SETTINGS = CalibrationSettings(frames=8, sensitivity_frames=3, psnr_target_db=40.0, patch=96)


@pytest.fixture(scope="module")
def int8(tmp_path_factory: pytest.TempPathFactory) -> tuple[VariantInfo, list[float]]:
    seen: list[float] = []
    variant = prepare_variant(
        SPEC,
        "int8",
        source=SAMPLE,
        settings=SETTINGS,
        on_progress=lambda _text, fraction: seen.append(fraction),
        cache_dir=tmp_path_factory.mktemp("cache"),
    )
    return variant, seen


def upscale(settings: PipelineSettings, image: Image) -> Image:
    pipeline = build.host_pipeline(settings)
    try:
        out = pipeline.infer(Frame(image, 0, 0.0), StageTimes()).output.image
    finally:
        pipeline.close()
    assert out is not None
    return out


def test_calibration_patches_are_the_detailed_squares_of_the_frames() -> None:
    frames = read_calibration_frames(SPEC, SAMPLE, 4, patch=96)
    assert len(frames) == 4
    for tensor, geometry in zip(frames.tensors, frames.geometries, strict=True):
        assert tensor.shape == (1, 1, 96, 96)  # the Y plane of a 96 px square
        assert geometry.region is not None and geometry.region[2:] == (96, 96)
        assert tensor.std() > 0.02  # texture, not a flat wall


def test_int8_superres_is_measured_by_psnr_and_reaches_its_target(
    int8: tuple[VariantInfo, list[float]],
) -> None:
    variant, seen = int8
    report = variant.report
    assert report is not None
    assert report.agreement_metric == "psnr_db"
    assert report.agreement_target == 40.0
    assert report.target_reached and report.agreement_f1 >= 40.0
    assert "PSNR" in report.table() and "dB" in report.table()
    assert seen and seen[-1] == pytest.approx(1.0)  # progress reached the end
    graph = onnx.load(str(variant.path))
    assert any(n.op_type == "QuantizeLinear" for n in graph.graph.node)
    assert report.int8_mac_fraction >= 0.9


def test_the_int8_variant_upscales_close_to_fp32_on_frames_it_was_not_calibrated_on(
    int8: tuple[VariantInfo, list[float]],
) -> None:
    variant, _ = int8
    for image in sample_frames(Path(SAMPLE), (75, 700)):
        fp32 = upscale(PipelineSettings(SPEC), image)
        quantized = upscale(PipelineSettings(variant.spec, precision="int8"), image)
        assert quantized.shape == fp32.shape == (*output_size(768, 432, 2)[::-1], 3)
        # the whole frame merged with the bicubic chroma: INT8 moves luma only
        assert psnr(fp32, quantized) >= 38.0
        assert not np.array_equal(fp32, quantized)  # it did run quantized


def test_compare_reports_int8_beside_fp32(tmp_path: Path) -> None:
    """``framelens compare --task superres --precisions fp32,int8``: INT8 calibrated on
    the video it compares, its PSNR against the original frames reported with FP32's."""
    import json
    import os
    import subprocess
    import sys

    report = tmp_path / "report"
    done = subprocess.run(
        [sys.executable, "-m", "framelens", "compare", SAMPLE, "--task", "superres",
         "--models", "espcn-x2", "--precisions", "fp32,int8", "--start", "300",
         "--frames", "3", "--report", str(report), "--quiet"],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "FRAMELENS_CACHE_DIR": str(tmp_path / "cache")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    variants = json.loads((report / "summary.json").read_text())["variants"]
    fp32, int8 = variants["espcn-x2@fp32"], variants["espcn-x2@int8"]
    assert int8["precision"] == "int8"
    # INT8 costs a little quality against the ground truth, not the picture
    assert fp32["psnr_db"] - 3.0 < int8["psnr_db"] <= fp32["psnr_db"] + 0.1
