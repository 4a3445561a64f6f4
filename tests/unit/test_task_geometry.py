"""The task owns the input geometry: the pipeline lays frames out by it and decodes
with its letterbox (what super-resolution's own geometry will plug into)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from framelens.core.geometry import InputGeometry, letterbox_input
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline import build
from framelens.core.pipeline.frame_pipeline import FramePipeline
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.stages.sources import open_source
from framelens.core.stages.tasks import DetectionTask
from framelens.core.types import StageTimes

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4")


class CentredDetection(DetectionTask):
    """YOLOX-Nano's task, but with the frame centred in the input (the spec says top-left)."""

    def input_geometry(self, src_w: int, src_h: int) -> InputGeometry:
        h, w = self.spec.input_size
        return letterbox_input(src_w, src_h, h, w, "center")


def test_the_pipeline_preprocesses_and_decodes_by_the_tasks_geometry() -> None:
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)
    plain = build.host_pipeline(settings)
    centred = FramePipeline(settings, plain.engine, CentredDetection(settings.model))
    with open_source(SAMPLE) as source:
        source.seek(330)
        frame = source.read()
    assert frame is not None
    usual = plain.infer(frame, StageTimes()).output
    moved = centred.infer(frame, StageTimes()).output
    geometry = centred._pre[0][1].geometry
    assert geometry.pad_y > 0 and geometry.pad_x == 0  # centred: padding above the frame
    assert plain._pre[0][1].geometry.pad_y == 0  # the spec's top-left letterbox
    # the same person, mapped back to the same place in source pixels
    assert len(usual) == len(moved) >= 1
    best_usual = usual.boxes[int(np.argmax(usual.scores))]
    best_moved = moved.boxes[int(np.argmax(moved.scores))]
    assert np.abs(best_usual - best_moved).max() < 6.0, (best_usual, best_moved)
    plain.close()
