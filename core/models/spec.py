"""What a model needs around it: input preparation, output layout, class labels."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from framelens.core.geometry import InputGeometry, letterbox_input

LAYOUTS = ("yolox", "yolov5", "yolov8", "end2end", "yunet", "superres")
"""Output layouts FrameLens decodes.

yolox   [1, N, 5+C] raw grid offsets (x, y, log w, log h), objectness and class scores
yolov5  [1, N, 5+C] boxes already in input pixels (cx, cy, w, h), objectness, class scores
yolov8  [1, 4+C, N] boxes in input pixels (cx, cy, w, h), class scores, no objectness
end2end [1, N, 6]   x1, y1, x2, y2, score, class id after NMS inside the graph
yunet   per-stride cls_/obj_/bbox_/kps_ outputs (faces with 5 landmarks)
superres [1, C, s*H, s*W] the upscaled image of a [1, C, H, W] input (C = ``channels``:
        1 = the Y channel of OpenCV's YCrCb, 3 = colour in ``color_order``), 0..1
"""

TASK_OF_LAYOUT = {
    "yolox": "detect",
    "yolov5": "detect",
    "yolov8": "detect",
    "end2end": "detect",
    "yunet": "faces",
    "superres": "superres",
}


@dataclass(frozen=True)
class ModelSpec:
    """A model file plus everything needed to feed it and read its output.

    input_size is (height, width) of the network input; for models with a
    dynamic input (YuNet) it is the size FrameLens feeds them; for super-resolution
    (any input size) the largest tile it is fed (larger frames are tiled).
    """

    name: str
    path: Path
    layout: str
    task: str
    input_size: tuple[int, int]
    color_order: str = "bgr"  # "bgr" | "rgb" (super-resolution with channels = 1: Y)
    input_scale: float = 1.0  # multiply 0..255 pixel values by this
    letterbox: str = "topleft"  # "topleft" | "center"
    pad_value: int = 114
    stride_multiple: int = 32  # dynamic inputs are padded to a multiple of this
    dynamic_input: bool = False
    labels: tuple[str, ...] = field(default_factory=tuple)
    scale: int = 1  # super-resolution: output size = scale x input size
    channels: int = 3  # super-resolution: 1 = Y channel of YCrCb, 3 = colour
    licence: str = ""
    origin: str = ""
    description: str = ""

    def label(self, class_id: int) -> str:
        if 0 <= class_id < len(self.labels):
            return self.labels[class_id]
        return str(class_id)


def input_size_for(spec: ModelSpec, src_w: int, src_h: int) -> tuple[int, int]:
    """Network (height, width) for a source: fixed, or the source padded up for dynamic models."""
    if not spec.dynamic_input:
        return spec.input_size
    m = spec.stride_multiple
    h, w = spec.input_size
    # Dynamic models (YuNet) keep the source aspect, bounded by input_size's longer side.
    scale = min(1.0, max(h, w) / max(src_w, src_h))
    tw, th = round(src_w * scale), round(src_h * scale)
    return (-(-th // m) * m, -(-tw // m) * m)


def input_geometry(spec: ModelSpec, src_w: int, src_h: int) -> InputGeometry:
    """The letterbox of a source frame into ``spec``'s input (detection's geometry)."""
    h, w = input_size_for(spec, src_w, src_h)
    return letterbox_input(src_w, src_h, h, w, spec.letterbox)
