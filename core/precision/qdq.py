"""ONNX Runtime as INT8 calibration uses it: ``quantize_static`` writing a Q/DQ graph
with FrameLens' settings (see int8.py), and CPU sessions that run the graphs."""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from framelens.core.errors import EngineError
from framelens.core.precision.int8_settings import CalibrationSettings, StageProgress


def onnxruntime_module() -> Any:
    try:
        import onnxruntime
    except ImportError as exc:
        raise EngineError(
            "INT8 calibration needs ONNX Runtime (pip install onnxruntime or onnxruntime-gpu)"
        ) from exc
    return onnxruntime


def cpu_session(model: onnx.ModelProto | Path, threads: int | None) -> Any:
    ort = onnxruntime_module()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads or 0
    opts.log_severity_level = 3
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    data = str(model) if isinstance(model, Path) else model.SerializeToString()
    return ort.InferenceSession(data, sess_options=opts, providers=["CPUExecutionProvider"])


def input_name_of(model: onnx.ModelProto) -> str:
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


def quantize_qdq(
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
                # biases stay float: TensorRT takes no Int32 DequantizeLinear (and fuses
                # the float bias into the INT8 convolution itself)
                "QuantizeBias": False,
            },
        )


def onnxruntime_version() -> str:
    return str(getattr(onnxruntime_module(), "__version__", "unknown"))
