"""Decoders for the YOLO output layouts (see framelens.core.models.spec.LAYOUTS).

Each decoder thresholds first and decodes only the rows that pass, so the cost
per frame follows the number of candidates, not the thousands of anchors.

Decoders take a batch: outputs with leading dim N (one engine call for N frames) and
the N frames' letterboxes, and return one Detections per frame, in order. Each frame is
decoded exactly as a batch of one would be.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt
from framelens.core.errors import ModelError
from framelens.core.geometry import Letterbox
from framelens.core.models.spec import ModelSpec, input_size_for
from framelens.core.stages.tasks.detect.candidates import Candidates, gather_host
from framelens.core.stages.tasks.detect.nms import finish, nms
from framelens.core.types import Detections

F32 = npt.NDArray[np.float32]
I32 = npt.NDArray[np.int32]
Outputs = Sequence[npt.NDArray[Any]]
Classes = frozenset[int] | None

YOLOX_STRIDES = (8, 16, 32)


def batch_size(geometries: Sequence[Letterbox], spec: ModelSpec) -> int:
    """The batch size N: one letterbox per frame, at least one."""
    if not geometries:
        raise ModelError(f"{spec.name}: a batch needs at least one frame's letterbox")
    return len(geometries)


def check_leading(out: npt.NDArray[Any], n: int, spec: ModelSpec) -> None:
    """ModelError unless the output holds a batch of ``n`` (its leading dim)."""
    if out.ndim < 1 or out.shape[0] != n:
        raise ModelError(
            f"{spec.name}: output is {list(out.shape)}, but the batch has {n} frame(s)"
        )


class BatchDecoder(ABC):
    """A decoder of one layout: splits a batch's outputs by frame and decodes each frame
    as a batch of one would be."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec

    def __call__(
        self,
        outputs: Outputs,
        geometries: Sequence[Letterbox],
        conf: float,
        iou: float,
        classes: frozenset[int] | None,
    ) -> list[Detections]:
        frames = self._frames(outputs, batch_size(geometries, self.spec))
        return [
            self._one(out, geometry, conf, iou, classes)
            for out, geometry in zip(frames, geometries, strict=True)
        ]

    @abstractmethod
    def _frames(self, outputs: Outputs, n: int) -> Iterable[Any]:
        """Each frame's outputs (ModelError when they do not hold ``n`` frames)."""

    @abstractmethod
    def _one(
        self, out: Any, geometry: Letterbox, conf: float, iou: float, classes: Classes
    ) -> Detections:
        """One frame's detections."""


def _first_output(outputs: Outputs, spec: ModelSpec, rank3_min_last: int, n: int) -> F32:
    """Output 0 of a batch: (N, rows, cols) float32 (fp16 engines return float16)."""
    out = outputs[0]
    if out.ndim != 3 or out.shape[2] < rank3_min_last:
        raise ModelError(
            f"{spec.name}: output is {list(out.shape)}, which the {spec.layout} layout cannot read"
        )
    check_leading(out, n, spec)
    return np.asarray(out, dtype=np.float32)


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


