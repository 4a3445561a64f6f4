"""framelens.core.api: the GUI's functions over core internals."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
from framelens.core import api
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline.compare.report import HTML_FILE
from framelens.core.stages.tasks.detect.diff import REF_ONLY_COLOUR, TEST_ONLY_COLOUR
from framelens.core.types import Detections, Frame, FrameResult, StageTimes


def test_every_exported_name_exists() -> None:
    missing = [name for name in api.__all__ if not hasattr(api, name)]
    assert missing == []


def test_difference_colours_are_the_drawn_ones_as_hex() -> None:
    colours = api.difference_colours()
    b, g, r = REF_ONLY_COLOUR
    assert colours.ref_only == f"#{r:02x}{g:02x}{b:02x}"
    b, g, r = TEST_ONLY_COLOUR
    assert colours.test_only == f"#{r:02x}{g:02x}{b:02x}"


def test_fp32_variant_is_the_model_itself() -> None:
    spec = resolve_model(DEFAULT_MODEL)
    variant = api.fp32_variant(spec)
    assert (variant.precision, variant.path, variant.spec) == ("fp32", spec.path, spec)
    assert variant.report is None


def test_compare_report_folder(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert api.compare_report_folder(empty, "clip") == empty.absolute()
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / HTML_FILE).write_text("old report")
    assert api.compare_report_folder(earlier, "clip") == earlier.absolute()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    assert api.compare_report_folder(busy, "clip") == (busy / "clip_compare").absolute()
    (busy / "clip_compare").mkdir()
    (busy / "clip_compare" / "other.txt").write_text("mine too")
    assert api.compare_report_folder(busy, "clip") == (busy / "clip_compare_2").absolute()


def test_save_frame_snapshot_draws_overlays_the_gpu_path_left_out(tmp_path: Path) -> None:
    image = np.zeros((64, 96, 3), np.uint8)
    detections = Detections(
        boxes=np.array([[10, 10, 50, 40]], np.float32),
        scores=np.array([0.9], np.float32),
        class_ids=np.array([0], np.int32),
    )
    frame = Frame(image=image, index=0, pts=0.0)
    result = FrameResult(frame=frame, output=detections, annotated=None, times=StageTimes())
    path = api.save_frame_snapshot(result, tmp_path / "shot.png")
    assert path.is_file()
    saved = cv2.imread(str(path))
    assert saved.shape == image.shape
    assert saved.any()  # the box was drawn on the black frame
