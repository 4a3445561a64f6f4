"""The video canvas: an OpenGL texture of the annotated frame, with zoom and pan.

Fixed-function OpenGL (compatibility profile) keeps it working everywhere,
Mesa's llvmpipe under Xvfb included. The texture is allocated once per frame
size and then updated with glTexSubImage2D. The canvas times its own upload and
paint and reports it through ``drawTimeMs``, so display is measured like any
other stage.

GPU path (later): the GPU layer asks for ``pixel_buffer()``, registers that GL
buffer with CUDA, writes the frame into it and calls ``show_pixel_buffer()``;
the texture is then filled from the buffer without a host round trip.
"""

from __future__ import annotations

import time

import numpy as np
from framelens.core.types import Image
from OpenGL import GL
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QImage,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QWheelEvent,
)
from PySide6.QtOpenGLWidgets import QOpenGLWidget
from PySide6.QtWidgets import QWidget

_BACKGROUND = (0.075, 0.082, 0.098)
_ZOOM_STEP = 1.15
_ZOOM_RANGE = (0.1, 64.0)
_PIXELATED_ABOVE = 3.0  # screen pixels per image pixel: show pixels sharp when zoomed in


class VideoCanvas(QOpenGLWidget):
    """Shows one BGR image, fitted with its aspect kept; wheel zooms, drag pans."""

    drawTimeMs = Signal(float)  # upload + paint of a new frame
    zoomChanged = Signal(float)  # 1.0 = fitted to the widget

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMinimumSize(320, 180)  # a 0-sized QOpenGLWidget has no complete framebuffer
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setCursor(Qt.CursorShape.OpenHandCursor)
        self.placeholder = "Open a video (Ctrl+O), a camera or a stream — or drop a file here"
        self._image: Image | None = None
        self._fresh = False  # _image not uploaded yet
        self._texture = 0
        self._texture_size = (0, 0)
        self._pbo = 0
        self._pbo_size = (0, 0)
        self._pbo_fresh = False
        self._zoom = 1.0
        self._pan = QPointF(0.0, 0.0)
        self._drag_from: QPointF | None = None
        self.renderer = ""  # GL_RENDERER, known once the context exists
        self.software_gl = False  # llvmpipe & co: every repaint costs CPU

    # ---- content ---------------------------------------------------------------

    @property
    def image_size(self) -> tuple[int, int] | None:
        """(width, height) of what is shown, or None."""
        if self._image is not None:
            return int(self._image.shape[1]), int(self._image.shape[0])
        if self._pbo_fresh or self._texture_size != (0, 0):
            return self._texture_size
        return None

    def set_image(self, image: Image) -> None:
        """Show a BGR uint8 HxWx3 image from the next paint on."""
        self._image = np.ascontiguousarray(image)
        self._fresh = True
        self.update()

    def clear(self) -> None:
        self._image = None
        self._fresh = False
        self._texture_size = (0, 0)
        self.update()

    def grab_frame_image(self) -> QImage:
        """What the canvas shows, as rendered (for tests and screenshots)."""
        return self.grabFramebuffer()

    # ---- GPU interop hook --------------------------------------------------------

    def pixel_buffer(self, width: int, height: int) -> int:
        """A GL pixel-unpack buffer of width*height*3 bytes (BGR) for the GPU layer.

        The GPU layer registers it with CUDA (pycuda.gl.RegisteredBuffer), writes
        a frame into it, then calls show_pixel_buffer().
        """
        self.makeCurrent()
        try:
            if self._pbo == 0:
                self._pbo = int(GL.glGenBuffers(1))
            if self._pbo_size != (width, height):
                GL.glBindBuffer(GL.GL_PIXEL_UNPACK_BUFFER, self._pbo)
                GL.glBufferData(
                    GL.GL_PIXEL_UNPACK_BUFFER, width * height * 3, None, GL.GL_STREAM_DRAW
                )
                GL.glBindBuffer(GL.GL_PIXEL_UNPACK_BUFFER, 0)
                self._pbo_size = (width, height)
        finally:
            self.doneCurrent()
        return self._pbo

    def show_pixel_buffer(self) -> None:
        """Display the pixel buffer's current content from the next paint on."""
        self._image = None
        self._pbo_fresh = True
        self.update()

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
        if uploaded:
            GL.glFlush()
            self.drawTimeMs.emit((time.perf_counter() - start) * 1000.0)

    def _upload(self) -> bool:
        """Send a new frame to the texture; True when one was sent."""
        if self._fresh and self._image is not None:
            image = self._image
            h, w = int(image.shape[0]), int(image.shape[1])
            self._fill_texture(w, h, image)
            self._fresh = False
            return True
        if self._pbo_fresh and self._pbo:
            w, h = self._pbo_size
            GL.glBindBuffer(GL.GL_PIXEL_UNPACK_BUFFER, self._pbo)
            self._fill_texture(w, h, None)  # None = offset 0 into the bound buffer
            GL.glBindBuffer(GL.GL_PIXEL_UNPACK_BUFFER, 0)
            self._pbo_fresh = False
            return True
        return False

    def _fill_texture(self, w: int, h: int, pixels: Image | None) -> None:
        GL.glBindTexture(GL.GL_TEXTURE_2D, self._texture)
        GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 1)  # rows of w*3 bytes are not 4-aligned
        if self._texture_size != (w, h):
            GL.glTexImage2D(
                GL.GL_TEXTURE_2D, 0, GL.GL_RGB8, w, h, 0, GL.GL_BGR, GL.GL_UNSIGNED_BYTE, pixels
            )
            self._texture_size = (w, h)
        else:
            GL.glTexSubImage2D(
                GL.GL_TEXTURE_2D, 0, 0, 0, w, h, GL.GL_BGR, GL.GL_UNSIGNED_BYTE, pixels
            )
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
