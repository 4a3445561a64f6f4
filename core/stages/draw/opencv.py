"""The OpenCV painter: overlays drawn into host BGR frames, for export and snapshots.

What is drawn is decided by ``framelens.core.stages.draw.style`` (shared with the
canvas' QPainter and the CUDA kernel); here it is only put on the pixels: shapes as
filled rectangles, trails as their rasterised masks, tag text with ``cv2.putText`` in the
Hershey font the tags were measured in.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
from framelens.core.stages.draw.style import (
    DEFAULT_STYLE,
    FONT,
    LANDMARK_COLOURS,
    PALETTE,
    Overlay,
    OverlayStyle,
    Rect,
    auto_font_scale,
    auto_thickness,
    class_colour,
    layout,
    tag_text,
    text_colour,
)
from framelens.core.types import Detections, Image


def _fill(out: Image, r: Rect, colour: tuple[int, int, int]) -> None:
    out[r.y1 : r.y2 + 1, r.x1 : r.x2 + 1] = colour


def paint(out: Image, overlay: Overlay) -> None:
    """Put ``overlay`` on a BGR uint8 image in place (it must be writable)."""
    w, h = overlay.width, overlay.height
    for trail in overlay.trails:
        m = trail.mask
        out[trail.y : trail.y + m.shape[0], trail.x : trail.x + m.shape[1]][m] = trail.colour
    for mark in overlay.boxes:
        if mark.outline:
            for band in mark.bands(w, h):
                _fill(out, band, mark.colour)
        tag = mark.tag
        if tag is not None:
            _fill(out, tag.rect, tag.colour)
            cv2.putText(
                out,
                tag.text,
                tag.origin,
                FONT,
                tag.font_scale,
                tag.text_colour,
                tag.font_thickness,
                cv2.LINE_AA,
            )
    for dot in overlay.dots:
        for span in dot.spans(w, h):
            _fill(out, span, dot.colour)


class OpenCvAnnotator:
    """``Annotator`` of host BGR uint8 images (see ``annotate``)."""

    def annotate(
        self,
        image: Image,
        detections: Detections,
        labels: Sequence[str],
        style: OverlayStyle = DEFAULT_STYLE,
        *,
        copy: bool = True,
    ) -> Image:
        return annotate(image, detections, labels, style, copy=copy)


def annotate(
    image: Image,
    detections: Detections,
    labels: Sequence[str],
    style: OverlayStyle = DEFAULT_STYLE,
    *,
    copy: bool = True,
) -> Image:
    """Draw ``detections`` on a BGR uint8 image and return the image drawn on.

    With ``copy=True`` the input is left untouched. With ``copy=False`` the drawing
    happens in place when the array is writable and C-contiguous (what OpenCV needs);
    otherwise a copy is drawn on and returned anyway.
    """
    out = image
    if copy or not (image.flags.c_contiguous and image.flags.writeable):
        out = image.copy()
    overlay = layout(detections, labels, style, int(out.shape[1]), int(out.shape[0]))
    if overlay:
        paint(out, overlay)
    return out


__all__ = [
    "LANDMARK_COLOURS",
    "PALETTE",
    "OpenCvAnnotator",
    "OverlayStyle",
    "annotate",
    "auto_font_scale",
    "auto_thickness",
    "class_colour",
    "paint",
    "tag_text",
    "text_colour",
]
