"""ONNX Runtime backend: CPU, or CUDA when onnxruntime-gpu provides it."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from framelens.core.errors import EngineError, GpuError, ModelError
from framelens.core.gpu.graphs import library_run
from framelens.core.interrupt import Interrupted, while_interruptible
from framelens.core.stages.engines.base import Engine

_CUDA = re.compile(r"^cuda(?::(\d+))?$")
_ORT_PREFIX = re.compile(r"^\[ONNXRuntimeError\]\s*:\s*\d+\s*:\s*\w+\s*:\s*")


def ort_message(exc: BaseException) -> str:
    """ONNX Runtime's exception text as one line, without its error-code prefix."""
    text = _ORT_PREFIX.sub("", str(exc).strip())
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


_ORT_CODE = re.compile(r"^\[ONNXRuntimeError\]\s*:\s*(\d+)\s*:")
_INPUT_FAULTS = {2, 9, 10}  # INVALID_ARGUMENT, NOT_IMPLEMENTED, INVALID_GRAPH


def run_failure(exc: BaseException, device: str) -> EngineError:
    """ONNX Runtime's error from a run as ours. On CUDA a failure is the GPU's (out of
    memory, a driver or kernel error: GpuError, so a run goes on on the CPU) unless ORT
    says it is the input's or the graph's (a wrong shape or type: EngineError, as on
    the CPU, where it would fail the same)."""
    text = f"inference failed: {ort_message(exc)}"
    code = _ORT_CODE.match(str(exc).strip())
    if device == "cpu" or (code is not None and int(code.group(1)) in _INPUT_FAULTS):
        return EngineError(text)
    return GpuError(text)


def providers_for(
    device: str, available: list[str], cuda_options: Mapping[str, str] | None = None
) -> tuple[str, list[Any]]:
    """(normalised device, ORT providers list) for "cpu" or "cuda[:N]".

    ``cuda_options`` are extra CUDA provider options (e.g. ``user_compute_stream``).
    """
    dev = device.strip().lower()
    if dev == "cpu":
        return "cpu", ["CPUExecutionProvider"]
    m = _CUDA.match(dev)
    if not m:
        raise EngineError(f"unknown device {device!r}: use cpu, cuda or cuda:N")
    if "CUDAExecutionProvider" not in available:
        raise EngineError(
            "CUDA was requested but ONNX Runtime has no CUDA provider "
            f"(installed: {', '.join(available) or 'none'})"
        )
    index = int(m.group(1) or 0)
    # CPU stays in the list so that ops CUDA lacks still run, as ORT intends.
    # FP32 means FP32: without use_tf32=0 cuDNN computes fp32 convolutions in TF32 on
    # Ampere and later, and on the H200 that moved scores by ~1e-3, enough to flip
    # detections near the threshold against the CPU. Precision modes are the graph's.
    options = {"device_id": index, "use_tf32": "0", **(cuda_options or {})}
    cuda = ("CUDAExecutionProvider", options)
    return f"cuda:{index}", [cuda, "CPUExecutionProvider"]


