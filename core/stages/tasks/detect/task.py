"""Detection as a task: boxes (and face landmarks) from any of the supported layouts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from framelens.core.errors import ConfigError
from framelens.core.geometry import Letterbox
from framelens.core.models.spec import ModelSpec
from framelens.core.stages.draw.opencv import OverlayStyle, annotate
from framelens.core.stages.preprocess.cpu import Preprocessor
from framelens.core.stages.sinks.atomic import StrPath
from framelens.core.stages.sinks.detections import DetectionsWriter
from framelens.core.stages.tasks.base import EngineOutputs, Task
from framelens.core.stages.tasks.detect.agreement import FrameMatch, match_frame
from framelens.core.stages.tasks.detect.candidates import Candidates
from framelens.core.stages.tasks.detect.decoders import make_decoder
from framelens.core.stages.tasks.detect.yolo import Yolov5Decoder
from framelens.core.types import Detections, Image

if TYPE_CHECKING:
    from framelens.core.stages.tasks.device import DeviceHalf, DeviceRig

MATCH_IOU = 0.5
"""The product's one agreement rule: a test box matches a reference box of its class at
IoU >= 0.5 (compare view, CLI compare, INT8 sensitivity search)."""


@dataclass(frozen=True)
class DetectParams:
    """What a user tunes while a detector runs."""

    conf: float = 0.25  # rows scoring at most this are dropped before NMS
    iou: float = 0.45  # NMS IoU threshold
    classes: frozenset[int] | None = None  # class ids kept; None keeps all


def class_ids(names: str | None, labels: Sequence[str]) -> frozenset[int] | None:
    """The ids of classes given by name (comma-separated); None for none given;
    ConfigError for a name the model does not know."""
    if not names:
        return None
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    index = {label: i for i, label in enumerate(labels)}
    unknown = [n for n in wanted if n not in index]
    if unknown:
        raise ConfigError(
            f"unknown class {', '.join(unknown)}; the model knows {', '.join(labels[:8])}"
            + (", ..." if len(labels) > 8 else "")
        )
    return frozenset(index[n] for n in wanted)


class DetectionTask(Task[Detections, DetectParams, FrameMatch, Letterbox]):
    """Object or face detection: YOLOX, YOLOv5, YOLOv8/11, end-to-end NMS exports, YuNet."""

    name: ClassVar[str] = "detect"
    has_thresholds: ClassVar[bool] = True
    finds_objects: ClassVar[bool] = True
    int8_measure: ClassVar[str] = "f1"

    def __init__(self, spec: ModelSpec, output_names: Sequence[str] | None = None) -> None:
        super().__init__(spec)
        self._decoder = make_decoder(spec, output_names)

    @classmethod
    def for_model(cls, spec: ModelSpec, output_names: Sequence[str] | None = None) -> DetectionTask:
        return cls(spec, output_names)

    @classmethod
    def params_from_options(cls, spec: ModelSpec, options: Mapping[str, Any]) -> DetectParams:
        if options.get("tile"):
            raise ConfigError(f"--tile applies to super-resolution models, not {spec.name}")
        classes = class_ids(options.get("classes"), spec.labels)
        return DetectParams(float(options["conf"]), float(options["iou"]), classes)

    @classmethod
    def describe(cls, spec: ModelSpec) -> str:
        size = f"{spec.input_size[1]}x{spec.input_size[0]}"
        n = len(spec.labels)
        return f"{spec.layout:<8} {size}  {n} class{'' if n == 1 else 'es'}"

    @classmethod
    def provenance(cls, spec: ModelSpec, params: DetectParams) -> dict[str, Any]:
        del spec
        return {
            "conf": params.conf,
            "iou": params.iou,
            "task_summary": f"conf {params.conf}; iou {params.iou}",
        }

    def device_half(self, rig: DeviceRig) -> DeviceHalf:
        """The batch path, with the candidate gather on the device for layouts that
        have a gate (detect/device.py)."""
        from framelens.core.stages.tasks.detect.device import DetectDevice

        return DetectDevice(rig, self)

    def preprocessor(self, src_w: int, src_h: int, params: DetectParams) -> Preprocessor:
        del params
        return Preprocessor(self.spec, src_w, src_h, self.input_geometry(src_w, src_h))

    @classmethod
    def default_params(cls) -> DetectParams:
        return DetectParams()

    def decode(
        self, outputs: EngineOutputs, geometries: Sequence[Letterbox], params: DetectParams
    ) -> list[Detections]:
        return self._decoder(list(outputs), geometries, params.conf, params.iou, params.classes)

    @property
    def candidate_gate(self) -> int | None:
        """The output column that bounds every score (YOLOv5/YOLOX objectness), for
        gathering candidates before decoding (candidates.py); None for other layouts."""
        return self._decoder.GATE if isinstance(self._decoder, Yolov5Decoder) else None

    def check_columns(self, cols: int) -> None:
        """ModelError unless output rows of ``cols`` columns fit the layout."""
        if isinstance(self._decoder, Yolov5Decoder):
            self._decoder.check_candidates(cols)

    def decode_candidates(
        self, cands: Candidates, geometries: Sequence[Letterbox], params: DetectParams
    ) -> list[Detections]:
        """``decode`` from the candidates gathered at ``candidate_gate`` (the GPU
        pipeline gathers them on the device): the same detections."""
        if not isinstance(self._decoder, Yolov5Decoder):
            raise TypeError(f"the {self.spec.layout} layout has no candidate gate")
        return self._decoder.decode_candidates(
            cands, geometries, params.conf, params.iou, params.classes
        )

    def empty(self) -> Detections:
        return Detections.empty(with_landmarks=self.spec.layout == "yunet")

    def annotate(
        self, image: Image, output: Detections, style: OverlayStyle, *, copy: bool = True
    ) -> Image:
        return annotate(image, output, self.spec.labels, style, copy=copy)

    def agree(self, reference: Detections, output: Detections) -> FrameMatch:
        return match_frame(reference, output, MATCH_IOU)

    def open_writer(self, path: StrPath, meta: Mapping[str, Any]) -> DetectionsWriter:
        return DetectionsWriter(path, meta, self.spec.labels)
