"""Drawing and editing lines and zones on the video canvas, with the mouse.

The editor sits on a ``VideoCanvas`` (an event filter) and works in the source pixels
of the frame shown (``VideoCanvas.map_to_source``: right under any zoom, pan and
letterboxing). While it draws or edits, its clicks are its own: the canvas does not pan.

* Draw a line (``draw("line")``): click its first point, then its second; the line is
  done (``drawn``). Walking from the first point to the second, a crossing from left to
  right is ``in`` (docs/analytics.md).
* Draw a zone (``draw("zone")``): click its corners; Enter or a double-click closes it
  (3 corners or more). Backspace takes the last corner back; Esc cancels either.
* Edit (``edit(shapes)``): every point of every line and zone gets a handle; drag one to
  move it (``moved``, when released); double-click a shape's handle for its name and
  classes (``propertiesAsked``). Esc ends editing.

The points drawn so far and the handles are painted over the frame by the canvas
(``VideoCanvas.set_decoration``), in screen pixels whatever the zoom.
"""

from __future__ import annotations

import itertools

from framelens.gui.display.canvas import VideoCanvas
from PySide6.QtCore import QEvent, QObject, QPointF, Qt, Signal
from PySide6.QtGui import QColor, QKeyEvent, QMouseEvent, QPainter, QPen

__all__ = ["HANDLE_RADIUS", "Point", "ZoneEditor"]

Point = tuple[float, float]
HANDLE_RADIUS = 7.0  # screen pixels: a handle is grabbed within it
_DRAWING = QColor(255, 255, 255)
_HALO = QColor(0, 0, 0, 200)
_HANDLE = QColor(255, 215, 0)