class OnnxRuntimeEngine(Engine):
    """An ort.InferenceSession for one model file.

    threads: intra-op threads (None = ORT's default, one per physical core).
    spinning=False stops idle worker threads from busy-waiting between runs, which
    otherwise keeps cores at 100% and starves a GUI or decoder thread.
    cuda_options: extra CUDA provider options, for device "cuda[:N]" only.
    session_config: more session configuration entries (``add_session_config_entry``).
    """

    backend = "onnxruntime"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        device: str = "cpu",
        threads: int | None = None,
        spinning: bool = True,
        cuda_options: Mapping[str, str] | None = None,
        session_config: Mapping[str, str] | None = None,
    ) -> None:
        try:
            import onnxruntime as ort  # optional dependency: cpu or gpu wheel, see pyproject
        except ImportError as exc:
            raise EngineError(
                "ONNX Runtime is not installed (pip install onnxruntime, or onnxruntime-gpu)"
            ) from exc

        self.path = Path(path)
        if not self.path.is_file():
            raise ModelError(f"model file {self.path} does not exist")
        if threads is not None and threads < 1:
            raise EngineError(f"threads must be at least 1, got {threads}")
        self.device, providers = providers_for(
            device, list(ort.get_available_providers()), cuda_options
        )

        self._run_options = ort.RunOptions
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.intra_op_num_threads = threads or 0  # 0 = ORT picks
        opts.log_severity_level = 3  # errors only: warnings would spam the console
        if not spinning:
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
            opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
        for key, value in (session_config or {}).items():
            opts.add_session_config_entry(key, value)
        try:
            try:
                self._session: Any = ort.InferenceSession(
                    str(self.path), sess_options=opts, providers=providers
                )
            except Exception as exc:
                if "use_tf32" not in str(exc):
                    raise
                # an ONNX Runtime that predates the option: its default is full fp32
                for _name, cuda_opts in providers[:1]:
                    cuda_opts.pop("use_tf32", None)
                self._session = ort.InferenceSession(
                    str(self.path), sess_options=opts, providers=providers
                )
        except Exception as exc:  # ORT raises its own pybind11 exception types
            message = ort_message(exc)
            if "INVALID_PROTOBUF" in str(exc) or "Protobuf parsing failed" in message:
                raise ModelError(f"{self.path} is not a valid ONNX model: {message}") from exc
            raise ModelError(f"ONNX Runtime cannot load {self.path}: {message}") from exc

        self.providers = list(self._session.get_providers())
        if self.device != "cpu" and "CUDAExecutionProvider" not in self.providers:
            # ORT falls back to CPU silently when the CUDA libraries fail to load.
            self.close()
            raise EngineError(
                "ONNX Runtime could not start its CUDA provider (CUDA or cuDNN libraries "
                "missing or mismatched); use --device cpu"
            )
        inputs = self._session.get_inputs()
        if len(inputs) != 1:
            names = ", ".join(i.name for i in inputs)
            self.close()
            raise ModelError(f"{self.path.name} has {len(inputs)} inputs ({names}); need one")
        self.input_name = str(inputs[0].name)
        self.input_shape = tuple(d if isinstance(d, int) else None for d in inputs[0].shape)
        self.output_names = [str(o.name) for o in self._session.get_outputs()]

    @property
    def cuda_provider_options(self) -> dict[str, str]:
        """The CUDA provider's options as ONNX Runtime applied them (empty on the CPU)."""
        options = self._session.get_provider_options().get("CUDAExecutionProvider", {})
        return {str(k): str(v) for k, v in options.items()}

    def infer(self, tensor: npt.NDArray[np.float32]) -> list[npt.NDArray[Any]]:
        if self._session is None:
            raise EngineError("the engine is closed")
        if tensor.ndim != len(self.input_shape):
            raise EngineError(
                f"input of shape {tuple(tensor.shape)} does not fit the model's "
                f"{len(self.input_shape)}-d input"
            )
        self.check_batch(int(tensor.shape[0]))
        options = self._run_options()
        # on the CPU a stopping worker ends the run between two of the graph's nodes
        # (terminate, core/interrupt.py); a CUDA run is left to finish until a GPU test
        # shows a cut one leaves the session sound, and it may capture a stream: no
        # context-wide wait meanwhile
        guard = (
            while_interruptible(lambda: setattr(options, "terminate", True))
            if self.device == "cpu"
            else library_run()
        )
        try:  # the whole batch in one run
            with guard:
                outputs = self._session.run(self.output_names, {self.input_name: tensor}, options)
        except Interrupted:
            raise
        except Exception as exc:
            if options.terminate:
                raise Interrupted("ONNX Runtime's run was ended by a stopping worker") from exc
            raise run_failure(exc, self.device) from exc
        return list(outputs)

    def close(self) -> None:
        self._session = None
