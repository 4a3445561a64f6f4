"""The overlay painted by Qt: core's overlay layout (shapes in image pixels) drawn with a
QPainter, the same pixels OpenCV draws into exported frames (tests/gui/
test_overlay_same_picture.py holds them to that). The canvas paints it over device
frames; ``QPainterAnnotator`` paints it on a QImage.
"""

from __future__ import annotations

from collections.abc import Sequence

from framelens.core.api import (
    BGR,
    DEFAULT_STYLE,
    Detections,
    Overlay,
    OverlayStyle,
    Rect,
    Tag,
    layout,
)
from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QImage, QPainter, QPainterPath

__all__ = ["QPainterAnnotator", "paint_overlay"]

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
