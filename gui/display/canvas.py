"""The video canvas: an OpenGL texture of the annotated frame, with zoom and pan.

Fixed-function OpenGL (compatibility profile) keeps it working everywhere,
Mesa's llvmpipe under Xvfb included. The texture (RGBA8, gl_texture.py) is
allocated once per frame size and then updated with glTexSubImage2D. The canvas
times its own upload and paint and reports it through ``drawTimeMs``, so display
is measured like any other stage.

Frames come as host BGR arrays (CPU path) or as device frames (GPU path,
``framelens.core.gpu.interop.DeviceFrame``). Device frames are written by the
display kernel into a GL pixel buffer registered with CUDA and the texture is
filled from it, without a host round trip; where interop cannot run (no NVIDIA
OpenGL, pycuda without GL) they go through host memory instead. ``display_path``
says which, and why, for the status bar.

Subclasses (sr_canvas.py) draw more than one texture: they list them in
``_textures`` and paint in ``_paint_content``; ``_view_area`` is the part of the
widget the image is fitted into.
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Callable
from typing import Protocol

import shiboken6
from framelens.core.api import (
    BGR,
    INTEROP_PATH,
    Detections,
    DeviceFrame,
    HeatLayer,
    Image,
    Overlay,
    OverlayStyle,
    ZonesPicture,
    fallback_path,
    heat_patch,
    layout,
)
from framelens.gui.display.gl_texture import GlTexture
from framelens.gui.display.image_place import ImagePlace
from framelens.gui.display.overlay_paint import (
    QPainterAnnotator,
    paint_follow,
    paint_highlight,
    paint_overlay,
)
from OpenGL import GL
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QHideEvent,
    QImage,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QWheelEvent,
)
from PySide6.QtOpenGLWidgets import QOpenGLWidget
from PySide6.QtWidgets import QWidget

__all__ = ["QPainterAnnotator", "VideoCanvas", "paint_overlay", "release_gpu_slot"]

_BACKGROUND = (0.075, 0.082, 0.098)
ZOOM_STEP = 1.15
ZOOM_RANGE = (0.1, 64.0)
Box = tuple[float, float, float, float]  # x1, y1, x2, y2 in source pixels


class _GpuHolder(Protocol):
    def _release_gpu(self, texture_too: bool = False) -> None: ...


def release_gpu_slot(canvas: _GpuHolder) -> Callable[[], None]:
    """A slot for the GL context's aboutToBeDestroyed (re-parenting) that keeps no canvas
    alive (this canvas's or the wall's).

    When the canvas itself is being deleted its Python side is gone before
    QOpenGLWidget destroys the context; hideEvent released everything then.
    """
    ref = weakref.ref(canvas)

    def release() -> None:
        alive = ref()
        if alive is not None and shiboken6.isValid(alive):
            alive._release_gpu(texture_too=True)

    return release


class VideoCanvas(QOpenGLWidget):
    """Shows one BGR image, fitted with its aspect kept; wheel zooms, drag pans."""

    drawTimeMs = Signal(float)  # upload + paint of a new frame
    zoomChanged = Signal(float)  # 1.0 = fitted to the widget
    displayPathChanged = Signal(str)  # see display_path

    def __init__(self, parent: QWidget | None = None, *, interop: bool = True) -> None:
        """``interop=False`` sends device frames through host memory even where CUDA-GL
        interop runs (benchmarks/qt_window_gpu.py compares the two paths)."""
        super().__init__(parent)
        self.setMinimumSize(320, 180)  # a 0-sized QOpenGLWidget has no complete framebuffer
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setCursor(Qt.CursorShape.OpenHandCursor)
        self.placeholder = "Open a video (Ctrl+O), a camera or a stream — or drop a file here"
        self._main = GlTexture(interop=interop)  # the frame shown
        # Detections drawn over a device frame (host frames come with overlays drawn in)
        self._overlay: tuple[Detections, tuple[str, ...], OverlayStyle] | None = None
        self._marks: tuple[ZonesPicture, ...] = ()  # lines and zones over a device frame
        self._heat: tuple[int, int, Image] | None = None  # a heatmap's RGBA patch, likewise
        # the picked box and the region marked around it (see set_highlight)
        self._highlight: tuple[Box, Box] | None = None
        self._follow: tuple[Box, BGR, Box] | None = None  # box, colour, region: set_follow
        self._decoration: Callable[[QPainter], None] | None = None  # set_decoration
        self._gl_ready = False
        self._display_path = self._describe_path()
        self._zoom = 1.0
        self._pan = QPointF(0.0, 0.0)
        self._drag_from: QPointF | None = None
        self.renderer = ""  # GL_RENDERER, known once the context exists
        self.software_gl = False  # llvmpipe & co: every repaint costs CPU

    def _textures(self) -> tuple[GlTexture, ...]:
        """Every texture the canvas holds (created, uploaded and released together)."""
        return (self._main,)

    # ---- content ---------------------------------------------------------------

    @property
    def image_size(self) -> tuple[int, int] | None:
        """(width, height) of what is shown, or None."""
        return self._main.frame_size

    def set_image(
        self,
        image: Image | DeviceFrame,
        overlay: tuple[Detections, tuple[str, ...], OverlayStyle] | None = None,
        marks: tuple[ZonesPicture, ...] = (),
        heat: HeatLayer | None = None,
    ) -> None:
        """Show a frame from the next paint on: a BGR uint8 HxWx3 array or a DeviceFrame.

        ``overlay`` (detections, labels, style), ``marks`` (the lines and zones with
        their counts) and ``heat`` (a heatmap, under the overlay) are painted over the
        frame by the canvas: the GPU path keeps frames on the device, so overlays are not
        drawn into them (host frames come with them drawn in, by core, as an export
        draws them).
        """
        self._main.set(image)
        self._overlay = overlay
        self._marks = marks
        self._heat = heat_patch(heat) if heat is not None else None
        self.update()

    @property
    def highlight(self) -> Box | None:
        """The box picked in the detections list (x1, y1, x2, y2, source pixels), or None."""
        return self._highlight[0] if self._highlight is not None else None

    @property
    def highlight_region(self) -> Box | None:
        """The region marked around the picked box (source pixels), or None."""
        return self._highlight[1] if self._highlight is not None else None

    def set_highlight(self, box: Box | None, region: Box | None = None) -> None:
        """Mark one box of the frame: the rest of the frame dimmed, ``region`` (core's
        ``mark_region``: the box and its tag; the box alone by default) outlined.

        Painted over detection frames only (not over the super-resolution views)."""
        highlight = (box, region or box) if box is not None else None
        if highlight != self._highlight:
            self._highlight = highlight
            self.update()

    @property
    def follow(self) -> Box | None:
        """The followed track's box in the frame shown (source pixels), or None."""
        return self._follow[0] if self._follow is not None else None

    @property
    def follow_region(self) -> Box | None:
        """The region marked around the followed track's box (source pixels), or None."""
        return self._follow[2] if self._follow is not None else None

    def set_follow(self, box: Box | None, colour: BGR, region: Box | None = None) -> None:
        """Mark the followed track's box (None: not in this frame) with a thick outline
        in its track's colour around ``region`` (core's ``mark_region``: the box and its
        tag; the box alone by default). Painted over detection frames only."""
        follow = (box, colour, region or box) if box is not None else None
        if follow != self._follow:
            self._follow = follow
            self.update()

    def clear(self) -> None:
        for texture in self._textures():
            texture.clear()
        self.update()

    @property
    def display_path(self) -> str:
        """How frames reach the screen: "CUDA-GL interop" or "texture upload (why)"."""
        return self._display_path

    def _describe_path(self) -> str:
        if self._main.via_interop:
            return INTEROP_PATH
        if not self._gl_ready:
            return fallback_path("no OpenGL context yet")
        reason = self._main.uploader.check()  # GL context current: initializeGL/paintGL only
        return fallback_path(reason or "frames arrive in host memory")

    def _update_display_path(self) -> None:
        path = self._describe_path()
        if path != self._display_path:
            self._display_path = path
            self.displayPathChanged.emit(path)

    def grab_frame_image(self) -> QImage:
        """What the canvas shows, as rendered (for tests and screenshots)."""
        return self.grabFramebuffer()

    # ---- view ------------------------------------------------------------------

    @property
    def zoom(self) -> float:
        return self._zoom

    def reset_view(self) -> None:
        self._zoom = 1.0
        self._pan = QPointF(0.0, 0.0)
        self.zoomChanged.emit(self._zoom)
        self.update()

    def set_pixel_scale(self, screen_per_pixel: float = 1.0) -> None:
        """Zoom so that one image pixel is ``screen_per_pixel`` screen pixels, centred."""
        size = self.image_size
        if size is None:
            return
        area = self._view_area()
        fitted = min(area.width() / size[0], area.height() / size[1])
        self._zoom = min(max(screen_per_pixel / fitted, ZOOM_RANGE[0]), ZOOM_RANGE[1])
        self._pan = QPointF(0.0, 0.0)
        self.zoomChanged.emit(self._zoom)
        self.update()

    def zoom_at(self, factor: float, at: QPointF) -> None:
        """Zoom by ``factor`` keeping the image point under ``at`` in place."""
        size = self.image_size
        if size is None:
            return
        old = self.image_rect()
        new_zoom = min(max(self._zoom * factor, ZOOM_RANGE[0]), ZOOM_RANGE[1])
        u = (at.x() - old.x()) / old.width()
        v = (at.y() - old.y()) / old.height()
        self._zoom = new_zoom
        fitted = self.image_rect(pan=QPointF(0.0, 0.0))
        self._pan = QPointF(
            at.x() - u * fitted.width() - fitted.x(), at.y() - v * fitted.height() - fitted.y()
        )
        self.zoomChanged.emit(self._zoom)
        self.update()

    def _view_area(self) -> QRectF:
        """The part of the widget the image is fitted into (all of it here)."""
        return QRectF(0.0, 0.0, self.width(), self.height())

    def image_rect(self, pan: QPointF | None = None) -> QRectF:
        """Where the image lies in widget coordinates (logical pixels); its top-left corner
        on a whole pixel, so that at integer zooms pixels land on pixels."""
        size = self.image_size or (16, 9)
        iw, ih = size
        area = self._view_area()
        scale = min(area.width() / iw, area.height() / ih) * self._zoom
        w, h = iw * scale, ih * scale
        p = self._pan if pan is None else pan
        x = math.floor(area.x() + (area.width() - w) / 2 + p.x() + 1e-6)
        y = math.floor(area.y() + (area.height() - h) / 2 + p.y() + 1e-6)
        return QRectF(x, y, w, h)

    def map_to_image(self, point: QPointF) -> tuple[int, int] | None:
        """Image pixel under a widget point, or None outside the image."""
        size = self.image_size
        if size is None:
            return None
        u, v = ImagePlace(self.image_rect(), *size).pixel_at(point)
        x, y = math.floor(u), math.floor(v)
        return (x, y) if 0 <= x < size[0] and 0 <= y < size[1] else None

    def map_to_source(self, point: QPointF) -> tuple[float, float] | None:
        """The point of the frame shown (source pixels, fractional) under a widget point,
        whatever the zoom, pan and letterboxing; None outside the frame."""
        size = self.image_size
        if size is None:
            return None
        x, y = ImagePlace(self.image_rect(), *size).pixel_at(point)
        return (x, y) if 0 <= x <= size[0] and 0 <= y <= size[1] else None

    def map_from_source(self, x: float, y: float) -> QPointF:
        """Where a point of the frame shown (source pixels) lies on the widget."""
        return ImagePlace(self.image_rect(), *(self.image_size or (16, 9))).point(x, y)

    def set_decoration(self, paint: Callable[[QPainter], None] | None) -> None:
        """``paint(painter)`` over everything, in widget coordinates (the lines and zones
        editor's points and handles), None: nothing."""
        self._decoration = paint
        self.update()

    # ---- GL --------------------------------------------------------------------

    def initializeGL(self) -> None:
        raw = GL.glGetString(GL.GL_RENDERER)
        self.renderer = raw.decode(errors="replace") if isinstance(raw, bytes) else ""
        self.software_gl = any(
            name in self.renderer.lower() for name in ("llvmpipe", "softpipe", "swiftshader")
        )
        GL.glClearColor(*_BACKGROUND, 1.0)
        for texture in self._textures():
            texture.create()  # a new context (first show, or re-parenting): new textures
        context = self.context()
        if context is not None:
            context.aboutToBeDestroyed.connect(release_gpu_slot(self))
        self._gl_ready = True
        self._update_display_path()

    def _release_gpu(self, texture_too: bool = False) -> None:
        """Unregister the pixel buffers from CUDA and free them, while the GL context exists.

        The uploaders set up again on the next device frame.
        """
        if not self._gl_ready:
            return
        self.makeCurrent()
        try:
            for texture in self._textures():
                texture.release(texture_too)
        finally:
            self.doneCurrent()
        if texture_too:
            self._gl_ready = False

    def hideEvent(self, event: QHideEvent) -> None:
        # Closing the window hides the canvas while it is still whole: the last moment
        # to release CUDA's hold on GL objects for sure (see _release_gpu_of).
        self._release_gpu()
        super().hideEvent(event)

    def paintGL(self) -> None:
        start = time.perf_counter()
        ratio = self.devicePixelRatioF()
        GL.glViewport(0, 0, round(self.width() * ratio), round(self.height() * ratio))
        GL.glClear(GL.GL_COLOR_BUFFER_BIT)
        uploaded = False
        for texture in self._textures():
            uploaded = texture.upload() or uploaded
        self._update_display_path()
        if self._main.size == (0, 0):
            self._paint_placeholder()
            return
        GL.glMatrixMode(GL.GL_PROJECTION)
        GL.glLoadIdentity()
        GL.glOrtho(0, self.width(), self.height(), 0, -1, 1)
        GL.glMatrixMode(GL.GL_MODELVIEW)
        GL.glLoadIdentity()
        self._paint_content()
        if uploaded:
            GL.glFlush()
            self.drawTimeMs.emit((time.perf_counter() - start) * 1000.0)

    def _paint_content(self) -> None:
        """The frame and the overlay over it."""
        self._main.draw(self.image_rect(), ratio=self.devicePixelRatioF())
        if self._heat is not None:
            self._paint_heat(*self._heat)
        if self._overlay is not None:
            self._paint_overlay(*self._overlay)
        for mark in self._marks:
            self._paint_in_image(mark.overlay(*self._main.size))
        if self._highlight is not None:
            painter = QPainter(self)
            paint_highlight(painter, self.image_rect(), self._main.size, self._highlight[1])
            painter.end()
        if self._follow is not None:
            _box, colour, region = self._follow
            painter = QPainter(self)
            paint_follow(painter, self.image_rect(), self._main.size, region, colour)
            painter.end()
        if self._decoration is not None:
            painter = QPainter(self)
            self._decoration(painter)
            painter.end()

    def _paint_overlay(
        self, dets: Detections, labels: tuple[str, ...], style: OverlayStyle
    ) -> None:
        """The overlay annotate() draws into host frames, painted in image pixels through
        the image's place on screen (so at 1:1 it is the same picture, pixel for pixel)."""
        w, h = self._main.size
        if not len(dets) or w == 0:
            return
        self._paint_in_image(layout(dets, labels, style, w, h))

    def _paint_heat(self, x0: int, y0: int, rgba: Image) -> None:
        """A heatmap's patch (image pixels from (x0, y0)) through the image's place."""
        w, h = self._main.size
        if w == 0:
            return
        rows, cols = rgba.shape[:2]
        patch = QImage(rgba.data, cols, rows, 4 * cols, QImage.Format.Format_RGBA8888)
        target = ImagePlace(self.image_rect(), w, h).area(x0, y0, cols, rows)
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, True)
        painter.drawImage(target, patch)
        painter.end()

    def _paint_in_image(self, overlay: Overlay) -> None:
        """``overlay`` (image pixels) painted through the image's place on screen."""
        w, h = self._main.size
        if not overlay or w == 0:
            return
        painter = QPainter(self)
        painter.setTransform(ImagePlace(self.image_rect(), w, h).transform())
        paint_overlay(painter, overlay)
        painter.end()

    def _paint_placeholder(self) -> None:
        painter = QPainter(self)
        painter.setPen(QColor(150, 158, 172))
        font = painter.font()
        font.setPointSizeF(font.pointSizeF() * 1.15)
        painter.setFont(font)
        painter.drawText(self.rect(), int(Qt.AlignmentFlag.AlignCenter), self.placeholder)
        painter.end()

    # ---- input -----------------------------------------------------------------

    def wheelEvent(self, event: QWheelEvent) -> None:
        steps = event.angleDelta().y() / 120.0
        if steps:
            self.zoom_at(ZOOM_STEP**steps, event.position())
        event.accept()

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self._drag_from = event.position()
            self.setCursor(Qt.CursorShape.ClosedHandCursor)
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if self._drag_from is not None:
            delta = event.position() - self._drag_from
            self._drag_from = event.position()
            self._pan += delta
            self.update()
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self._drag_from = None
            self.setCursor(Qt.CursorShape.OpenHandCursor)
        super().mouseReleaseEvent(event)

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        self.reset_view()
        event.accept()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_0:
            self.reset_view()
            return
        if event.key() in (Qt.Key.Key_Plus, Qt.Key.Key_Equal):
            self.zoom_at(ZOOM_STEP, QPointF(self.width() / 2, self.height() / 2))
            return
        if event.key() == Qt.Key.Key_Minus:
            self.zoom_at(1 / ZOOM_STEP, QPointF(self.width() / 2, self.height() / 2))
            return
        super().keyPressEvent(event)
