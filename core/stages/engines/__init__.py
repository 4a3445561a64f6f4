"""Inference backends behind one Engine interface (host) and DeviceEngine (device
buffers): onnxruntime_cpu.py, onnxruntime_cuda.py, tensorrt.py. Which one runs is the
builder's choice (core/pipeline/build.py)."""

from __future__ import annotations

from framelens.core.stages.engines.base import DeviceEngine, DeviceOutput, Engine

__all__ = ["BACKENDS", "DeviceEngine", "DeviceOutput", "Engine"]

BACKENDS = ("onnxruntime", "tensorrt")
