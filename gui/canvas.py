"""The video canvas: an OpenGL texture of the annotated frame, with zoom and pan.

Fixed-function OpenGL (compatibility profile) keeps it working everywhere,
Mesa's llvmpipe under Xvfb included. The texture (RGBA8) is allocated once per
frame size and then updated with glTexSubImage2D. The canvas times its own
upload and paint and reports it through ``drawTimeMs``, so display is measured
like any other stage.

Frames come as host BGR arrays (CPU path) or as device frames (GPU path,
``framelens.core.gpu.interop.DeviceFrame``). Device frames are written by the
display kernel into a GL pixel buffer registered with CUDA and the texture is
filled from it, without a host round trip; where interop cannot run (no NVIDIA
OpenGL, pycuda without GL) they go through host memory instead. ``display_path``
says which, and why, for the status bar.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Sequence

import numpy as np
import shiboken6
from framelens.core.api import (
    BGR,
    DEFAULT_STYLE,
    INTEROP_PATH,
    Detections,
    DeviceFrame,
    DeviceFrameUploader,
    Image,
    Overlay,
    OverlayStyle,
    Rect,
    Tag,
    fallback_path,
    layout,
)
from OpenGL import GL
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetricsF,
    QHideEvent,
    QImage,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QPainterPath,
    QWheelEvent,
)
from PySide6.QtOpenGLWidgets import QOpenGLWidget
from PySide6.QtWidgets import QWidget

_BACKGROUND = (0.075, 0.082, 0.098)
_ZOOM_STEP = 1.15
_ZOOM_RANGE = (0.1, 64.0)
_PIXELATED_ABOVE = 3.0  # screen pixels per image pixel: show pixels sharp when zoomed in


_FONT_PROBE_PX = 64  # font size at which a font's cap height is measured


def _qcolour(bgr: BGR) -> QColor:
    b, g, r = bgr
    return QColor(r, g, b)


def _paint_text(painter: QPainter, tag: Tag) -> None:
    """The tag's text fitted into the box Hershey measured for it: baseline at ``origin``,
    cap height = its height, advance = its width (Qt's font near that size, its outline
    stretched the rest of the way, filled antialiased)."""
    tw, th = tag.text_size
    if tw <= 0 or th <= 0 or not tag.text:
        return
    font = QFont(painter.font())
    font.setPixelSize(_FONT_PROBE_PX)
    cap = QFontMetricsF(font).capHeight()
    if cap <= 0:
        return
    font.setPixelSize(max(1, round(_FONT_PROBE_PX * th / cap)))
    metrics = QFontMetricsF(font)
    advance, cap = metrics.horizontalAdvance(tag.text), metrics.capHeight()
    if advance <= 0 or cap <= 0:
        return
    path = QPainterPath()
    path.addText(0.0, 0.0, font, tag.text)
    painter.save()
    painter.translate(tag.origin[0], tag.origin[1])
    painter.scale(tw / advance, th / cap)
    painter.fillPath(path, _qcolour(tag.text_colour))
    painter.restore()


def paint_overlay(painter: QPainter, overlay: Overlay) -> None:
    """Paint ``overlay`` with ``painter``, whose coordinates are image pixels.

    The shapes are ``framelens.core.stages.draw.style``'s filled rectangles, in its
    order, so the same pixels get the same colours as in OpenCV's drawing; only the
    tag text differs (Qt's font fitted into the box of OpenCV's Hershey text).
    """
    w, h = overlay.width, overlay.height

    def fill(rect: Rect, colour: QColor) -> None:
        painter.fillRect(QRectF(rect.x1, rect.y1, rect.width, rect.height), colour)

    painter.save()
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    for mark in overlay.boxes:
        colour = _qcolour(mark.colour)
        if mark.outline:
            for band in mark.bands(w, h):
                fill(band, colour)
        if mark.tag is not None:
            fill(mark.tag.rect, colour)
            _paint_text(painter, mark.tag)
    for dot in overlay.dots:
        colour = _qcolour(dot.colour)
        for span in dot.spans(w, h):
            fill(span, colour)
    painter.restore()


class QPainterAnnotator:
    """``Annotator`` of QImages: the canvas' overlay painting on an image of its own."""

    def annotate(
        self,
        image: QImage,
        detections: Detections,
        labels: Sequence[str],
        style: OverlayStyle = DEFAULT_STYLE,
    ) -> QImage:
        """A copy of ``image`` with the overlay painted on, in image pixels."""
        out = image.copy()
        overlay = layout(detections, labels, style, out.width(), out.height())
        if overlay:
            painter = QPainter(out)
            paint_overlay(painter, overlay)
            painter.end()
        return out


