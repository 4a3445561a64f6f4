"""What the wall paints over its picture (each tile's caption strip, lines and zones,
boxes, tags and trails) kept in ONE image at the widget's size, a tile repainted into it
only when what it shows has changed, and the image drawn over the picture once a paint.

    paint ──views (one TileView a tile)──> TileLayer.paint
        tiles whose view changed since the last paint: each painted into an image of
        its own cell (Qt's raster engine, on the CPU), several at once on worker threads
        (Qt lets go of Python's lock while it rasterises)
        their cells cleared in the layer and their images laid in, pixel for pixel
        the layer ──one drawImage──> the GL widget (one texture upload)

Painting the overlays straight onto the GL widget made Qt's OpenGL paint engine
tessellate every tag's text and upload every trail's image at every paint, for all 16
tiles: 16 tiles took ~30 ms a paint on an H100's host (a profile of the real window,
2026-12-05), so the wall painted ~28 times a second against 480 results. In the raster
engine the same painting costs ~0.25-0.7 ms a tile, and a tile whose result did not
change costs nothing. With every tile renewed each paint (16 live cameras), that raster
work was still most of the GUI thread's time a paint, and the GUI thread's time is
what caps the wall's paints a second (the H200's host painted 33-39 times a second,
2026-12-06): the worker threads take it off the GUI thread.
"""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass

from framelens.core.api import (
    Detections,
    Overlay,
    OverlayStyle,
    ZonesPicture,
    layout,
    set_native_name,
)
from framelens.gui.common.widgets import elide
from framelens.gui.display.image_place import ImagePlace
from framelens.gui.display.overlay_paint import paint_overlay
from framelens.gui.wall.zones_paint import paint_zones
from PySide6.QtCore import QPoint, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QImage, QPainter

__all__ = ["CAPTION_H", "WORKERS_ENV", "TileLayer", "TileOverlay", "TileView", "default_workers"]

CAPTION_H = 20.0  # the caption strip's height, in widget pixels

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
            paint_overlay(painter, shapes)
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


WORKERS_ENV = "FRAMELENS_WALL_LAYER_WORKERS"  # another number of painting threads (A/B)


def default_workers() -> int:
    """Threads that paint tiles beside the GUI thread: one core a thread, the GUI
    thread's core left to it, at most 4 (16 tiles' raster work split 4 ways is a few
    ms); 0 (all on the GUI thread) on a machine of one core. ``WORKERS_ENV`` asks for
    another number (0: none), for an A/B of the same window (benchmarks/wall_screen.py
    ``--layer-workers``)."""
    asked = os.environ.get(WORKERS_ENV, "").strip()
    if asked.isdecimal() and asked.isascii():
        return min(int(asked), 16)
    return max(0, min(4, _cores() - 1))


def _cores() -> int:
    """The cores this process may run on (a container's limit, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class _TileImage:
    """One tile's overlay painted on its own: ``image`` holds the device pixels from
    ``origin`` (device pixels of the layer) on, transparent outside the tile's cell."""

    origin: QPoint
    image: QImage


_local = threading.local()  # each painting thread's own fonts


def _thread_font(description: str) -> QFont:
    """A font of this thread's own made from ``description`` (``QFont.toString``). A
    QFont shares its data with the fonts it was copied from, and Qt caches font engines
    in that data per thread: fonts shared between threads would race on it."""
    fonts: dict[str, QFont] = _local.__dict__.setdefault("fonts", {})
    font = fonts.get(description)
    if font is None:
        font = QFont()
        font.fromString(description)  # detached: data of its own
        fonts[description] = font
    return font


