"""Lines and zones drawn over a frame with their live counts, as one ``Overlay``.

``ZonesPicture`` is a mark a stage puts on ``FrameResult.marks``: the host painter
(core/pipeline/processor.py, the frames the window shows and an export writes) and the
canvas' QPainter (frames kept on the GPU) both paint ``overlay(width, height)`` with the
painters of core/stages/draw/, so the picture is the same wherever it is drawn. Shapes
are rasterised once per definition and frame size (cached): a line is its segment, a
short arrow from its middle towards its ``in`` side and a dot at ``p1``; a zone is its
outline. Each gets a tag: its name and counts ("gate in 3 out 1", "bay inside 2 entered 5").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import cv2
import numpy as np
from framelens.core.stages.analytics.zones import LineSpec, ZonesFile, ZoneSpec
from framelens.core.stages.draw.opencv import paint
from framelens.core.stages.draw.style import (
    BGR,
    DEFAULT_STYLE,
    BoxMark,
    Dot,
    Overlay,
    Rect,
    Trail,
    sizes,
    tag_at,
)
from framelens.core.types import Image

__all__ = ["SHAPE_COLOURS", "LiveCounts", "ZonesPicture", "shape_colour"]

SHAPE_COLOURS: tuple[BGR, ...] = (
    (0, 215, 255),  # gold
    (255, 191, 0),  # deep sky blue
    (180, 105, 255),  # pink
    (127, 255, 0),  # spring green
    (255, 255, 0),  # cyan
    (60, 20, 220),  # crimson
)
"""Lines' and zones' colours (BGR), one after another in the file's order."""


def shape_colour(number: int) -> BGR:
    """The colour of the ``number``-th line or zone (lines first, then zones)."""
    return SHAPE_COLOURS[number % len(SHAPE_COLOURS)]


@dataclass(frozen=True, slots=True)
class LiveCounts:
    """Counts at one frame: each line's (name, in, out) and each zone's (name, inside
    now, entered), in the file's order."""

    frame: int
    time_s: float
    lines: tuple[tuple[str, int, int], ...] = ()
    zones: tuple[tuple[str, int, int], ...] = ()

    def texts(self) -> tuple[str, ...]:
        """Each line's tag then each zone's, as the picture reads them."""
        return (
            *(f"{name} in {n_in} out {n_out}" for name, n_in, n_out in self.lines),
            *(f"{name} inside {now} entered {entered}" for name, now, entered in self.zones),
        )


@dataclass(frozen=True, slots=True, eq=False)
class ZonesPicture:
    """``spec``'s lines and zones with ``counts`` (None: names only), a frame's mark."""

    spec: ZonesFile
    counts: LiveCounts | None = None

    def texts(self) -> tuple[str, ...]:
        if self.counts is not None:
            return self.counts.texts()
        return self.spec.names

    def overlay(self, width: int, height: int) -> Overlay:
        """What to paint on a ``width`` x ``height`` image (its pixels: source pixels)."""
        if width <= 0 or height <= 0 or not self.spec:
            return Overlay(width, height, (), ())
        shapes, dots, anchors = _shapes(self.spec, width, height)
        s = sizes(DEFAULT_STYLE, width, height)
        tags: list[BoxMark] = []
        for k, (text, (x, y)) in enumerate(zip(self.texts(), anchors, strict=True)):
            colour = shape_colour(k)
            tag = tag_at(text, x, y, colour, s, width, height)
            for _ in tags:  # shapes sharing a corner: their tags stacked, not on top
                if not any(_overlap(tag.rect, m.box) for m in tags):
                    break
                y += tag.rect.y2 - tag.rect.y1 + 2
                tag = tag_at(text, x, y, colour, s, width, height)
            tags.append(BoxMark(tag.rect, 0, colour, -1, tag, False))
        return Overlay(width, height, tuple(tags), dots, shapes)

    def paint(self, image: Image) -> None:
        """Paint on a host BGR image in place (OpenCV: core/stages/draw/opencv.py)."""
        h, w = int(image.shape[0]), int(image.shape[1])
        overlay = self.overlay(w, h)
        if overlay:
            paint(image, overlay)


