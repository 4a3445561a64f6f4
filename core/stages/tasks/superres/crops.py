"""Detections enlarged: the boxes a detector found, cut out of the frame and upscaled by a
super-resolution model (the GUI's "Enlarge detections" strip).

``HostUpscaler`` is the super-resolution task's host path on its own: a BGR image in,
the upscaled BGR image out, through the task's preprocessing, an engine and its merge;
core/api.py builds it from settings (the engine comes from the pipeline layer's
``create_engine``). ``CropUpscaler`` picks the boxes (best scores first, at most
``max_crops``), pads each by a margin, and upscales the crops one by one.

Crops differ in size from frame to frame. On the CPU that costs nothing; on CUDA every
new input shape makes cuDNN search its algorithms again (tens of milliseconds), so there
each crop is padded (edge pixels repeated) to the next of a few bucket sizes per side
before it goes in, and the output is cut back to scale x the crop: a handful of shapes
in all, each searched once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt
from framelens.core.closing import Closing
from framelens.core.errors import ConfigError
from framelens.core.stages.engines.base import Engine
from framelens.core.stages.tasks.superres.color import SrPreprocessor
from framelens.core.stages.tasks.superres.output import SuperResParams
from framelens.core.stages.tasks.superres.task import SuperResTask
from framelens.core.types import Image

__all__ = [
    "BUCKETS",
    "DEFAULT_MARGIN",
    "MAX_CROPS",
    "CropUpscaler",
    "EnlargedCrop",
    "HostUpscaler",
    "bucket_side",
    "crop_boxes",
]

DEFAULT_MARGIN = 0.15
"""Each side of a box grows by this fraction of the box's size (context around it)."""
MAX_CROPS = 8
MIN_SIDE = 8
"""Crops smaller than this (source pixels, after the margin) are not worth enlarging."""
BUCKETS = (64, 128, 256, 512)
"""Input sides crops are padded to on CUDA; larger crops go to a multiple of the last."""

Box = tuple[int, int, int, int]


@dataclass(frozen=True, slots=True)
class EnlargedCrop:
    """One detection enlarged: ``image`` is ``box`` (x1, y1, x2, y2 in source pixels,
    margin included, x2 and y2 exclusive) upscaled by the model's scale."""

    image: Image
    box: Box
    score: float
    class_id: int


def host_upscaler(task: object, engine: Engine, device: str = "cpu") -> HostUpscaler:
    """``task`` (a pipeline's) with ``engine`` as a HostUpscaler; ConfigError when the
    task is not super-resolution."""
    if not isinstance(task, SuperResTask):
        name = getattr(getattr(task, "spec", None), "name", "the model")
        raise ConfigError(f"{name} is not a super-resolution model")
    return HostUpscaler(task, engine, device)


class HostUpscaler(Closing):
    """A BGR image -> the model's upscaled BGR image, exactly scale x its size.
    Preprocessors are kept per input size."""

    def __init__(self, task: SuperResTask, engine: Engine, device: str = "cpu") -> None:
        self.task = task
        self.engine = engine
        self.device = device  # where ``engine`` runs: "cpu" or "cuda:N"
        self._params = SuperResParams()
        self._pre: dict[tuple[int, int], SrPreprocessor] = {}

    @property
    def scale(self) -> int:
        return self.task.scale

    def __call__(self, image: Image) -> Image:
        h, w = image.shape[:2]
        pre = self._pre.get((w, h))
        if pre is None:
            if len(self._pre) >= 32:  # sizes come and go (crops): keep the cache small
                self._pre.clear()
            pre = self._pre[(w, h)] = self.task.preprocessor(w, h, self._params)
        tensor = pre(np.ascontiguousarray(image))
        outputs = self.engine.infer(tensor)
        out = self.task.decode(outputs, [pre.geometry], self._params)[0].image
        assert out is not None, "decode returns the upscaled image"
        return out

    def close(self) -> None:
        self.engine.close()


