"""Model outputs -> Detections in source pixels: one decoder per output layout."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from framelens.core.errors import ModelError
from framelens.core.geometry import Letterbox
from framelens.core.models.spec import ModelSpec
from framelens.core.stages.tasks.detect.nms import MAX_DETECTIONS, nms
from framelens.core.stages.tasks.detect.yolo import (
    End2EndDecoder,
    Outputs,
    Yolov5Decoder,
    Yolov8Decoder,
    YoloxDecoder,
)
from framelens.core.stages.tasks.detect.yunet import YunetDecoder
from framelens.core.types import Detections

__all__ = ["MAX_DETECTIONS", "Decoder", "make_decoder", "nms"]


class Decoder(Protocol):
    """Turns the engine outputs of a batch of N frames into one Detections per frame.

    outputs are in the model's output order, each with leading dim N (one engine call);
    geometries are the N frames' letterboxes, in batch order; rows scoring at most
    ``conf`` are dropped before NMS at ``iou``; ``classes`` keeps only those class ids
    (None keeps all). Returns N Detections in batch order, each what a batch of one
    would give. ModelError when the outputs do not hold N frames.
    """

    def __call__(
        self,
        outputs: Outputs,
        geometries: Sequence[Letterbox],
        conf: float,
        iou: float,
        classes: frozenset[int] | None,
    ) -> list[Detections]: ...


def graph_output_names(path: Path) -> list[str]:
    """Output names of an ONNX file, read without its weights' external data."""
    import onnx  # imported here: only YuNet needs it, and it is slow to import

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # onnx raises protobuf's DecodeError, OSError, ...
        raise ModelError(f"{path} is not a valid ONNX model: {exc}") from exc
    return [o.name for o in model.graph.output]


def make_decoder(spec: ModelSpec, output_names: Sequence[str] | None = None) -> Decoder:
    """The decoder for spec.layout. YuNet matches outputs by name: pass the engine's
    output_names, or they are read from spec.path."""
    if spec.layout == "yolox":
        return YoloxDecoder(spec)
    if spec.layout == "yolov5":
        return Yolov5Decoder(spec)
    if spec.layout == "yolov8":
        return Yolov8Decoder(spec)
    if spec.layout == "end2end":
        return End2EndDecoder(spec)
    if spec.layout == "yunet":
        names = graph_output_names(spec.path) if output_names is None else output_names
        return YunetDecoder(spec, names)
    raise ModelError(f"{spec.name}: unknown output layout {spec.layout!r}")