class Yolov5Decoder(BatchDecoder):
    """[B, N, 5+C]: cx, cy, w, h in network pixels, objectness, class scores.

    Decoded from the batch's candidates (candidates.py): the rows whose objectness
    beats conf, gathered on the host here or on the device by the GPU pipeline
    (``decode_candidates``); the class scores and boxes of all of them in one go,
    then NMS per frame.
    """

    GATE = 4  # objectness: score = obj * cls <= obj rules out most rows cheaply

    def __call__(
        self,
        outputs: Outputs,
        geometries: Sequence[Letterbox],
        conf: float,
        iou: float,
        classes: frozenset[int] | None,
    ) -> list[Detections]:
        batch = self._frames(outputs, batch_size(geometries, self.spec))
        return self.decode_candidates(
            gather_host(batch, self.GATE, conf), geometries, conf, iou, classes
        )

    def check_candidates(self, cols: int) -> None:
        """ModelError unless rows of ``cols`` columns fit this layout."""
        if cols < 6:
            raise ModelError(
                f"{self.spec.name}: output rows have {cols} columns, which the "
                f"{self.spec.layout} layout cannot read"
            )

    def decode_candidates(
        self,
        cands: Candidates,
        geometries: Sequence[Letterbox],
        conf: float,
        iou: float,
        classes: frozenset[int] | None,
    ) -> list[Detections]:
        """Each frame's detections from the batch's candidates."""
        if cands.frames != len(geometries):
            raise ModelError(
                f"{self.spec.name}: candidates of {cands.frames} frames for {len(geometries)}"
            )
        self.check_candidates(cands.values.shape[1] if cands.values.ndim == 2 else 0)
        rows = cands.values
        sel, scores, ids = _best_class(rows[:, 5:], rows[:, 4], conf, classes)
        cands = cands.select(sel)
        boxes = self._all_boxes(cands, geometries)
        bounds = cands.bounds()
        if any(g != geometries[0] for g in geometries):
            return [
                finish(boxes[a:b], scores[a:b], ids[a:b], geometry, iou)
                for geometry, (a, b) in zip(geometries, bounds, strict=True)
            ]
        # one letterbox for the batch: NMS per frame, the kept boxes mapped all at once
        # (elementwise, so each frame's are what finish() would map)
        keeps = [a + nms(boxes[a:b], scores[a:b], ids[a:b], iou) for a, b in bounds]
        kept = np.concatenate(keeps) if keeps else np.zeros(0, np.intp)
        mapped = geometries[0].boxes_to_source(boxes[kept])
        kept_scores = np.ascontiguousarray(scores[kept], dtype=np.float32)
        kept_ids = np.ascontiguousarray(ids[kept], dtype=np.int32)
        out, at = [], 0
        for keep in keeps:
            end = at + len(keep)
            out.append(Detections(mapped[at:end], kept_scores[at:end], kept_ids[at:end]))
            at = end
        return out

    def _all_boxes(self, cands: Candidates, geometries: Sequence[Letterbox]) -> F32:
        """xyxy boxes of every candidate: in one call when the frames share an input
        size (a batch does), else frame by frame."""
        sizes = {input_size_for(self.spec, g.src_width, g.src_height) for g in geometries}
        if len(sizes) == 1:
            return self._boxes(cands.values, cands.row, cands.rows, geometries[0])
        parts = [
            self._boxes(cands.values[a:b], cands.row[a:b], cands.rows, g)
            for g, (a, b) in zip(geometries, cands.bounds(), strict=True)
        ]
        return np.concatenate(parts) if parts else np.zeros((0, 4), np.float32)

    def _boxes(self, rows: F32, index: npt.NDArray[np.intp], n: int, geometry: Letterbox) -> F32:
        """xyxy boxes of the selected rows; index = their row numbers among all n."""
        return cxcywh_to_xyxy(rows[:, :4])

    def _frames(self, outputs: Outputs, n: int) -> F32:
        return _first_output(outputs, self.spec, 6, n)

    def _one(
        self, pred: F32, geometry: Letterbox, conf: float, iou: float, classes: Classes
    ) -> Detections:
        return self.__call__([pred[None]], [geometry], conf, iou, classes)[0]


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
    """[B, N, 5+C] like YOLOv5, but x, y, w, h are offsets on the stride 8/16/32 grids."""

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


class Yolov8Decoder(BatchDecoder):
    """[B, 4+C, N]: cx, cy, w, h in network pixels then class scores, no objectness.

    Extra rows after the class scores (mask coefficients of -seg exports) are ignored
    when the labels say how many classes there are.
    """

    def _frames(self, outputs: Outputs, n: int) -> F32:
        batch = outputs[0]
        if batch.ndim != 3 or batch.shape[1] < 5:
            raise ModelError(
                f"{self.spec.name}: output is {list(batch.shape)}, "
                "which the yolov8 layout cannot read"
            )
        check_leading(batch, n, self.spec)
        return np.asarray(batch, dtype=np.float32)  # (B, 4+C, N), not transposed: no copy

    def _one(
        self, pred: F32, geometry: Letterbox, conf: float, iou: float, classes: Classes
    ) -> Detections:
        n_cls = len(self.spec.labels) or pred.shape[0] - 4
        cls = pred[4 : 4 + n_cls]
        cand = np.flatnonzero(cls.max(axis=0) > conf)
        sel, scores, ids = _best_class(np.ascontiguousarray(cls[:, cand].T), None, conf, classes)
        boxes = cxcywh_to_xyxy(np.ascontiguousarray(pred[:4, cand[sel]].T))
        return finish(boxes, scores, ids, geometry, iou)


class End2EndDecoder(BatchDecoder):
    """[B, N, 6]: x1, y1, x2, y2, score, class id; NMS already ran inside the graph."""

    def _frames(self, outputs: Outputs, n: int) -> F32:
        return _first_output(outputs, self.spec, 6, n)

    def _one(
        self, pred: F32, geometry: Letterbox, conf: float, iou: float, classes: Classes
    ) -> Detections:
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
