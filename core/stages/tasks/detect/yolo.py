"""Decoders for the YOLO output layouts (see framelens.core.models.spec.LAYOUTS).

Each decoder thresholds first and decodes only the rows that pass, so the cost
per frame follows the number of candidates, not the thousands of anchors.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt
from framelens.core.errors import ModelError
from framelens.core.geometry import Letterbox
from framelens.core.models.spec import ModelSpec, input_size_for
from framelens.core.stages.tasks.detect.nms import finish
from framelens.core.types import Detections

F32 = npt.NDArray[np.float32]
I32 = npt.NDArray[np.int32]
Outputs = Sequence[npt.NDArray[Any]]

YOLOX_STRIDES = (8, 16, 32)


def _first_output(outputs: Outputs, spec: ModelSpec, rank3_min_last: int) -> F32:
    """Output 0 without its batch dim, as float32 (fp16 engines return float16)."""
    out = outputs[0]
    if out.ndim != 3 or out.shape[0] != 1 or out.shape[2] < rank3_min_last:
        raise ModelError(
            f"{spec.name}: output is {list(out.shape)}, which the {spec.layout} layout cannot read"
        )
    return np.asarray(out[0], dtype=np.float32)


def cxcywh_to_xyxy(b: F32) -> F32:
    half = b[:, 2:4] * 0.5
    return np.concatenate([b[:, 0:2] - half, b[:, 0:2] + half], axis=1)


def class_mask(class_ids: I32, classes: frozenset[int] | None) -> npt.NDArray[np.bool_] | None:
    """Rows to keep for a class filter; None when there is no filter."""
    if classes is None:
        return None
    return np.isin(class_ids, np.fromiter(classes, dtype=np.int32, count=len(classes)))


def _best_class(
    cls: F32, gate: F32 | None, conf: float, classes: frozenset[int] | None
) -> tuple[npt.NDArray[np.intp], F32, I32]:
    """Rows whose best class score (times the gate, e.g. objectness) beats conf.

    cls is (M, C). The best class is chosen over all classes and the class filter
    applied after (as Ultralytics does), so a filtered result is a subset of the
    unfiltered one.
    """
    ids = cls.argmax(axis=1).astype(np.int32)
    scores = np.take_along_axis(cls, ids[:, None].astype(np.intp), axis=1)[:, 0]
    if gate is not None:
        scores = scores * gate
    keep = scores > conf
    mask = class_mask(ids, classes)
    if mask is not None:
        keep &= mask
    rows = np.flatnonzero(keep)
    return rows, scores[rows], ids[rows]


class Yolov5Decoder:
    """[1, N, 5+C]: cx, cy, w, h in network pixels, objectness, class scores."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec

    def _boxes(self, rows: F32, index: npt.NDArray[np.intp], n: int, geometry: Letterbox) -> F32:
        """xyxy boxes of the selected rows; index = their row numbers among all n."""
        return cxcywh_to_xyxy(rows[:, :4])

    def __call__(
        self,
        outputs: Outputs,
        geometry: Letterbox,
        conf: float,
        iou: float,
        classes: frozenset[int] | None,
    ) -> Detections:
        pred = _first_output(outputs, self.spec, 6)
        # score = obj * cls <= obj, so objectness alone rules out most rows cheaply.
        cand = np.flatnonzero(pred[:, 4] > conf)
        rows = pred[cand]
        sel, scores, ids = _best_class(rows[:, 5:], rows[:, 4], conf, classes)
        boxes = self._boxes(rows[sel], cand[sel], len(pred), geometry)
        return finish(boxes, scores, ids, geometry, iou)


@lru_cache(maxsize=16)
def stride_grid(height: int, width: int, strides: tuple[int, ...]) -> tuple[F32, F32]:
    """(N, 2) cell x, y and (N,) stride of every cell, row-major per stride, in order.

    YOLOX and YuNet both lay their outputs out this way. Cached per input size;
    the arrays are shared, so callers must not write to them.
    """
    cells, cell_strides = [], []
    for s in strides:
        ys, xs = np.mgrid[0 : height // s, 0 : width // s]
        cells.append(np.stack([xs.ravel(), ys.ravel()], axis=1))
        cell_strides.append(np.full(xs.size, s))
    return (
        np.concatenate(cells).astype(np.float32),
        np.concatenate(cell_strides).astype(np.float32),
    )


class YoloxDecoder(Yolov5Decoder):
    """[1, N, 5+C] like YOLOv5, but x, y, w, h are offsets on the stride 8/16/32 grids."""

    def _boxes(self, rows: F32, index: npt.NDArray[np.intp], n: int, geometry: Letterbox) -> F32:
        h, w = input_size_for(self.spec, geometry.src_width, geometry.src_height)
        cells, strides = stride_grid(h, w, YOLOX_STRIDES)
        if len(cells) != n:
            raise ModelError(
                f"{self.spec.name}: YOLOX output has {n} rows, but a {w}x{h} input "
                f"has {len(cells)} grid cells over strides {YOLOX_STRIDES}"
            )
        s = strides[index, None]
        xy = (rows[:, 0:2] + cells[index]) * s
        wh = np.exp(rows[:, 2:4]) * s
        return cxcywh_to_xyxy(np.concatenate([xy, wh], axis=1))


class Yolov8Decoder:
    """[1, 4+C, N]: cx, cy, w, h in network pixels then class scores, no objectness.

    Extra rows after the class scores (mask coefficients of -seg exports) are ignored
    when the labels say how many classes there are.
    """

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec

    def __call__(
        self,
        outputs: Outputs,
        geometry: Letterbox,
        conf: float,
        iou: float,
        classes: frozenset[int] | None,
    ) -> Detections:
        pred = outputs[0]
        if pred.ndim != 3 or pred.shape[0] != 1 or pred.shape[1] < 5:
            raise ModelError(
                f"{self.spec.name}: output is {list(pred.shape)}, "
                "which the yolov8 layout cannot read"
            )
        pred = np.asarray(pred[0], dtype=np.float32)  # (4+C, N), not transposed: no copy
        n_cls = len(self.spec.labels) or pred.shape[0] - 4
        cls = pred[4 : 4 + n_cls]
        cand = np.flatnonzero(cls.max(axis=0) > conf)
        sel, scores, ids = _best_class(np.ascontiguousarray(cls[:, cand].T), None, conf, classes)
        boxes = cxcywh_to_xyxy(np.ascontiguousarray(pred[:4, cand[sel]].T))
        return finish(boxes, scores, ids, geometry, iou)


class End2EndDecoder:
    """[1, N, 6]: x1, y1, x2, y2, score, class id; NMS already ran inside the graph."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec

    def __call__(
        self,
        outputs: Outputs,
        geometry: Letterbox,
        conf: float,
        iou: float,
        classes: frozenset[int] | None,
    ) -> Detections:
        pred = _first_output(outputs, self.spec, 6)
        keep = pred[:, 4] > conf
        ids = np.rint(pred[:, 5]).astype(np.int32)
        mask = class_mask(ids, classes)
        if mask is not None:
            keep &= mask
        rows = np.flatnonzero(keep)
        return finish(
            np.ascontiguousarray(pred[rows, :4]),
            pred[rows, 4],
            ids[rows],
            geometry,
            iou,
            suppress=False,
        )
