"""Heatmaps (core/stages/analytics/heatmap.py): the exact heat a track leaves, the decay's
half-life, a seek starting it again, the colour blended where the heat is and nowhere
else, the draw step drawing it under the boxes, and the PNG written whole or not at all."""

from __future__ import annotations

import math
from pathlib import Path

import cv2
import numpy as np
import pytest
from framelens.core.errors import ConfigError, ExportError
from framelens.core.pipeline.processor import draw_after_stages
from framelens.core.stages.analytics.heatmap import (
    Heatmap,
    HeatmapPng,
    HeatmapSettings,
    HeatmapStage,
    HeatmapStages,
    blend_heat,
    heat_layer,
)
from framelens.core.types import Detections, Frame, FrameResult, StageTimes

W, H = 200, 100
SETTINGS = HeatmapSettings(cell=10, sigma=1.0, anchor="center")
G1 = math.exp(-0.5)  # the splat one cell away (sigma 1 cell)


def _result(index: int, pts: float, boxes: list[list[float]], ids: list[int]) -> FrameResult:
    n = len(boxes)
    dets = Detections(
        np.asarray(boxes, np.float32).reshape(n, 4), np.full(n, 0.9, np.float32),
        np.zeros(n, np.int32), track_ids=np.asarray(ids, np.int64),
    )  # fmt: skip
    frame = Frame(np.full((H, W, 3), 100, np.uint8), index, pts)
    return FrameResult(frame, dets, StageTimes())


def _box(cx: float, cy: float) -> list[float]:
    return [cx - 5, cy - 5, cx + 5, cy + 5]


def test_each_observation_of_a_tracked_box_adds_one_to_its_cell_and_a_gaussian_around() -> None:
    stage = HeatmapStage(SETTINGS)
    # track 1 stays at (25, 35) (cell row 3, column 2) for three frames; track 2 is at
    # (105, 55) (row 5, column 10) once; a box of no confirmed track (-1) leaves nothing
    for k in range(3):
        boxes = [_box(25, 35), _box(105, 55), _box(175, 85)]
        stage(_result(k, k / 10, boxes, [1, 2 if k == 0 else -1, -1]))
    assert stage.heatmap is not None
    grid = stage.heatmap.grid
    assert grid.shape == (10, 20)
    assert grid[3, 2] == pytest.approx(3.0)
    assert grid[3, 3] == pytest.approx(3 * G1) and grid[2, 2] == pytest.approx(3 * G1)
    assert grid[4, 3] == pytest.approx(3 * G1 * G1)
    assert grid[5, 10] == pytest.approx(1.0)
    assert grid[5, 12] == pytest.approx(math.exp(-2.0))
    assert grid[8, 17] == 0.0  # the untracked box's cell
    assert grid.sum() == pytest.approx(4 * (2 * math.pi), rel=0.01)  # 4 splats of 2*pi*sigma^2
    assert stage.heatmap.observations == 4


def test_points_on_the_frames_edge_count_and_points_outside_do_not() -> None:
    heat = Heatmap(W, H, SETTINGS)
    heat.add(np.array([[200.0, 100.0], [0.0, 0.0], [201.0, 50.0], [-1.0, 5.0]]), 0.0)
    assert heat.grid[9, 19] == pytest.approx(1.0) and heat.grid[0, 0] == pytest.approx(1.0)
    assert heat.observations == 2


def test_decay_halves_the_heat_every_half_life_of_the_sources_time() -> None:
    heat = Heatmap(W, H, HeatmapSettings(mode="decay", half_life_s=2.0, cell=10, sigma=1.0))
    heat.add(np.array([[25.0, 35.0]]), 10.0)
    heat.add(np.empty((0, 2)), 12.0)
    assert heat.grid[3, 2] == pytest.approx(0.5)
    heat.add(np.array([[25.0, 35.0]]), 13.0)
    assert heat.grid[3, 2] == pytest.approx(0.5 * 2**-0.5 + 1.0)
    accumulate = Heatmap(W, H, SETTINGS)
    accumulate.add(np.array([[25.0, 35.0]]), 10.0)
    accumulate.add(np.array([[25.0, 35.0]]), 1000.0)
    assert accumulate.grid[3, 2] == pytest.approx(2.0)


def test_a_seek_starts_the_heatmap_again() -> None:
    stage = HeatmapStage(
        HeatmapSettings(mode="decay", half_life_s=1.0, cell=10, sigma=1.0, anchor="center")
    )
    for k in range(5):
        stage(_result(k, k * 1.0, [_box(25, 35)], [1]))
    stage.reset()  # the session resets a source's stages on a seek
    assert stage.heatmap is not None and float(stage.heatmap.grid.max()) == 0.0
    back = _result(1, 1.0, [_box(105, 55)], [1])  # played again from frame 1
    stage(back)
    grid = stage.heatmap.grid
    assert grid[5, 10] == pytest.approx(1.0) and grid[3, 2] == 0.0  # no decay from t=4
    layer = heat_layer(back.layers)
    assert layer is not None and layer.grid[5, 10] == pytest.approx(1.0)


