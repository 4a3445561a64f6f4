"""What the wall paints over its picture (each tile's caption strip, lines and zones,
boxes, tags and trails) kept in ONE image at the widget's size, a tile repainted into it
only when what it shows has changed, and the image drawn over the picture once a paint.

    paint ──views (one TileView a tile)──> TileLayer.paint
        tiles whose view changed since the last paint: their cell cleared and painted
        again into the layer (Qt's raster engine, on the CPU)
        the layer ──one drawImage──> the GL widget (one texture upload)

Painting the overlays straight onto the GL widget made Qt's OpenGL paint engine
tessellate every tag's text and upload every trail's image at every paint, for all 16
tiles: 16 tiles took ~30 ms a paint on an H100's host (a profile of the real window,
2026-12-05), so the wall painted ~28 times a second against 480 results. In the raster
engine the same painting costs ~0.25 ms a tile, and a tile whose result did not change
costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from framelens.core.api import Detections, Overlay, OverlayStyle, ZonesPicture, layout
from framelens.gui.common.widgets import elide
from framelens.gui.display.image_place import ImagePlace
from framelens.gui.display.overlay_paint import paint_overlay
from framelens.gui.wall.zones_paint import paint_zones
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QImage, QPainter

__all__ = ["CAPTION_H", "GLYPHS_BELOW_PX", "TileLayer", "TileOverlay", "TileView"]

CAPTION_H = 20.0  # the caption strip's height, in widget pixels
# a tag whose text is shown less than this high (cap height, widget pixels) is written
# with the font's glyphs at that size, not its outline stretched into the tag's box: 16
# tiles of 1080p on a 1600-pixel window show a tag's text ~7 pixels high, where filling
# the outline costs about twice as much (48 tags a paint: the layer 10.6 -> 8.3 ms)
GLYPHS_BELOW_PX = 14.0

TileOverlay = tuple[Detections, tuple[str, ...], OverlayStyle]
"""A tile's detections, the model's labels and the style they are painted in."""

_SHADE = QColor(0, 0, 0, 150)
_CAPTION_TEXT = QColor(235, 238, 243)
_FAILED = QColor(242, 95, 92)
_WAITING = QColor(244, 162, 89)


@dataclass(frozen=True, eq=False)
class TileView:
    """What one tile shows, in widget coordinates: its ``cell``, the frame's ``image``
    rectangle in it (letterboxed), the overlay and the lines and zones over the frame
    (None: nothing over it), the frame's size, the caption's top line and its centred
    message ("" none); ``shapes``: the overlay already laid out for the frame (the wall's
    process does it), None to lay it out here."""

    cell: QRectF
    image: QRectF
    overlay: TileOverlay | None
    zones: ZonesPicture | None
    frame_size: tuple[int, int]
    caption: str
    message: str
    shapes: Overlay | None = None

    def same_as(self, other: TileView | None) -> bool:
        """Whether ``other`` paints the same pixels: the same result's overlay and zones
        (the very objects: a new result brings new ones), geometry and text."""
        return (
            other is not None
            and other.overlay is self.overlay
            and other.shapes is self.shapes
            and other.zones is self.zones
            and other.frame_size == self.frame_size
            and other.cell == self.cell
            and other.image == self.image
            and other.caption == self.caption
            and other.message == self.message
        )


def caption_font(base: QFont) -> QFont:
    font = QFont(base)
    font.setPixelSize(12)
    return font


def shown_caption(caption: str, font: QFont, width: float) -> str:
    """The caption as painted: cut with "…" to a cell ``width`` wide."""
    return elide(caption, QFontMetrics(font), width - 12)


def paint_tile(painter: QPainter, view: TileView, font: QFont) -> None:
    """One tile's strip, lines and zones, boxes, tags and trails, and caption."""
    cell = view.cell
    strip = QRectF(cell.left(), cell.top(), cell.width(), CAPTION_H)
    # the strip's shade first: a label of a box at the frame's top lies under it, and
    # is painted over the shade, as bright as anywhere else ...
    painter.fillRect(strip, _SHADE)
    w, h = view.frame_size
    tags: list[QRectF] = []  # the labels painted, in widget coordinates
    if view.zones is not None and w:
        paint_zones(painter, view.zones, view.image, w, h)
    if view.overlay is not None and w and len(view.overlay[0]):
        shapes = view.shapes
        if shapes is None or (shapes.width, shapes.height) != (w, h):
            detections, labels, style = view.overlay
            shapes = layout(detections, labels, style, w, h)
        if shapes:
            place = ImagePlace(view.image, w, h)
            painter.save()
            painter.setTransform(place.transform(), True)
            paint_overlay(painter, shapes, glyphs_below_px=GLYPHS_BELOW_PX)
            painter.restore()
            for mark in shapes.boxes:
                if mark.tag is not None:
                    t = mark.tag.rect
                    tags.append(place.area(t.x1, t.y1, t.x2 - t.x1 + 1, t.y2 - t.y1 + 1))
    painter.save()
    painter.setFont(font)
    shown = shown_caption(view.caption, font, cell.width())
    # ... except behind the caption's own text, shaded again so that it stays readable
    text = QRectF(strip.left(), strip.top(), QFontMetrics(font).horizontalAdvance(shown), 0)
    text.setWidth(min(strip.width(), text.width() + 12))
    text.setHeight(CAPTION_H)
    for tag in tags:
        painter.fillRect(tag.intersected(text), _SHADE)
    painter.setPen(_CAPTION_TEXT)
    flags = int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft)
    painter.drawText(strip.adjusted(6, 0, -6, 0), flags, shown)
    if view.message:
        painter.setPen(_FAILED if view.message.startswith("failed") else _WAITING)
        body = cell.adjusted(8, CAPTION_H, -8, -8)
        align = Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap
        painter.drawText(body, int(align), view.message)
    painter.restore()


