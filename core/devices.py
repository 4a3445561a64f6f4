"""Which compute device a run uses: `auto`, `cpu` or `cuda[:N]`."""

from __future__ import annotations

import re

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
