"""ImagePlace: what is painted in image pixels lands where a click reads it back.

An image of 320 x 180 pixels drawn letterboxed and stretched unevenly (x 2.5, y 2.0)
at an offset: a box painted through the place's transform covers the widget pixels
``box`` says, and a click on any of them reads back a point inside the box."""

from __future__ import annotations

import pytest
from framelens.gui.display.image_place import ImagePlace
from PySide6.QtCore import QPointF, QRectF
from PySide6.QtGui import QColor, QImage, QPainter

pytestmark = pytest.mark.gui

PLACE = ImagePlace(QRectF(40.0, 30.0, 800.0, 360.0), 320, 180)


def test_a_box_painted_in_image_pixels_covers_the_rectangle_box_gives(qapp: object) -> None:
    del qapp
    canvas = QImage(900, 420, QImage.Format.Format_RGB32)
    canvas.fill(QColor(0, 0, 0))
    painter = QPainter(canvas)
    painter.setTransform(PLACE.transform())
    painter.fillRect(QRectF(100.0, 50.0, 20.0, 10.0), QColor(255, 255, 255))
    painter.end()
    rect = PLACE.box(100.0, 50.0, 120.0, 60.0)
    assert (rect.left(), rect.top(), rect.width(), rect.height()) == (290.0, 130.0, 50.0, 20.0)
    lit = [(x, y) for y in range(420) for x in range(900) if QColor(canvas.pixel(x, y)).red() > 128]
    xs, ys = [x for x, _ in lit], [y for _, y in lit]
    assert (min(xs), max(xs) + 1, min(ys), max(ys) + 1) == (290, 340, 130, 150)


def test_a_click_reads_back_the_image_point_painted_there() -> None:
    for x, y in [(0.0, 0.0), (100.5, 50.25), (319.0, 179.0), (320.0, 180.0)]:
        at = PLACE.point(x, y)
        assert PLACE.pixel_at(at) == pytest.approx((x, y))
    # outside the image: not clamped (the caller decides what a click there means)
    assert PLACE.pixel_at(QPointF(0.0, 0.0)) == pytest.approx((-16.0, -15.0))
    assert PLACE.scale == (2.5, 2.0)
    assert PLACE.area(10.0, 20.0, 4.0, 6.0) == QRectF(65.0, 70.0, 10.0, 12.0)
