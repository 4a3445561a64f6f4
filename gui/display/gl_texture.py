"""One texture of the video canvas: an RGBA8 GL texture filled from a host BGR image or a
device frame, and drawn into a rectangle of the widget.

The texture is allocated once per frame size and then updated with glTexSubImage2D.
Device frames go through ``DeviceFrameUploader`` (CUDA-GL interop where it runs, host
memory where not), one uploader per texture. Every call needs the canvas's GL context
current (initializeGL, paintGL, or between makeCurrent and doneCurrent).
"""

from __future__ import annotations

import numpy as np
from framelens.core.api import DeviceFrame, DeviceFrameUploader, Image
from OpenGL import GL
from PySide6.QtCore import QRectF

__all__ = ["PIXELATED_ABOVE", "Frame", "GlTexture"]

PIXELATED_ABOVE = 3.0  # screen pixels per texel: show pixels sharp when zoomed in

Frame = Image | DeviceFrame


class GlTexture:
    """A texture and the frame waiting to go into it (``pending``, taken by ``upload``)."""

    def __init__(self, *, interop: bool = True) -> None:
        self.interop = interop  # False: device frames always through host memory
        self.id = 0
        self.size = (0, 0)  # allocated (width, height); (0, 0): nothing yet
        self.pending: Frame | None = None
        self.shown: Image | None = None  # host frame uploaded last (for a new GL context)
        self.uploader = DeviceFrameUploader(interop=interop)
        self.via_interop = False  # the last frame came through CUDA-GL interop

    @property
    def frame_size(self) -> tuple[int, int] | None:
        """(width, height) of the pending frame, else of what the texture holds."""
        frame = self.pending
        if isinstance(frame, np.ndarray):
            return int(frame.shape[1]), int(frame.shape[0])
        if frame is not None:
            return int(frame.width), int(frame.height)
        return self.size if self.size != (0, 0) else None

    def set(self, frame: Frame | None) -> None:
        """The frame to show from the next upload (None: keep what is there)."""
        self.pending = np.ascontiguousarray(frame) if isinstance(frame, np.ndarray) else frame

    def clear(self) -> None:
        self.pending = self.shown = None
        self.size = (0, 0)

    def create(self) -> None:
        """A new GL texture (a new context); the last host frame is uploaded again."""
        self.id = int(GL.glGenTextures(1))
        self.size = (0, 0)
        GL.glBindTexture(GL.GL_TEXTURE_2D, self.id)
        for param in (GL.GL_TEXTURE_WRAP_S, GL.GL_TEXTURE_WRAP_T):
            GL.glTexParameteri(GL.GL_TEXTURE_2D, param, GL.GL_CLAMP_TO_EDGE)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        # new CUDA registrations for a new context
        self.uploader = DeviceFrameUploader(interop=self.interop)
        if self.pending is None:
            self.pending = self.shown
        self.via_interop = False

    def upload(self) -> bool:
        """Send the pending frame to the texture; True when one was sent."""
        frame, self.pending = self.pending, None
        if frame is None or not self.id:
            return False
        # A device frame is not kept: its buffer goes back to the pipeline's pool.
        self.shown = frame if isinstance(frame, np.ndarray) else None
        if isinstance(frame, np.ndarray):
            self._fill(int(frame.shape[1]), int(frame.shape[0]), frame)
            self.via_interop = False
        else:
            self._fill(frame.width, frame.height, None)
            self.via_interop = self.uploader.upload(frame, self.id)
        return True

    def _fill(self, w: int, h: int, bgr: Image | None) -> None:
        """Allocate the RGBA8 texture for w x h; upload ``bgr`` into it when given."""
        GL.glBindTexture(GL.GL_TEXTURE_2D, self.id)
        GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 1)  # rows of w*3 bytes are not 4-aligned
        if self.size != (w, h):
            GL.glTexImage2D(
                GL.GL_TEXTURE_2D, 0, GL.GL_RGBA8, w, h, 0, GL.GL_BGR, GL.GL_UNSIGNED_BYTE, bgr
            )
            self.size = (w, h)
        elif bgr is not None:
            GL.glTexSubImage2D(GL.GL_TEXTURE_2D, 0, 0, 0, w, h, GL.GL_BGR, GL.GL_UNSIGNED_BYTE, bgr)
        GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 4)  # the default Qt's glyph cache relies on
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)

    def draw(
        self,
        rect: QRectF,
        uv: tuple[float, float, float, float] = (0.0, 0.0, 1.0, 1.0),
        *,
        ratio: float = 1.0,
        nearest: bool = False,
    ) -> None:
        """The texture's ``uv`` part (u0, v0, u1, v1) stretched over ``rect`` (widget
        coordinates, an orthographic projection set up by the caller). Magnified pixels
        are sharp with ``nearest`` or from PIXELATED_ABOVE screen pixels per texel on."""
        if not self.id or self.size == (0, 0) or rect.width() <= 0 or rect.height() <= 0:
            return
        u0, v0, u1, v1 = uv
        per_pixel = rect.width() / max(1e-9, (u1 - u0) * self.size[0]) * ratio
        filt = GL.GL_NEAREST if nearest or per_pixel >= PIXELATED_ABOVE else GL.GL_LINEAR
        GL.glEnable(GL.GL_TEXTURE_2D)
        GL.glBindTexture(GL.GL_TEXTURE_2D, self.id)
        GL.glTexParameteri(
            GL.GL_TEXTURE_2D,
            GL.GL_TEXTURE_MIN_FILTER,
            GL.GL_NEAREST if nearest else GL.GL_LINEAR,
        )
        GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MAG_FILTER, filt)
        GL.glColor4f(1.0, 1.0, 1.0, 1.0)
        x0, y0, x1, y1 = rect.left(), rect.top(), rect.right(), rect.bottom()
        GL.glBegin(GL.GL_QUADS)
        for (u, v), (x, y) in (
            ((u0, v0), (x0, y0)),
            ((u1, v0), (x1, y0)),
            ((u1, v1), (x1, y1)),
            ((u0, v1), (x0, y1)),
        ):
            GL.glTexCoord2f(u, v)
            GL.glVertex2f(x, y)
        GL.glEnd()
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        GL.glDisable(GL.GL_TEXTURE_2D)

    def release(self, texture_too: bool = False) -> None:
        """Free the uploader's buffers (and the texture); the GL context is current."""
        self.uploader.close()
        if texture_too and self.id:
            GL.glDeleteTextures(1, [self.id])  # shared contexts keep it otherwise
            self.id = 0
