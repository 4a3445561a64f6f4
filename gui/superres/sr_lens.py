"""The zoom lens of the super-resolution views: two square panes beside the cursor showing
the same neighbourhood of the frame, the original and the upscaled, pixel-exact.

A lens zoom of k shows each upscaled pixel as k x k screen pixels and each original
pixel as (k * scale) x (k * scale): nearest-neighbour enlargements, so that every pixel
the model produced can be told apart and set against the source pixel it came from.
The panes are computed on the host with numpy indexing and painted unscaled.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from framelens.core.api import Image
from PySide6.QtCore import QPointF, QRect, QRectF, Qt
from PySide6.QtGui import QColor, QImage, QPainter, QPen

__all__ = [
    "LENS_GAP",
    "LENS_SIDE",
    "LENS_ZOOMS",
    "LensPanes",
    "lens_panes",
    "lens_rects",
    "paint_lens",
]

LENS_ZOOMS = (2, 3, 4, 6, 8)
"""Screen pixels per upscaled pixel: 200% to 800%."""
LENS_SIDE = 192  # each pane, screen pixels
LENS_GAP = 6
_OUTSIDE = (28, 24, 22)  # BGR of lens pixels beyond the frame's edge


class LensPanes:
    """Both panes (BGR, side x side) and where they start in upscaled pixels."""

    def __init__(self, original: Image, upscaled: Image, origin: tuple[int, int]) -> None:
        self.original = original
        self.upscaled = upscaled
        self.origin = origin  # the upscaled pixel at each pane's top-left corner


def _axis(
    start: int, side: int, zoom: int, limit: int
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.bool_]]:
    idx = start + np.arange(side, dtype=np.intp) // zoom
    inside = (idx >= 0) & (idx < limit)
    return np.clip(idx, 0, max(0, limit - 1)), inside


def lens_panes(
    original: Image,
    upscaled: Image,
    scale: int,
    centre: tuple[float, float],
    zoom: int,
    side: int = LENS_SIDE,
) -> LensPanes:
    """The panes around ``centre`` (x, y in upscaled pixels): upscaled pixel (x, y) is
    shown as upscaled[y, x] and original[y // scale, x // scale], each zoom x zoom."""
    h, w = upscaled.shape[:2]
    x0 = int(np.floor(centre[0] - side / (2 * zoom)))
    y0 = int(np.floor(centre[1] - side / (2 * zoom)))
    xs, x_in = _axis(x0, side, zoom, w)
    ys, y_in = _axis(y0, side, zoom, h)
    inside = y_in[:, None] & x_in[None, :]
    up = upscaled[ys[:, None], xs[None, :]]
    oh, ow = original.shape[:2]
    orig = original[
        np.clip(ys // scale, 0, oh - 1)[:, None], np.clip(xs // scale, 0, ow - 1)[None, :]
    ]
    up[~inside] = _OUTSIDE
    orig[~inside] = _OUTSIDE
    return LensPanes(np.ascontiguousarray(orig), np.ascontiguousarray(up), (x0, y0))


def lens_rects(at: QPointF, width: int, height: int, side: int = LENS_SIDE) -> tuple[QRect, QRect]:
    """The two panes' places: side by side, centred on ``at``, kept inside the widget."""
    total = 2 * side + LENS_GAP
    x = round(at.x() - total / 2)
    y = round(at.y() - side / 2)
    x = max(0, min(x, width - total))
    y = max(0, min(y, height - side - 20))
    return QRect(x, y, side, side), QRect(x + side + LENS_GAP, y, side, side)


def _qimage(bgr: Image) -> QImage:
    h, w = bgr.shape[:2]
    return QImage(bgr.data, w, h, bgr.strides[0], QImage.Format.Format_BGR888).copy()


def paint_lens(
    painter: QPainter, panes: LensPanes, rects: tuple[QRect, QRect], captions: tuple[str, str]
) -> None:
    """Both panes unscaled at ``rects``, a frame around each, the captions under them."""
    for image, rect, caption in zip((panes.original, panes.upscaled), rects, captions, strict=True):
        painter.drawImage(rect.topLeft(), _qimage(image))
        painter.setPen(QPen(QColor(240, 200, 80), 1))
        painter.drawRect(QRectF(rect).adjusted(-1.5, -1.5, 0.5, 0.5))
        label = QRectF(rect.left() - 1, rect.bottom() + 2, rect.width() + 2, 18)
        painter.fillRect(label, QColor(20, 22, 26, 220))
        painter.setPen(QColor(230, 233, 240))
        painter.drawText(label, int(Qt.AlignmentFlag.AlignCenter), caption)
