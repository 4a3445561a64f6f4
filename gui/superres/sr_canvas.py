"""The video canvas with super-resolution views: the upscaled frame set against the original.

A second texture holds the original (``reference``): the source frame drawn enlarged by
GL's nearest-neighbour sampling over the part the model upscaled, or bicubic's
enlargement made on the host. The views (``MODES``):

- upscaled: the model's output alone (the plain canvas);
- wipe: a vertical divider across the canvas (a fraction of its width, dragged with the
  mouse): the original left of it, the upscaled right of it, in the same place;
- side: the original and the upscaled in two halves, at the same zoom and pan;
- lens: the upscaled frame, and beside the cursor two panes (sr_lens.py) with the
  original and the upscaled at 200-800% nearest-neighbour (wheel or +/- change it);
- roi: the original frame; a rectangle dragged on it is the region of interest, the only
  part upscaled (``regionChanged``, in source pixels; Esc clears it, via the window).

Detection frames (``set_image``) are shown plainly whatever the mode.
"""

from __future__ import annotations

from framelens.core.api import (
    Detections,
    DeviceFrame,
    HeatLayer,
    Image,
    OverlayStyle,
    Region,
    ZonesPicture,
)
from framelens.gui.display.canvas import VideoCanvas
from framelens.gui.display.gl_texture import Frame, GlTexture
from framelens.gui.display.image_place import ImagePlace
from framelens.gui.superres.sr_lens import LENS_ZOOMS, LensPanes, lens_panes, lens_rects, paint_lens
from OpenGL import GL
from PySide6.QtCore import QEvent, QPointF, QRect, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QKeyEvent, QMouseEvent, QPainter, QPen, QWheelEvent
from PySide6.QtWidgets import QWidget

__all__ = ["MODES", "MODE_LABELS", "SrCanvas"]

MODES = ("upscaled", "wipe", "side", "lens", "roi")
MODE_LABELS = {
    "upscaled": "Upscaled",
    "wipe": "Before/After Wipe",
    "side": "Side by Side",
    "lens": "Zoom Lens",
    "roi": "Region of Interest",
}
SIDE_GAP = 4  # pixels between the halves of the side-by-side view
_GRAB = 8  # the divider is grabbed this close to it (pixels)
_ACCENT = QColor(240, 200, 80)