def _release_gpu_of(canvas: VideoCanvas) -> Callable[[], None]:
    """A slot for the GL context's aboutToBeDestroyed (re-parenting) that keeps no canvas alive.

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

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMinimumSize(320, 180)  # a 0-sized QOpenGLWidget has no complete framebuffer
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setCursor(Qt.CursorShape.OpenHandCursor)
        self.placeholder = "Open a video (Ctrl+O), a camera or a stream — or drop a file here"
        self._frame: Image | DeviceFrame | None = None  # the latest frame, not uploaded yet
        # Detections drawn over a device frame (host frames come with overlays drawn in)
        self._overlay: tuple[Detections, tuple[str, ...], OverlayStyle] | None = None
        self._shown: Image | None = None  # host frame uploaded last (for a new GL context)
        self._texture = 0
        self._texture_size = (0, 0)
        self._uploader = DeviceFrameUploader()
        self._gl_ready = False
        self._via_interop = False  # the last frame shown came through CUDA-GL interop
        self._display_path = self._describe_path()
        self._zoom = 1.0
        self._pan = QPointF(0.0, 0.0)
        self._drag_from: QPointF | None = None
        self.renderer = ""  # GL_RENDERER, known once the context exists
        self.software_gl = False  # llvmpipe & co: every repaint costs CPU

    # ---- content ---------------------------------------------------------------

    @property
    def image_size(self) -> tuple[int, int] | None:
        """(width, height) of what is shown, or None."""
        frame = self._frame
        if isinstance(frame, np.ndarray):
            return int(frame.shape[1]), int(frame.shape[0])
        if frame is not None:
            return int(frame.width), int(frame.height)
        if self._texture_size != (0, 0):
            return self._texture_size
        return None

    def set_image(
        self,
        image: Image | DeviceFrame,
        overlay: tuple[Detections, tuple[str, ...], OverlayStyle] | None = None,
    ) -> None:
        """Show a frame from the next paint on: a BGR uint8 HxWx3 array or a DeviceFrame.

        ``overlay`` (detections, labels, style) is painted over the frame by the canvas:
        the GPU path keeps frames on the device, so overlays are not drawn into them.
        """
        self._frame = np.ascontiguousarray(image) if isinstance(image, np.ndarray) else image
        self._overlay = overlay
        self.update()

    def clear(self) -> None:
        self._frame = self._shown = None
        self._texture_size = (0, 0)
        self.update()

    @property
    def display_path(self) -> str:
        """How frames reach the screen: "CUDA-GL interop" or "texture upload (why)"."""
        return self._display_path

    def _describe_path(self) -> str:
        if self._via_interop:
            return INTEROP_PATH
        if not self._gl_ready:
            return fallback_path("no OpenGL context yet")
        reason = self._uploader.check()  # GL context current: initializeGL/paintGL only
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

    def zoom_at(self, factor: float, at: QPointF) -> None:
        """Zoom by ``factor`` keeping the image point under ``at`` in place."""
        size = self.image_size
        if size is None:
            return
        old = self.image_rect()
        new_zoom = min(max(self._zoom * factor, _ZOOM_RANGE[0]), _ZOOM_RANGE[1])
        u = (at.x() - old.x()) / old.width()
        v = (at.y() - old.y()) / old.height()
        self._zoom = new_zoom
        fitted = self.image_rect(pan=QPointF(0.0, 0.0))
        self._pan = QPointF(
            at.x() - u * fitted.width() - fitted.x(), at.y() - v * fitted.height() - fitted.y()
        )
        self.zoomChanged.emit(self._zoom)
        self.update()

    def image_rect(self, pan: QPointF | None = None) -> QRectF:
        """Where the image lies in widget coordinates (logical pixels)."""
        size = self.image_size or (16, 9)
        iw, ih = size
        scale = min(self.width() / iw, self.height() / ih) * self._zoom
        w, h = iw * scale, ih * scale
        p = self._pan if pan is None else pan
        return QRectF((self.width() - w) / 2 + p.x(), (self.height() - h) / 2 + p.y(), w, h)

    def map_to_image(self, point: QPointF) -> tuple[int, int] | None:
        """Image pixel under a widget point, or None outside the image."""
        size = self.image_size
        if size is None:
            return None
        r = self.image_rect()
        x = int((point.x() - r.x()) / r.width() * size[0])
        y = int((point.y() - r.y()) / r.height() * size[1])
        return (x, y) if 0 <= x < size[0] and 0 <= y < size[1] else None

    # ---- GL --------------------------------------------------------------------

    def initializeGL(self) -> None:
        raw = GL.glGetString(GL.GL_RENDERER)
        self.renderer = raw.decode(errors="replace") if isinstance(raw, bytes) else ""
        self.software_gl = any(
            name in self.renderer.lower() for name in ("llvmpipe", "softpipe", "swiftshader")
        )
        GL.glClearColor(*_BACKGROUND, 1.0)
        self._texture = int(GL.glGenTextures(1))
        self._texture_size = (0, 0)
        GL.glBindTexture(GL.GL_TEXTURE_2D, self._texture)
        for param in (GL.GL_TEXTURE_WRAP_S, GL.GL_TEXTURE_WRAP_T):
            GL.glTexParameteri(GL.GL_TEXTURE_2D, param, GL.GL_CLAMP_TO_EDGE)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        # A new context (first show, or re-parenting) needs new CUDA registrations.
        self._uploader = DeviceFrameUploader()
        context = self.context()
        if context is not None:
            context.aboutToBeDestroyed.connect(_release_gpu_of(self))
        self._gl_ready = True
        if self._frame is None:
            self._frame = self._shown  # the new texture is empty
        self._via_interop = False
        self._update_display_path()

    def _release_gpu(self, texture_too: bool = False) -> None:
        """Unregister the pixel buffer from CUDA and free it, while the GL context exists.

        The uploader sets up again on the next device frame.
        """
        if not self._gl_ready:
            return
        self.makeCurrent()
        try:
            self._uploader.close()
            if texture_too and self._texture:
                GL.glDeleteTextures(1, [self._texture])  # shared contexts keep it otherwise
                self._texture = 0
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
        uploaded = self._upload()
        if self._texture_size == (0, 0):
            self._paint_placeholder()
            return
        self._paint_quad()
        if self._overlay is not None:
            self._paint_overlay(*self._overlay)
        if uploaded:
            GL.glFlush()
            self.drawTimeMs.emit((time.perf_counter() - start) * 1000.0)

    def _upload(self) -> bool:
        """Send a new frame to the texture; True when one was sent."""
        frame, self._frame = self._frame, None
        if frame is None:
            return False
        # A device frame is not kept: its buffer goes back to the pipeline's pool.
        self._shown = frame if isinstance(frame, np.ndarray) else None
        if isinstance(frame, np.ndarray):
            self._fill_texture(int(frame.shape[1]), int(frame.shape[0]), frame)
            self._via_interop = False
        else:
            self._fill_texture(frame.width, frame.height, None)
            self._via_interop = self._uploader.upload(frame, self._texture)
        self._update_display_path()
        return True

    def _fill_texture(self, w: int, h: int, bgr: Image | None) -> None:
        """Allocate the RGBA8 texture for w x h; upload ``bgr`` into it when given."""
        GL.glBindTexture(GL.GL_TEXTURE_2D, self._texture)
        GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 1)  # rows of w*3 bytes are not 4-aligned
        if self._texture_size != (w, h):
            GL.glTexImage2D(
                GL.GL_TEXTURE_2D, 0, GL.GL_RGBA8, w, h, 0, GL.GL_BGR, GL.GL_UNSIGNED_BYTE, bgr
            )
            self._texture_size = (w, h)
        elif bgr is not None:
            GL.glTexSubImage2D(GL.GL_TEXTURE_2D, 0, 0, 0, w, h, GL.GL_BGR, GL.GL_UNSIGNED_BYTE, bgr)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)

    def _paint_quad(self) -> None:
        r = self.image_rect()
        per_pixel = r.width() / max(1, self._texture_size[0]) * self.devicePixelRatioF()
        filt = GL.GL_NEAREST if per_pixel >= _PIXELATED_ABOVE else GL.GL_LINEAR
        GL.glMatrixMode(GL.GL_PROJECTION)
        GL.glLoadIdentity()
        GL.glOrtho(0, self.width(), self.height(), 0, -1, 1)
        GL.glMatrixMode(GL.GL_MODELVIEW)
        GL.glLoadIdentity()
        GL.glEnable(GL.GL_TEXTURE_2D)
        GL.glBindTexture(GL.GL_TEXTURE_2D, self._texture)
        GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MIN_FILTER, GL.GL_LINEAR)
        GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MAG_FILTER, filt)
        GL.glColor4f(1.0, 1.0, 1.0, 1.0)
        x0, y0, x1, y1 = r.left(), r.top(), r.right(), r.bottom()
        GL.glBegin(GL.GL_QUADS)
        for (u, v), (x, y) in (
            ((0, 0), (x0, y0)),
            ((1, 0), (x1, y0)),
            ((1, 1), (x1, y1)),
            ((0, 1), (x0, y1)),
        ):
            GL.glTexCoord2f(u, v)
            GL.glVertex2f(x, y)
        GL.glEnd()
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        GL.glDisable(GL.GL_TEXTURE_2D)

    def _paint_overlay(
        self, dets: Detections, labels: tuple[str, ...], style: OverlayStyle
    ) -> None:
        """The overlay annotate() draws into host frames, painted in image pixels through
        the image's place on screen (so at 1:1 it is the same picture, pixel for pixel)."""
        w, h = self._texture_size
        if not len(dets) or w == 0:
            return
        overlay = layout(dets, labels, style, w, h)
        if not overlay:
            return
        r = self.image_rect()
        painter = QPainter(self)
        painter.translate(r.left(), r.top())
        painter.scale(r.width() / w, r.height() / h)
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
            self.zoom_at(_ZOOM_STEP**steps, event.position())
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
            self.zoom_at(_ZOOM_STEP, QPointF(self.width() / 2, self.height() / 2))
            return
        if event.key() == Qt.Key.Key_Minus:
            self.zoom_at(1 / _ZOOM_STEP, QPointF(self.width() / 2, self.height() / 2))
            return
        super().keyPressEvent(event)
