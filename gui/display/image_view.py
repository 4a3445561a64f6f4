"""A small view of one host image, fitted with its aspect kept: the region of interest
upscaled, the enlarged detections. Painted by QPainter (no GL: these views are small),
nearest-neighbour when magnified so that enlarged pixels stay pixels."""

from __future__ import annotations

import numpy as np
from framelens.core.api import Image
from framelens.gui.common.widgets import elide
from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QImage, QPainter, QPaintEvent
from PySide6.QtWidgets import QSizePolicy, QWidget

__all__ = ["ImageView", "to_qimage"]


def to_qimage(bgr: Image) -> QImage:
    """A QImage copy of a BGR uint8 array."""
    bgr = np.ascontiguousarray(bgr)
    h, w = bgr.shape[:2]
    return QImage(bgr.data, w, h, bgr.strides[0], QImage.Format.Format_BGR888).copy()


class ImageView(QWidget):
    """Shows a BGR image (or a placeholder text) fitted into the widget, with a caption."""

    def __init__(self, placeholder: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.placeholder = placeholder
        self.caption = ""
        self._image: QImage | None = None
        self.image_shape: tuple[int, ...] | None = None  # of the array shown (H, W, 3)
        self.setMinimumSize(120, 90)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

    def sizeHint(self) -> QSize:
        return QSize(360, 240)

    def set_image(self, bgr: Image | None, caption: str = "") -> None:
        self._image = None if bgr is None else to_qimage(bgr)
        self.image_shape = None if bgr is None else tuple(bgr.shape)
        self.caption = caption
        self.setToolTip(caption)
        self.update()

    def shown_caption(self) -> str:
        """The caption as painted: cut with "…" to the view's width (the tooltip has it
        whole)."""
        return elide(self.caption, self.fontMetrics(), self.width() - 8)

    def image_rect(self) -> QRectF:
        """Where the image is painted (widget coordinates)."""
        if self._image is None:
            return QRectF()
        caption_h = self.fontMetrics().height() + 6 if self.caption else 0
        w, h = self._image.width(), self._image.height()
        avail_w, avail_h = self.width(), self.height() - caption_h
        s = min(avail_w / w, avail_h / h)
        dw, dh = w * s, h * s
        return QRectF(round((avail_w - dw) / 2), round((avail_h - dh) / 2), dw, dh)

    def paintEvent(self, event: QPaintEvent) -> None:
        del event
        painter = QPainter(self)
        painter.fillRect(self.rect(), QColor(19, 21, 25))
        if self._image is None:
            painter.setPen(QColor(150, 158, 172))
            painter.drawText(
                self.rect().adjusted(8, 8, -8, -8),
                int(Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap),
                self.placeholder,
            )
            painter.end()
            return
        r = self.image_rect()
        smooth = r.width() < self._image.width()  # shrunk: smooth; enlarged: pixels
        painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, smooth)
        painter.drawImage(r, self._image)
        if self.caption:
            painter.setPen(QColor(200, 206, 216))
            text = QRectF(0, self.height() - self.fontMetrics().height() - 4, self.width(), 20)
            painter.drawText(text, int(Qt.AlignmentFlag.AlignHCenter), self.shown_caption())
        painter.end()
