"""The one CUDA context of a device, shared by pycuda, NVDEC and ONNX Runtime / TensorRT.

CUDA's runtime API (which ONNX Runtime and TensorRT use) works in the device's
*primary* context. pycuda by default creates a context of its own; buffers made
there are not usable by the runtime in another context without peer copies. So
every GPU component of FrameLens retains the primary context through this module
and makes it current with ``with ctx.active():`` in the thread that uses it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from framelens.core.errors import EngineError

_CUDA_DEVICE = re.compile(r"^cuda(?::(\d+))?$")

_current = threading.local()
"""Per thread: the GpuContext whose ``active()`` block it is in, innermost (``ctx``)."""


def parse_cuda_device(device: str) -> int:
    """The index in "cuda" or "cuda:N"; EngineError for anything else."""
    m = _CUDA_DEVICE.match(device.strip().lower())
    if not m:
        raise EngineError(f"unknown CUDA device {device!r}: use cuda or cuda:N")
    return int(m.group(1) or 0)


def _driver() -> Any:
    try:
        import pycuda.driver as cuda
    except ImportError as exc:  # not installed, or no libcuda on this machine
        raise EngineError(f"pycuda is not usable here ({exc})") from exc
    try:
        cuda.init()
    except Exception as exc:  # pycuda raises its own LogicError/RuntimeError types
        raise EngineError(f"the CUDA driver did not initialise ({exc})") from exc
    return cuda


@dataclass(frozen=True, slots=True)
class DeviceProperties:
    index: int
    name: str
    compute_capability: tuple[int, int]
    total_memory: int
    multiprocessors: int


class GpuContext:
    """The primary context of one CUDA device, retained once per process.

    Use ``with ctx.active():`` around any CUDA work in a thread; it nests.
    """

    def __init__(self, index: int) -> None:
        cuda = _driver()
        count = cuda.Device.count()
        if index >= count:
            raise EngineError(f"CUDA device {index} does not exist ({count} device(s) present)")
        self.index = index
        self._cuda = cuda
        self.device = cuda.Device(index)
        self._ctx = self.device.retain_primary_context()
        attrs = self.device.get_attributes()
        self.properties = DeviceProperties(
            index=index,
            name=str(self.device.name()),
            compute_capability=tuple(self.device.compute_capability()),
            total_memory=int(self.device.total_memory()),
            multiprocessors=int(attrs[cuda.device_attribute.MULTIPROCESSOR_COUNT]),
        )

    @property
    def handle(self) -> int:
        """The CUcontext as an integer, for PyNvVideoCodec's ``cudacontext``."""
        return int(self._ctx.handle)

    @contextmanager
    def active(self) -> Iterator[GpuContext]:
        """Make this context current in the calling thread for the block. Nested blocks
        of the same context in a thread cost nothing: a kernel launch or a copy inside a
        pipeline's batch does not push and pop again (two driver calls each)."""
        previous = getattr(_current, "ctx", None)
        if previous is self:
            yield self
            return
        self._ctx.push()
        _current.ctx = self
        try:
            yield self
        finally:
            _current.ctx = previous
            self._cuda.Context.pop()

    def memory_used(self) -> int:
        """Bytes in use on the device (all processes), for leak checks."""
        with self.active():
            free, total = self._cuda.mem_get_info()
        return int(total - free)

    def synchronize(self) -> None:
        from framelens.core.gpu.graphs import quiet

        with quiet(), self.active():  # no stream capture meanwhile (core/gpu/graphs.py)
            self._cuda.Context.synchronize()


_contexts: dict[int, GpuContext] = {}
_lock = threading.Lock()


def get_context(device: str | int = "cuda:0") -> GpuContext:
    """The process-wide GpuContext of a device ("cuda", "cuda:N" or N)."""
    index = device if isinstance(device, int) else parse_cuda_device(device)
    with _lock:
        ctx = _contexts.get(index)
        if ctx is None:
            ctx = _contexts[index] = GpuContext(index)
        return ctx


def cuda_usable(device: str | int = "cuda:0") -> str | None:
    """None when the device can run FrameLens' GPU path, else the reason in one line."""
    try:
        get_context(device)
    except EngineError as exc:
        return str(exc)
    return None
