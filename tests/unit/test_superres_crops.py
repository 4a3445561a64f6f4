"""Detections enlarged by a super-resolution model, and one frame's PSNR on demand: the real
bundled ESPCN x2 and YOLOX-Nano on frames of the bundled sample, through core.api."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from framelens.core.api import (
    PipelineSettings,
    crop_upscaler,
    measure_frame_quality,
    sr_upscaler,
)
from framelens.core.errors import ConfigError
from framelens.core.models.catalog import load_catalog
from framelens.core.pipeline import build
from framelens.core.stages.tasks.superres.color import bicubic_downscale, bicubic_upscale
from framelens.core.stages.tasks.superres.crops import bucket_side, crop_boxes
from framelens.core.stages.tasks.superres.metrics import psnr, ssim
from framelens.core.types import Detections, Frame, Image, StageTimes
from media_factory import sample_frames

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
CATALOG = load_catalog()
SR = PipelineSettings(CATALOG["espcn-x2"])


@pytest.fixture(scope="module")
def frame() -> Image:
    return sample_frames(SAMPLE, (330,))[0]  # the person close to the camera


@pytest.fixture(scope="module")
def people(frame: Image) -> Detections:
    """YOLOX-Nano's boxes on the frame (the real detector)."""
    pipeline = build.host_pipeline(PipelineSettings(CATALOG["yolox-nano"]))
    try:
        dets = pipeline.infer(Frame(frame, 330, 0.0), StageTimes()).output
    finally:
        pipeline.close()
    assert isinstance(dets, Detections) and len(dets) >= 1
    return dets


def test_detections_come_out_scale_times_the_padded_crop_and_like_bicubic(
    frame: Image, people: Detections
) -> None:
    with crop_upscaler(SR, margin=0.1) as up:
        crops = up.upscale(frame, people.boxes, people.scores, people.class_ids)
    assert len(crops) == min(len(people), 8)
    for crop in crops:
        x1, y1, x2, y2 = crop.box
        assert 0 <= x1 < x2 <= frame.shape[1] and 0 <= y1 < y2 <= frame.shape[0]
        assert crop.image.shape == (2 * (y2 - y1), 2 * (x2 - x1), 3)
        source = frame[y1:y2, x1:x2]
        assert psnr(bicubic_upscale(source, 2), crop.image) > 25.0
    # the margin: the crop holds the box and 10% of its size around it (inside the frame)
    bx1, by1, bx2, by2 = people.boxes[int(np.argmax(people.scores))]
    x1, y1, x2, y2 = crops[0].box
    assert x1 == max(0, int(np.floor(bx1 - 0.1 * (bx2 - bx1))))
    assert y1 == max(0, int(np.floor(by1 - 0.1 * (by2 - by1))))
    assert x2 >= min(frame.shape[1], bx2 + 0.1 * (bx2 - bx1)) - 2
    assert crops[0].score == pytest.approx(float(people.scores.max()))


def test_at_most_max_crops_best_score_first_and_tiny_or_outside_boxes_skipped(
    frame: Image,
) -> None:
    rng = np.random.default_rng(3)
    xy = rng.uniform(0, 600, (12, 2)).astype(np.float32)
    boxes = np.hstack([xy, xy + rng.uniform(20, 120, (12, 2)).astype(np.float32)])
    boxes[0] = (100, 100, 102, 103)  # 2x3 px: too small to enlarge
    boxes[1] = (900, 500, 1000, 600)  # outside the 768x432 frame
    scores = np.linspace(0.99, 0.3, 12, dtype=np.float32)
    with crop_upscaler(SR, max_crops=5) as up:
        crops = up.upscale(frame, boxes, scores, np.arange(12, dtype=np.int32))
    assert [c.class_id for c in crops] == [2, 3, 4, 5, 6]
    assert [c.score for c in crops] == sorted((c.score for c in crops), reverse=True)


def test_bucketed_crops_equal_unbucketed_away_from_the_padding(frame: Image) -> None:
    """CUDA's fixed input shapes (padding to buckets) change nothing but the last few
    output pixels next to the padding."""
    boxes = np.array([[200.5, 60.2, 291.7, 301.9], [10, 10, 75, 50]], np.float32)
    with crop_upscaler(SR, buckets=()) as plain, crop_upscaler(SR, buckets=(64, 128)) as padded:
        a = plain.upscale(frame, boxes)
        b = padded.upscale(frame, boxes)
    for ca, cb in zip(a, b, strict=True):
        assert ca.box == cb.box and ca.image.shape == cb.image.shape
        inner_a, inner_b = ca.image[:-16, :-16], cb.image[:-16, :-16]
        assert np.abs(inner_a.astype(int) - inner_b).max() <= 1
        assert psnr(ca.image, cb.image) > 35.0
    assert bucket_side(65, (64, 128)) == 128 and bucket_side(300, (64, 128)) == 384


def test_crop_boxes_are_cut_to_a_multiple_of_the_scale_inside_the_frame() -> None:
    boxes = np.array([[-20.0, -5.0, 41.0, 30.0], [700.0, 400.0, 790.0, 440.0]], np.float32)
    got = crop_boxes(boxes, 768, 432, scale=3, margin=0.0)
    assert got[0] == (0, 0, 39, 30)
    assert got[1] == (700, 400, 766, 430)


def test_frame_quality_is_compares_method_on_one_frame(frame: Image) -> None:
    got = measure_frame_quality(frame, SR)
    assert (got.scale, got.width, got.height) == (2, 768, 432)
    # the same numbers written out: shrink, upscale by the model and by bicubic, measure
    low = bicubic_downscale(frame, 2)
    with sr_upscaler(SR) as up:
        model_up = up(low)
    bicubic_up = bicubic_upscale(low, 2)
    assert got.model.psnr_db == pytest.approx(psnr(frame, model_up), abs=1e-9)
    assert got.model.ssim == pytest.approx(ssim(frame, model_up), abs=1e-9)
    assert got.bicubic.psnr_db == pytest.approx(psnr(frame, bicubic_up), abs=1e-9)
    assert 25.0 < got.bicubic.psnr_db < 60.0 and 0.5 < got.bicubic.ssim < 1.0
    assert got.psnr_gain_db == pytest.approx(got.model.psnr_db - got.bicubic.psnr_db)
    # the model really ran: its output is not bicubic's
    assert not np.array_equal(model_up, bicubic_up)


def test_frame_quality_refuses_a_detector_and_a_tiny_frame(frame: Image) -> None:
    with pytest.raises(ConfigError, match="not a super-resolution model"):
        measure_frame_quality(frame, PipelineSettings(CATALOG["yolox-nano"]))
    with pytest.raises(ConfigError, match="too small"):
        measure_frame_quality(cv2.resize(frame, (20, 12)), SR)
