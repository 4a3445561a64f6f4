"""Which compute device a run uses: `auto`, `cpu` or `cuda[:N]`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from framelens.core.errors import ConfigError

_CUDA = re.compile(r"^cuda(?::(\d+))?$")


def onnxruntime_providers() -> list[str]:
    try:
        import onnxruntime as ort
    except ImportError:
        return []
    return list(ort.get_available_providers())


def cuda_available() -> bool:
    """CUDA is usable for inference when ONNX Runtime has its CUDA provider."""
    return "CUDAExecutionProvider" in onnxruntime_providers()


def resolve_device(requested: str) -> str:
    """Turn a user's --device into 'cpu' or 'cuda:N', with a clear error when impossible."""
    req = requested.strip().lower()
    if req == "cpu":
        return "cpu"
    if req == "auto":
        return "cuda:0" if cuda_available() else "cpu"
    m = _CUDA.match(req)
    if not m:
        raise ConfigError(f"unknown device {requested!r}: use auto, cpu, cuda or cuda:N")
    if not cuda_available():
        raise ConfigError(
            f"device {requested} was requested but CUDA is not usable here "
            "(ONNX Runtime has no CUDA provider); use --device cpu or auto"
        )
    return f"cuda:{m.group(1) or 0}"


@dataclass(frozen=True, slots=True)
class DeviceChoice:
    """One entry of a device (or backend) menu: ``id`` is what resolve_device() (or
    --backend) takes."""

    id: str  # "auto" | "cpu" | "cuda:N"
    label: str
    unavailable: str | None = None  # why it cannot be used here; None = usable


def _cuda_names() -> list[str]:
    """Names of the CUDA devices pycuda sees; empty without pycuda or a driver."""
    try:
        import pycuda.driver as cuda

        cuda.init()
        return [str(cuda.Device(i).name()) for i in range(cuda.Device.count())]
    except Exception:  # pycuda missing, no libcuda, no device: all mean "none here"
        return []


def device_choices() -> list[DeviceChoice]:
    """Auto, CPU and each CUDA device, with the reason when CUDA cannot be used."""
    choices = [DeviceChoice("auto", "Auto"), DeviceChoice("cpu", "CPU")]
    names = _cuda_names()
    if not cuda_available():
        why = "ONNX Runtime has no CUDA provider (install onnxruntime-gpu)"
        choices.append(DeviceChoice("cuda:0", "CUDA", why))
        return choices
    for i, name in enumerate(names or ["GPU"]):
        choices.append(DeviceChoice(f"cuda:{i}", f"CUDA {i} · {name}"))
    return choices


def backend_choices() -> list[DeviceChoice]:
    """ONNX Runtime, and TensorRT with the reason when it cannot run here."""
    from framelens.core.pipeline.build import tensorrt_reason

    why = tensorrt_reason("cuda:0")
    if why is None and not cuda_available():
        why = "TensorRT runs on NVIDIA GPUs and CUDA is not usable here"
    return [DeviceChoice("onnxruntime", "ONNX Runtime"), DeviceChoice("tensorrt", "TensorRT", why)]
