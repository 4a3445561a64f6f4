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

EAGER_PER_FRAME = 64
"""Rows per frame copied back with the count, before it is known (348 KB for a YOLOX
batch of 16): in the common case one wait per batch, not two."""


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
        eager = min(capacity, EAGER_PER_FRAME * max(frames, 1))
        self._ensure(capacity, cols)
        assert self._device is not None and self._host is not None
        base = int(self._device.buffers[0].ptr)
        where_ptr, picked_ptr = base + 16, base + 16 + 4 * capacity
        host = self._host.buffers[0].array
        picked_at = 16 + 4 * capacity  # the picked rows' offset, in both buffers
        with self._ctx.active():
            cuda_driver().memset_d32_async(base, 0, 1, stream)
            self._kernels.gather_candidates(
                out_ptr, frames, rows, cols, gate, conf, capacity, base, where_ptr, picked_ptr,
                stream,
            )  # fmt: skip
            # the count, and the first rows before it is known: usually all of them
            self._copy(host, 0, 16 + 4 * eager, base, picked_at, eager * cols, stream)
            stream.synchronize()
            found = int(host[:4].view(np.int32)[0])
            if found > capacity:
                self.overflows += 1
                whole = self._copy_whole(out_ptr, shape, stream)
                return gather_host(whole, gate, conf)
            if found > eager:
                rest = found - eager
                self._copy(host, 16 + 4 * eager, 4 * rest, base, picked_at + 4 * eager * cols,
                           rest * cols, stream)  # fmt: skip
                stream.synchronize()
        where = host[16 : 16 + 4 * found].view(np.int32)
        picked = host[picked_at : picked_at + 4 * found * cols].view(np.float32)
        # copies, not views: the buffers are reused by the next batch
        return from_flat(where, picked.reshape(found, cols), frames, rows)

    @staticmethod
    def _copy(
        host: npt.NDArray[np.uint8],
        head_at: int,
        head_bytes: int,
        base: int,
        rows_at: int,
        floats: int,
        stream: Any,
    ) -> None:
        """Queue two device-to-host copies between the same layout in both buffers: the
        ``head_bytes`` at ``head_at`` (count and row numbers) and ``floats`` values at
        ``rows_at`` (the picked rows)."""
        cuda = cuda_driver()
        if head_bytes:
            cuda.memcpy_dtoh_async(host[head_at : head_at + head_bytes], base + head_at, stream)
        if floats:
            cuda.memcpy_dtoh_async(host[rows_at : rows_at + 4 * floats], base + rows_at, stream)

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
