"""The video wall's canvas: ONE OpenGL widget that draws a grid of tiles.

Each tile is a texture (gl_texture.py) holding its source's latest frame, letterboxed
into its cell, with the detections painted over it the way the single canvas paints
them over device frames (core's overlay layout through overlay_paint.py, so the wall
shows the picture the exporter draws), and a caption: the source's name, its fps and
latency, or why it is down ("failed: ...", "reconnecting"). The layout (1, 2x2, 3x3,
4x4 or auto by count) decides how many tiles are on screen; a click on one emits
``tileClicked`` with its index.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from framelens.core.api import (
    WALL_LAYOUTS,
    Detections,
    Image,
    OverlayStyle,
    TileState,
    layout,
    wall_grid,
)
from framelens.gui.gl_texture import GlTexture
from framelens.gui.overlay_paint import paint_overlay
from OpenGL import GL
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFont, QImage, QMouseEvent, QPainter
from PySide6.QtOpenGLWidgets import QOpenGLWidget
from PySide6.QtWidgets import QWidget

__all__ = ["LAYOUTS", "WallCanvas", "grid_size"]

LAYOUTS: dict[str, int] = {**WALL_LAYOUTS, "auto": 0}
"""Layout name -> tiles per side (0: as many as the sources need); core's wall layouts."""

_BACKGROUND = (0.075, 0.082, 0.098)
_GAP = 2.0  # pixels between tiles
_CAPTION_H = 20.0

TileOverlay = tuple[Detections, tuple[str, ...], OverlayStyle]


def grid_size(name: str, count: int) -> tuple[int, int]:
    """(columns, rows) of layout ``name`` for ``count`` sources; auto: the squarest grid
    that holds them all (2 -> 2x1, 3 or 4 -> 2x2, 5 -> 3x2, 16 -> 4x4). Core's rule, so
    the device composite (core.gpu.wall_composite) lays tiles out the same."""
    return wall_grid(count, name if name in LAYOUTS else "auto")


def _caption(state: TileState | None, name: str) -> tuple[str, str]:
    """(top line, centred message) of a tile."""
    if state is None:
        return name, "opening…"
    if state.status == "failed":
        return state.name, f"failed: {state.reason}"
    if state.status == "reconnecting":
        return state.name, "reconnecting…"
    parts = [state.name]
    if state.fps > 0:
        parts.append(f"{state.fps:.1f} fps")
    if math.isfinite(state.latency_ms):
        parts.append(f"{state.latency_ms:.0f} ms")
    if state.status == "ended":
        parts.append("ended")
    return " · ".join(parts), "opening…" if state.status == "opening" else ""


