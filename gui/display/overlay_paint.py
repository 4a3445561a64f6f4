"""The overlay painted by Qt: core's overlay layout (shapes in image pixels) drawn with a
QPainter, the same pixels OpenCV draws into exported frames (tests/gui/
test_overlay_same_picture.py holds them to that). The canvas paints it over device
frames; ``QPainterAnnotator`` paints it on a QImage. ``paint_highlight`` marks the box
picked in the detections list, over whatever the frame shows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from framelens.core.api import (
    BGR,
    DEFAULT_STYLE,
    Detections,
    Overlay,
    OverlayStyle,
    Rect,
    Tag,
    Trail,
    layout,
)
from framelens.gui.display.image_place import ImagePlace
from PySide6.QtCore import QPointF, QRectF
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetricsF,
    QImage,
    QPainter,
    QPainterPath,
    QPen,
    QTransform,
)

__all__ = [
    "HIGHLIGHT_COLOUR",
    "QPainterAnnotator",
    "paint_follow",
    "paint_highlight",
    "paint_overlay",
]

_FONT_PROBE_PX = 64  # font size at which a font's cap height is measured
HIGHLIGHT_COLOUR = QColor(255, 255, 255)  # the picked box's outline
_DIM = QColor(0, 0, 0, 130)  # over the frame outside the picked box
_HALO = QColor(0, 0, 0, 220)  # under the outline, so it shows on white too


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
    fitted = _fitted_text(painter.font().toString(), tag.text, tw, th)
    if fitted is None:
        return
    path, sx, sy = fitted
    painter.save()
    painter.translate(tag.origin[0], tag.origin[1])
    painter.scale(sx, sy)
    painter.fillPath(path, _qcolour(tag.text_colour))
    painter.restore()


@lru_cache(maxsize=2048)
def _fitted_text(
    font: str, text: str, tw: int, th: int
) -> tuple[QPainterPath, float, float] | None:
    """The outline of ``text`` in ``font`` (QFont.toString), and the scale that fits it
    into ``tw`` x ``th``: made once per label and size (a track's tag reads the same
    frame after frame; outlining text is most of what painting a tag costs)."""
    per_pixel = _cap_per_pixel(font)
    if per_pixel <= 0:
        return None
    qfont = QFont()
    qfont.fromString(font)
    qfont.setPixelSize(max(1, round(th / per_pixel)))
    metrics = QFontMetricsF(qfont)
    advance, cap = metrics.horizontalAdvance(text), metrics.capHeight()
    if advance <= 0 or cap <= 0:
        return None
    path = QPainterPath()
    path.addText(0.0, 0.0, qfont, text)
    return path, tw / advance, th / cap


def _trail_image(trail: Trail) -> QImage:
    """The trail's mask as an image: its colour where the mask is set, clear elsewhere."""
    h, w = trail.mask.shape
    b, g, r = trail.colour
    argb = np.zeros((h, w), np.uint32)
    argb[trail.mask] = (255 << 24) | (r << 16) | (g << 8) | b
    data = argb.tobytes()
    # copied: the image then owns its pixels (``data`` goes when this returns)
    return QImage(data, w, h, 4 * w, QImage.Format.Format_ARGB32_Premultiplied).copy()


_NARROWEST = 50  # the least stretch (percent) a tag's glyphs take; narrower: the outline
_DIGITS = re.compile(r"[0-9]")


def _glyph_text_font(font: QFont, cap: float, width: float, text: str) -> QFont | None:
    """``font`` at the pixel size whose cap height is ``cap``, narrowed (Qt stretches it)
    until ``text`` is no wider than ``width``; None where that would take it under
    ``_NARROWEST``. Made once per size, width and the text's shape with its digits as
    zeros (a tag's score changes every frame; the fonts' digits are all as wide)."""
    description = font.toString()
    per_pixel = _cap_per_pixel(description)
    if per_pixel <= 0:
        return None
    pixels = max(1, round(cap / per_pixel))
    return _narrowed_font(description, pixels, round(width * 4) / 4, _DIGITS.sub("0", text))


@lru_cache(maxsize=1024)
def _narrowed_font(description: str, pixels: int, width: float, text: str) -> QFont | None:
    fitted = QFont()
    fitted.fromString(description)
    fitted.setPixelSize(pixels)
    advance = QFontMetricsF(fitted).horizontalAdvance(text)
    if advance <= width:
        return fitted
    # Qt's stretched advance is not quite linear in the stretch (a few percent wider):
    # from the linear guess, a point narrower until it fits (three steps at most, seen)
    stretch = int(100 * width / advance)
    while stretch >= _NARROWEST:
        fitted.setStretch(stretch)
        if QFontMetricsF(fitted).horizontalAdvance(text) <= width:
            return fitted
        stretch -= 1
    return None


@lru_cache(maxsize=64)
def _cap_per_pixel(font: str) -> float:
    """The cap height of ``font`` (QFont.toString) per pixel of its size, measured at
    ``_FONT_PROBE_PX`` (0 or less: the font has none to fit text by)."""
    qfont = QFont()
    qfont.fromString(font)
    qfont.setPixelSize(_FONT_PROBE_PX)
    return QFontMetricsF(qfont).capHeight() / _FONT_PROBE_PX