def bucket_side(side: int, buckets: Sequence[int]) -> int:
    """The smallest bucket holding ``side``; past the last, a multiple of the last."""
    for b in buckets:
        if side <= b:
            return b
    last = buckets[-1]
    return -(-side // last) * last


def crop_boxes(
    boxes: npt.NDArray[np.float32],
    width: int,
    height: int,
    scale: int,
    margin: float = DEFAULT_MARGIN,
) -> list[Box | None]:
    """Each box (x1, y1, x2, y2 floats) grown by ``margin`` of its size on every side,
    inside the ``width`` x ``height`` frame, its size cut to a multiple of ``scale``
    (so the enlarged crop is exactly scale x the crop); None for one too small."""
    out: list[Box | None] = []
    for x1, y1, x2, y2 in np.asarray(boxes, dtype=np.float64).reshape(-1, 4):
        mx, my = (x2 - x1) * margin, (y2 - y1) * margin
        a = max(0, int(np.floor(x1 - mx)))
        b = max(0, int(np.floor(y1 - my)))
        c = min(width, int(np.ceil(x2 + mx)))
        d = min(height, int(np.ceil(y2 + my)))
        w, h = c - a, d - b
        w, h = w - w % scale, h - h % scale
        out.append((a, b, a + w, b + h) if min(w, h) >= max(MIN_SIDE, scale) else None)
    return out


class CropUpscaler(Closing):
    """Detections of a frame, enlarged by a super-resolution model.

    ``buckets``: input sides crops are padded to (``BUCKETS`` on CUDA, none on the CPU
    when None; an empty sequence turns padding off).
    """

    def __init__(
        self,
        upscaler: HostUpscaler,
        *,
        margin: float = DEFAULT_MARGIN,
        max_crops: int = MAX_CROPS,
        buckets: Sequence[int] | None = None,
    ) -> None:
        self.upscaler = upscaler
        self.margin = margin
        self.max_crops = max_crops
        if buckets is None:
            buckets = BUCKETS if upscaler.device.startswith("cuda") else ()
        self.buckets = tuple(buckets)

    @property
    def scale(self) -> int:
        return self.upscaler.scale

    def upscale(
        self,
        image: Image,
        boxes: npt.NDArray[np.float32],
        scores: npt.NDArray[np.float32] | None = None,
        class_ids: npt.NDArray[np.int32] | None = None,
    ) -> list[EnlargedCrop]:
        """The best ``max_crops`` boxes by score (all scores equal when None), each
        padded by the margin and upscaled; in order of score, best first."""
        n = len(boxes)
        scores = np.ones(n, np.float32) if scores is None else np.asarray(scores)
        class_ids = np.zeros(n, np.int32) if class_ids is None else np.asarray(class_ids)
        h, w = image.shape[:2]
        order = np.argsort(-scores, kind="stable")
        crops = crop_boxes(np.asarray(boxes)[order], w, h, self.scale, self.margin)
        out: list[EnlargedCrop] = []
        for i, box in zip(order, crops, strict=True):
            if box is None:
                continue
            if len(out) == self.max_crops:
                break
            out.append(
                EnlargedCrop(self._enlarge(image, box), box, float(scores[i]), int(class_ids[i]))
            )
        return out

    def _enlarge(self, image: Image, box: Box) -> Image:
        x1, y1, x2, y2 = box
        crop = image[y1:y2, x1:x2]
        if not self.buckets:
            return self.upscaler(crop)
        h, w = crop.shape[:2]
        bw, bh = bucket_side(w, self.buckets), bucket_side(h, self.buckets)
        padded = cv2.copyMakeBorder(crop, 0, bh - h, 0, bw - w, cv2.BORDER_REPLICATE)
        s = self.scale
        return np.ascontiguousarray(self.upscaler(np.asarray(padded))[: h * s, : w * s])

    def close(self) -> None:
        self.upscaler.close()
