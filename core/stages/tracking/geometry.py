"""Box geometry the trackers share: IoU matrices and the box <-> state conversions.

Boxes are (N, 4) x1, y1, x2, y2 arrays (the detector's convention, core/types.py).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = [
    "Boxes",
    "centres",
    "iou_matrix",
    "xyah_to_xyxy",
    "xywh_to_xyxy",
    "xyxy_to_xyah",
    "xyxy_to_xywh",
]

Boxes = npt.NDArray[np.float64]
"""(N, 4) float64 boxes, x1, y1, x2, y2."""


def iou_matrix(a: npt.NDArray[np.floating], b: npt.NDArray[np.floating]) -> Boxes:
    """(len(a), len(b)) intersection over union of every pair of boxes (0 for empty boxes)."""
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)), dtype=np.float64)
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64).T
    iw = np.minimum(a[:, 2:3], b[2]) - np.maximum(a[:, 0:1], b[0])
    ih = np.minimum(a[:, 3:4], b[3]) - np.maximum(a[:, 1:2], b[1])
    np.maximum(iw, 0.0, out=iw)
    np.maximum(ih, 0.0, out=ih)
    inter = iw * ih
    area_a = (a[:, 2:3] - a[:, 0:1]) * (a[:, 3:4] - a[:, 1:2])
    area_b = (b[2] - b[0]) * (b[3] - b[1])
    union = area_a + area_b - inter
    np.maximum(union, 1e-12, out=union)  # two empty boxes: 0 / tiny = 0
    out: Boxes = inter / union
    return out


def xyxy_to_xyah(boxes: npt.NDArray[np.floating]) -> Boxes:
    """Centre x, centre y, aspect ratio (w / h) and height: ByteTrack's Kalman measurement."""
    b = np.asarray(boxes, dtype=np.float64)
    out: Boxes = np.empty((len(b), 4))
    out[:, 0] = (b[:, 0] + b[:, 2]) * 0.5
    out[:, 1] = (b[:, 1] + b[:, 3]) * 0.5
    out[:, 3] = b[:, 3] - b[:, 1]
    out[:, 2] = (b[:, 2] - b[:, 0]) / np.maximum(out[:, 3], 1e-6)
    return out


def xyah_to_xyxy(state: npt.NDArray[np.floating]) -> Boxes:
    """The inverse of :func:`xyxy_to_xyah` (reads the first four columns)."""
    s = np.asarray(state, dtype=np.float64)
    half_h = s[:, 3] * 0.5
    half_w = s[:, 2] * half_h
    out: Boxes = np.empty((len(s), 4))
    out[:, 0] = s[:, 0] - half_w
    out[:, 1] = s[:, 1] - half_h
    out[:, 2] = s[:, 0] + half_w
    out[:, 3] = s[:, 1] + half_h
    return out


def xyxy_to_xywh(boxes: npt.NDArray[np.floating]) -> Boxes:
    """Centre x, centre y, width, height: BoT-SORT's Kalman measurement."""
    b = np.asarray(boxes, dtype=np.float64)
    out: Boxes = np.empty((len(b), 4))
    out[:, :2] = (b[:, :2] + b[:, 2:4]) * 0.5
    out[:, 2:] = b[:, 2:4] - b[:, :2]
    return out


def xywh_to_xyxy(state: npt.NDArray[np.floating]) -> Boxes:
    """The inverse of :func:`xyxy_to_xywh` (reads the first four columns)."""
    s = np.asarray(state, dtype=np.float64)
    out: Boxes = np.empty((len(s), 4))
    out[:, :2] = s[:, :2] - s[:, 2:4] * 0.5
    out[:, 2:] = s[:, :2] + s[:, 2:4] * 0.5
    return out


def centres(boxes: npt.NDArray[np.floating]) -> npt.NDArray[np.float32]:
    """(N, 2) float32 centre points."""
    b = np.asarray(boxes, dtype=np.float32)
    out: npt.NDArray[np.float32] = np.stack(
        [(b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2], axis=1
    )
    return out