def _tile_image(view: TileView, ratio: float, fonts: tuple[str, str]) -> _TileImage:
    """``view`` painted into an image of its cell's device pixels, placed so that its
    pixels are those painting it straight into the layer would give (the layer's own
    device-pixel grid: an offset of whole pixels, the same scale). ``fonts``: the
    painter's default font and the captions' (``QFont.toString``), made again here."""
    cell = view.cell
    x0, y0 = math.floor(cell.left() * ratio), math.floor(cell.top() * ratio)
    x1, y1 = math.ceil(cell.right() * ratio), math.ceil(cell.bottom() * ratio)
    image = QImage(max(1, x1 - x0), max(1, y1 - y0), QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    try:
        painter.setFont(_thread_font(fonts[0]))  # not the application's, shared
        painter.translate(-x0, -y0)
        painter.scale(ratio, ratio)
        painter.setClipRect(cell)  # nothing of a tile outside its cell
        paint_tile(painter, view, _thread_font(fonts[1]))
    finally:
        painter.end()
    return _TileImage(QPoint(x0, y0), image)


class TileLayer:
    """The overlays of all tiles in one transparent image the size of the widget.

    ``workers``: threads that paint changed tiles beside the calling (GUI) thread
    (``default_workers()``); 0 paints them all on the calling thread. The pixels are the
    same either way (the tags' text outlines are made once for all threads, each painting
    a copy of its own)."""

    def __init__(self, workers: int | None = None) -> None:
        self._image: QImage | None = None
        self._ratio = 1.0
        self._views: list[TileView | None] = []
        self.tiles_painted = 0  # tiles painted into the layer (the rest were kept)
        self._workers = default_workers() if workers is None else max(0, workers)
        self._pool: ThreadPoolExecutor | None = None
        self._closed = False  # closed: painted on the calling thread from then on
        self.tiles_on_workers = 0  # of tiles_painted, those a worker thread painted

    def invalidate(self) -> None:
        """Every tile painted again, on a clear layer, at the next paint (a layout or
        font change)."""
        self._image, self._views = None, []

    def close(self) -> None:
        """Stop the worker threads (the canvas is going); a paint after (a grab) paints
        on the calling thread."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def _paint_tiles(self, views: list[TileView], ratio: float, font: QFont) -> list[_TileImage]:
        """Each of ``views`` painted into its own image, shared between the worker threads
        and the calling thread (which paints every ``workers + 1``-th itself rather than
        wait idle: with one worker on two cores, half each); Qt's painting lets go of
        Python's lock. The fonts go as descriptions: each thread makes its own."""
        fonts = (QFont().toString(), font.toString())
        if self._closed or self._workers == 0 or len(views) < 2:
            return [_tile_image(view, ratio, fonts) for view in views]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                self._workers, "fl-wall-layer", initializer=set_native_name,
                initargs=("fl-wall-layer",),
            )  # fmt: skip
        share = self._workers + 1
        futures = {
            k: self._pool.submit(_tile_image, view, ratio, fonts)
            for k, view in enumerate(views)
            if k % share
        }
        try:
            mine = {k: _tile_image(views[k], ratio, fonts) for k in range(0, len(views), share)}
        finally:
            wait(futures.values())  # none still painting once this returns or raises
        self.tiles_on_workers += len(futures)
        return [mine[k] if k in mine else futures[k].result() for k in range(len(views))]

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
            image.fill(Qt.GlobalColor.transparent)
            self._image, self._ratio, self._views = image, ratio, []
        old = self._views + [None] * (len(views) - len(self._views))
        stale = [v for v in old[len(views) :] if v is not None]
        changed = [k for k, view in enumerate(views) if not view.same_as(old[k])]
        if changed or stale:
            tiles = self._paint_tiles([views[k] for k in changed], ratio, font)
            painter = QPainter(image)
            try:
                painter.scale(ratio, ratio)  # cells in widget pixels, as the tiles painted
                painter.setCompositionMode(QPainter.CompositionMode.CompositionMode_Clear)
                for gone in stale:  # tiles no longer on screen (fewer after a layout change)
                    painter.fillRect(gone.cell, Qt.GlobalColor.transparent)
                for k in changed:
                    previous = old[k]
                    if previous is not None:
                        painter.fillRect(previous.cell, Qt.GlobalColor.transparent)
                    painter.fillRect(views[k].cell, Qt.GlobalColor.transparent)
                painter.resetTransform()  # the tiles' images: device pixels, whole offsets
                painter.setCompositionMode(QPainter.CompositionMode.CompositionMode_SourceOver)
                for tile in tiles:
                    painter.drawImage(tile.origin, tile.image)
            finally:
                painter.end()
            self.tiles_painted += len(changed)
        self._views = list(views)
        target.drawImage(QRectF(0, 0, w, h), image)
