"""Playback's heatmap (core/sessions/playback/heatmap.py): the stage follows the tracker's
only while tracking is on, its mode changes live without a new tracker, and an export's
stages end with the same heatmap."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from framelens.core.sessions.playback.heatmap import PlaybackHeatmap
from framelens.core.stages.analytics.heatmap import HeatmapSettings, HeatmapStage, heat_layer
from framelens.core.stages.source_stages import SourceStage
from framelens.core.types import Detections, Frame, FrameResult, StageTimes


class Ids:
    """A stand-in tracker: every box is track 1."""

    made = 0

    def __init__(self) -> None:
        Ids.made += 1

    def __call__(self, result: FrameResult) -> None:
        d = result.output
        result.output = Detections(d.boxes, d.scores, d.class_ids,
                                   track_ids=np.ones(len(d), np.int64))  # fmt: skip

    def reset(self) -> None:
        pass


def tracker(source: int) -> Sequence[SourceStage]:
    del source
    return [Ids()]


def _result(index: int, pts: float) -> FrameResult:
    dets = Detections(np.array([[20, 20, 30, 35]], np.float32), np.ones(1, np.float32),
                      np.zeros(1, np.int32))  # fmt: skip
    return FrameResult(Frame(np.zeros((80, 80, 3), np.uint8), index, pts), dets, StageTimes())


def test_no_tracker_no_heatmap_and_the_mode_changes_live() -> None:
    heat = PlaybackHeatmap(HeatmapSettings(half_life_s=1.0, cell=10, sigma=1.0))
    assert heat.after(None) is None and heat.after_export(None) is None
    chain = heat.after(tracker)
    assert chain is not None
    stages = chain(0)
    made = Ids.made
    value = []
    for k in range(4):
        if k == 2:
            heat.set_mode("decay")  # from frame 2 on: halves every second
        result = _result(k, float(k))
        for stage in stages:
            stage(result)
        layer = heat_layer(result.layers)
        assert layer is not None
        value.append(float(layer.grid[3, 2]))  # (25, 35): row 3, column 2
    assert value == pytest.approx([1.0, 2.0, 2.0 * 0.5 + 1.0, 2.0 * 0.5 * 0.5 + 0.5 + 1.0])
    assert Ids.made == made  # the same tracker all along


def test_an_export_ends_with_a_heatmap_of_the_mode_of_now() -> None:
    heat = PlaybackHeatmap()
    heat.set_mode("decay")
    chain = heat.after_export(tracker)
    assert chain is not None
    stages = chain(0)
    assert isinstance(stages[-1], HeatmapStage) and stages[-1].settings.mode == "decay"
