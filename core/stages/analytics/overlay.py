"""Lines and zones as a layer over their source's frame, with their live counts.

An analytics stage that is drawn (``AnalyticsStage(drawn=True)``: the wall's tiles) puts
a ``ZonesLayer`` on each result: the lines and polygons, per line its ``in`` and ``out``
so far, per zone how many tracks are inside now and how many entered. ``paint(image)``
draws it into a BGR frame; the wall's canvas paints the same with QPainter
(gui/wall/zones_paint.py), with the labels of ``line_text`` and ``zone_text``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import cv2
import numpy as np
from framelens.core.stages.analytics.zones import ZonesFile
from framelens.core.types import Image

__all__ = ["LINE_BGR", "ZONE_BGR", "ZonesLayer", "line_text", "zone_text"]

LINE_BGR = (0, 215, 255)  # amber
ZONE_BGR = (255, 191, 0)  # sky blue


def line_text(name: str, counts: tuple[int, int]) -> str:
    """A line's label: "gate in 3 · out 1"."""
    return f"{name} in {counts[0]} · out {counts[1]}"


def zone_text(name: str, counts: tuple[int, int]) -> str:
    """A zone's label: "bay 2 inside · 7 entered"."""
    return f"{name} {counts[0]} inside · {counts[1]} entered"


@dataclass(frozen=True, slots=True, eq=False)
class ZonesLayer:
    """A source's lines and zones with their counts at one frame (a snapshot)."""

    style_key: ClassVar[str] = "zones"  # no OverlayStyle flag: always drawn

    spec: ZonesFile
    lines: tuple[tuple[int, int], ...]  # per line: (in, out)
    zones: tuple[tuple[int, int], ...]  # per zone: (inside now, entered)

    def labels(self) -> list[tuple[str, tuple[float, float], bool]]:
        """(text, where, is a line) for each line (at its middle) and zone (its first
        corner)."""
        out: list[tuple[str, tuple[float, float], bool]] = []
        for line, counts in zip(self.spec.lines, self.lines, strict=True):
            mid = ((line.p1[0] + line.p2[0]) / 2, (line.p1[1] + line.p2[1]) / 2)
            out.append((line_text(line.name, counts), mid, True))
        for zone, counts in zip(self.spec.zones, self.zones, strict=True):
            out.append((zone_text(zone.name, counts), zone.polygon[0], False))
        return out

    def paint(self, image: Image) -> None:
        """Draw it into ``image`` (BGR uint8, in place): polygons, lines, labels."""
        h = image.shape[0]
        thick = max(2, round(h / 360))
        for zone in self.spec.zones:
            pts = np.round(np.asarray(zone.polygon)).astype(np.int32).reshape(-1, 1, 2)
            cv2.polylines(image, [pts], True, ZONE_BGR, thick, cv2.LINE_AA)
        for line in self.spec.lines:
            p1 = (round(line.p1[0]), round(line.p1[1]))
            p2 = (round(line.p2[0]), round(line.p2[1]))
            cv2.line(image, p1, p2, LINE_BGR, thick + 1, cv2.LINE_AA)
        scale = max(0.4, h / 1080)
        for text, (x, y), is_line in self.labels():
            text = text.replace("·", "-")  # OpenCV's font has no middle dot
            (tw, th), base = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, scale, 1)
            x0, y0 = int(x) + 4, int(y) - 4
            cv2.rectangle(image, (x0 - 2, y0 - th - 4), (x0 + tw + 2, y0 + base), (0, 0, 0), -1)
            colour = LINE_BGR if is_line else ZONE_BGR
            cv2.putText(image, text, (x0, y0), cv2.FONT_HERSHEY_SIMPLEX, scale, colour, 1,
                        cv2.LINE_AA)  # fmt: skip
