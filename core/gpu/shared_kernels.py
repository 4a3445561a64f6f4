"""The kernels of each CUDA context, loaded (built with nvcc or read from the cache) once."""

from __future__ import annotations

import threading

from framelens.core.gpu.context import GpuContext
from framelens.core.gpu.kernels import GpuKernels

_kernels: dict[int, GpuKernels] = {}
_lock = threading.Lock()


def kernels_for(ctx: GpuContext) -> GpuKernels:
    """The kernels of a context, loaded once per process and device."""
    with _lock:
        k = _kernels.get(ctx.index)
        if k is None:
            k = _kernels[ctx.index] = GpuKernels(ctx)
        return k
