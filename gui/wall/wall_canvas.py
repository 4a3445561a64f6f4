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
from collections import deque
from collections.abc import Callable, Iterable, Sequence

from framelens.core.api import (
    INTEROP_PATH,
    WALL_LAYOUTS,
    Frame,
    Overlay,
    OverlayStyle,
    SharedWallFrame,
    TileState,
    WallPicture,
    ZonesPicture,
    fallback_path,
    ms_since,
    picture_size_for,
    wall_grid,
)
from framelens.gui.display.canvas import release_gpu_slot
from framelens.gui.display.gl_texture import GlTexture
from framelens.gui.wall.tile_layer import (
    TileLayer,
    TileOverlay,
    TileView,
    caption_font,
    shown_caption,
)
from OpenGL import GL
from PySide6.QtCore import QEvent, QPointF, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QHelpEvent,
    QHideEvent,
    QImage,
    QMouseEvent,
    QPainter,
    QResizeEvent,
)
from PySide6.QtOpenGLWidgets import QOpenGLWidget
from PySide6.QtWidgets import QToolTip, QWidget

__all__ = ["LAYOUTS", "WallCanvas", "grid_size"]

LAYOUTS: dict[str, int] = {**WALL_LAYOUTS, "auto": 0}
"""Layout name -> tiles per side (0: as many as the sources need); core's wall layouts."""

