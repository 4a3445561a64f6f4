"""Inference backends behind one Engine interface."""

from __future__ import annotations

import os

from framelens.core.errors import EngineError

from .base import Engine

__all__ = ["BACKENDS", "Engine", "create_engine"]

BACKENDS = ("onnxruntime", "tensorrt")


def create_engine(
    model_path: str | os.PathLike[str],
    backend: str = "onnxruntime",
    device: str = "cpu",
    threads: int | None = None,
    *,
    spinning: bool = True,
) -> Engine:
    """An Engine for an ONNX file; raises ModelError or EngineError with one line."""
    if backend == "onnxruntime":
        from .onnxruntime_engine import OnnxRuntimeEngine

        return OnnxRuntimeEngine(model_path, device=device, threads=threads, spinning=spinning)
    if backend == "tensorrt":
        raise EngineError("TensorRT backend is not available on this machine")
    raise EngineError(f"unknown backend {backend!r} (known: {', '.join(BACKENDS)})")
