"""A tile's lines and zones with their live counts, painted with QPainter over the tile:
core's ZonesPicture (the lines, polygons, colours and tags its ``paint`` draws into
frames), its tags at the widget's size so they stay legible on small tiles."""

from __future__ import annotations

from framelens.core.api import ZonesPicture, shape_colour
from framelens.gui.display.image_place import ImagePlace
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPen, QPolygonF

__all__ = ["paint_zones"]


def _colour(bgr: tuple[int, int, int], alpha: int = 255) -> QColor:
    return QColor(bgr[2], bgr[1], bgr[0], alpha)


def paint_zones(
    painter: QPainter, picture: ZonesPicture, rect: QRectF, width: int, height: int
) -> None:
    """``picture`` (in source pixels of a ``width`` x ``height`` frame) over ``rect`` of
    the widget: zones outlined and lightly filled, lines thick, each in its colour with
    its tag (name and counts) in a dark label."""
    place = ImagePlace(rect, width, height)

    def at(p: tuple[float, float]) -> QPointF:
        return place.point(p[0], p[1])

    spec = picture.spec
    painter.save()
    painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
    for k, zone in enumerate(spec.zones, start=len(spec.lines)):  # under the lines
        colour = shape_colour(k)
        painter.setPen(QPen(_colour(colour), 2))
        painter.setBrush(_colour(colour, 40))
        painter.drawPolygon(QPolygonF([at(p) for p in zone.polygon]))
    painter.setBrush(Qt.BrushStyle.NoBrush)
    for k, segment in enumerate(spec.lines):
        painter.setPen(QPen(_colour(shape_colour(k)), 3))
        painter.drawLine(at(segment.p1), at(segment.p2))
    where = [min((s.p1, s.p2), key=lambda p: p[1]) for s in spec.lines]  # their top ends
    where += [min(z.polygon, key=lambda p: (p[1], p[0])) for z in spec.zones]  # top corners
    font = QFont(painter.font())
    font.setPixelSize(12)
    font.setBold(True)
    painter.setFont(font)
    metrics = QFontMetrics(font)
    placed: list[QRectF] = []
    for k, (text, anchor) in enumerate(zip(picture.texts(), where, strict=True)):
        p = at(anchor)
        box = QRectF(metrics.boundingRect(text)).adjusted(-4, -2, 4, 2)
        box.moveTopLeft(QPointF(p.x() + 4, p.y() - box.height() - 2))
        box.moveLeft(min(max(box.left(), rect.left()), rect.right() - box.width()))
        box.moveTop(min(max(box.top(), rect.top()), rect.bottom() - box.height()))
        while any(box.intersects(other) for other in placed):  # tags on one corner: stacked
            box.moveTop(box.top() + box.height() + 1)
        placed.append(box)
        painter.fillRect(box, QColor(0, 0, 0, 185))
        painter.setPen(_colour(shape_colour(k)))
        painter.drawText(box, int(Qt.AlignmentFlag.AlignCenter), text)
    painter.restore()
