"""INT8: a Q/DQ graph calibrated on the user's frames, with a per-layer sensitivity analysis
and mixed precision.

Measured on YOLOX-Nano (see DESIGN.md): quantizing every layer destroys the model,
and so does quantizing the head's Sigmoid/Mul/Concat. What works here:

1. Only Conv nodes are quantized (op_types_to_quantize=["Conv"]), inputs only (no
   Q/DQ on conv outputs: TensorRT fuses conv+activation and quantizes the next
   conv's input, the layout NVIDIA's explicit-quantization guide recommends):
   symmetric int8 activations (zero point 0), symmetric per-channel int8 weights,
   MinMax calibration, QDQ format at opset >= 13.
2. Depthwise convolutions get per-channel range equalisation of their input
   (graph.equalize_depthwise), because one per-tensor scale over channels whose
   ranges differ by orders of magnitude is what breaks them.
3. Sensitivity: every Conv is quantized alone (calibrated once, ranges reused) and
   the noise-to-signal ratio of the model outputs is measured on a few frames.
4. Mixed precision: the most sensitive layers are moved back to float, one at a
   time, until detections agree with FP32 on the calibration frames at the target
   F1, while at least ``min_int8_mac_fraction`` of the convolution MACs stay INT8.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import math
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import onnx
from framelens.core.errors import Cancelled, ConfigError, EngineError
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
from framelens.core.precision.report import LayerSensitivity, SearchStep, SensitivityReport
from framelens.core.stages.tasks.detect.agreement import AgreementTotals
from framelens.core.stages.tasks.detect.decoders import make_decoder
from framelens.core.types import Detections

METHODS = ("minmax", "percentile", "entropy")
MIN_REFERENCE_DETECTIONS = 10
"""Fewer FP32 detections than this on the calibration frames make F1 meaningless; the
agreement threshold is then lowered (down to 0.05) until there are enough."""


@dataclass(frozen=True)
class CalibrationSettings:
    """How an INT8 variant is calibrated and how much float it may keep.

    frames: calibration frames spread over the source. sensitivity_frames: how many
    of them score each layer. agreement_target: detection F1 against FP32 on the
    calibration frames (at ``conf``, NMS at ``nms_iou``) that mixed precision aims
    for (when the MAC budget runs out first, the best agreement seen is kept).
    min_int8_mac_fraction: share of the convolutions' MACs that must stay INT8.
    max_search_steps: at most this many layers are tried in float. threads: ONNX
    Runtime threads for the calibration work (None = one per core); it does not
    change the result, so it is not part of the cache key.
    """

    frames: int = 50
    method: str = "minmax"
    agreement_target: float = 0.95
    conf: float = 0.3
    nms_iou: float = 0.45
    min_int8_mac_fraction: float = 0.9
    sensitivity_frames: int = 8
    max_search_steps: int = 24
    equalize_depthwise: bool = True
    threads: int | None = None

    def validate(self) -> None:
        if self.frames < 2:
            raise ConfigError(f"INT8 calibration needs at least 2 frames, got {self.frames}")
        if self.method not in METHODS:
            raise ConfigError(
                f"unknown calibration method {self.method!r} (known: {', '.join(METHODS)})"
            )
        if self.sensitivity_frames < 1:
            raise ConfigError("sensitivity_frames must be at least 1")
        for name in ("agreement_target", "conf", "nms_iou", "min_int8_mac_fraction"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"{name} must be between 0 and 1, got {value}")
        if self.max_search_steps < 0:
            raise ConfigError("max_search_steps must not be negative")
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"threads must be at least 1, got {self.threads}")

    def analysis_key(self) -> dict[str, Any]:
        """What the calibrated ranges and the sensitivity scores depend on."""
        return {
            "method": self.method,
            "sensitivity_frames": self.sensitivity_frames,
            "equalize_depthwise": self.equalize_depthwise,
        }

    def variant_key(self) -> dict[str, Any]:
        """What the final graph depends on (everything but threads)."""
        data = asdict(self)
        data.pop("threads")
        return data


Progress = Callable[[str, float], None]


class StageProgress:
    """Maps each stage's own 0..1 onto the overall 0..1, and checks for cancellation."""

    STAGES: ClassVar[dict[str, tuple[str, float, float]]] = {
        "frames": ("reading calibration frames", 0.0, 0.05),
        "calibrate": ("calibrating activation ranges", 0.05, 0.2),
        "sensitivity": ("measuring layer sensitivity", 0.2, 0.75),
        "search": ("choosing layers to keep in float", 0.75, 0.95),
        "quantize": ("writing the INT8 graph", 0.95, 1.0),
    }

    def __init__(self, on_progress: Progress | None, cancel: threading.Event | None) -> None:
        self.on_progress = on_progress
        self.cancel = cancel

    def check(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled("INT8 calibration cancelled")

    def __call__(self, stage: str, fraction: float, detail: str = "") -> None:
        self.check()
        if self.on_progress is None:
            return
        label, lo, hi = self.STAGES[stage]
        text = f"{label} ({detail})" if detail else label
        self.on_progress(text, lo + (hi - lo) * min(1.0, max(0.0, fraction)))


def _ort() -> Any:
    try:
        import onnxruntime
    except ImportError as exc:
        raise EngineError(
            "INT8 calibration needs ONNX Runtime (pip install onnxruntime or onnxruntime-gpu)"
        ) from exc
    return onnxruntime


def _session(model: onnx.ModelProto | Path, threads: int | None) -> Any:
    ort = _ort()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads or 0
    opts.log_severity_level = 3
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    data = str(model) if isinstance(model, Path) else model.SerializeToString()
    return ort.InferenceSession(data, sess_options=opts, providers=["CPUExecutionProvider"])


def _input_name(model: onnx.ModelProto) -> str:
    inits = {i.name for i in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in inits]
    if len(inputs) != 1:
        raise EngineError(f"INT8 calibration needs a model with one input, this has {len(inputs)}")
    return str(inputs[0])


@contextlib.contextmanager
def _quiet_quantizer() -> Iterator[None]:
    """onnxruntime.quantization warns through the root logger ("consider pre-processing"),
    which would also install a stderr handler on first use; a NullHandler prevents both."""
    root = logging.getLogger()
    handler: logging.Handler | None = None
    if not root.handlers:
        handler = logging.NullHandler()
        root.addHandler(handler)
    try:
        yield
    finally:
        if handler is not None:
            root.removeHandler(handler)


def _quantize(
    src: Path,
    dst: Path,
    ranges: Path,
    settings: CalibrationSettings,
    *,
    tensors: Sequence[npt.NDArray[np.float32]] = (),
    input_name: str = "",
    exclude: Sequence[str] = (),
    progress: StageProgress | None = None,
) -> None:
    """onnxruntime.quantization.quantize_static with FrameLens' settings.

    With ``tensors`` the activation ranges are calibrated and saved to ``ranges``;
    without, the ranges saved before are reused (calibrate once, quantize many).
    """
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    if "calibration_cache_path" not in inspect.signature(quantize_static).parameters:
        raise EngineError(
            "this onnxruntime is too old for INT8 calibration (quantize_static has no "
            "calibration_cache_path); upgrade onnxruntime"
        )
    reader: Any = None
    if tensors:
        total = len(tensors)

        class Reader(CalibrationDataReader):  # type: ignore[misc]
            def __init__(self) -> None:
                self.i = 0

            def get_next(self) -> dict[str, npt.NDArray[np.float32]] | None:
                if progress is not None:
                    done = min(self.i + 1, total)
                    progress("calibrate", 0.5 + 0.5 * self.i / total, f"frame {done} of {total}")
                if self.i >= total:
                    return None
                self.i += 1
                return {input_name: tensors[self.i - 1]}

        reader = Reader()
    method = {
        "minmax": CalibrationMethod.MinMax,
        "percentile": CalibrationMethod.Percentile,
        "entropy": CalibrationMethod.Entropy,
    }[settings.method]
    with _quiet_quantizer():
        quantize_static(
            str(src),
            str(dst),
            reader,
            quant_format=QuantFormat.QDQ,
            op_types_to_quantize=["Conv"],
            per_channel=True,
            reduce_range=False,
            activation_type=QuantType.QInt8,
            weight_type=QuantType.QInt8,
            nodes_to_exclude=list(exclude),
            calibrate_method=method,
            calibration_cache_path=str(ranges),
            extra_options={
                "ActivationSymmetric": True,
                "WeightSymmetric": True,
                "OpTypesToExcludeOutputQuantization": ["Conv"],
            },
        )


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
    session = _session(with_outputs(model, wanted), threads)
    names = [o.name for o in session.get_outputs()]
    input_name = _input_name(model)
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


class _Trials:
    """Runs the gated model for any set of INT8 convolutions."""

    def __init__(self, gated: GatedModel, spec: ModelSpec, threads: int | None) -> None:
        self.gated = gated
        self.session = _session(gated.model, threads)
        gate_names = set(gated.gates(frozenset()))
        self.input_name = next(
            str(i.name) for i in self.session.get_inputs() if i.name not in gate_names
        )
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.decode = make_decoder(spec, self.output_names)

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
            dets.append(self.decode(out, [geometry], conf, iou, None)[0])
        return dets


def agreement(ref: Sequence[Detections], test: Sequence[Detections]) -> AgreementTotals:
    totals = AgreementTotals()
    for r, t in zip(ref, test, strict=True):
        totals.add_frame(r, t)
    return totals


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
class _Prepared:
    model: onnx.ModelProto  # opset >= 13, all nodes named
    input_name: str
    convs: list[ConvInfo]

    @property
    def depthwise(self) -> list[ConvInfo]:
        return [c for c in self.convs if c.depthwise]


def prepare_float(spec: ModelSpec, frames: CalibrationFrames) -> _Prepared:
    model = upgrade_opset(onnx.load(str(spec.path)))
    name_unnamed_nodes(model)
    convs = conv_inventory(model, frames.tensors[0].shape)
    return _Prepared(model, _input_name(model), convs)


def analyse(
    prep: _Prepared,
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
    _quantize(
        work / "float.onnx",
        work / "all_int8.onnx",
        work / "ranges.json",
        settings,
        tensors=frames.tensors,
        input_name=prep.input_name,
        progress=progress,
    )
    trials = _Trials(
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


def _agreement_conf(
    trials: _Trials, frames: CalibrationFrames, settings: CalibrationSettings
) -> tuple[float, list[Detections]]:
    """The confidence used for agreement, and the FP32 detections at it (see
    MIN_REFERENCE_DETECTIONS)."""
    conf = settings.conf
    while True:
        ref = trials.detections(frozenset(), frames, conf, settings.nms_iou)
        if sum(len(d) for d in ref) >= MIN_REFERENCE_DETECTIONS or conf <= 0.05:
            return conf, ref
        conf = max(0.05, conf / 2)


def search_and_write(
    prep: _Prepared,
    spec: ModelSpec,
    frames: CalibrationFrames,
    settings: CalibrationSettings,
    analysis: Analysis,
    work: Path,
    out: Path,
    progress: StageProgress,
) -> SensitivityReport:
    """Mixed precision: move the most sensitive convs to float until the target is met,
    then write the final Q/DQ graph to ``out`` and verify it."""
    sensitivity = analysis.sensitivity
    dw = prep.depthwise if settings.equalize_depthwise else []
    equalized = equalize_depthwise(prep.model, analysis.absmax, [c.name for c in dw])
    if not (work / "all_int8.onnx").is_file():
        onnx.save(equalized, str(work / "float.onnx"))
        _quantize(work / "float.onnx", work / "all_int8.onnx", work / "ranges.json", settings)
    trials = _Trials(
        gated_model(equalized, onnx.load(str(work / "all_int8.onnx"))), spec, settings.threads
    )
    macs = {c.name: c.macs for c in prep.convs}
    total = sum(macs.values())
    quantizable = [c.name for c in prep.convs if c.name in set(trials.gated.convs)]
    conf, reference = _agreement_conf(trials, frames, settings)

    def evaluate(floats: list[str]) -> tuple[float, float]:
        int8 = frozenset(quantizable) - set(floats)
        dets = trials.detections(int8, frames, conf, settings.nms_iou)
        return agreement(reference, dets).f1, sum(macs[n] for n in int8) / total

    floats: list[str] = []
    budget = settings.max_search_steps
    f1, fraction = evaluate(floats)
    steps = [SearchStep(0, None, fraction, f1)]
    best_f1, best_floats = f1, list(floats)
    order = sorted(quantizable, key=lambda n: -sensitivity.get(n, 0.0))
    for name in order:
        if f1 >= settings.agreement_target or len(floats) >= budget:
            break
        if fraction - macs[name] / total < settings.min_int8_mac_fraction:
            continue  # over the MAC budget: try the next, smaller one
        progress("search", len(floats) / max(1, budget), f"{len(floats) + 1} float layers")
        floats.append(name)
        f1, fraction = evaluate(floats)
        steps.append(SearchStep(len(floats), name, fraction, f1))
        if f1 > best_f1:
            best_f1, best_floats = f1, list(floats)
    chosen = floats if f1 >= settings.agreement_target else best_floats
    progress("quantize", 0.0)

    # The final graph: equalisation only where the conv stays INT8 (in float it is moot).
    int8_dw = [c.name for c in dw if c.name not in chosen]
    final_float = equalize_depthwise(prep.model, analysis.absmax, int8_dw)
    onnx.save(final_float, str(work / "final_float.onnx"))
    _quantize(work / "final_float.onnx", out, work / "ranges.json", settings, exclude=chosen)
    progress("quantize", 0.7, "verifying")
    final = _session(out, settings.threads)
    final_name = final.get_inputs()[0].name
    decode = make_decoder(spec, [o.name for o in final.get_outputs()])
    dets = [
        decode(final.run(None, {final_name: t}), [g], conf, settings.nms_iou, None)[0]
        for t, g in zip(frames.tensors, frames.geometries, strict=True)
    ]
    final_f1 = agreement(reference, dets).f1
    chosen_set = set(chosen)
    dw_names = {c.name for c in dw}
    layers = [
        LayerSensitivity(
            name=c.name,
            macs=c.macs,
            sensitivity=sensitivity.get(c.name, math.nan),
            kept_float=c.name in chosen_set or c.name not in set(quantizable),
            depthwise=c.depthwise,
            equalized=c.name in dw_names and c.name not in chosen_set,
        )
        for c in prep.convs
    ]
    progress("quantize", 1.0)
    return SensitivityReport(
        layers=layers,
        agreement_target=settings.agreement_target,
        agreement_f1=final_f1,
        agreement_conf=conf,
        target_reached=final_f1 >= settings.agreement_target,
        min_int8_mac_fraction=settings.min_int8_mac_fraction,
        calibration_frames=len(frames),
        sensitivity_frames=min(settings.sensitivity_frames, len(frames)),
        method=settings.method,
        search=steps,
        reference_detections=sum(len(d) for d in reference),
    )


def onnxruntime_version() -> str:
    return str(getattr(_ort(), "__version__", "unknown"))