def test_the_colour_goes_where_the_heat_is_and_nowhere_else() -> None:
    grid = np.zeros((10, 20), np.float32)
    grid[5, 10] = 4.0
    image = np.full((H, W, 3), 100, np.uint8)
    blend_heat(image, grid, 0.6)
    assert not np.array_equal(image[55, 105], [100, 100, 100])  # the hot cell is coloured
    assert (image[:30] == 100).all() and (image[:, :60] == 100).all()  # cold: untouched
    # one pixel a cell: the hottest cell gets alpha of JET's top colour; a cell with a
    # quarter of its heat log(1 + 2) / log(1 + 8) = 1/2 of the scale, at sqrt(1/2) alpha
    small = np.full((10, 20, 3), 100, np.uint8)
    cells = np.zeros((10, 20), np.float32)
    cells[2, 3], cells[7, 8] = 8.0, 2.0
    blend_heat(small, cells, 0.6)
    jet = cv2.applyColorMap(np.array([[255, 128]], np.uint8), cv2.COLORMAP_JET)[0].astype(float)
    assert np.abs(small[2, 3] - (100 + (jet[0] - 100) * 0.6)).max() <= 1
    assert np.abs(small[7, 8] - (100 + (jet[1] - 100) * 0.6 * 0.5**0.5)).max() <= 1
    assert (np.delete(small.reshape(200, 3), [43, 148], axis=0) == 100).all()


def test_the_draw_step_draws_the_heatmap_under_the_boxes_of_the_annotated_frame() -> None:
    from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
    from framelens.core.pipeline import build
    from framelens.core.pipeline.settings import PipelineSettings

    pipeline = build.host_pipeline(PipelineSettings(resolve_model(DEFAULT_MODEL)))
    try:
        stage = HeatmapStage(SETTINGS)
        plain, heated = (_result(0, 0.0, [_box(105, 55)], [1]) for _ in range(2))
        stage(heated)
        draw_after_stages(pipeline, plain, copy=True)
        draw_after_stages(pipeline, heated, copy=True)
        assert plain.annotated is not None and heated.annotated is not None
        differs = np.any(plain.annotated != heated.annotated, axis=2)
        ys, xs = np.nonzero(differs)
        assert len(ys) > 0  # the heat is drawn
        assert xs.min() >= 105 - 40 and xs.max() <= 105 + 40  # only around the track
        assert (heated.frame.image == 100).all()  # copy: the frame itself is untouched
    finally:
        pipeline.close()


def test_the_png_is_the_last_heat_over_the_last_frame_and_appears_whole(tmp_path: Path) -> None:
    stage = HeatmapStages(SETTINGS, keep_frame=True)(0)[0]
    png = HeatmapPng(tmp_path / "heat.png")
    for k in range(3):
        result = _result(k, k / 10, [_box(105, 55)], [1])
        stage(result)
        result.frame.image[:] = 0  # the overlay drawn in place later: not in the PNG
        png.add_layers(result.layers)
    # nothing to see before the outputs are committed: only the hidden temporary
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == []
    path = png.close()
    assert path == tmp_path / "heat.png" and [p.name for p in tmp_path.iterdir()] == ["heat.png"]
    image = cv2.imread(str(path))
    assert image.shape == (H, W, 3)
    assert (image[:15] == 100).all()  # the frame as it came, where it is cold
    assert not np.array_equal(image[55, 105], [100, 100, 100])
    empty = HeatmapPng(tmp_path / "none.png")
    with pytest.raises(ExportError, match="no frame"):
        empty.close()
    empty.abort()
    assert [p.name for p in tmp_path.iterdir()] == ["heat.png"]  # no temporary left


def test_a_png_a_folder_cannot_take_is_refused_before_the_run() -> None:
    # /proc takes no new files, not even root's (a read-only folder would not stop root)
    with pytest.raises(ExportError, match=r"cannot write /proc/heat\.png"):
        HeatmapPng("/proc/heat.png")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"mode": "fade"}, "unknown heatmap mode 'fade'"),
        ({"half_life_s": 0.0}, "half-life must be a positive"),
        ({"anchor": "middle"}, "unknown anchor 'middle'"),
        ({"alpha": 1.5}, "alpha must be between 0 and 1"),
    ],
)
def test_bad_settings_are_one_line(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        HeatmapSettings(**kwargs)  # type: ignore[arg-type]
