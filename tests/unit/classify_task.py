"""A third task, written as a user would add one, to prove the task seam: a per-frame
image classifier, with nothing of it in the product.

Everything task-specific is here: the task (Task's interface: preprocessor, decode,
parameters, overlay, agreement, writer), its parameters and output, a tiny ONNX graph
(the frame's mean per colour channel as the logits: a "dominant colour" classifier)
and a video of known colours. The product learns of it by one registry call
(``registered(KIND, ClassifyTask)``); its device half is the standard batch half
(core/stages/tasks/device.py), which Task.device_half gives every task. Used by
tests/unit/test_task_seam.py (the CPU path) and tests/gpu/test_task_seam_gpu.py (the
device path).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import cv2
import numpy as np
import onnx
from framelens.core.geometry import Letterbox
from framelens.core.models.spec import ModelSpec
from framelens.core.stages.draw.style import OverlayStyle
from framelens.core.stages.preprocess.cpu import Preprocessor
from framelens.core.stages.sinks.atomic import StrPath
from framelens.core.stages.tasks.base import EngineOutputs, Task
from onnx import TensorProto, helper

KIND = "classify"
LABELS = ("blue", "green", "red")  # the model's channel order is BGR: logit c = mean of c
COLOURS = {"blue": (255, 0, 0), "green": (0, 255, 0), "red": (0, 0, 255)}  # BGR
SIDE = 32  # the model's input: 32 x 32


@dataclass(frozen=True)
class ClassifyParams:
    """``min_score``: frames whose best class scores less are left unclassified."""

    min_score: float = 0.0


@dataclass(frozen=True)
class Classified:
    """One frame's class: ``label`` (-1: none), its name and softmax score."""

    label: int
    name: str
    score: float

    def __len__(self) -> int:  # a classified frame counts as a frame with output
        return 0 if self.label < 0 else 1


class ClassifyTask(Task[Classified, ClassifyParams, bool, Letterbox]):
    """A classifier whose model outputs one row of logits per image."""

    name: ClassVar[str] = KIND

    def preprocessor(self, src_w: int, src_h: int, params: ClassifyParams) -> Preprocessor:
        del params
        return Preprocessor(self.spec, src_w, src_h, self.input_geometry(src_w, src_h))

    @classmethod
    def default_params(cls) -> ClassifyParams:
        return ClassifyParams()

    def decode(
        self, outputs: EngineOutputs, geometries: Sequence[Letterbox], params: ClassifyParams
    ) -> list[Classified]:
        logits = np.asarray(outputs[0], dtype=np.float64).reshape(len(geometries), -1)
        found = []
        for row in logits:
            p = np.exp(row - row.max())
            p /= p.sum()
            best = int(np.argmax(p))
            if p[best] < params.min_score:
                found.append(self.empty())
            else:
                found.append(Classified(best, self.spec.label(best), float(p[best])))
        return found

    def empty(self) -> Classified:
        return Classified(-1, "", 0.0)

    def annotate(
        self, image: Any, output: Classified, style: OverlayStyle, *, copy: bool = True
    ) -> Any:
        out = image.copy() if copy else image
        if output.label >= 0:
            text = f"{output.name} {output.score:.2f}"
            cv2.putText(out, text, (2, 12), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (255, 255, 255), 1)
        return out

    def agree(self, reference: Classified, output: Classified) -> bool:
        return reference.label == output.label

    def open_writer(self, path: StrPath, meta: Mapping[str, Any]) -> ClassesWriter:
        return ClassesWriter(Path(path), meta)


class ClassesWriter:
    """Each frame's class as JSON, written to a temporary file renamed on close."""

    def __init__(self, path: Path, meta: Mapping[str, Any]) -> None:
        self.path = path
        self.meta = dict(meta)
        self.frames: list[dict[str, Any]] = []

    def add(self, index: int, pts: float, output: Classified) -> None:
        self.frames.append(
            {"index": index, "pts": pts, "class": output.name, "score": output.score}
        )

    def close(self) -> Path:
        tmp = self.path.with_name(f".{self.path.name}.partial")
        tmp.write_text(json.dumps({"meta": self.meta, "frames": self.frames}, default=str))
        os.replace(tmp, self.path)
        return self.path

    def abort(self) -> None:
        self.frames = []


def classifier_model(path: Path) -> Path:
    """An ONNX classifier: (batch, 3, 32, 32) -> (batch, 3) logits, each the mean of one
    input channel (the input is 0..1: the spec's input_scale is 1/255)."""
    nodes = [
        helper.make_node("GlobalAveragePool", ["images"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["logits"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "framelens_classifier",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, SIDE, SIDE])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def classifier_spec(path: Path) -> ModelSpec:
    """The classifier's spec, as a catalogue entry or a sidecar would give it."""
    return ModelSpec(
        name="colour-classifier",
        path=classifier_model(path),
        layout=KIND,
        task=KIND,
        input_size=(SIDE, SIDE),
        color_order="bgr",
        input_scale=1.0 / 255.0,
        labels=LABELS,
    )


def colour_frames(count: int, side: int = 64) -> tuple[list[np.ndarray], list[str]]:
    """``count`` frames of one solid colour each, cycling blue, green, red, with a frame
    number in a corner (so no two frames are alike); and each frame's colour."""
    images, names = [], []
    for i in range(count):
        name = LABELS[i % 3]
        image = np.zeros((side, side, 3), np.uint8)
        image[:] = COLOURS[name]
        cv2.putText(image, str(i), (2, side - 4), cv2.FONT_HERSHEY_SIMPLEX, 0.3, (128,) * 3, 1)
        images.append(image)
        names.append(name)
    return images, names
