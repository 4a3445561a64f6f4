"""Buffer pools for the GPU path: device and page-locked host memory, allocated once.

A pool holds ``count`` buffers of one size, allocated when it is made and freed by
``close()``; nothing is allocated per frame. Two ways to hand buffers out, one per pool:

* ``acquire()`` / ``release()``: ownership. ``acquire`` blocks (or times out) while every
  buffer is out, which is the back-pressure a producer thread needs.
* ``cycle()``: round-robin without ownership, for double/triple buffering where the
  caller knows a buffer is free again once it comes round.

Buffers are reused across CUDA streams safely: ``release(buf, stream)`` records an event
on the stream whose work still reads or writes the buffer, and whoever gets that buffer
next waits for the event first, on the device when it passes its own stream (no host
stall), on the host otherwise. Page-locked host buffers are always waited for on the
host, since the host is what writes them.

Every method makes the pool's CUDA context current itself, so a pool may be used from
any thread (one at a time per buffer).
"""

from __future__ import annotations

import logging
import math
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt
from framelens.core.errors import EngineError
from framelens.core.gpu.context import GpuContext
from framelens.core.gpu.graphs import quiet

log = logging.getLogger(__name__)


def cuda_driver() -> Any:
    """pycuda.driver, or EngineError saying why not."""
    try:
        import pycuda.driver as cuda
    except ImportError as exc:
        raise EngineError(f"pycuda is not usable here ({exc})") from exc
    return cuda


def cuda_message(exc: BaseException) -> str:
    """A pycuda/driver error as one line."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


@dataclass(eq=False)
class _Slot:
    """Bookkeeping shared by device and host buffers."""

    slot: int
    event: Any = field(repr=False)
    pending: bool = field(default=False, repr=False)  # event recorded, not yet waited for
    in_use: bool = field(default=False, repr=False)


@dataclass(eq=False)
class DeviceBuffer(_Slot):
    """One device allocation: ``ptr`` (CUdeviceptr as int), ``nbytes``, and for pitched
    buffers ``pitch`` bytes per row over ``rows`` rows (linear buffers: pitch == nbytes,
    rows == 1)."""

    ptr: int = 0
    nbytes: int = 0
    pitch: int = 0
    rows: int = 1
    allocation: Any = field(default=None, repr=False)


@dataclass(eq=False)
class PinnedBuffer(_Slot):
    """One page-locked host array (``array``), usable for asynchronous copies."""

    array: npt.NDArray[Any] = field(default_factory=lambda: np.empty(0), repr=False)

    @property
    def ptr(self) -> int:
        return int(self.array.ctypes.data)


B = TypeVar("B", bound=_Slot)


class _Pool(Generic[B]):
    _host_waits = False  # page-locked buffers: the host writes them, so it must wait

    def __init__(self, ctx: GpuContext, kind: str) -> None:
        self._ctx = ctx
        self._kind = kind
        self._buffers: list[B] = []
        self._free: deque[B] = deque()
        self._cond = threading.Condition()
        self._next = 0
        self._closed = False
        self._orphans: list[B] = []  # out when the pool closed: freed on release

    def __len__(self) -> int:
        return len(self._buffers)

    @property
    def buffers(self) -> tuple[B, ...]:
        return tuple(self._buffers)

    @property
    def free_count(self) -> int:
        with self._cond:
            return len(self._free)

    def acquire(self, stream: Any = None, timeout: float | None = None) -> B:
        """A free buffer, waiting (``timeout`` seconds, None = forever) while all are out.

        With ``stream``, the stream waits for the buffer's last user instead of the host.
        Raises EngineError on time-out or when the pool is closed.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: self._closed or bool(self._free), timeout):
                raise EngineError(
                    f"no free {self._kind} buffer after {timeout:g} s: all {len(self)} are "
                    "in use (release the ones you are done with)"
                )
            self._check_open()
            buf = self._free.popleft()
            buf.in_use = True
        self._wait(buf, stream)
        return buf

    def release(self, buf: B, stream: Any = None) -> None:
        """Give ``buf`` back; ``stream``: work queued there still uses it. Idempotent.

        A buffer still out when the pool was closed is freed now, its user done.
        """
        with self._cond:
            if self._closed:
                orphan = buf in self._orphans
                if orphan:
                    self._orphans.remove(buf)
            else:
                orphan = False
                if stream is not None:
                    self._record(buf, stream)
                if buf.in_use:
                    buf.in_use = False
                    self._free.append(buf)
                    self._cond.notify()
        if orphan:  # outside the lock: the free may wait for other threads' runs
            self._free_quietly([buf], stream)

    def cycle(self, stream: Any = None) -> B:
        """The next buffer round-robin, after its last recorded user (no ownership)."""
        with self._cond:
            self._check_open()
            buf = self._buffers[self._next % len(self._buffers)]
            self._next += 1
        self._wait(buf, stream)
        return buf

    def mark_used(self, buf: B, stream: Any) -> None:
        """For ``cycle()`` users: work queued on ``stream`` still uses ``buf``."""
        with self._cond:
            if not self._closed:
                self._record(buf, stream)

    def close(self, stream: Any = None) -> None:
        """Free the buffers (after the device is idle, or after ``stream`` is: the one
        stream every use of them is ordered on). Safe to call more than once.

        Buffers handed out by ``acquire`` and not yet released stay valid for their
        holder (a frame on screen, say) and are freed when they come back.
        """
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
            buffers, self._buffers = self._buffers, []
            self._orphans = [b for b in buffers if b.in_use]
            idle = [b for b in buffers if not b.in_use]
            self._free.clear()
        self._free_quietly(idle, stream)

    def _free_quietly(self, buffers: list[B], stream: Any) -> None:
        """Free after the device is done with them; a failing device (a sticky CUDA
        error) must not stop the caller from going on, on the CPU if need be."""
        if not buffers:
            return
        cuda = cuda_driver()
        try:
            with self._ctx.active():
                try:
                    if stream is not None:  # the one stream that uses them: waited for
                        stream.synchronize()  # outside the gate
                finally:
                    # no capture (ours, or one inside an ONNX Runtime run) meanwhile
                    # (core/gpu/graphs.py): a context-wide wait beside one failed it or
                    # killed the process
                    with quiet():
                        try:
                            if stream is None:
                                cuda.Context.synchronize()  # nothing may still use them
                        finally:
                            for buf in buffers:
                                self._free_buffer(buf)
        except Exception as exc:  # the context is broken: its memory goes with it
            log.warning("freeing %s buffers failed: %s", self._kind, cuda_message(exc))

    def _free_buffer(self, buf: B) -> None:
        raise NotImplementedError

    def _record(self, buf: B, stream: Any) -> None:
        with self._ctx.active():
            buf.event.record(stream)
        buf.pending = True

    def _wait(self, buf: B, stream: Any) -> None:
        if not buf.pending:
            return
        with self._ctx.active():
            if stream is None or self._host_waits:
                buf.event.synchronize()
            else:
                stream.wait_for_event(buf.event)
        buf.pending = False

    def _check_open(self) -> None:
        if self._closed:
            raise EngineError(f"the {self._kind} buffer pool is closed")

    def __enter__(self) -> _Pool[B]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _event(cuda: Any) -> Any:
    return cuda.Event(cuda.event_flags.DISABLE_TIMING)