_BACKGROUND = (0.075, 0.082, 0.098)
LATENCIES_KEPT = 1 << 14  # the newest shown results' latencies (~34 s of 16 tiles at 30 fps)


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
    """The wall's one picture (core's WallPicture) fitted into one GL widget, with each
    tile's overlay and caption painted over it; ``set_frame`` per result, then a repaint.

    On the GPU path the tiles are drawn into the picture on the device by a kernel and the
    picture reaches the screen through one CUDA-GL interop buffer (``display_path``)."""

    tileClicked = Signal(int)  # index of the source clicked

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMinimumSize(320, 180)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self._names: list[str] = []
        self._picture = WallPicture()
        self._texture = GlTexture()
        self._layer = TileLayer()  # the tiles' overlays and captions, over the picture
        self._shown_version = -1  # the picture's version in the texture
        self._overlays: list[TileOverlay | None] = []
        self._shapes: list[Overlay | None] = []  # overlays laid out by the wall's process
        self._zones: list[ZonesPicture | None] = []  # each tile's lines and zones, counted
        self._frame_sizes: list[tuple[int, int]] = []
        self._states: list[TileState | None] = []
        self._layout = "auto"
        self.frames_painted = 0
        # each result drawn into a tile either reaches a paint (shown) or is drawn over by
        # the tile's next result first (replaced): what the wall benchmark counts
        self.tiles_shown = 0
        self.tiles_replaced = 0
        # each shown result's time from its frame's release (a live source's) to the paint
        # that shows it, in ms, the newest LATENCIES_KEPT: what the benchmark's p50/p99 read
        self.shown_latency_ms: deque[float] = deque(maxlen=LATENCIES_KEPT)
        # tiles whose newest result no paint has shown -> its frame's release time
        self._unpainted: dict[int, float | None] = {}
        # the picture of a wall played in a process of its own (set_shared): the one
        # waiting for the next paint, and its buffer handed back once uploaded
        self._shared: SharedWallFrame | None = None
        self._shared_size: tuple[int, int] | None = None
        self._shared_rects: dict[int, tuple[int, int, int, int]] = {}
        # (buffer, the newer picture's version when given back unseen for it)
        self.release_shared: Callable[[int, int | None], None] | None = None
        # told once when a device picture (CUDA IPC) reached the texture through host
        # memory, with why (no CUDA-GL interop here): core then picks shared memory
        self.device_via_host: Callable[[str], None] | None = None
        self._told_via_host = False
        # the picture takes the canvas's aspect once a resize has settled
        self._resize_timer = QTimer(self, singleShot=True, interval=150)
        self._resize_timer.timeout.connect(self._fit_picture)

    # ---- content ---------------------------------------------------------------

    def set_sources(self, names: Sequence[str]) -> None:
        """One tile per source, in this order, blank until its first frame."""
        self._names = list(names)
        self._overlays = [None] * len(names)
        self._shapes = [None] * len(names)
        self._zones = [None] * len(names)
        self._frame_sizes = [(0, 0)] * len(names)
        self._states = [None] * len(names)
        self._unpainted.clear()
        self._shared_rects.clear()
        self._relayout()

    @property
    def source_count(self) -> int:
        return len(self._names)

    def set_frame(
        self,
        tile: int,
        frame: Frame,
        overlay: TileOverlay | None = None,
        marks: tuple[object, ...] = (),
    ) -> None:
        """Tile ``tile`` shows ``frame`` with ``overlay`` painted over it from the next
        paint on (the frame itself is not kept: it is drawn into the wall's picture);
        ``marks``: the result's, its lines and zones with their counts among them."""
        if self._picture.put(tile, frame):
            if tile in self._unpainted:
                self.tiles_replaced += 1
            self._unpainted[tile] = frame.arrived
            self._overlays[tile] = overlay
            self._shapes[tile] = None  # laid out at the paint
            self._zones[tile] = next((m for m in marks if isinstance(m, ZonesPicture)), None)
            self._frame_sizes[tile] = (frame.width, frame.height)

    def set_shared(
        self, frame: SharedWallFrame, labels: tuple[str, ...], style: OverlayStyle
    ) -> None:
        """The whole wall as drawn in its own process (``frame.image``: shared memory,
        uploaded as it lies; ``frame.device``: an IPC buffer, copied on the device through
        interop) at the next paint, then its buffer handed back through
        ``release_shared``; a picture still waiting is handed back unseen (the tiles it
        renewed that this one renews again counted as replaced)."""
        renewed = frame.overlays  # the older's tiles were taken when it came
        older = self._shared
        if older is not None:  # never painted: this one carries its tiles on
            self._release(older, unseen_for=frame.version)
            frame, lost = frame.after(older)
            self.tiles_replaced += lost
        self._shared = frame
        size = frame.size
        if size != self._shared_size:
            self._shared_size = size
            self._relayout()
        for tile, overlay in renewed.items():
            if 0 <= tile < len(self._names):
                self._overlays[tile] = (overlay.detections, labels, style)
                self._shapes[tile] = overlay.shapes
                self._zones[tile] = next(
                    (m for m in overlay.marks if isinstance(m, ZonesPicture)), None
                )
                self._frame_sizes[tile] = overlay.frame_size
                self._shared_rects[tile] = overlay.rect

    def _tell_via_host(self) -> None:
        if self._told_via_host or self.device_via_host is None:
            return
        self._told_via_host = True
        why = self._texture.uploader.reason or "no CUDA-GL interop in this window"
        self.device_via_host(why)

    def _release(self, frame: SharedWallFrame, unseen_for: int | None = None) -> None:
        if self.release_shared is not None:
            self.release_shared(frame.buffer, unseen_for)

    def drop_shared(self) -> None:
        """Let go of the shared picture (its process is closing)."""
        if self._shared is not None:
            self._release(self._shared)
        self._shared = None
        self._texture.pending = self._texture.shown = None

    def zones(self, tile: int) -> ZonesPicture | None:
        """The lines and zones tile ``tile`` shows, with their counts (None: none)."""
        return self._zones[tile]

    def set_states(self, states: Sequence[TileState]) -> None:
        for i, state in enumerate(states[: len(self._states)]):
            self._states[i] = state

    @property
    def display_path(self) -> str:
        """How the picture reaches the screen: "CUDA-GL interop" or "texture upload (why)"."""
        if self._texture.via_interop:
            return INTEROP_PATH
        why = self._texture.uploader.reason or self._picture.note or "frames arrive in host memory"
        return fallback_path(why)

    # ---- layout ----------------------------------------------------------------

    @property
    def layout_name(self) -> str:
        return self._layout

    def set_layout(self, name: str) -> None:
        if name not in LAYOUTS:
            raise ValueError(f"unknown wall layout {name!r}")
        self._layout = name
        self._relayout()

    def _relayout(self) -> None:
        if self._shared_size is not None:  # the process's picture: its grid and size
            self._picture.set_layout(len(self._names), "auto", self._shared_size)
            self.update()
            return
        size = picture_size_for(self.width(), self.height())
        self._picture.set_layout(len(self._names), self._layout, size)
        self.update()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._resize_timer.start()

    def _fit_picture(self) -> None:
        """A new picture when the canvas's aspect has changed by more than 3%."""
        pw, ph = self._picture.width, self._picture.height
        if abs(math.log((self.width() / max(1, self.height())) / (pw / ph))) > 0.03:
            self._relayout()

    def grid(self) -> tuple[int, int]:
        return grid_size(self._layout, len(self._names))

    @property
    def tile_count(self) -> int:
        """Tiles on screen: the grid's cells, or fewer when there are fewer sources."""
        return self._picture.tiles

    def picture_rect(self) -> QRectF:
        """Where the wall's picture lies in the widget (fitted, aspect kept, centred)."""
        pw, ph = self._picture.width, self._picture.height
        scale = min(self.width() / pw, self.height() / ph)
        w, h = pw * scale, ph * scale
        return QRectF(math.floor((self.width() - w) / 2), math.floor((self.height() - h) / 2), w, h)

    def _to_widget(self, rect: tuple[int, int, int, int]) -> QRectF:
        """A rectangle of the picture in widget coordinates."""
        area = self.picture_rect()
        s = area.width() / self._picture.width
        x, y, w, h = rect
        return QRectF(area.x() + x * s, area.y() + y * s, w * s, h * s)

    def cell_rect(self, tile: int) -> QRectF:
        """Where tile ``tile``'s cell lies, in widget coordinates."""
        return self._to_widget(self._picture.cell(tile))

    def image_rect(self, tile: int) -> QRectF:
        """The tile's frame letterboxed into its cell (its cell before its first frame)."""
        rect = self._shared_rects.get(tile) if self._shared_size else self._picture.rect(tile)
        return self._to_widget(rect) if rect is not None else self.cell_rect(tile)

    def tile_at(self, point: QPointF) -> int | None:
        for i in range(self.tile_count):
            if self.cell_rect(i).contains(point):
                return i
        return None

    def caption(self, tile: int) -> str:
        """The tile's top line, whole (painted cut with "…" when the tile is narrow)."""
        return _caption(self._states[tile], self._names[tile])[0]

    def shown_caption(self, tile: int, font: QFont | None = None) -> str:
        """The tile's top line as painted: cut with "…" to its cell (the tooltip has it
        whole)."""
        font = font or self.caption_font()
        return shown_caption(self.caption(tile), font, self.cell_rect(tile).width())

    def caption_font(self) -> QFont:
        return caption_font(self.font())

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            tile = self.tile_at(QPointF(event.pos()))
            if tile is None:
                QToolTip.hideText()
            else:
                QToolTip.showText(event.globalPos(), self.caption(tile), self)
            return True
        return super().event(event)

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.FontChange:  # captions are in the canvas's font
            self._layer.invalidate()
            self.update()
        super().changeEvent(event)

    def grab_frame_image(self) -> QImage:
        """What the canvas shows, as rendered (for tests and screenshots)."""
        return self.grabFramebuffer()

    # ---- GL --------------------------------------------------------------------

    def initializeGL(self) -> None:
        GL.glClearColor(*_BACKGROUND, 1.0)
        self._texture.create()  # a new context: a new texture
        self._shown_version = -1
        context = self.context()
        if context is not None:
            context.aboutToBeDestroyed.connect(release_gpu_slot(self))

    def _release_gpu(self, texture_too: bool = True) -> None:
        """Unregister the interop buffer and free the texture while the GL context exists
        (the texture is made again at the next paint)."""
        if not self._texture.id:
            return
        self.makeCurrent()
        try:
            self._texture.release(texture_too=True)
        finally:
            self.doneCurrent()
        self._shown_version = -1

    def hideEvent(self, event: QHideEvent) -> None:
        self._release_gpu()  # the last moment the canvas is whole (see VideoCanvas)
        super().hideEvent(event)

    def close_picture(self) -> None:
        """Free the picture's device memory (the window is closing)."""
        self._picture.close()

    def paintGL(self) -> None:
        ratio = self.devicePixelRatioF()
        GL.glViewport(0, 0, round(self.width() * ratio), round(self.height() * ratio))
        GL.glClear(GL.GL_COLOR_BUFFER_BIT)
        GL.glMatrixMode(GL.GL_PROJECTION)
        GL.glLoadIdentity()
        GL.glOrtho(0, self.width(), self.height(), 0, -1, 1)
        GL.glMatrixMode(GL.GL_MODELVIEW)
        GL.glLoadIdentity()
        if not self._texture.id:
            self._texture.create()  # shown again after a hide released it
        if self._shared is not None:
            frame, self._shared = self._shared, None
            # shared memory: uploaded as it lies; CUDA IPC: copied on the device (interop)
            try:
                self._texture.set(frame.device if frame.device is not None else frame.image)
                self._texture.upload()
            finally:  # even where the copy failed: the child keeps both its buffers
                self._texture.shown = None  # its buffer is the child's again
                self._release(frame)
            self.tiles_shown += frame.shown
            self._shown_since(overlay.arrived for overlay in frame.overlays.values())
            if frame.device is not None and not self._texture.via_interop:
                self._tell_via_host()
        elif (
            self._shared_size is None
            and self._names
            and (self._picture.version != self._shown_version)
        ):
            self._shown_version = self._picture.version
            self._texture.set(self._picture.picture())
            self._texture.upload()
        if self._names:
            self._texture.draw(self.picture_rect(), ratio=ratio)
        self.frames_painted += 1
        self.tiles_shown += len(self._unpainted)
        self._shown_since(self._unpainted.values())
        self._unpainted.clear()
        painter = QPainter(self)
        try:
            size = (self.width(), self.height())
            self._layer.paint(painter, self._views(), size, ratio, self.caption_font())
            if not self._names:
                painter.setPen(QColor(150, 158, 172))
                painter.drawText(self.rect(), int(Qt.AlignmentFlag.AlignCenter), "No sources")
        finally:
            painter.end()

    def _shown_since(self, arrivals: Iterable[float | None]) -> None:
        """Record the latency of results this paint shows (those whose frames say when
        they were released: files played in real time; cameras and streams do not say)."""
        for arrived in arrivals:
            latency = ms_since(arrived)
            if latency is not None:
                self.shown_latency_ms.append(latency)

    def _views(self) -> list[TileView]:
        """What each tile on screen shows now (TileLayer repaints the ones that changed)."""
        views = []
        for i in range(self.tile_count):
            overlay, zones = self._overlays[i], self._zones[i]
            if not (self._picture.showing(i) or i in self._shared_rects):
                overlay = zones = None  # a blank tile (since a layout change): nothing over it
            top, message = _caption(self._states[i], self._names[i])
            views.append(TileView(self.cell_rect(i), self.image_rect(i), overlay, zones,
                                  self._frame_sizes[i], top, message,
                                  self._shapes[i] if overlay is not None else None))  # fmt: skip
        return views

    # ---- input -----------------------------------------------------------------

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            tile = self.tile_at(event.position())
            if tile is not None:
                self.tileClicked.emit(tile)
        super().mouseReleaseEvent(event)
