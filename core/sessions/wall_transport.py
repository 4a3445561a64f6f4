"""How the video wall's picture crosses from its process to the consumer's: the plan, and
one interface with two transports behind it.

    plan, in the consumer's process before the child starts (``choose_transport``):
        CUDA IPC       the child's pipeline runs on CUDA and this process can open IPC
                       handles of that device (same device only)
        shared memory  otherwise, with the reason
    child:  sender.publish(k, picture)   shared memory: the picture (downloaded when drawn
                                         on the device) copied into host buffer k
                                         CUDA IPC: copied device-to-device into IPC buffer
                                         k, its inter-process event recorded
    here:   receiver.picture(k)          shared memory: a view of buffer k (``image``)
                                         CUDA IPC: a DeviceFrame of buffer k (``device``)
            receiver.release(k)          shared memory: at once; CUDA IPC: once the copy
                                         out of buffer k is done

The shared memory is always there, so CUDA IPC falls back to it for good, with one reason
(``WallTransport.reason``), when it cannot be set up in the child, cannot be opened here,
the child's picture leaves the device (its pipeline moved to the CPU), or the consumer
shows device pictures only through host memory (``WallProcess.display_copies_to_host``:
no CUDA-GL interop, so the copy is better made in the child than on the GUI's thread). pycuda is
imported only where CUDA IPC is tried (``framelens.core.gpu.wall_ipc``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.shared_memory import SharedMemory
from typing import Any, Protocol

import numpy as np
from framelens.core.errors import EngineError
from framelens.core.gpu.context import parse_cuda_device
from framelens.core.gpu.interop import DeviceFrame
from framelens.core.gpu.wall_ipc import (
    IpcPictureReceiver,
    IpcPictureSender,
    ipc_unavailable_reason,
)
from framelens.core.types import Image

__all__ = [
    "HOST",
    "IPC",
    "TRANSPORTS",
    "HostPictureReceiver",
    "HostPictureSender",
    "IpcReceiver",
    "IpcSender",
    "PictureReceiver",
    "PictureSender",
    "WallTransport",
    "choose_transport",
]

HOST = "shared memory"
IPC = "CUDA IPC"
TRANSPORTS = ("auto", "host", "ipc")
"""What a consumer may ask for: "auto" (CUDA IPC where it can run), "host" (shared memory
always, e.g. to compare), "ipc" (CUDA IPC tried without this process's check: the child
and this process still fall back with their reasons)."""


@dataclass(frozen=True)
class WallTransport:
    """The transport in use: ``kind`` (HOST or IPC), why not IPC (``reason``, for HOST),
    the CUDA device the child exports from (IPC), and whether CUDA IPC was the way but
    could not be used (``fell_back``: worth telling the user once; a wall on the CPU or
    shared memory asked for is not)."""

    kind: str
    reason: str = ""
    device: int | None = None
    fell_back: bool = False

    @property
    def path(self) -> str:
        """For a status line: "picture through CUDA IPC", or "... shared memory (why)"."""
        why = f" ({self.reason})" if self.reason else ""
        return f"picture through {self.kind}{why}"


def choose_transport(
    device: str, wanted: str = "auto", ipc_reason: Callable[[int], str | None] | None = None
) -> WallTransport:
    """The transport for a wall whose pipeline runs on ``device`` ("cpu", "cuda:N"), as
    ``wanted`` (TRANSPORTS). ``ipc_reason(index)``: why this process cannot open IPC
    handles of a device (default: ``wall_ipc.ipc_unavailable_reason``, which retains the
    device's primary context here)."""
    if wanted not in TRANSPORTS:
        raise ValueError(f"unknown wall transport {wanted!r}: use one of {TRANSPORTS}")
    if wanted == "host":
        return WallTransport(HOST, "chosen")
    on_cuda = device.strip().lower().startswith("cuda")
    if not on_cuda and wanted == "auto":
        return WallTransport(HOST, "the wall runs on the CPU")
    try:
        index = parse_cuda_device(device) if on_cuda else 0
    except EngineError as exc:
        return WallTransport(HOST, str(exc), fell_back=True)
    if wanted == "auto":
        reason = (ipc_reason or ipc_unavailable_reason)(index)
        if reason is not None:
            return WallTransport(HOST, f"no CUDA IPC in this process: {reason}", fell_back=True)
    return WallTransport(IPC, device=index)


# ---- the child's side ------------------------------------------------------------------


class PictureSender(Protocol):
    """Puts the wall's picture (a BGR array, or the DeviceWallPicture) into buffer k;
    EngineError (GpuError) when it cannot, which makes CUDA IPC fall back."""

    kind: str

    def publish(self, buffer: int, picture: Any) -> None: ...


def _host_view(shm: SharedMemory, size: tuple[int, int], buffer: int) -> Image:
    width, height = size
    view: Image = np.ndarray(
        (height, width, 3), np.uint8, shm.buf, offset=buffer * width * height * 3
    )
    return view


class HostPictureSender:
    """Shared memory: the picture copied into host buffer k (a device picture downloaded
    first: one device-to-host copy and a colour conversion per picture)."""

    kind = HOST

    def __init__(self, shm: SharedMemory, size: tuple[int, int]) -> None:
        self._shm, self._size = shm, size

    def publish(self, buffer: int, picture: Any) -> None:
        source = picture if isinstance(picture, np.ndarray) else picture.to_host_bgr()
        np.copyto(_host_view(self._shm, self._size, buffer), source)


class IpcSender:
    """CUDA IPC: the device picture copied into IPC buffer k on the device; a picture in
    host memory is refused (the caller falls back to shared memory for good)."""

    kind = IPC

    def __init__(self, sender: IpcPictureSender) -> None:
        self.sender = sender

    def publish(self, buffer: int, picture: Any) -> None:
        if isinstance(picture, np.ndarray):
            raise EngineError("the wall's picture is drawn in host memory now")
        self.sender.publish(buffer, picture)


# ---- this process's side -----------------------------------------------------------------


class PictureReceiver(Protocol):
    """Hands out buffer k as a host image or a device frame, and takes it back."""

    kind: str

    def picture(self, buffer: int) -> tuple[Image | None, DeviceFrame | None]: ...

    def release(self, buffer: int) -> None: ...

    def close(self) -> None: ...


class HostPictureReceiver:
    """Shared memory: buffer k as a view (no copy), handed back at once."""

    kind = HOST

    def __init__(
        self, shm: SharedMemory, size: tuple[int, int], send: Callable[[int], None]
    ) -> None:
        self._shm, self._size, self._send = shm, size, send

    def picture(self, buffer: int) -> tuple[Image | None, DeviceFrame | None]:
        return _host_view(self._shm, self._size, buffer), None

    def release(self, buffer: int) -> None:
        self._send(buffer)

    def close(self) -> None:
        """Nothing: the shared memory is the WallProcess's."""


class IpcReceiver:
    """CUDA IPC: buffer k as a DeviceFrame (the canvas copies it into its GL texture on
    the device), handed back once that copy is done."""

    kind = IPC

    def __init__(self, receiver: IpcPictureReceiver) -> None:
        self.receiver = receiver

    def picture(self, buffer: int) -> tuple[Image | None, DeviceFrame | None]:
        return None, self.receiver.frame(buffer)

    def release(self, buffer: int) -> None:
        self.receiver.release(buffer)

    def close(self) -> None:
        self.receiver.close()
