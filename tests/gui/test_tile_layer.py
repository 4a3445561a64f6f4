"""The wall's overlay layer: a tile is painted again only when what it shows changed, the
others keep their pixels, and nothing of a tile stays once it is gone or emptied."""

from __future__ import annotations

import numpy as np
import pytest
from framelens.core.api import DEFAULT_STYLE, Detections, box_colour, layout
from framelens.gui.wall import tile_layer
from framelens.gui.wall.tile_layer import (
    WORKERS_ENV,
    TileLayer,
    TileOverlay,
    TileView,
    caption_font,
    default_workers,
    paint_tile,
)
from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtWidgets import QApplication

pytestmark = pytest.mark.gui

W, H = 640, 360  # the widget: four tiles of 320x180 (2x2)
FRAME = (320, 180)  # each tile's frame, drawn at its size
LABELS = ("person",)


def _cell(k: int) -> QRectF:
    return QRectF((k % 2) * 320, (k // 2) * 180, 320, 180)


def _boxes(x: float) -> Detections:
    """One box whose left edge lies at frame x."""
    return Detections(
        np.array([[x, 60, x + 40, 160]], np.float32),
        np.array([0.9], np.float32),
        np.array([0], np.int32),
    )


def _view(k: int, overlay: TileOverlay | Detections | None, caption: str = "cam") -> TileView:
    if isinstance(overlay, Detections):
        overlay = (overlay, LABELS, DEFAULT_STYLE)
    return TileView(_cell(k), _cell(k), overlay, None, FRAME, f"{caption}{k}", "")


def _paint(layer: TileLayer, views: list[TileView]) -> QImage:
    """The layer drawn over a black widget, as the canvas draws it over its picture."""
    target = QImage(W, H, QImage.Format.Format_ARGB32_Premultiplied)
    target.fill(QColor(0, 0, 0))
    painter = QPainter(target)
    layer.paint(painter, views, (W, H), 1.0, caption_font(QApplication.font()))
    painter.end()
    return target


def _box_colour_at(image: QImage, tile: int, frame_x: float) -> bool:
    """Whether the box's colour is at its left edge (frame x, y 110) in ``tile``."""
    b, g, r = box_colour(0, -1)
    cell = _cell(tile)
    px = image.pixelColor(int(cell.x() + frame_x), int(cell.y() + 110))
    return abs(px.red() - r) + abs(px.green() - g) + abs(px.blue() - b) < 40


def test_only_the_tiles_whose_result_changed_are_painted_again(qapp: QApplication) -> None:
    layer = TileLayer()
    # as the canvas keeps them: one overlay a result, the same object paint after paint
    results = [(_boxes(20 + 60 * k), LABELS, DEFAULT_STYLE) for k in range(4)]
    first = _paint(layer, [_view(k, results[k]) for k in range(4)])
    assert layer.tiles_painted == 4
    assert all(_box_colour_at(first, k, 20 + 60 * k) for k in range(4))
    # the same results again (a paint for another reason): nothing painted again
    same = _paint(layer, [_view(k, results[k]) for k in range(4)])
    assert layer.tiles_painted == 4
    assert same == first
    # tile 2's next result: its box moved, the three others as they were
    results[2] = (_boxes(240), LABELS, DEFAULT_STYLE)
    moved = _paint(layer, [_view(k, results[k]) for k in range(4)])
    assert layer.tiles_painted == 5
    assert _box_colour_at(moved, 2, 240) and not _box_colour_at(moved, 2, 140)
    assert all(_box_colour_at(moved, k, 20 + 60 * k) for k in (0, 1, 3))
    # a caption that changes (its fps) paints its tile again too
    _paint(layer, [_view(k, results[k], "cam" if k else "fps") for k in range(4)])
    assert layer.tiles_painted == 6


def test_a_tile_gone_or_emptied_leaves_nothing_behind(qapp: QApplication) -> None:
    layer = TileLayer()
    _paint(layer, [_view(k, _boxes(100)) for k in range(4)])
    # one tile left on screen (the layout went from 4 to 1 source): the others clear
    one = _paint(layer, [_view(0, _boxes(100))])
    assert _box_colour_at(one, 0, 100)
    for k in (1, 2, 3):
        cell = _cell(k).toRect()
        pixels = [one.pixelColor(x, y) for x in range(cell.left(), cell.right(), 7)
                  for y in range(cell.top(), cell.bottom(), 7)]  # fmt: skip
        assert all(p == QColor(0, 0, 0) for p in pixels), f"tile {k} left pixels behind"
    # a tile blank since a layout change: its box goes, its caption stays
    blank = _paint(layer, [_view(0, None)])
    assert not _box_colour_at(blank, 0, 100)
    caption = [blank.pixelColor(x, y).red() for x in range(6, 40) for y in range(4, 16)]
    assert max(caption) > 150  # the caption's light text


def test_a_tile_laid_out_by_the_wall_s_process_is_painted_as_given(qapp: QApplication) -> None:
    """The wall's process sends each overlay laid out (``shapes``): the layer paints
    those, not a layout of its own of the detections."""
    layer = TileLayer()
    detections = _boxes(20)
    given = layout(_boxes(200), LABELS, DEFAULT_STYLE, *FRAME)  # elsewhere on purpose
    view = TileView(_cell(0), _cell(0), (detections, LABELS, DEFAULT_STYLE), None, FRAME,
                    "cam0", "", given)  # fmt: skip
    image = _paint(layer, [view])
    assert _box_colour_at(image, 0, 200) and not _box_colour_at(image, 0, 20)


def _cells(side: int) -> list[QRectF]:
    """A side x side grid over the widget, cells a fraction of a pixel apart."""
    w, h = (W - 1.5 * (side - 1)) / side, (H - 1.5 * (side - 1)) / side
    return [QRectF(c * (w + 1.5), r * (h + 1.5), w, h) for r in range(side) for c in range(side)]


def _grid_views(side: int, step: int) -> list[TileView]:
    views = []
    for k, cell in enumerate(_cells(side)):
        overlay = (_boxes(10 + (7 * k + 13 * step) % 200), LABELS, DEFAULT_STYLE)
        views.append(TileView(cell, cell, overlay, None, FRAME, f"cam{k}", ""))
    return views


@pytest.mark.parametrize("ratio", [1.0, 1.5])
def test_painting_only_what_changed_gives_the_pixels_of_painting_everything(
    qapp: QApplication, ratio: float
) -> None:
    """Results renewed tile by tile and the grid changed (2x2 -> 3x3 -> 2x2), on a
    screen of device pixel ratio 1 and 1.5 (cells off whole pixels): the layer kept
    between paints ends exactly as a layer painted afresh, nothing left outside a cell."""

    def paint(layer: TileLayer, views: list[TileView]) -> QImage:
        target = QImage(
            round(W * ratio), round(H * ratio), QImage.Format.Format_ARGB32_Premultiplied
        )
        target.setDevicePixelRatio(ratio)
        target.fill(QColor(0, 0, 0))
        painter = QPainter(target)
        layer.paint(painter, views, (W, H), ratio, caption_font(QApplication.font()))
        painter.end()
        return target

    kept = TileLayer()
    views = _grid_views(2, 0)
    paint(kept, views)
    for step, side in ((1, 2), (2, 3), (3, 3), (4, 2)):
        fresh = _grid_views(side, step)
        if side == len(views) ** 0.5:  # one tile renewed, the others the same objects
            views = [fresh[k] if k == step % len(views) else v for k, v in enumerate(views)]
        else:
            views = fresh
        incremental = paint(kept, views)
        assert incremental == paint(TileLayer(), views), f"step {step}: pixels differ"


def _tracked(k: int, step: int) -> Detections:
    """Two tracked people with tags and trails (what a tracked wall tile shows)."""
    x = 10.0 + (7 * k + 13 * step) % 150
    boxes = np.array([[x, 40, x + 50, 150], [x + 90, 30, x + 140, 170]], np.float32)
    trails = tuple(
        np.stack([np.linspace(b[0] - 30, b[0] + 25, 12), np.full(12, b[3] - 5.0)], 1).astype(
            np.float32
        )
        for b in boxes
    )
    return Detections(boxes, np.array([0.9, 0.8], np.float32), np.zeros(2, np.int32), None,
                      np.array([3 + k, 40 + k], np.int64), trails)  # fmt: skip


def _differences(a: QImage, b: QImage) -> tuple[int, int]:
    """How many pixels of ``a`` and ``b`` differ, and by how many levels at most."""
    pa = np.frombuffer(a.constBits(), np.uint8, a.sizeInBytes()).astype(np.int16)
    pb = np.frombuffer(b.constBits(), np.uint8, b.sizeInBytes()).astype(np.int16)
    delta = np.abs(pa - pb).reshape(-1, 4)
    return int((delta.max(axis=1) > 0).sum()), int(delta.max(initial=0))


@pytest.mark.parametrize("side, ratio", [(3, 1.0), (4, 1.5)])
def test_tiles_painted_on_worker_threads_give_the_pixels_of_painting_them_in_place(
    qapp: QApplication, side: int, ratio: float
) -> None:
    """The layer paints changed tiles on worker threads and the calling thread, each into
    an image of its own cell laid into the layer: the pixels of painting every tile
    straight into one image on the GUI thread (as the layer did before), boxes, tags,
    trails and captions, whichever thread painted which tile: 3x3 on a screen of device
    pixel ratio 1, and the 16-tile wall at 1.5 (cells off whole pixels, where an
    antialiased edge may round a few levels apart)."""
    font = caption_font(QApplication.font())

    def views(step: int) -> list[TileView]:
        return [
            TileView(cell, cell, (_tracked(k, step), LABELS, DEFAULT_STYLE), None, FRAME,
                     f"cam{k} 30.0 fps", "")
            for k, cell in enumerate(_cells(side))
        ]  # fmt: skip

    def blank() -> QImage:
        image = QImage(
            round(W * ratio), round(H * ratio), QImage.Format.Format_ARGB32_Premultiplied
        )
        image.setDevicePixelRatio(ratio)
        image.fill(QColor(0, 0, 0, 0))
        return image

    def layer_pixels(layer: TileLayer, shown: list[TileView]) -> QImage:
        target = blank()
        painter = QPainter(target)
        layer.paint(painter, shown, (W, H), ratio, font)
        painter.end()
        return target

    threaded, in_place = TileLayer(workers=3), TileLayer(workers=0)
    try:
        for step in (1, 2, 3):  # every tile renewed each time, by any thread
            shown = views(step)
            direct = blank()  # every tile straight into one image, on this thread
            painter = QPainter(direct)
            for view in shown:
                painter.save()
                painter.setClipRect(view.cell)
                paint_tile(painter, view, font)
                painter.restore()
            painter.end()
            on_workers = layer_pixels(threaded, shown)
            assert on_workers == layer_pixels(in_place, shown), f"step {step}"
            count, most = _differences(on_workers, direct)
            if ratio == 1.0:
                assert count == 0, f"step {step}: {count} pixels differ, by up to {most}"
            else:  # a tile painted at a whole-pixel offset: an antialiased edge's coverage
                # can round a few levels apart (a box's side at x.33 of a device pixel)
                assert most <= 8 and count <= 0.001 * direct.width() * direct.height()
    finally:
        threaded.close()
    n = side * side
    assert threaded.tiles_on_workers == 3 * (n - len(range(0, n, 4)))  # 3 of 4 theirs
    # and there is something to compare: every tile's boxes and caption are painted
    assert sum(on_workers.pixel(x, y) != 0 for x in range(0, W, 4) for y in range(0, H, 4)) > 500


def test_the_painting_threads_follow_the_machine_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One thread a core beside the GUI thread's, at most 4; ``FRAMELENS_WALL_LAYER_WORKERS``
    (the benchmark's A/B) sets another number, 0 none; a value that is not one is ignored."""
    monkeypatch.delenv(WORKERS_ENV, raising=False)
    for cores, workers in ((1, 0), (2, 1), (4, 3), (16, 4)):
        monkeypatch.setattr(tile_layer, "_cores", lambda cores=cores: cores)
        assert default_workers() == workers
    monkeypatch.setenv(WORKERS_ENV, "0")
    assert default_workers() == 0
    monkeypatch.setenv(WORKERS_ENV, "2")
    assert default_workers() == 2
    for wrong in ("many", "²", "-1"):
        monkeypatch.setenv(WORKERS_ENV, wrong)
        assert default_workers() == 4  # the machine's (16 cores, as set above)