def _paint_glyph_text(painter: QPainter, tag: Tag) -> None:
    """The tag's text as the font's glyphs at the size it is shown (baseline at
    ``origin``, cap height its height, no wider than its width): what a small tag gets,
    where filling the outline ``_paint_text`` fits costs about twice as much and reads no
    better. The outline where the glyphs would not fit, or the painter turns or flips."""
    tw, th = tag.text_size
    if tw <= 0 or th <= 0 or not tag.text:
        return
    world = painter.worldTransform()
    upright = world.type().value <= QTransform.TransformationType.TxScale.value
    fitted = None
    if upright and world.m11() > 0 and world.m22() > 0:
        fitted = _glyph_text_font(painter.font(), th * world.m22(), tw * world.m11(), tag.text)
    if fitted is None:
        _paint_text(painter, tag)
        return
    origin = world.map(QPointF(tag.origin[0], tag.origin[1]))
    painter.save()
    painter.setWorldTransform(QTransform())  # the widget's pixels: glyphs at their size
    painter.setFont(fitted)
    painter.setPen(_qcolour(tag.text_colour))
    painter.drawText(origin, tag.text)
    painter.restore()


def paint_overlay(painter: QPainter, overlay: Overlay, glyphs_below_px: float = 0.0) -> None:
    """Paint ``overlay`` with ``painter``, whose coordinates are image pixels.

    The shapes are ``framelens.core.stages.draw.style``'s filled rectangles (and trails'
    masks), in its order, so the same pixels get the same colours as in OpenCV's drawing; only the
    tag text differs (Qt's font fitted into the box of OpenCV's Hershey text).
    ``glyphs_below_px``: a tag whose text is shown less than this many pixels high (the
    video wall's small tiles) is written with the font's glyphs at that size instead.
    """
    w, h = overlay.width, overlay.height
    shown = abs(painter.worldTransform().m22())  # widget pixels an image pixel

    def fill(rect: Rect, colour: QColor) -> None:
        painter.fillRect(QRectF(rect.x1, rect.y1, rect.width, rect.height), colour)

    painter.save()
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, False)  # pixels stay pixels
    for trail in overlay.trails:  # under the boxes
        painter.drawImage(QPointF(trail.x, trail.y), _trail_image(trail))
    for mark in overlay.boxes:
        colour = _qcolour(mark.colour)
        if mark.outline:
            for band in mark.bands(w, h):
                fill(band, colour)
        if mark.tag is not None:
            fill(mark.tag.rect, colour)
            if mark.tag.text_size[1] * shown < glyphs_below_px:
                _paint_glyph_text(painter, mark.tag)
            else:
                _paint_text(painter, mark.tag)
    for dot in overlay.dots:
        colour = _qcolour(dot.colour)
        for span in dot.spans(w, h):
            fill(span, colour)
    painter.restore()


def paint_highlight(
    painter: QPainter,
    image_rect: QRectF,
    image_size: tuple[int, int],
    box: tuple[float, float, float, float],
) -> None:
    """Mark ``box`` (x1, y1, x2, y2 in image pixels: core's ``mark_region``, a box and
    its tag) of the image drawn at ``image_rect`` (widget coordinates): the image outside
    it dimmed and a white outline just outside it, in screen pixels whatever the zoom, so
    the box's own overlay, its tag included, stays seen."""
    w, h = image_size
    if w <= 0 or h <= 0:
        return
    x1, y1 = min(max(box[0], 0.0), w), min(max(box[1], 0.0), h)
    x2, y2 = min(max(box[2], x1), w), min(max(box[3], y1), h)
    rect = ImagePlace(image_rect, w, h).box(x1, y1, x2, y2)
    outside = QPainterPath()
    outside.addRect(image_rect)
    outside.addRect(rect)  # odd-even fill: the frame less the box
    painter.save()
    painter.fillPath(outside, _DIM)
    ring = rect.adjusted(-3.0, -3.0, 3.0, 3.0)
    painter.setBrush(QColor(0, 0, 0, 0))
    painter.setPen(QPen(_HALO, 5.0))
    painter.drawRect(ring)
    painter.setPen(QPen(HIGHLIGHT_COLOUR, 2.0))
    painter.drawRect(ring)
    painter.restore()


FOLLOW_WIDTH = 6.0  # the followed track's outline, in screen pixels


def paint_follow(
    painter: QPainter,
    image_rect: QRectF,
    image_size: tuple[int, int],
    box: tuple[float, float, float, float],
    colour: BGR,
) -> None:
    """Mark the followed track's ``box`` (image pixels: core's ``mark_region``, its box
    and tag) of the image drawn at ``image_rect``: a thick outline in its track's
    ``colour`` between two dark rims, just outside it (around the tag, never through
    it), with corner brackets beyond it, in screen pixels whatever the zoom."""
    w, h = image_size
    if w <= 0 or h <= 0:
        return
    rect = ImagePlace(image_rect, w, h).box(*box)
    ring = rect.adjusted(-7.0, -7.0, 7.0, 7.0)
    painter.save()
    painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
    painter.setBrush(QColor(0, 0, 0, 0))
    painter.setPen(QPen(_HALO, FOLLOW_WIDTH + 4.0))
    painter.drawRect(ring)
    painter.setPen(QPen(_qcolour(colour), FOLLOW_WIDTH))
    painter.drawRect(ring)
    # corner brackets: the mark reads as "followed" even over a box of the same colour
    arm = min(24.0, ring.width() / 3, ring.height() / 3)
    out = ring.adjusted(-8.0, -8.0, 8.0, 8.0)
    painter.setPen(QPen(HIGHLIGHT_COLOUR, 3.0))
    for cx, cy, dx, dy in (
        (out.left(), out.top(), 1, 1),
        (out.right(), out.top(), -1, 1),
        (out.left(), out.bottom(), 1, -1),
        (out.right(), out.bottom(), -1, -1),
    ):
        painter.drawLine(QPointF(cx, cy), QPointF(cx + dx * arm, cy))
        painter.drawLine(QPointF(cx, cy), QPointF(cx, cy + dy * arm))
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
