"""The difference view: detections that one pane has and the reference pane has not.

"Present in one pane only" means left unmatched by the product's one agreement rule
(framelens.core.stages.tasks.detect.agreement): the reference's misses of the test pane and the
test pane's extra detections. ``draw_difference`` overlays both on a frame in two
fixed colours, dashed for the reference's, so they read apart from class colours.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np
from framelens.core.stages.draw.style import auto_font_scale, auto_thickness
from framelens.core.stages.tasks.detect.agreement import FrameMatch, match_frame
from framelens.core.types import Detections, Image

__all__ = [
    "REF_ONLY_COLOUR",
    "TEST_ONLY_COLOUR",
    "DetectionDiff",
    "detection_diff",
    "draw_difference",
]

REF_ONLY_COLOUR = (0, 165, 255)  # BGR orange: the reference found it, the test pane missed it
TEST_ONLY_COLOUR = (255, 0, 255)  # BGR magenta: only the test pane found it


@dataclass(frozen=True)
class DetectionDiff:
    """Unmatched detections of one frame: ``ref_only`` (misses), ``test_only`` (extras)."""

    ref_only: Detections
    test_only: Detections

    @property
    def empty(self) -> bool:
        return len(self.ref_only) == 0 and len(self.test_only) == 0


def detection_diff(
    ref: Detections, test: Detections, match: FrameMatch | None = None, iou: float = 0.5
) -> DetectionDiff:
    """The detections of each side left unmatched; pass ``match`` when already computed."""
    m = match if match is not None else match_frame(ref, test, iou)
    return DetectionDiff(
        ref.select(np.asarray(m.unmatched_ref, dtype=np.intp)),
        test.select(np.asarray(m.unmatched_test, dtype=np.intp)),
    )


def _dashed_rectangle(
    img: Image, p1: tuple[int, int], p2: tuple[int, int], colour: tuple[int, int, int], thick: int
) -> None:
    dash = 4 * thick
    (x1, y1), (x2, y2) = p1, p2
    for x in range(x1, x2, 2 * dash):
        cv2.line(img, (x, y1), (min(x + dash, x2), y1), colour, thick)
        cv2.line(img, (x, y2), (min(x + dash, x2), y2), colour, thick)
    for y in range(y1, y2, 2 * dash):
        cv2.line(img, (x1, y), (x1, min(y + dash, y2)), colour, thick)
        cv2.line(img, (x2, y), (x2, min(y + dash, y2)), colour, thick)


def draw_difference(
    image: Image,
    diff: DetectionDiff,
    labels: Sequence[str] = (),
    names: tuple[str, str] = ("reference", "test"),
    *,
    copy: bool = True,
) -> Image:
    """Draw ``diff`` on a BGR frame: "only in <name>" boxes, the reference's dashed."""
    out = image.copy() if copy or not image.flags.writeable else image
    h, w = int(out.shape[0]), int(out.shape[1])
    thick, scale = auto_thickness(w, h), auto_font_scale(w, h)
    sides = (
        (diff.ref_only, REF_ONLY_COLOUR, names[0], True),
        (diff.test_only, TEST_ONLY_COLOUR, names[1], False),
    )
    for dets, colour, name, dashed in sides:
        for box, cid in zip(dets.boxes.tolist(), dets.class_ids.tolist(), strict=True):
            x1, y1 = max(0, round(box[0])), max(0, round(box[1]))
            x2, y2 = min(w - 1, round(box[2])), min(h - 1, round(box[3]))
            if x2 <= x1 or y2 <= y1:
                continue
            if dashed:
                _dashed_rectangle(out, (x1, y1), (x2, y2), colour, thick)
            else:
                cv2.rectangle(out, (x1, y1), (x2, y2), colour, thick)
            label = labels[cid] if 0 <= cid < len(labels) else str(cid)
            text_y = y1 - 4 if y1 > 20 else y2 + 16
            cv2.putText(
                out,
                f"{label}: only in {name}",
                (x1, text_y),
                cv2.FONT_HERSHEY_SIMPLEX,
                scale,
                colour,
                max(1, thick // 2),
                cv2.LINE_AA,
            )
    return out
