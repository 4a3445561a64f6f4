"""The video wall's device picture handed between processes through CUDA IPC.

    wall's process (exporter, ``IpcPictureSender``):
        DeviceWallPicture ──write_rgba: device-to-device copy──> IPC buffer k
        ──record IPC event k──> pipe: ("picture", k, ...)     (handles sent once, at open)
    consumer's process (importer, ``IpcPictureReceiver``):
        buffer k opened once (IPCMemoryHandle), event k opened once (Event.from_ipc_handle)
        ──IpcWallFrame (a DeviceFrame)──> the canvas's DeviceFrameUploader: its stream waits
        for event k, copies buffer k into the GL pixel buffer (interop), records "copied k"
        ──release(k): a thread of the receiver waits for "copied k", then hands k back

Nothing but the handles (64 bytes each, once) and the pipe's small messages crosses the
process boundary: no host copy of the picture on either side. The buffers are plain
``cuMemAlloc`` allocations (``pycuda.driver.mem_alloc``), never a pool allocator's
sub-allocations: an IPC handle names an allocation by its base pointer. Each is a whole
number of 2 MiB: the driver may place a smaller allocation inside a 2 MiB block with
others, and CUDA IPC then maps the whole block into the importer (the CUDA programming
guide's advice: share only 2 MiB-aligned sizes). The events are made with
``INTERPROCESS | DISABLE_TIMING``, as CUDA requires of an exported event.

Limits: both processes see the same device (same ``CUDA_VISIBLE_DEVICES``; IPC across
GPUs is not handled here), Linux only, and a process cannot open its own handles. The
importer closes its handles before the exporter frees the buffers (``WallProcess.close``
closes the receiver, then stops the child).

pycuda is imported lazily: importing this module needs no GPU.
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import cv2
from framelens.core.errors import EngineError, GpuError
from framelens.core.gpu.buffers import cuda_driver, cuda_message
from framelens.core.gpu.context import GpuContext, cuda_usable, get_context
from framelens.core.gpu.images import copy_rgba, download_rgba
from framelens.core.threads import NamedThread
from framelens.core.types import Image

__all__ = [
    "IpcHandles",
    "IpcPictureReceiver",
    "IpcPictureSender",
    "IpcWallFrame",
    "ipc_unavailable_reason",
    "open_receiver",
]

_PITCH_ALIGN = 256  # bytes: rows of the IPC buffers start aligned as mem_alloc_pitch's do
_IPC_GRANULE = 2 << 20  # bytes: each IPC buffer a whole number of these (see above)


def ipc_unavailable_reason(device: int) -> str | None:
    """Why this process cannot open CUDA IPC handles of device ``device``, in one line;
    None if it can (this retains the device's primary context)."""
    if not sys.platform.startswith("linux"):
        return f"CUDA IPC is supported on Linux only (this is {sys.platform})"
    reason = cuda_usable(device)
    if reason is not None:
        return reason
    cuda = cuda_driver()
    try:
        attrs = get_context(device).device.get_attributes()
        unified = bool(attrs.get(cuda.device_attribute.UNIFIED_ADDRESSING, 0))
    except Exception as exc:  # pycuda's own error types
        return f"the device's attributes could not be read ({cuda_message(exc)})"
    if not unified:
        return "the device has no unified addressing, which CUDA IPC needs"
    return None


@dataclass(frozen=True)
class IpcHandles:
    """What the exporter sends once: the device, the picture's size and row pitch, and
    per buffer the IPC handle of its allocation and of its event (opaque bytes)."""

    device: int
    width: int
    height: int
    pitch: int
    memory: tuple[bytes, ...]
    events: tuple[bytes, ...]


class IpcPictureSender:
    """The exporter's side: ``count`` RGBA device buffers of ``width`` x ``height`` and an
    inter-process event each, in ``context``. ``publish`` copies the wall's device
    picture into one on the device and records its event."""

    def __init__(self, context: GpuContext, width: int, height: int, count: int) -> None:
        """GpuError in one line when the buffers, events or handles cannot be made."""
        cuda = cuda_driver()
        self.context, self.width, self.height = context, width, height
        self.pitch = -(-width * 4 // _PITCH_ALIGN) * _PITCH_ALIGN
        self._allocations: list[Any] = []
        self._events: list[Any] = []
        self._stream: Any = None
        flags = cuda.event_flags.INTERPROCESS | cuda.event_flags.DISABLE_TIMING
        size = -(-self.pitch * height // _IPC_GRANULE) * _IPC_GRANULE
        try:
            with context.active():
                for _ in range(count):
                    self._allocations.append(cuda.mem_alloc(size))
                    self._events.append(cuda.Event(flags))
                self._stream = cuda.Stream()
                self.handles = IpcHandles(
                    context.index, width, height, self.pitch,
                    tuple(bytes(cuda.mem_get_ipc_handle(int(a))) for a in self._allocations),
                    tuple(bytes(e.ipc_handle()) for e in self._events),
                )  # fmt: skip
        except Exception as exc:
            self.close()
            raise GpuError(f"CUDA IPC buffers for the wall: {cuda_message(exc)}") from exc

    def publish(self, buffer: int, picture: Any) -> None:
        """Queue the copy of ``picture`` (a DeviceWallPicture of this context and size)
        into ``buffer``, then record its event; GpuError in one line if it cannot."""
        if picture.context is not self.context:
            raise GpuError("the wall is drawn in another CUDA context than its IPC buffers")
        if (picture.width, picture.height) != (self.width, self.height):
            raise GpuError(
                f"the wall's picture is {picture.width}x{picture.height}, its IPC buffers "
                f"{self.width}x{self.height}"
            )
        try:
            with self.context.active():
                picture.write_rgba(int(self._allocations[buffer]), self.pitch, self._stream)
                self._events[buffer].record(self._stream)
        except Exception as exc:
            raise GpuError(f"copying the wall into its IPC buffer: {cuda_message(exc)}") from exc

    def close(self) -> None:
        """Free the buffers and events once the copies queued are done (the importer has
        closed its handles by then). Idempotent."""
        if not (self._allocations or self._events or self._stream is not None):
            return
        try:
            with self.context.active():
                if self._stream is not None:
                    self._stream.synchronize()
                for allocation in self._allocations:
                    allocation.free()
                self._allocations, self._events, self._stream = [], [], None
        except Exception:  # a failed device: freed with the process
            self._allocations, self._events, self._stream = [], [], None


class IpcWallFrame:
    """Buffer ``buffer`` of the exporter's, opened here, as the canvas's ``DeviceFrame``:
    ``write_rgba`` waits (on the device) for the exporter's copy into it and copies it into
    the destination, then records the receiver's "copied" event for the release."""

    def __init__(self, receiver: IpcPictureReceiver, buffer: int) -> None:
        self._receiver, self.buffer = receiver, buffer
        self.width, self.height = receiver.width, receiver.height
        self.context = receiver.context

    def write_rgba(self, dst_ptr: int, dst_pitch: int, stream: Any) -> None:
        self._receiver.write(self.buffer, dst_ptr, dst_pitch, stream)

    def to_host_bgr(self) -> Image:
        """The picture downloaded (for tests and snapshots; the canvas never calls it)."""
        return self._receiver.download(self.buffer)


class IpcPictureReceiver:
    """The importer's side: the exporter's buffers and events opened once in
    ``context`` (this process's primary context of the same device). ``release`` hands a
    buffer back through ``send`` once the copies out of it queued so far are done, on a
    thread of its own (the caller, a GUI thread, never waits for the device)."""

    def __init__(
        self, context: GpuContext, handles: IpcHandles, send: Callable[[int], None]
    ) -> None:
        """GpuError in one line when a handle cannot be opened."""
        cuda = cuda_driver()
        self.context, self.width, self.height = context, handles.width, handles.height
        self.pitch = handles.pitch
        self._send = send
        self._memory: list[Any] = []
        self._events: list[Any] = []  # the exporter's, opened here
        self._copied: list[Any] = []  # ours: after the last copy out of each buffer
        self._lock = threading.Lock()
        self.closed = False
        try:
            with context.active():
                for mem, event in zip(handles.memory, handles.events, strict=True):
                    self._memory.append(cuda.IPCMemoryHandle(bytearray(mem)))
                    self._events.append(cuda.Event.from_ipc_handle(bytearray(event)))
                    self._copied.append(cuda.Event(cuda.event_flags.DISABLE_TIMING))
        except Exception as exc:
            self._close_handles()
            raise GpuError(f"opening the wall's CUDA IPC handles: {cuda_message(exc)}") from exc
        self._releases: queue.Queue[int | None] = queue.Queue()
        self._thread = NamedThread(
            target=self._release_when_copied, name="fl-wall-ipc-release", daemon=True
        )
        self._thread.start()

    def frame(self, buffer: int) -> IpcWallFrame:
        return IpcWallFrame(self, buffer)

    def write(self, buffer: int, dst_ptr: int, dst_pitch: int, stream: Any) -> None:
        with self._lock:
            if self.closed:  # the wall is closing: nothing copied, the texture keeps its
                return
            with self.context.active():
                stream.wait_for_event(self._events[buffer])
                copy_rgba(int(self._memory[buffer]), self.pitch, dst_ptr, dst_pitch,
                          self.width, self.height, stream)  # fmt: skip
                self._copied[buffer].record(stream)

    def download(self, buffer: int) -> Image:
        with self._lock:
            if self.closed:
                raise GpuError("the wall's CUDA IPC buffers are closed")
            try:
                rgba = download_rgba(self.context, int(self._memory[buffer]), self.pitch,
                                     self.width, self.height, self._events[buffer])  # fmt: skip
            except Exception as exc:
                raise GpuError(f"downloading the wall failed: {cuda_message(exc)}") from exc
        return cast(Image, cv2.cvtColor(rgba, cv2.COLOR_RGBA2BGR))

    def release(self, buffer: int) -> None:
        """``buffer`` goes back to the exporter once every copy out of it is done."""
        self._releases.put(buffer)

    def _release_when_copied(self) -> None:
        while (buffer := self._releases.get()) is not None:
            with self._lock:
                if self.closed:
                    return
                event = self._copied[buffer]
            try:
                with self.context.active():
                    event.synchronize()  # pycuda lets go of the GIL while it waits
            except Exception:  # a failed device: the wall's own errors say so
                return
            self._send(buffer)

    def close(self) -> None:
        """Wait for the copies queued, close the handles (before the exporter frees the
        buffers). Idempotent; frames written after this copy nothing."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        self._releases.put(None)
        if self._thread is not threading.current_thread():
            self._thread.join(5.0)
        self._close_handles()

    def _close_handles(self) -> None:
        try:
            with self.context.active():
                for event in self._copied:
                    event.synchronize()
                for memory in self._memory:
                    memory.close()
                self._memory, self._events, self._copied = [], [], []
        except Exception:  # a failed device: released with the process
            self._memory, self._events, self._copied = [], [], []


def open_receiver(handles: IpcHandles, send: Callable[[int], None]) -> IpcPictureReceiver | str:
    """The exporter's handles opened in this process's context of their device, or why
    not in one line (the caller falls back to host memory)."""
    try:
        return IpcPictureReceiver(get_context(handles.device), handles, send)
    except EngineError as exc:
        return str(exc)
