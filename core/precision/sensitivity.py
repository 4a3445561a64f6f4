"""Per-layer sensitivity: the float model prepared for quantization, its activation
ranges calibrated, and every Conv quantized alone and scored by the noise-to-signal
ratio of the model outputs (steps 2 and 3 in int8.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from framelens.core.models.spec import ModelSpec
from framelens.core.precision.calibration import CalibrationFrames
from framelens.core.precision.graph import (
    ConvInfo,
    GatedModel,
    conv_inventory,
    equalize_depthwise,
    gated_model,
    name_unnamed_nodes,
    upgrade_opset,
    with_outputs,
)
from framelens.core.precision.int8_settings import CalibrationSettings, StageProgress
from framelens.core.precision.qdq import cpu_session, input_name_of, quantize_qdq
from framelens.core.precision.report import SensitivityReport
from framelens.core.stages.engines.tensorrt_layers import kept_in_float, plan_layer_precisions
from framelens.core.stages.tasks import AnyTask, DetectParams, task_for
from framelens.core.types import Detections


def channel_absmax(
    model: onnx.ModelProto,
    tensors_of_interest: Sequence[str],
    frames: CalibrationFrames,
    threads: int | None,
    progress: StageProgress,
) -> dict[str, npt.NDArray[np.float32]]:
    """Per-channel absolute maxima of ``tensors_of_interest`` (NCHW) over the frames."""
    wanted = list(dict.fromkeys(tensors_of_interest))
    if not wanted:
        return {}
    session = cpu_session(with_outputs(model, wanted), threads)
    names = [o.name for o in session.get_outputs()]
    input_name = input_name_of(model)
    amax: dict[str, npt.NDArray[np.float32]] = {}
    for n, tensor in enumerate(frames.tensors):
        progress("calibrate", 0.5 * n / len(frames), "channel ranges")
        for name, value in zip(names, session.run(None, {input_name: tensor}), strict=True):
            if name in wanted:
                m = np.abs(value).max(axis=tuple(i for i in range(value.ndim) if i != 1))
                amax[name] = np.maximum(amax.get(name, m), m).astype(np.float32)
    return amax


def output_nsr(
    test: Sequence[Sequence[npt.NDArray[Any]]], ref: Sequence[Sequence[npt.NDArray[Any]]]
) -> float:
    """Noise-to-signal ratio of model outputs, averaged over the outputs (report.py)."""
    ratios = []
    for k in range(len(ref[0])):
        noise = sum(
            float(np.sum((t[k].astype(np.float64) - r[k]) ** 2))
            for t, r in zip(test, ref, strict=True)
        )
        signal = sum(float(np.sum(np.square(r[k], dtype=np.float64))) for r in ref)
        ratios.append(noise / signal if signal > 0 else (0.0 if noise == 0 else math.inf))
    return float(np.mean(ratios))


class Trials:
    """Runs the gated model for any set of INT8 convolutions."""

    def __init__(self, gated: GatedModel, spec: ModelSpec, threads: int | None) -> None:
        self.gated = gated
        self.session = cpu_session(gated.model, threads)
        gate_names = set(gated.gates(frozenset()))
        self.input_name = next(
            str(i.name) for i in self.session.get_inputs() if i.name not in gate_names
        )
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.task: AnyTask = task_for(spec, self.output_names)  # decodes as pipelines do

    def outputs(
        self, int8: frozenset[str], tensors: Sequence[npt.NDArray[np.float32]]
    ) -> list[list[npt.NDArray[Any]]]:
        gates = self.gated.gates(int8)
        return [
            list(self.session.run(self.output_names, {self.input_name: t, **gates}))
            for t in tensors
        ]

    def detections(
        self, int8: frozenset[str], frames: CalibrationFrames, conf: float, iou: float
    ) -> list[Detections]:
        gates = self.gated.gates(int8)
        dets = []
        for tensor, geometry in zip(frames.tensors, frames.geometries, strict=True):
            out = self.session.run(self.output_names, {self.input_name: tensor, **gates})
            dets.append(self.task.decode(out, [geometry], DetectParams(conf, iou))[0])
        return dets


@dataclass
class Analysis:
    """Calibrated once per model, frames and analysis settings; cached (analysis entry)."""

    absmax: dict[str, npt.NDArray[np.float32]]
    sensitivity: dict[str, float]

    def save(self, folder: Path) -> None:
        np.savez(folder / "absmax.npz", *self.absmax.values())
        import json

        (folder / "sensitivity.json").write_text(
            json.dumps({"sensitivity": self.sensitivity, "absmax_keys": list(self.absmax)}),
            encoding="utf-8",
        )

    @classmethod
    def load(cls, folder: Path) -> Analysis:
        import json

        data = json.loads((folder / "sensitivity.json").read_text(encoding="utf-8"))
        with np.load(folder / "absmax.npz") as arrays:
            absmax = {k: arrays[f"arr_{i}"] for i, k in enumerate(data["absmax_keys"])}
        return cls(absmax, {k: float(v) for k, v in data["sensitivity"].items()})


@dataclass
class Prepared:
    model: onnx.ModelProto  # opset >= 13, all nodes named
    input_name: str
    convs: list[ConvInfo]

    @property
    def depthwise(self) -> list[ConvInfo]:
        return [c for c in self.convs if c.depthwise]


def prepare_float(spec: ModelSpec, frames: CalibrationFrames) -> Prepared:
    model = upgrade_opset(onnx.load(str(spec.path)))
    name_unnamed_nodes(model)
    convs = conv_inventory(model, frames.tensors[0].shape)
    return Prepared(model, input_name_of(model), convs)


def analyse(
    prep: Prepared,
    spec: ModelSpec,
    frames: CalibrationFrames,
    settings: CalibrationSettings,
    work: Path,
    progress: StageProgress,
) -> Analysis:
    """Calibrate the ranges (saved as work/ranges.json) and score every Conv alone."""
    dw = prep.depthwise if settings.equalize_depthwise else []
    absmax = channel_absmax(prep.model, [c.input for c in dw], frames, settings.threads, progress)
    equalized = equalize_depthwise(prep.model, absmax, [c.name for c in dw])
    onnx.save(equalized, str(work / "float.onnx"))
    quantize_qdq(
        work / "float.onnx",
        work / "all_int8.onnx",
        work / "ranges.json",
        settings,
        tensors=frames.tensors,
        input_name=prep.input_name,
        progress=progress,
    )
    trials = Trials(
        gated_model(equalized, onnx.load(str(work / "all_int8.onnx"))), spec, settings.threads
    )
    subset = frames.subset(settings.sensitivity_frames)
    reference = trials.outputs(frozenset(), subset.tensors)
    sensitivity: dict[str, float] = {}
    names = trials.gated.convs
    for i, name in enumerate(names):
        progress("sensitivity", i / len(names), f"{name}, {i + 1} of {len(names)}")
        sensitivity[name] = output_nsr(trials.outputs(frozenset({name}), subset.tensors), reference)
    progress("sensitivity", 1.0)
    return Analysis(absmax, sensitivity)


def tensorrt_kept_float(report: SensitivityReport, graph: str | Path) -> set[str]:
    """Convolutions the INT8 graph quantized that TensorRT ran in float, from the layer
    list of a plan of ``graph`` a GPU has run (empty when none has)."""
    precisions = plan_layer_precisions(graph)
    if not precisions:
        return set()
    return kept_in_float(
        precisions, [layer.name for layer in report.layers if not layer.kept_float]
    )
