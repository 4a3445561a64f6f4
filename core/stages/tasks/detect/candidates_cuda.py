"""Detection candidates gathered on the device (kernels/candidates.cu), for the GPU pipeline.

After the engine call, the kernel picks the rows of the output whose gate column beats
conf and packs them; two small copies bring the count, then those rows, to the host,
instead of the whole output (19 MB per YOLOX batch of 16). The host implementation
of the same step is ``candidates.gather_host``; both give the decoder the same
``Candidates``. A batch with more candidates than the buffers hold (a very low conf)
is copied whole and gathered on the host instead: slower, the same result.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from framelens.core.gpu.buffers import DevicePool, PinnedPool, cuda_driver
from framelens.core.gpu.context import GpuContext
from framelens.core.gpu.kernels import GpuKernels
from framelens.core.stages.tasks.detect.candidates import Candidates, from_flat, gather_host

CAPACITY_PER_FRAME = 512
"""Candidate rows kept per frame of a batch (YOLOX-Nano at conf 0.25: a few dozen)."""


class DeviceCandidateGather:
    """Candidates of one pipeline's device outputs; buffers made on first use, per
    batch size and row width. Use from the pipeline's thread only."""

    def __init__(self, ctx: GpuContext, kernels: GpuKernels) -> None:
        self._ctx = ctx
        self._kernels = kernels
        self._key: tuple[int, int] | None = None  # (capacity, cols) of the buffers
        self._device: DevicePool | None = None  # count | where | picked, one allocation
        self._host: PinnedPool | None = None  # the same layout, page-locked
        self._whole: PinnedPool | None = None  # a whole output, when the buffers overflow
        self.overflows = 0  # batches copied whole (too many candidates)

    def gather(
        self,
        out_ptr: int,
        shape: tuple[int, int, int],
        gate: int,
        conf: float,
        stream: Any,
    ) -> Candidates:
        """The candidates of the (frames, rows, cols) float32 output at ``out_ptr``,
        complete in ``stream``'s order (queue this after the engine call on it)."""
        frames, rows, cols = shape
        capacity = CAPACITY_PER_FRAME * max(frames, 1)
        self._ensure(capacity, cols)
        assert self._device is not None and self._host is not None
        cuda = cuda_driver()
        base = int(self._device.buffers[0].ptr)
        where_ptr, picked_ptr = base + 16, base + 16 + 4 * capacity
        host = self._host.buffers[0].array
        with self._ctx.active():
            cuda.memset_d32_async(base, 0, 1, stream)
            self._kernels.gather_candidates(
                out_ptr, frames, rows, cols, gate, conf, capacity, base, where_ptr, picked_ptr,
                stream,
            )  # fmt: skip
            cuda.memcpy_dtoh_async(host[:16], base, stream)
            stream.synchronize()
            found = int(host[:4].view(np.int32)[0])
            if found > capacity:
                self.overflows += 1
                whole = self._copy_whole(out_ptr, shape, stream)
                return gather_host(whole, gate, conf)
            if found:
                cuda.memcpy_dtoh_async(host[16 : 16 + 4 * found], where_ptr, stream)
                picked_bytes = 16 + 4 * capacity
                cuda.memcpy_dtoh_async(
                    host[picked_bytes : picked_bytes + 4 * found * cols], picked_ptr, stream
                )
                stream.synchronize()
        where = host[16 : 16 + 4 * found].view(np.int32)
        start = 16 + 4 * capacity
        picked = host[start : start + 4 * found * cols].view(np.float32).reshape(found, cols)
        return from_flat(where, picked, frames, rows)  # copies: the buffers are reused

    def _copy_whole(
        self, out_ptr: int, shape: tuple[int, int, int], stream: Any
    ) -> npt.NDArray[np.float32]:
        nbytes = 4 * shape[0] * shape[1] * shape[2]
        if self._whole is None or self._whole.buffers[0].array.nbytes < nbytes:
            if self._whole is not None:
                self._whole.close()
            self._whole = None
            self._whole = PinnedPool(self._ctx, (nbytes,), np.uint8, 1, kind="detection output")
        flat = self._whole.buffers[0].array[:nbytes]
        cuda_driver().memcpy_dtoh_async(flat, out_ptr, stream)
        stream.synchronize()
        return flat.view(np.float32).reshape(shape).copy()

    def _ensure(self, capacity: int, cols: int) -> None:
        if self._key == (capacity, cols):
            return
        self._free_buffers()
        nbytes = 16 + 4 * capacity + 4 * capacity * cols
        self._device = DevicePool.linear(self._ctx, nbytes, 1, kind="detection candidates")
        self._host = PinnedPool(self._ctx, (nbytes,), np.uint8, 1, kind="detection candidates")
        self._key = (capacity, cols)

    def _free_buffers(self) -> None:
        for pool in (self._device, self._host):
            if pool is not None:
                pool.close()
        self._device = self._host = None
        self._key = None

    def close(self) -> None:
        self._free_buffers()
        if self._whole is not None:
            self._whole.close()
            self._whole = None