class DevicePool(_Pool[DeviceBuffer]):
    """``count`` device buffers of one size, in ``ctx`` (its primary context).

    Make one with ``DevicePool.linear(ctx, nbytes, count)`` or
    ``DevicePool.pitched(ctx, width_bytes, rows, count)`` (rows padded to the driver's
    preferred pitch, as 2D copies and image kernels like).
    """

    def __init__(
        self,
        ctx: GpuContext,
        count: int,
        *,
        nbytes: int = 0,
        width_bytes: int = 0,
        rows: int = 0,
        kind: str = "device",
    ) -> None:
        super().__init__(ctx, kind)
        pitched = width_bytes > 0
        if count < 1 or (nbytes < 1 and not (pitched and rows > 0)):
            raise EngineError(f"a {kind} pool needs at least one buffer of at least one byte")
        cuda = cuda_driver()
        with quiet(), ctx.active():  # no capture beside the allocations
            try:
                for slot in range(count):
                    if pitched:
                        alloc, pitch = cuda.mem_alloc_pitch(width_bytes, rows, 4)
                        size = int(pitch) * rows
                    else:
                        alloc, pitch, size = cuda.mem_alloc(nbytes), nbytes, nbytes
                    buf = DeviceBuffer(
                        slot=slot,
                        event=_event(cuda),
                        ptr=int(alloc),
                        nbytes=size,
                        pitch=int(pitch),
                        rows=rows if pitched else 1,
                        allocation=alloc,
                    )
                    self._buffers.append(buf)
                    self._free.append(buf)
            except Exception as exc:  # pycuda's MemoryError/LogicError/RuntimeError
                self.close()
                each = (width_bytes * rows if pitched else nbytes) / 2**20
                raise EngineError(
                    f"could not allocate {count} x {each:.1f} MiB of device memory for "
                    f"{kind} buffers: {cuda_message(exc)}"
                ) from exc

    @classmethod
    def linear(cls, ctx: GpuContext, nbytes: int, count: int, kind: str = "device") -> DevicePool:
        return cls(ctx, count, nbytes=nbytes, kind=kind)

    @classmethod
    def pitched(
        cls, ctx: GpuContext, width_bytes: int, rows: int, count: int, kind: str = "device"
    ) -> DevicePool:
        return cls(ctx, count, width_bytes=width_bytes, rows=rows, kind=kind)

    @property
    def pitch(self) -> int:
        return self._buffers[0].pitch if self._buffers else 0

    def _free_buffer(self, buf: DeviceBuffer) -> None:
        if buf.allocation is not None:
            buf.allocation.free()
            buf.allocation = None
            buf.ptr = 0


class PinnedPool(_Pool[PinnedBuffer]):
    """``count`` page-locked host arrays of one shape and dtype (for async copies)."""

    _host_waits = True

    def __init__(
        self,
        ctx: GpuContext,
        shape: tuple[int, ...],
        dtype: npt.DTypeLike,
        count: int,
        kind: str = "pinned host",
    ) -> None:
        super().__init__(ctx, kind)
        if count < 1 or math.prod(shape) < 1:
            raise EngineError(f"a {kind} pool needs at least one non-empty buffer")
        cuda = cuda_driver()
        with quiet(), ctx.active():  # no capture beside the allocations
            try:
                for slot in range(count):
                    array = cuda.pagelocked_empty(shape, dtype)
                    buf = PinnedBuffer(slot=slot, event=_event(cuda), array=array)
                    self._buffers.append(buf)
                    self._free.append(buf)
            except Exception as exc:
                self.close()
                each = math.prod(shape) * np.dtype(dtype).itemsize / 2**20
                raise EngineError(
                    f"could not allocate {count} x {each:.1f} MiB of page-locked host memory: "
                    f"{cuda_message(exc)}"
                ) from exc

    def _free_buffer(self, buf: PinnedBuffer) -> None:
        base = buf.array.base
        free = getattr(base, "free", None)
        if callable(free):
            free()
        buf.array = np.empty(0)
