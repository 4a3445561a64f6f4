"""The wall's overlay layer: a tile is painted again only when what it shows changed, the
others keep their pixels, and nothing of a tile stays once it is gone or emptied."""

from __future__ import annotations

import numpy as np
import pytest
from framelens.core.api import DEFAULT_STYLE, Detections, box_colour, layout
from framelens.gui.display import overlay_paint
from framelens.gui.display.image_place import ImagePlace
from framelens.gui.wall.tile_layer import (
    TileLayer,
    TileOverlay,
    TileView,
    caption_font,
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


@pytest.mark.parametrize("label", ["person", "motorcycle", "traffic light"])
@pytest.mark.parametrize("side", [4, 2])
def test_a_small_tile_writes_its_tags_in_glyphs_that_stay_in_the_tag(
    qapp: QApplication, monkeypatch: pytest.MonkeyPatch, side: int, label: str
) -> None:
    """A 4x4 or 2x2 wall of 1080p on a 1600x900 canvas shows a tag's text ~7 or ~13
    pixels high: the layer writes it with the font's glyphs at that size (not its
    outline: that path is made to fail here), inside the tag's coloured box, narrowed
    where it would be wider (long labels too)."""

    def no_outline(*args: object) -> None:
        raise AssertionError("a small tag's text was outlined, not written in glyphs")

    monkeypatch.setattr(overlay_paint, "_paint_text", no_outline)
    w, h = 1600 / side - 2, 900 / side - 1
    cell = QRectF(0, 0, w, h)  # a wall's tile on a 1600x900 canvas
    frame = (1920, 1080)
    boxes = np.array([[200, 300, 360, 720]], np.float32)
    detections = Detections(boxes, np.array([0.99], np.float32), np.zeros(1, np.int32), None,
                            np.array([123456], np.int64))  # fmt: skip
    shapes = layout(detections, (label,), DEFAULT_STYLE, *frame)
    tag = shapes.boxes[0].tag
    assert tag is not None
    place = ImagePlace(cell, *frame)
    view = TileView(cell, cell, (detections, (label,), DEFAULT_STYLE), None, frame, "", "",
                    shapes)  # fmt: skip
    size = (round(w) + 2, round(h) + 1)
    target = QImage(*size, QImage.Format.Format_ARGB32_Premultiplied)
    target.fill(QColor(90, 90, 90))
    painter = QPainter(target)
    TileLayer().paint(painter, [view], size, 1.0, caption_font(QApplication.font()))
    painter.end()
    b, g, r = tag.text_colour
    box = place.box(tag.rect.x1, tag.rect.y1, tag.rect.x2 + 1, tag.rect.y2 + 1)
    near = box.adjusted(-6, -6, 40, 6).toRect()  # the tag and past its right end

    def text_pixel(x: int, y: int) -> bool:  # ink of the text's colour, its edges too
        c = target.pixelColor(x, y)
        return abs(c.red() - r) + abs(c.green() - g) + abs(c.blue() - b) < 200

    inside = outside = 0
    for y in range(max(near.top(), 0), min(near.bottom(), size[1])):
        for x in range(max(near.left(), 0), min(near.right(), size[0])):
            if text_pixel(x, y):
                if box.contains(x + 0.5, y + 0.5):
                    inside += 1
                else:
                    outside += 1
    assert inside > 10, f"no text in the tag ({inside} pixels)"
    assert outside == 0, f"{outside} text pixels outside the tag's box"
