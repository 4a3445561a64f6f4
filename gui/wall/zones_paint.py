"""A tile's lines and zones with their live counts, painted with QPainter over the tile
(core's ZonesLayer: the same lines, polygons and labels its ``paint`` draws into frames)."""

from __future__ import annotations

from framelens.core.api import ZONE_LINE_BGR, ZONE_ZONE_BGR, ZonesLayer
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPen, QPolygonF

__all__ = ["paint_zones"]


def _colour(bgr: tuple[int, int, int], alpha: int = 255) -> QColor:
    return QColor(bgr[2], bgr[1], bgr[0], alpha)


def paint_zones(
    painter: QPainter, layer: ZonesLayer, rect: QRectF, width: int, height: int
) -> None:
    """``layer`` (in source pixels of a ``width`` x ``height`` frame) over ``rect`` of the
    widget: zones outlined and lightly filled, lines thick, each with its counts in a
    dark label (text at the widget's size, legible on small tiles)."""
    sx, sy = rect.width() / width, rect.height() / height

    def at(p: tuple[float, float]) -> QPointF:
        return QPointF(rect.x() + p[0] * sx, rect.y() + p[1] * sy)

    painter.save()
    painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
    zone, line = _colour(ZONE_ZONE_BGR), _colour(ZONE_LINE_BGR)
    for z in layer.spec.zones:
        painter.setPen(QPen(zone, 2))
        painter.setBrush(_colour(ZONE_ZONE_BGR, 40))
        painter.drawPolygon(QPolygonF([at(p) for p in z.polygon]))
    painter.setBrush(Qt.BrushStyle.NoBrush)
    for segment in layer.spec.lines:
        painter.setPen(QPen(line, 3))
        painter.drawLine(at(segment.p1), at(segment.p2))
    font = QFont(painter.font())
    font.setPixelSize(12)
    font.setBold(True)
    painter.setFont(font)
    metrics = QFontMetrics(font)
    for text, where, is_line in layer.labels():
        p = at(where)
        box = QRectF(metrics.boundingRect(text)).adjusted(-4, -2, 4, 2)
        box.moveTopLeft(QPointF(p.x() + 4, p.y() - box.height() - 2))
        box.moveLeft(min(max(box.left(), rect.left()), rect.right() - box.width()))
        box.moveTop(min(max(box.top(), rect.top()), rect.bottom() - box.height()))
        painter.fillRect(box, QColor(0, 0, 0, 185))
        painter.setPen(line if is_line else zone)
        painter.drawText(box, int(Qt.AlignmentFlag.AlignCenter), text)
    painter.restore()
