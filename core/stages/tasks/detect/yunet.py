"""Decoder for YuNet face detectors (libfacedetection.train ONNX exports).

Per stride s in 8, 16, 32 the model emits cls_s and obj_s [B, HW, 1], bbox_s
[B, HW, 4] and kps_s [B, HW, 10] over an (H/s) x (W/s) grid, row-major. The
decode is OpenCV's cv2.FaceDetectorYN's: score = sqrt(cls * obj),
centre = (cell + offset) * s, size = exp(log size) * s, landmark = (cell + offset) * s.
Outputs are matched by name because exporters do not agree on their order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from framelens.core.errors import ModelError
from framelens.core.geometry import Letterbox
from framelens.core.models.spec import ModelSpec, input_size_for
from framelens.core.stages.tasks.detect.nms import finish
from framelens.core.stages.tasks.detect.yolo import (
    F32,
    BatchDecoder,
    Outputs,
    check_leading,
    class_mask,
    cxcywh_to_xyxy,
    stride_grid,
)
from framelens.core.types import Detections

YUNET_STRIDES = (8, 16, 32)
YUNET_HEADS = ("cls", "obj", "bbox", "kps")


def yunet_output_names() -> tuple[str, ...]:
    """The 12 output names a YuNet model must have."""
    return tuple(f"{head}_{s}" for head in YUNET_HEADS for s in YUNET_STRIDES)


class YunetDecoder(BatchDecoder):
    """Faces with five landmarks (eyes, nose tip, mouth corners); class id 0."""

    def __init__(self, spec: ModelSpec, output_names: Sequence[str]) -> None:
        super().__init__(spec)
        missing = [n for n in yunet_output_names() if n not in output_names]
        if missing:
            raise ModelError(
                f"{spec.name}: a YuNet model needs outputs {', '.join(yunet_output_names())}; "
                f"missing {', '.join(missing)}"
            )
        self._index = {name: i for i, name in enumerate(output_names)}

    def _head(self, outputs: Outputs, head: str, width: int) -> F32:
        """One frame's head concatenated over the strides: (N, width) float32."""
        parts = [outputs[self._index[f"{head}_{s}"]] for s in YUNET_STRIDES]
        return np.concatenate([np.asarray(p, dtype=np.float32).reshape(-1, width) for p in parts])

    def _frames(self, outputs: Outputs, n: int) -> list[Outputs]:
        for name in yunet_output_names():
            check_leading(outputs[self._index[name]], n, self.spec)
        return [[out[i] for out in outputs] for i in range(n)]

    def _one(
        self,
        outputs: Outputs,
        geometry: Letterbox,
        conf: float,
        iou: float,
        classes: frozenset[int] | None,
    ) -> Detections:
        """One frame: ``outputs`` without their batch dim."""
        h, w = input_size_for(self.spec, geometry.src_width, geometry.src_height)
        cells, cell_strides = stride_grid(h, w, YUNET_STRIDES)
        strides = cell_strides[:, None]
        cls = self._head(outputs, "cls", 1)[:, 0]
        obj = self._head(outputs, "obj", 1)[:, 0]
        if len(cls) != len(cells):
            raise ModelError(
                f"{self.spec.name}: YuNet outputs have {len(cls)} cells, but a {w}x{h} input "
                f"has {len(cells)} over strides {YUNET_STRIDES}"
            )
        scores = np.sqrt(np.clip(cls, 0.0, 1.0) * np.clip(obj, 0.0, 1.0))
        keep = scores > conf
        ids = np.zeros(len(scores), dtype=np.int32)
        mask = class_mask(ids, classes)
        if mask is not None:
            keep &= mask
        rows = np.flatnonzero(keep)
        cell, s = cells[rows], strides[rows]
        bbox = self._head(outputs, "bbox", 4)[rows]
        centre = (cell + bbox[:, 0:2]) * s
        size = np.exp(bbox[:, 2:4]) * s
        boxes = cxcywh_to_xyxy(np.concatenate([centre, size], axis=1))
        kps = self._head(outputs, "kps", 10)[rows].reshape(-1, 5, 2)
        landmarks = ((kps + cell[:, None, :]) * s[:, None, :]).astype(np.float32)
        return finish(boxes, scores[rows], ids[rows], geometry, iou, landmarks)