class WallCanvas(QOpenGLWidget):
    """Tiles of many sources in one GL widget; ``set_frame`` per tile, then a repaint."""

    tileClicked = Signal(int)  # index of the source clicked

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMinimumSize(320, 180)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self._names: list[str] = []
        self._textures: list[GlTexture] = []
        self._overlays: list[TileOverlay | None] = []
        self._states: list[TileState | None] = []
        self._layout = "auto"
        self._gl_ready = False
        self.frames_painted = 0

    # ---- content ---------------------------------------------------------------

    def set_sources(self, names: Sequence[str]) -> None:
        """One tile per source, in this order, blank until its first frame."""
        self._names = list(names)
        self._textures = [GlTexture() for _ in names]
        self._overlays = [None] * len(names)
        self._states = [None] * len(names)
        self.update()

    @property
    def source_count(self) -> int:
        return len(self._names)

    def set_frame(self, tile: int, image: Image, overlay: TileOverlay | None = None) -> None:
        """Tile ``tile`` shows ``image`` (BGR) with ``overlay`` painted over it from the
        next paint on."""
        if 0 <= tile < len(self._textures):
            self._textures[tile].set(image)
            self._overlays[tile] = overlay

    def set_states(self, states: Sequence[TileState]) -> None:
        for i, state in enumerate(states[: len(self._states)]):
            self._states[i] = state

    # ---- layout ----------------------------------------------------------------

    @property
    def layout_name(self) -> str:
        return self._layout

    def set_layout(self, name: str) -> None:
        if name not in LAYOUTS:
            raise ValueError(f"unknown wall layout {name!r}")
        self._layout = name
        self.update()

    def grid(self) -> tuple[int, int]:
        return grid_size(self._layout, len(self._names))

    @property
    def tile_count(self) -> int:
        """Tiles on screen: the grid's cells, or fewer when there are fewer sources."""
        cols, rows = self.grid()
        return min(cols * rows, len(self._names))

    def cell_rect(self, tile: int) -> QRectF:
        """Where tile ``tile``'s cell lies, in widget coordinates."""
        cols, rows = self.grid()
        w, h = self.width() / cols, self.height() / rows
        r, c = divmod(tile, cols)
        return QRectF(c * w + _GAP / 2, r * h + _GAP / 2, w - _GAP, h - _GAP)

    def image_rect(self, tile: int) -> QRectF:
        """The tile's frame letterboxed into its cell (aspect kept, centred)."""
        cell = self.cell_rect(tile)
        size = self._textures[tile].frame_size if tile < len(self._textures) else None
        iw, ih = size or (16, 9)
        scale = min(cell.width() / iw, cell.height() / ih)
        w, h = iw * scale, ih * scale
        x = math.floor(cell.x() + (cell.width() - w) / 2)
        y = math.floor(cell.y() + (cell.height() - h) / 2)
        return QRectF(x, y, w, h)

    def tile_at(self, point: QPointF) -> int | None:
        for i in range(self.tile_count):
            if self.cell_rect(i).contains(point):
                return i
        return None

    def grab_frame_image(self) -> QImage:
        """What the canvas shows, as rendered (for tests and screenshots)."""
        return self.grabFramebuffer()

    # ---- GL --------------------------------------------------------------------

    def initializeGL(self) -> None:
        GL.glClearColor(*_BACKGROUND, 1.0)
        for texture in self._textures:
            texture.create()  # a new context: new textures
        self._gl_ready = True

    def paintGL(self) -> None:
        ratio = self.devicePixelRatioF()
        GL.glViewport(0, 0, round(self.width() * ratio), round(self.height() * ratio))
        GL.glClear(GL.GL_COLOR_BUFFER_BIT)
        GL.glMatrixMode(GL.GL_PROJECTION)
        GL.glLoadIdentity()
        GL.glOrtho(0, self.width(), self.height(), 0, -1, 1)
        GL.glMatrixMode(GL.GL_MODELVIEW)
        GL.glLoadIdentity()
        shown = self.tile_count
        for i in range(shown):
            texture = self._textures[i]
            if not texture.id:
                texture.create()  # a tile added since the context was made
            texture.upload()
            texture.draw(self.image_rect(i), ratio=ratio)
        self.frames_painted += 1
        painter = QPainter(self)
        try:
            for i in range(shown):
                self._paint_tile(painter, i)
            if not self._names:
                painter.setPen(QColor(150, 158, 172))
                painter.drawText(self.rect(), int(Qt.AlignmentFlag.AlignCenter), "No sources")
        finally:
            painter.end()

    def _paint_tile(self, painter: QPainter, i: int) -> None:
        texture, overlay = self._textures[i], self._overlays[i]
        w, h = texture.size
        if overlay is not None and w and len(overlay[0]):
            shapes = layout(overlay[0], overlay[1], overlay[2], w, h)
            if shapes:
                r = self.image_rect(i)
                painter.save()
                painter.translate(r.left(), r.top())
                painter.scale(r.width() / w, r.height() / h)
                paint_overlay(painter, shapes)
                painter.restore()
        cell = self.cell_rect(i)
        top, message = _caption(self._states[i], self._names[i])
        painter.save()
        font = QFont(painter.font())
        font.setPixelSize(12)
        painter.setFont(font)
        strip = QRectF(cell.left(), cell.top(), cell.width(), _CAPTION_H)
        painter.fillRect(strip, QColor(0, 0, 0, 150))
        painter.setPen(QColor(235, 238, 243))
        flags = int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft)
        painter.drawText(strip.adjusted(6, 0, -6, 0), flags, top)
        if message:
            failed = message.startswith("failed")
            painter.setPen(QColor(242, 95, 92) if failed else QColor(244, 162, 89))
            body = cell.adjusted(8, _CAPTION_H, -8, -8)
            align = Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap
            painter.drawText(body, int(align), message)
        painter.restore()

    # ---- input -----------------------------------------------------------------

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            tile = self.tile_at(event.position())
            if tile is not None:
                self.tileClicked.emit(tile)
        super().mouseReleaseEvent(event)
