"""Class-aware non-maximum suppression over numpy arrays.

Classes are kept apart by shifting each class's boxes to its own region of the
plane (torchvision's batched_nms trick), so one single-class NMS pass serves all
classes. The pass is OpenCV's C++ NMS for up to OPENCV_MAX_BOXES candidates
(4-7x faster than numpy there), and a vectorised numpy loop above that: OpenCV
compares every candidate with every kept box in scalar code, which falls behind
numpy's one-vector-step-per-kept-box when thousands of boxes survive a low
threshold. Both keep a box whose IoU with every better box is at most ``iou``
and return the same indices (tests/unit/test_decoders.py checks it).
"""

from __future__ import annotations

from typing import Any, cast

import cv2
import numpy as np
import numpy.typing as npt
from framelens.core.geometry import Letterbox
from framelens.core.types import Detections

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
Idx = npt.NDArray[np.intp]

MAX_DETECTIONS = 300
"""Detections kept per frame after NMS."""

OPENCV_MAX_BOXES = 1000
"""Above this many candidates the numpy NMS is faster than OpenCV's (measured, 2 cores)."""

MAX_CANDIDATES = 30000
"""Boxes entering NMS at most (the best-scoring ones); bounds the cost of a bad threshold."""


def _nms_numpy(boxes: F64, scores: F32, iou: float, limit: int) -> Idx:
    """Greedy NMS: indices of kept boxes, best first. One vectorised step per kept box."""
    x1, y1, x2, y2 = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
    areas = (x2 - x1).clip(0) * (y2 - y1).clip(0)
    order = np.argsort(-scores, kind="stable")
    keep: list[int] = []
    while order.size and len(keep) < limit:
        i = int(order[0])
        keep.append(i)
        rest = order[1:]
        w = (np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest])).clip(0)
        h = (np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest])).clip(0)
        inter = w * h
        union = areas[i] + areas[rest] - inter
        overlap = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
        order = rest[overlap <= iou]
    return np.asarray(keep, dtype=np.intp)


def _nms_opencv(boxes: F64, scores: F32, iou: float, limit: int) -> Idx:
    xywh = boxes.copy()
    xywh[:, 2:] -= xywh[:, :2]
    # OpenCV drops scores <= score_threshold and insists on a threshold >= 0; callers
    # have applied their own threshold, and nms() sends only positive scores here.
    # (Its top_k caps the candidates before NMS, not the result, so cut afterwards.)
    # The stubs ask for sequences; arrays are accepted and spare a list conversion.
    keep = cv2.dnn.NMSBoxes(cast(Any, xywh), cast(Any, scores), 0.0, iou)
    return np.asarray(keep, dtype=np.intp).reshape(-1)[:limit]


_HAS_CV2_NMS = hasattr(cv2, "dnn") and hasattr(cv2.dnn, "NMSBoxes")


def nms(
    boxes: F32,
    scores: F32,
    class_ids: npt.NDArray[np.int32],
    iou: float,
    limit: int = MAX_DETECTIONS,
    *,
    use_opencv: bool | None = None,
) -> Idx:
    """Class-aware NMS. Returns indices of kept boxes, best score first, at most ``limit``.

    boxes: (N, 4) x1, y1, x2, y2. Boxes of different classes never suppress each other.
    """
    n = len(boxes)
    if n == 0:
        return np.zeros(0, dtype=np.intp)
    candidates: Idx | None = None
    if n > MAX_CANDIDATES:
        candidates = np.argpartition(-scores, MAX_CANDIDATES)[:MAX_CANDIDATES]
        boxes, scores, class_ids = boxes[candidates], scores[candidates], class_ids[candidates]
    # Shift each class by more than the extent of all boxes so classes cannot overlap;
    # float64 so that large shifts do not cost precision in the IoU.
    span = float(boxes.max()) - min(float(boxes.min()), 0.0) + 1.0
    shifted = boxes.astype(np.float64) + (class_ids.astype(np.float64) * span)[:, None]
    if use_opencv is None:
        use_opencv = _HAS_CV2_NMS and len(boxes) <= OPENCV_MAX_BOXES
    opencv = use_opencv and float(scores.min()) > 0.0
    keep = (_nms_opencv if opencv else _nms_numpy)(shifted, scores, iou, limit)
    return keep if candidates is None else candidates[keep]


def finish(
    boxes: F32,
    scores: F32,
    class_ids: npt.NDArray[np.int32],
    geometry: Letterbox,
    iou: float,
    landmarks: F32 | None = None,
    *,
    suppress: bool = True,
) -> Detections:
    """Candidates in network pixels -> Detections in source pixels, after NMS.

    boxes (N, 4) xyxy, landmarks (N, 5, 2), both in network input pixels. With
    ``suppress=False`` (end-to-end models that ran NMS in the graph) the best
    MAX_DETECTIONS are kept by score alone.
    """
    if suppress:
        keep = nms(boxes, scores, class_ids, iou)
    else:
        keep = np.argsort(-scores, kind="stable")[:MAX_DETECTIONS]
    return Detections(
        geometry.boxes_to_source(boxes[keep]),
        np.ascontiguousarray(scores[keep], dtype=np.float32),
        np.ascontiguousarray(class_ids[keep], dtype=np.int32),
        None if landmarks is None else geometry.points_to_source(landmarks[keep]),
    )