class ZoneEditor(QObject):
    """The canvas' lines and zones editor (see the module's docstring)."""

    drawn = Signal(str, list)  # "line" or "zone", its points (source pixels)
    moved = Signal(int, list)  # shape number (lines first, then zones), its new points
    propertiesAsked = Signal(int)  # shape number
    modeChanged = Signal(str)  # "", "line", "zone" or "edit"
    refused = Signal(str)  # one line: a click that cannot be taken

    def __init__(self, canvas: VideoCanvas) -> None:
        super().__init__(canvas)
        self.canvas = canvas
        self.mode = ""
        self.points: list[Point] = []  # of the shape being drawn
        self.shapes: list[tuple[str, list[Point]]] = []  # edited: (kind, points)
        self._hover: Point | None = None
        self._drag: tuple[int, int] | None = None  # (shape, point) held
        canvas.installEventFilter(self)
        canvas.setMouseTracking(True)

    # ---- modes ----------------------------------------------------------------------

    def draw(self, kind: str) -> None:
        """Start drawing a ``kind`` ("line" or "zone")."""
        self._set_mode(kind)
        self.points = []

    def edit(self, shapes: list[tuple[str, list[Point]]]) -> None:
        """Show ``shapes``' handles to drag (lines first, then zones)."""
        self.shapes = [(k, list(p)) for k, p in shapes]
        self._set_mode("edit")

    def set_shapes(self, shapes: list[tuple[str, list[Point]]]) -> None:
        """The shapes edited, changed elsewhere (a point moved back, a shape deleted)."""
        self.shapes = [(k, list(p)) for k, p in shapes]
        self.canvas.update()

    def stop(self) -> None:
        """Back to watching: nothing drawn or edited."""
        self.points = []
        self._drag = None
        self._set_mode("")

    def _set_mode(self, mode: str) -> None:
        self.mode = mode
        self.canvas.set_decoration(self._paint if mode else None)
        self.canvas.setCursor(Qt.CursorShape.CrossCursor if mode else Qt.CursorShape.OpenHandCursor)
        if mode:
            self.canvas.setFocus()
        self.modeChanged.emit(mode)

    # ---- input ----------------------------------------------------------------------

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is not self.canvas or not self.mode:
            return False
        kind = event.type()
        if kind == QEvent.Type.ShortcutOverride and isinstance(event, QKeyEvent):
            if event.key() in (Qt.Key.Key_Escape, Qt.Key.Key_Return, Qt.Key.Key_Enter,
                               Qt.Key.Key_Backspace):  # fmt: skip
                event.accept()  # ours, not the window's shortcut (Esc: the region's)
                return True
            return False
        if kind == QEvent.Type.KeyPress and isinstance(event, QKeyEvent):
            return self._key(event)
        if not isinstance(event, QMouseEvent):
            return False
        if kind == QEvent.Type.MouseButtonPress and event.button() == Qt.MouseButton.LeftButton:
            self._press(event.position())
            return True
        if kind == QEvent.Type.MouseButtonDblClick:
            self._double_click(event.position())
            return True
        if kind == QEvent.Type.MouseMove:
            self._move(event.position())
            return True
        if kind == QEvent.Type.MouseButtonRelease:
            self._release()
            return True
        return False

    def _key(self, event: QKeyEvent) -> bool:
        key = event.key()
        if key == Qt.Key.Key_Escape:
            self.stop()
            return True
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and self.mode == "zone":
            self.close_zone()
            return True
        if key == Qt.Key.Key_Backspace and self.points:
            self.points.pop()
            self.canvas.update()
            return True
        return False

    def click(self, point: Point) -> None:
        """A point clicked while drawing (source pixels)."""
        if self.mode not in ("line", "zone"):
            return
        if self.points and _close(self.points[-1], point):
            return  # the same point twice (a double-click's first click)
        self.points.append(point)
        self.canvas.update()
        if self.mode == "line" and len(self.points) == 2:
            self._done("line")

    def close_zone(self) -> None:
        """Enter or a double-click: the zone drawn so far is done (3 corners or more)."""
        if len(self.points) < 3:
            self.refused.emit(
                f"a zone needs at least 3 corners, it has {len(self.points)}: click more, "
                "or Esc to cancel"
            )
            return
        self._done("zone")

    def _done(self, kind: str) -> None:
        points = list(self.points)
        self.stop()
        self.drawn.emit(kind, points)

    def _press(self, at: QPointF) -> None:
        if self.mode == "edit":
            self._drag = self._handle_at(at)
            return
        point = self.canvas.map_to_source(at)
        if point is None:
            self.refused.emit("click on the video: that point is outside the frame")
            return
        self.click(point)

    def _double_click(self, at: QPointF) -> None:
        if self.mode == "zone":
            point = self.canvas.map_to_source(at)
            if point is not None:
                self.click(point)
            self.close_zone()
        elif self.mode == "edit":
            held = self._handle_at(at)
            if held is not None:
                self.propertiesAsked.emit(held[0])

    def _move(self, at: QPointF) -> None:
        point = self.canvas.map_to_source(at)
        if self._drag is not None and point is not None:
            shape, index = self._drag
            self.shapes[shape][1][index] = point
        self._hover = point
        self.canvas.update()

    def _release(self) -> None:
        if self._drag is None:
            return
        shape, _ = self._drag
        self._drag = None
        self.moved.emit(shape, list(self.shapes[shape][1]))

    def _handle_at(self, at: QPointF) -> tuple[int, int] | None:
        best: tuple[float, tuple[int, int]] | None = None
        for s, (_kind, points) in enumerate(self.shapes):
            for i, (x, y) in enumerate(points):
                p = self.canvas.map_from_source(x, y)
                d = (p.x() - at.x()) ** 2 + (p.y() - at.y()) ** 2
                if d <= HANDLE_RADIUS**2 * 2 and (best is None or d < best[0]):
                    best = (d, (s, i))
        return best[1] if best is not None else None

    # ---- painting (widget coordinates) ------------------------------------------------

    def _paint(self, painter: QPainter) -> None:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        to = self.canvas.map_from_source
        if self.mode == "edit":
            if self._drag is not None:  # the shape held, as it will be when let go
                kind, points = self.shapes[self._drag[0]]
                pts = [to(x, y) for x, y in points]
                if kind == "zone":
                    pts.append(pts[0])
                self._polyline(painter, pts)
            for _kind, points in self.shapes:
                for x, y in points:
                    self._handle(painter, to(x, y))
            return
        pts = [to(x, y) for x, y in self.points]
        pts_h = [*pts, to(*self._hover)] if self._hover is not None and pts else pts
        self._polyline(painter, pts_h)
        for p in pts:
            self._handle(painter, p)

    @staticmethod
    def _polyline(painter: QPainter, pts: list[QPointF]) -> None:
        for pen in (QPen(_HALO, 5.0), QPen(_DRAWING, 2.0, Qt.PenStyle.DashLine)):
            painter.setPen(pen)
            for a, b in itertools.pairwise(pts):
                painter.drawLine(a, b)

    @staticmethod
    def _handle(painter: QPainter, at: QPointF) -> None:
        painter.setPen(QPen(_HALO, 2.0))
        painter.setBrush(_HANDLE)
        painter.drawEllipse(at, HANDLE_RADIUS - 2, HANDLE_RADIUS - 2)


def _close(a: Point, b: Point) -> bool:
    return abs(a[0] - b[0]) < 0.5 and abs(a[1] - b[1]) < 0.5
