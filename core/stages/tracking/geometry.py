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
    b = np.asarray(b, dtype=np.float64)
    ix1 = np.maximum(a[:, None, 0], b[None, :, 0])
    iy1 = np.maximum(a[:, None, 1], b[None, :, 1])
    ix2 = np.minimum(a[:, None, 2], b[None, :, 2])
    iy2 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(ix2 - ix1, 0.0, None) * np.clip(iy2 - iy1, 0.0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    out: Boxes = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
    return out


def xyxy_to_xyah(boxes: npt.NDArray[np.floating]) -> Boxes:
    """Centre x, centre y, aspect ratio (w / h) and height: ByteTrack's Kalman measurement."""
    b = np.asarray(boxes, dtype=np.float64)
    w = b[:, 2] - b[:, 0]
    h = b[:, 3] - b[:, 1]
    out: Boxes = np.stack(
        [(b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2, w / np.maximum(h, 1e-6), h], axis=1
    )
    return out


def xyah_to_xyxy(state: npt.NDArray[np.floating]) -> Boxes:
    """The inverse of :func:`xyxy_to_xyah` (reads the first four columns)."""
    s = np.asarray(state, dtype=np.float64)
    h = s[:, 3]
    w = s[:, 2] * h
    out: Boxes = np.stack(
        [s[:, 0] - w / 2, s[:, 1] - h / 2, s[:, 0] + w / 2, s[:, 1] + h / 2], axis=1
    )
    return out


def xyxy_to_xywh(boxes: npt.NDArray[np.floating]) -> Boxes:
    """Centre x, centre y, width, height: BoT-SORT's Kalman measurement."""
    b = np.asarray(boxes, dtype=np.float64)
    out: Boxes = np.stack(
        [(b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2, b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]],
        axis=1,
    )
    return out


def xywh_to_xyxy(state: npt.NDArray[np.floating]) -> Boxes:
    """The inverse of :func:`xyxy_to_xywh` (reads the first four columns)."""
    s = np.asarray(state, dtype=np.float64)
    out: Boxes = np.stack(
        [
            s[:, 0] - s[:, 2] / 2,
            s[:, 1] - s[:, 3] / 2,
            s[:, 0] + s[:, 2] / 2,
            s[:, 1] + s[:, 3] / 2,
        ],
        axis=1,
    )
    return out


def centres(boxes: npt.NDArray[np.floating]) -> npt.NDArray[np.float32]:
    """(N, 2) float32 centre points."""
    b = np.asarray(boxes, dtype=np.float32)
    out: npt.NDArray[np.float32] = np.stack(
        [(b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2], axis=1
    )
    return out
