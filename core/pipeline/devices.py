"""Which compute device a run uses (`auto`, `cpu` or `cuda[:N]`), and how a run of
several sources spreads over device slots and processes."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from framelens.core.errors import ConfigError
from framelens.core.pipeline.cores import usable_cpus

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


SOURCES_PER_PROCESS = 4
"""Sources per process where a CUDA run of many spreads itself over processes (``auto``).
On the H200 (benchmarks/results/h200-streams-2026-12-03.json), 16 sources of 1080p gave
3015 fps in 4 processes, 2655 in 2 and 1586 in one; 8 gave 1828 in 2 and 1392 in one;
4 sources in 4 processes (a batch of one each, contexts time-sliced) only 696."""


def device_slots(
    devices: Sequence[str], sources: int, processes: str | None, files: bool = True,
    cpus: int | None = None,
) -> tuple[list[str], bool]:  # fmt: skip
    """The device slots ``sources`` are spread over, and whether each slot runs in a
    process of its own (one GIL each) rather than a thread of this one.

    ``processes``: None or "auto": a run of at least two processes' worth of sources on
    one CUDA device, all of them ``files``, takes one process per
    :data:`SOURCES_PER_PROCESS` sources (at most half of ``cpus``, by default the cores
    this process may use); anything else stays in this process (a process holds back a
    camera's or stream's messages until its group ends). "N": N processes, the listed
    devices taken in turn (as many as devices listed: each in its own).
    """
    slots = list(devices)
    count = process_count(processes)
    if count is None:
        cpus = cpus or usable_cpus()
        wanted = min(math.ceil(sources / SOURCES_PER_PROCESS), cpus // 2)
        many = sources >= 2 * SOURCES_PER_PROCESS and wanted >= 2
        if len(slots) == 1 and slots[0].startswith("cuda") and many and files:
            return slots * wanted, True
        return slots, False
    if count == 1:
        return slots, False
    if count < len(slots):
        raise ConfigError(
            f"--processes {count} is fewer than the {len(slots)} devices listed: "
            "give each device a process at least"
        )
    return [slots[k % len(slots)] for k in range(count)], True


def process_count(processes: str | None) -> int | None:
    """``--processes``' value: a number of processes (at least 1), or None for auto."""
    if processes is None or processes == "auto":
        return None
    if not processes.isdigit() or int(processes) < 1:
        raise ConfigError(f"--processes takes a number of processes or auto, not {processes!r}")
    return int(processes)
