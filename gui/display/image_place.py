"""Where an image is drawn on a widget, and the mapping between its pixels and the
widget's coordinates both ways: one place for what every canvas (the player's, the
wall's tiles, super-resolution's, the zone editor's decorations) needs when it paints
something given in image pixels (boxes, tags, zones, heat) or reads a click."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF
from PySide6.QtGui import QTransform

__all__ = ["ImagePlace"]


@dataclass(frozen=True)
class ImagePlace:
    """An image of ``width`` x ``height`` pixels drawn over ``rect`` (widget
    coordinates, its aspect kept or not: the scale may differ along x and y)."""

    rect: QRectF
    width: float
    height: float

    @property
    def scale(self) -> tuple[float, float]:
        """Widget units per image pixel, along x and y."""
        return self.rect.width() / self.width, self.rect.height() / self.height

    def transform(self) -> QTransform:
        """Image pixels -> widget coordinates (for ``QPainter.setTransform(..., True)``:
        paint in image pixels)."""
        sx, sy = self.scale
        return QTransform(sx, 0.0, 0.0, sy, self.rect.left(), self.rect.top())

    def point(self, x: float, y: float) -> QPointF:
        """Where image pixel coordinates (x, y) lie on the widget."""
        sx, sy = self.scale
        return QPointF(self.rect.left() + x * sx, self.rect.top() + y * sy)

    def area(self, x: float, y: float, w: float, h: float) -> QRectF:
        """The widget rectangle of the image's ``w`` x ``h`` pixels from (x, y)."""
        sx, sy = self.scale
        return QRectF(self.rect.left() + x * sx, self.rect.top() + y * sy, w * sx, h * sy)

    def box(self, x1: float, y1: float, x2: float, y2: float) -> QRectF:
        """The widget rectangle of the image box (x1, y1)-(x2, y2)."""
        return self.area(x1, y1, x2 - x1, y2 - y1)

    def pixel_at(self, at: QPointF) -> tuple[float, float]:
        """The image point (fractional pixels, not clamped: outside the image when
        ``at`` is) under the widget point ``at``."""
        r = self.rect
        return (
            (at.x() - r.x()) / r.width() * self.width,
            (at.y() - r.y()) / r.height() * self.height,
        )
