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
    a = np.asarray(a, dtype=np.float64).T.copy()  # coordinates in rows
    b = np.asarray(b, dtype=np.float64).T.copy()
    # both coordinates at once, (2, len(a), len(b)): few numpy calls for few boxes
    wh = np.minimum(a[2:, :, None], b[2:, None, :]) - np.maximum(a[:2, :, None], b[:2, None, :])
    np.maximum(wh, 0.0, out=wh)
    inter = wh[0] * wh[1]
    size_a = a[2:] - a[:2]
    size_b = b[2:] - b[:2]
    union = (size_a[0] * size_a[1])[:, None] + size_b[0] * size_b[1] - inter
    np.maximum(union, 1e-12, out=union)  # two empty boxes: 0 / tiny = 0
    out: Boxes = inter / union
    return out


def xyxy_to_xyah(boxes: npt.NDArray[np.floating]) -> Boxes:
    """Centre x, centre y, aspect ratio (w / h) and height: ByteTrack's Kalman measurement."""
    b = np.asarray(boxes, dtype=np.float64)
    out: Boxes = np.empty((len(b), 4))
    out[:, :2] = (b[:, :2] + b[:, 2:]) * 0.5
    size = b[:, 2:] - b[:, :2]
    out[:, 3] = size[:, 1]
    out[:, 2] = size[:, 0] / np.maximum(size[:, 1], 1e-6)
    return out


def xyah_to_xyxy(state: npt.NDArray[np.floating]) -> Boxes:
    """The inverse of :func:`xyxy_to_xyah` (reads the first four columns)."""
    s = np.asarray(state, dtype=np.float64)
    half = np.empty((len(s), 2))
    half[:, 1] = s[:, 3] * 0.5
    half[:, 0] = s[:, 2] * half[:, 1]
    out: Boxes = np.empty((len(s), 4))
    np.subtract(s[:, :2], half, out=out[:, :2])
    np.add(s[:, :2], half, out=out[:, 2:])
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
    out = ((b[:, :2] + b[:, 2:4]) / 2).astype(np.float32, copy=False)  # float32 already
    return out