class TileLayer:
    """The overlays of all tiles in one transparent image the size of the widget."""

    def __init__(self) -> None:
        self._image: QImage | None = None
        self._ratio = 1.0
        self._views: list[TileView | None] = []
        self.tiles_painted = 0  # tiles painted into the layer (the rest were kept)

    def invalidate(self) -> None:
        """Every tile painted again, on a clear layer, at the next paint (a layout or
        font change)."""
        self._image, self._views = None, []

    def paint(
        self, target: QPainter, views: list[TileView], size: tuple[int, int], ratio: float,
        font: QFont,
    ) -> None:  # fmt: skip
        """Bring the layer up to ``views`` (a ``size`` widget at device pixel ``ratio``)
        and draw it with ``target``."""
        w, h = size
        if w <= 0 or h <= 0:
            return
        pixels = (round(w * ratio), round(h * ratio))
        image = self._image
        if image is None or (image.width(), image.height()) != pixels or self._ratio != ratio:
            image = QImage(pixels[0], pixels[1], QImage.Format.Format_ARGB32_Premultiplied)
            image.setDevicePixelRatio(ratio)
            image.fill(Qt.GlobalColor.transparent)
            self._image, self._ratio, self._views = image, ratio, []
        old = self._views + [None] * (len(views) - len(self._views))
        stale = [v for v in old[len(views) :] if v is not None]
        changed = [k for k, view in enumerate(views) if not view.same_as(old[k])]
        if changed or stale:
            painter = QPainter(image)
            try:
                # each cell cleared once, by writing transparent pixels (Source: the same
                # pixels as Clear, which Qt's raster engine composes several times slower)
                painter.setCompositionMode(QPainter.CompositionMode.CompositionMode_Source)
                clear = [gone.cell for gone in stale]  # tiles no longer on screen
                for k in changed:
                    previous = old[k]
                    if previous is not None and previous.cell != views[k].cell:
                        clear.append(previous.cell)  # the tile moved (a layout change)
                    clear.append(views[k].cell)
                for cell in clear:
                    painter.fillRect(cell, Qt.GlobalColor.transparent)
                painter.setCompositionMode(QPainter.CompositionMode.CompositionMode_SourceOver)
                for k in changed:
                    painter.save()
                    painter.setClipRect(views[k].cell)  # nothing of a tile outside its cell
                    paint_tile(painter, views[k], font)
                    painter.restore()
            finally:
                painter.end()
            self.tiles_painted += len(changed)
        self._views = list(views)
        target.drawImage(QRectF(0, 0, w, h), image)
