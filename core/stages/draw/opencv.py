"""Overlays drawn on a frame: boxes, "label score" tags, face landmarks.

One function, ``annotate``, serves both the GUI canvas and the exporters, so what
is seen live is exactly what is written to disk.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
from framelens.core.types import Detections, Image


@dataclass(frozen=True)
class OverlayStyle:
    """What to draw. ``None`` sizes are derived from the frame size."""

    boxes: bool = True
    labels: bool = True
    scores: bool = True
    landmarks: bool = True
    thickness: int | None = None
    font_scale: float | None = None


# BGR. Neighbouring ids get well separated hues so adjacent classes (person, bicycle,
# car...) are told apart at a glance; an id always maps to the same colour.
PALETTE: tuple[tuple[int, int, int], ...] = (
    (56, 56, 255),
    (151, 157, 255),
    (31, 112, 255),
    (29, 178, 255),
    (49, 210, 207),
    (10, 249, 72),
    (23, 204, 146),
    (134, 219, 61),
    (52, 147, 26),
    (187, 212, 0),
    (168, 153, 44),
    (255, 194, 0),
    (147, 69, 52),
    (255, 115, 100),
    (236, 24, 0),
    (255, 56, 132),
    (133, 0, 82),
    (255, 56, 203),
    (200, 149, 255),
    (199, 55, 255),
)

# Eyes, nose, mouth corners: distinct colours show a face's orientation.
LANDMARK_COLOURS: tuple[tuple[int, int, int], ...] = (
    (255, 0, 0),
    (0, 0, 255),
    (0, 255, 0),
    (255, 0, 255),
    (0, 255, 255),
)

_FONT = cv2.FONT_HERSHEY_SIMPLEX


def class_colour(class_id: int) -> tuple[int, int, int]:
    """The BGR colour used for ``class_id``."""
    return PALETTE[class_id % len(PALETTE)]


def _text_colour(bg: tuple[int, int, int]) -> tuple[int, int, int]:
    b, g, r = bg
    return (0, 0, 0) if 0.114 * b + 0.587 * g + 0.299 * r > 140 else (255, 255, 255)


def auto_thickness(width: int, height: int) -> int:
    """Line width that stays visible without hiding small objects: 2 px at 432p, 4 at 1080p."""
    return max(1, round(min(width, height) / 240))


def auto_font_scale(width: int, height: int) -> float:
    return max(0.35, min(width, height) / 900)


def annotate(
    image: Image,
    detections: Detections,
    labels: Sequence[str],
    style: OverlayStyle = OverlayStyle(),  # frozen, so one shared default is safe
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
    n = len(detections)
    if n == 0 or not (style.boxes or style.labels or style.scores or style.landmarks):
        return out

    h, w = int(out.shape[0]), int(out.shape[1])
    thick = style.thickness if style.thickness is not None else auto_thickness(w, h)
    thick = max(1, thick)
    scale = style.font_scale if style.font_scale is not None else auto_font_scale(w, h)
    font_thick = max(1, thick // 2)
    pad = max(1, thick)

    # tolist() once: Python floats are far cheaper to index than numpy scalars.
    boxes = detections.boxes.tolist()
    scores = detections.scores.tolist()
    class_ids = detections.class_ids.tolist()
    tagged = style.labels or style.scores

    for i in range(n):
        x1f, y1f, x2f, y2f = boxes[i]
        if not (x2f >= 0 and y2f >= 0 and x1f <= w - 1 and y1f <= h - 1):
            continue  # entirely outside the frame (or NaN): nothing sensible to draw
        x1 = max(0, round(x1f))
        y1 = max(0, round(y1f))
        x2 = min(w - 1, round(x2f))
        y2 = min(h - 1, round(y2f))
        cid = int(class_ids[i])
        colour = class_colour(cid)
        if style.boxes:
            cv2.rectangle(out, (x1, y1), (x2, y2), colour, thick, cv2.LINE_8)
        if tagged:
            _draw_tag(
                out,
                tag_text(cid, scores[i], labels, style),
                x1,
                y1,
                colour,
                scale,
                font_thick,
                pad,
            )

    if style.landmarks and detections.landmarks is not None:
        radius = max(1, thick)
        for face in detections.landmarks.tolist():
            for k, (px, py) in enumerate(face):
                if 0 <= px < w and 0 <= py < h:
                    cv2.circle(
                        out,
                        (round(px), round(py)),
                        radius,
                        LANDMARK_COLOURS[k % len(LANDMARK_COLOURS)],
                        -1,
                        cv2.LINE_8,
                    )
    return out


def tag_text(cid: int, score: float, labels: Sequence[str], style: OverlayStyle) -> str:
    """The "label score" text of a detection, as the overlay shows it."""
    name = labels[cid] if 0 <= cid < len(labels) else str(cid)
    if style.labels and style.scores:
        return f"{name} {score:.2f}"
    return name if style.labels else f"{score:.2f}"


def _draw_tag(
    out: Image,
    text: str,
    x: int,
    y: int,
    colour: tuple[int, int, int],
    scale: float,
    font_thick: int,
    pad: int,
) -> None:
    """A filled tag above the box's top-left corner, moved inside so it is never cut."""
    h, w = int(out.shape[0]), int(out.shape[1])
    (tw, th), baseline = cv2.getTextSize(text, _FONT, scale, font_thick)
    bw, bh = tw + 2 * pad, th + baseline + 2 * pad
    top = y - bh if y - bh >= 0 else y  # no room above the box: put it just inside
    top = max(0, min(top, h - bh))
    left = max(0, min(x, w - bw))
    cv2.rectangle(
        out,
        (left, top),
        (min(w - 1, left + bw - 1), min(h - 1, top + bh - 1)),
        colour,
        -1,
        cv2.LINE_8,
    )
    cv2.putText(
        out,
        text,
        (left + pad, top + pad + th),
        _FONT,
        scale,
        _text_colour(colour),
        font_thick,
        cv2.LINE_AA,
    )


def text_colour(bg: tuple[int, int, int]) -> tuple[int, int, int]:
    """Black or white (BGR), whichever reads better on ``bg``."""
    return _text_colour(bg)


__all__ = [
    "LANDMARK_COLOURS",
    "PALETTE",
    "OverlayStyle",
    "annotate",
    "class_colour",
    "tag_text",
    "text_colour",
]
