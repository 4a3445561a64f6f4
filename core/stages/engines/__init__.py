"""Inference backends behind one Engine interface."""

from __future__ import annotations

import os

from framelens.core.errors import EngineError
from framelens.core.models.spec import ModelSpec
from framelens.core.stages.engines.base import DeviceEngine, DeviceOutput, Engine

__all__ = ["BACKENDS", "DeviceEngine", "DeviceOutput", "Engine", "create_engine"]

BACKENDS = ("onnxruntime", "tensorrt")


def create_engine(
    model_path: str | os.PathLike[str],
    backend: str = "onnxruntime",
    device: str = "cpu",
    threads: int | None = None,
    *,
    spinning: bool = True,
    precision: str = "fp32",
    spec: ModelSpec | None = None,
    max_batch: int = 1,
) -> Engine:
    """An Engine for an ONNX file; raises ModelError or EngineError with one line.

    ``precision`` (the graph's) and ``spec`` (shape ranges of dynamic models) matter to
    TensorRT only, which builds an engine from the graph (core.engines.tensorrt_engine);
    so does ``max_batch``, the largest batch TensorRT builds a batch-dynamic graph for
    (ONNX Runtime runs any batch such a graph takes).
    """
    if backend == "onnxruntime":
        from framelens.core.stages.engines.onnxruntime_cpu import OnnxRuntimeEngine

        return OnnxRuntimeEngine(model_path, device=device, threads=threads, spinning=spinning)
    if backend == "tensorrt":
        if not device.startswith("cuda"):
            raise EngineError(
                f"TensorRT runs on NVIDIA GPUs, not on {device}: use --device cuda "
                "or --backend onnxruntime"
            )
        from framelens.core.stages.engines.tensorrt import TensorRtEngine, import_tensorrt

        import_tensorrt()  # its message before any CUDA setup
        from framelens.core.gpu.context import get_context

        ctx = get_context(device)
        return TensorRtEngine(model_path, ctx, precision=precision, spec=spec, max_batch=max_batch)
    raise EngineError(f"unknown backend {backend!r} (known: {', '.join(BACKENDS)})")
