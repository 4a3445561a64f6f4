"""A window as it looks on screen, for screenshots (docs, tests, benchmarks).

``QWidget.grab`` renders a QOpenGLWidget's GL content but not what QPainter drew over it
in paintGL (overlays, captions): each GL widget's own framebuffer, which holds both, is
painted over its place in the window's grab.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect
from PySide6.QtGui import QPainter, QPixmap
from PySide6.QtOpenGLWidgets import QOpenGLWidget
from PySide6.QtWidgets import QWidget

__all__ = ["grab_window"]


def grab_window(window: QWidget) -> QPixmap:
    """``window`` rendered, its visible GL widgets as they show themselves."""
    shot = window.grab()
    painter = QPainter(shot)
    try:
        for gl in window.findChildren(QOpenGLWidget):
            if gl.isVisible() and gl.window() is window.window():
                where = QRect(gl.mapTo(window, QPoint(0, 0)), gl.size())
                painter.drawImage(where, gl.grabFramebuffer())
    finally:
        painter.end()
    return shot