class SrCanvas(VideoCanvas):
    """VideoCanvas with the super-resolution views of the module doc."""

    modeChanged = Signal(str)
    dividerMoved = Signal(float)  # 0..1 of the width
    lensZoomChanged = Signal(int)
    regionChanged = Signal(object)  # Region (x, y, w, h) in source pixels, or None

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMouseTracking(True)  # the lens follows the cursor
        self._ref = GlTexture()
        self._ref_uv = (0.0, 0.0, 1.0, 1.0)
        self._ref_nearest = False
        self._sr = False  # the content is a super-resolution result: the views apply
        self._mode = "upscaled"
        self.divider = 0.5
        self.lens_zoom = 4
        self.captions = ("Original", "Upscaled")
        self.scale = 1
        self._lens_images: tuple[Image, Image] | None = None  # original, upscaled (host)
        self._lens_at: QPointF | None = None
        self.last_lens: tuple[LensPanes, tuple[QRect, QRect]] | None = None  # painted last
        self.region: Region | None = None
        self._rubber: tuple[QPointF, QPointF] | None = None
        self._moving_divider = False

    def _textures(self) -> tuple[GlTexture, ...]:
        return (self._main, self._ref)

    # ---- content ----------------------------------------------------------------------

    @property
    def showing_superres(self) -> bool:
        return self._sr

    def set_image(
        self,
        image: Image | DeviceFrame,
        overlay: tuple[Detections, tuple[str, ...], OverlayStyle] | None = None,
        marks: tuple[ZonesPicture, ...] = (),
        heat: HeatLayer | None = None,
    ) -> None:
        """A detection frame: shown plainly, whatever the mode."""
        self._sr = False
        self._lens_images = None
        super().set_image(image, overlay, marks, heat)

    def set_superres(
        self,
        main: Frame,
        reference: Frame | None = None,
        *,
        scale: int,
        reference_uv: tuple[float, float, float, float] = (0.0, 0.0, 1.0, 1.0),
        reference_nearest: bool = False,
        lens: tuple[Image, Image] | None = None,
        captions: tuple[str, str] = ("Original", "Upscaled"),
    ) -> None:
        """A super-resolution result: ``main`` is what the mode shows in full (the
        upscaled frame; the original in roi mode); ``reference`` the original enlarged
        (``reference_uv`` the part of it that was upscaled; sharp pixels with
        ``reference_nearest``); ``lens`` the host original and upscaled, for the lens."""
        self._sr = True
        self.scale = scale
        self._main.set(main)
        self._overlay = None
        if reference is not None:
            self._ref.set(reference)
            self._ref_uv = reference_uv
            self._ref_nearest = reference_nearest
        self._lens_images = lens
        self.captions = captions
        self.update()

    # ---- modes ------------------------------------------------------------------------

    @property
    def mode(self) -> str:
        return self._mode

    def set_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown view {mode!r} (known: {', '.join(MODES)})")
        if mode == self._mode:
            return
        roi_changed = "roi" in (mode, self._mode)  # what is shown changes size
        self._mode = mode
        self._rubber = None
        self._moving_divider = False
        if roi_changed:
            self.reset_view()
        self.update()
        self.modeChanged.emit(mode)

    def set_divider(self, fraction: float) -> None:
        fraction = min(1.0, max(0.0, float(fraction)))
        if fraction != self.divider:
            self.divider = fraction
            self.dividerMoved.emit(fraction)
            self.update()

    @property
    def divider_x(self) -> float:
        """The divider's place, widget x."""
        return self.divider * self.width()

    def step_lens_zoom(self, steps: int) -> None:
        i = LENS_ZOOMS.index(self.lens_zoom) if self.lens_zoom in LENS_ZOOMS else 2
        self.set_lens_zoom(LENS_ZOOMS[max(0, min(len(LENS_ZOOMS) - 1, i + steps))])

    def set_lens_zoom(self, zoom: int) -> None:
        zoom = min(LENS_ZOOMS, key=lambda z: abs(z - zoom))
        if zoom != self.lens_zoom:
            self.lens_zoom = zoom
            self.lensZoomChanged.emit(zoom)
            self.update()

    def set_region(self, region: Region | None) -> None:
        """The region of interest (source pixels), or None; says so by regionChanged."""
        if region != self.region:
            self.region = region
            self.update()
            self.regionChanged.emit(region)

    def clear_region(self) -> None:
        self._rubber = None
        self.set_region(None)

    # ---- geometry ---------------------------------------------------------------------

    def _side_by_side(self) -> bool:
        return self._sr and self._mode == "side"

    def _view_area(self) -> QRectF:
        if self._side_by_side():
            return QRectF(0.0, 0.0, (self.width() - SIDE_GAP) // 2, self.height())
        return super()._view_area()

    def right_offset(self) -> float:
        """How far right the side-by-side view's upscaled half is from the original's."""
        return float((self.width() - SIDE_GAP) // 2 + SIDE_GAP)  # whole pixels: no blur

    def lens_centre(self) -> tuple[float, float] | None:
        """The upscaled pixel (x, y, fractional) under the cursor, for the lens."""
        size = self.image_size
        if self._lens_at is None or size is None:
            return None
        return ImagePlace(self.image_rect(), *size).pixel_at(self._lens_at)

    # ---- painting ---------------------------------------------------------------------

    def _paint_content(self) -> None:
        if not self._sr:
            super()._paint_content()
            return
        ratio = self.devicePixelRatioF()
        r = self.image_rect()
        has_ref = self._ref.size != (0, 0)
        if self._mode == "wipe" and has_ref:
            self._paint_wipe(r, ratio)
        elif self._mode == "side" and has_ref:
            self._paint_side(r, ratio)
        else:
            self._main.draw(r, ratio=ratio)
        painter = QPainter(self)
        try:
            if self._mode == "wipe" and has_ref:
                self._paint_divider(painter)
            elif self._mode == "side" and has_ref:
                self._caption(painter, QPointF(8, 8), self.captions[0])
                self._caption(painter, QPointF(self.right_offset() + 8, 8), self.captions[1])
            elif self._mode == "lens":
                self._paint_lens(painter)
            elif self._mode == "roi":
                self._paint_region(painter, r)
        finally:
            painter.end()

    def _paint_wipe(self, r: QRectF, ratio: float) -> None:
        t = min(1.0, max(0.0, (self.divider_x - r.left()) / r.width()))
        u0, v0, u1, v1 = self._ref_uv
        left = QRectF(r.left(), r.top(), r.width() * t, r.height())
        right = QRectF(r.left() + r.width() * t, r.top(), r.width() * (1 - t), r.height())
        self._ref.draw(
            left, (u0, v0, u0 + (u1 - u0) * t, v1), ratio=ratio, nearest=self._ref_nearest
        )
        self._main.draw(right, (t, 0.0, 1.0, 1.0), ratio=ratio)

    def _paint_side(self, r: QRectF, ratio: float) -> None:
        half = self._view_area()
        offset = self.right_offset()
        GL.glEnable(GL.GL_SCISSOR_TEST)
        try:
            h = round(self.height() * ratio)
            GL.glScissor(0, 0, round(half.width() * ratio), h)
            self._ref.draw(r, self._ref_uv, ratio=ratio, nearest=self._ref_nearest)
            GL.glScissor(round(offset * ratio), 0, round(half.width() * ratio) + 1, h)
            self._main.draw(r.translated(offset, 0.0), ratio=ratio)
        finally:
            GL.glDisable(GL.GL_SCISSOR_TEST)

    def _caption(self, painter: QPainter, at: QPointF, text: str) -> None:
        metrics = painter.fontMetrics()
        box = QRectF(at.x(), at.y(), metrics.horizontalAdvance(text) + 12, metrics.height() + 6)
        painter.fillRect(box, QColor(20, 22, 26, 200))
        painter.setPen(QColor(230, 233, 240))
        painter.drawText(box, int(Qt.AlignmentFlag.AlignCenter), text)

    def _paint_divider(self, painter: QPainter) -> None:
        x = self.divider_x
        painter.setPen(QPen(_ACCENT, 2))
        painter.drawLine(QPointF(x, 0), QPointF(x, self.height()))
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setBrush(_ACCENT)
        painter.drawEllipse(QPointF(x, self.height() / 2), 7, 7)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        metrics = painter.fontMetrics()
        self._caption(
            painter,
            QPointF(max(4, x - metrics.horizontalAdvance(self.captions[0]) - 24), 8),
            self.captions[0],
        )
        self._caption(painter, QPointF(x + 10, 8), self.captions[1])

    def _paint_lens(self, painter: QPainter) -> None:
        centre = self.lens_centre()
        if centre is None or self._lens_images is None:
            return
        original, upscaled = self._lens_images
        panes = lens_panes(original, upscaled, self.scale, centre, self.lens_zoom)
        assert self._lens_at is not None
        rects = lens_rects(self._lens_at, self.width(), self.height())
        k = self.lens_zoom
        captions = (f"Original · {100 * k * self.scale}%", f"{self.captions[1]} · {100 * k}%")
        paint_lens(painter, panes, rects, captions)
        self.last_lens = (panes, rects)

    def _region_rect(self, r: QRectF, region: Region) -> QRectF:
        return ImagePlace(r, *(self.image_size or (1, 1))).area(*region)

    def _paint_region(self, painter: QPainter, r: QRectF) -> None:
        if self.region is not None:
            painter.setPen(QPen(_ACCENT, 2))
            painter.drawRect(self._region_rect(r, self.region))
        if self._rubber is not None:
            painter.setPen(QPen(_ACCENT, 1, Qt.PenStyle.DashLine))
            painter.drawRect(QRectF(*self._rubber).normalized())
        if self.region is None and self._rubber is None:
            self._caption(
                painter,
                QPointF(8, 8),
                "Drag a rectangle: only that region is upscaled · Esc clears it",
            )

    # ---- input ------------------------------------------------------------------------

    def _image_point(self, at: QPointF) -> tuple[float, float]:
        """The (fractional) image pixel under a widget point, clamped into the image."""
        size = self.image_size or (1, 1)
        x, y = ImagePlace(self.image_rect(), *size).pixel_at(at)
        return min(max(0.0, x), size[0]), min(max(0.0, y), size[1])

    def _region_from(self, a: QPointF, b: QPointF) -> Region | None:
        x0, y0 = self._image_point(a)
        x1, y1 = self._image_point(b)
        x, y = int(min(x0, x1)), int(min(y0, y1))
        w, h = int(max(x0, x1)) - x, int(max(y0, y1)) - y
        return (x, y, w, h) if min(w, h) >= 4 else None

    def mousePressEvent(self, event: QMouseEvent) -> None:
        pos, left = event.position(), event.button() == Qt.MouseButton.LeftButton
        if self._sr and left and self._mode == "wipe" and abs(pos.x() - self.divider_x) <= _GRAB:
            self._moving_divider = True
            return
        if self._sr and left and self._mode == "roi" and self.map_to_image(pos) is not None:
            self._rubber = (pos, pos)
            return
        if self._sr and self._mode == "roi" and not left:  # other buttons pan
            self._drag_from = pos
            return
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        pos = event.position()
        if self._moving_divider:
            self.set_divider(pos.x() / max(1, self.width()))
            return
        if self._rubber is not None:
            self._rubber = (self._rubber[0], pos)
            self.update()
            return
        if self._sr and self._mode == "lens":
            self._lens_at = pos
            self.update()
        if self._sr and self._mode == "wipe" and self._drag_from is None:
            near = abs(pos.x() - self.divider_x) <= _GRAB
            self.setCursor(Qt.CursorShape.SplitHCursor if near else Qt.CursorShape.OpenHandCursor)
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if self._moving_divider:
            self._moving_divider = False
            return
        if self._rubber is not None:
            start, _ = self._rubber
            self._rubber = None
            region = self._region_from(start, event.position())
            if region is not None:
                self.set_region(region)
            self.update()
            return
        if self._drag_from is not None and event.button() != Qt.MouseButton.LeftButton:
            self._drag_from = None
        super().mouseReleaseEvent(event)

    def leaveEvent(self, event: QEvent) -> None:
        if self._lens_at is not None:
            self._lens_at = None
            self.update()
        super().leaveEvent(event)

    def zoom_at(self, factor: float, at: QPointF) -> None:
        if self._side_by_side() and at.x() >= self.right_offset():
            at = QPointF(at.x() - self.right_offset(), at.y())  # the same place, left half
        super().zoom_at(factor, at)

    def wheelEvent(self, event: QWheelEvent) -> None:
        if self._sr and self._mode == "lens":
            steps = event.angleDelta().y() / 120.0
            if steps:
                self.step_lens_zoom(1 if steps > 0 else -1)
            event.accept()
            return
        super().wheelEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if self._sr and self._mode == "lens":
            if event.key() in (Qt.Key.Key_Plus, Qt.Key.Key_Equal):
                self.step_lens_zoom(1)
                return
            if event.key() == Qt.Key.Key_Minus:
                self.step_lens_zoom(-1)
                return
        super().keyPressEvent(event)