def _overlap(a: Rect, b: Rect) -> bool:
    return a.x1 <= b.x2 and b.x1 <= a.x2 and a.y1 <= b.y2 and b.y1 <= a.y2


def _raster(
    points: list[tuple[float, float]], closed: bool, colour: BGR, thick: int, w: int, h: int
) -> Trail | None:
    """The polyline (closed: polygon outline) as the pixels it covers, inside the image."""
    pts = np.rint(np.array(points, np.float64)).astype(np.int64)
    if len(pts) < 2:
        return None
    pad = thick // 2 + 1
    x0, y0 = max(0, int(pts[:, 0].min()) - pad), max(0, int(pts[:, 1].min()) - pad)
    x1, y1 = min(w - 1, int(pts[:, 0].max()) + pad), min(h - 1, int(pts[:, 1].max()) + pad)
    if x1 < x0 or y1 < y0:
        return None
    canvas = np.zeros((y1 - y0 + 1, x1 - x0 + 1), np.uint8)
    shifted = (pts - np.array([x0, y0])).astype(np.int32).reshape(-1, 1, 2)
    cv2.polylines(canvas, [shifted], closed, 1, thick, cv2.LINE_8)
    mask = canvas.astype(bool)
    return Trail(x0, y0, mask, colour, -1) if mask.any() else None


def _arrow(line: LineSpec, length: float) -> list[list[tuple[float, float]]]:
    """From the line's middle towards its ``in`` side (walking p1 -> p2, the right: in
    image coordinates, y down, the direction (-dy, dx)), with a head."""
    (x1, y1), (x2, y2) = line.p1, line.p2
    dx, dy = x2 - x1, y2 - y1
    norm = math.hypot(dx, dy) or 1.0
    rx, ry = -dy / norm, dx / norm
    mx, my = (x1 + x2) / 2, (y1 + y2) / 2
    tip = (mx + rx * length, my + ry * length)
    head = length * 0.4
    ux, uy = dx / norm, dy / norm  # along the line
    back = (tip[0] - rx * head, tip[1] - ry * head)
    left = (back[0] + ux * head, back[1] + uy * head)
    right = (back[0] - ux * head, back[1] - uy * head)
    return [[(mx, my), tip], [left, tip, right]]


@lru_cache(maxsize=32)
def _shapes(
    spec: ZonesFile, width: int, height: int
) -> tuple[tuple[Trail, ...], tuple[Dot, ...], tuple[tuple[int, int], ...]]:
    """The rasterised shapes, the dots, and where each one's tag goes."""
    s = sizes(DEFAULT_STYLE, width, height)
    thick = s.thickness
    shapes: list[Trail] = []
    dots: list[Dot] = []
    anchors: list[tuple[int, int]] = []
    items: list[LineSpec | ZoneSpec] = [*spec.lines, *spec.zones]
    for k, item in enumerate(items):
        colour = shape_colour(k)
        if isinstance(item, LineSpec):
            parts = [[item.p1, item.p2], *_arrow(item, max(16.0, 8.0 * thick))]
            for part in parts:
                shape = _raster(part, False, colour, thick, width, height)
                if shape is not None:
                    shapes.append(shape)
            px, py = round(item.p1[0]), round(item.p1[1])
            if 0 <= px < width and 0 <= py < height:
                dots.append(Dot(px, py, thick + 1, colour))
            top = min((item.p1, item.p2), key=lambda p: p[1])  # the tag above its top end
            anchors.append((round(top[0]) + thick, round(top[1]) - thick))
        else:
            shape = _raster(list(item.polygon), True, colour, thick, width, height)
            if shape is not None:
                shapes.append(shape)
            top = min(item.polygon, key=lambda p: (p[1], p[0]))
            anchors.append((round(top[0]), round(top[1]) - thick))
    return tuple(shapes), tuple(dots), tuple(anchors)
