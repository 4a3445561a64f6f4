"""The video wall's session in a process of its own; its picture handed to this one.

    child process: WallPlayer ──results──> WallPicture (its own, on the device on a GPU)
        ──publish into a released buffer k (the transport's)──> Pipe: ("picture", k, ...)
    this process: reader thread ──on_picture(SharedWallFrame)──> the consumer (a canvas)
        ──release(k)──> Pipe ──> buffer k is free for the child again

Decode, inference, tracking and the drawing of every tile run in the child, so the
consumer's process (the GUI's) holds no pipeline thread that competes for its GIL. The
picture is double-buffered: the child writes only a buffer the consumer has released, and
the consumer reads the one it was handed in place until it releases it. Two transports
behind one interface (``wall_transport``), chosen here before the child starts
(``choose_transport``), the one in use in ``transport`` and told to ``on_transport``:

* CUDA IPC, where the child's pipeline runs on CUDA and this process can open IPC handles
  of the same device: the child copies its device picture device-to-device into one of two
  IPC buffers and records an inter-process event; the handles cross once, at open; the
  frame here is ``SharedWallFrame.device`` (a DeviceFrame the canvas copies into its GL
  texture through CUDA-GL interop, after waiting on the device for that event); ``release``
  hands the buffer back once that copy is done. No host copy anywhere.
* shared memory (``multiprocessing.shared_memory``) otherwise: the picture copied into one
  of two host buffers (downloaded first when drawn on the device); ``SharedWallFrame.image``
  is a view of it, no copy here.

CUDA IPC that cannot be set up in the child, cannot be opened here, or whose picture
leaves the device falls back to shared memory for good, with one reason
(``WallTransport.reason``). IPC across GPUs is not handled (same device only).

The child's side is core/sessions/wall_child.py. It publishes when a buffer is free, and
a tile's next result waits (up to ``wall_child._WAIT_S``) until the consumer has handed
back the picture holding the previous one, so a consumer that keeps up gets every result
of every tile in some picture and shows each (one it gives back unseen for a newer
picture hands its tiles on to it: ``SharedWallFrame.after``); a tile renewed twice
between two publishes counts one ``replaced``. Overlays (detections, lines and zones),
states and errors travel in the pipe's messages. ``close`` closes this process's IPC
handles, stops the child (which then frees its buffers) and frees the shared memory; a
child that dies is one ``on_error`` message.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from multiprocessing.shared_memory import SharedMemory
from typing import Any

from framelens.core.gpu.interop import DeviceFrame
from framelens.core.gpu.wall_ipc import open_receiver
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.wall import WallState
from framelens.core.sessions.wall_child import (
    BUFFERS,
    DEPTH_ENV,
    ChildJob,
    TileOverlay,
    child_main,
)
from framelens.core.sessions.wall_transport import (
    HOST,
    IPC,
    HostPictureReceiver,
    IpcReceiver,
    PictureReceiver,
    WallTransport,
    choose_transport,
)
from framelens.core.stages.source_stages import StageFactory
from framelens.core.threads import NamedThread
from framelens.core.types import Image

__all__ = [
    "BUFFERS",
    "DEPTH_ENV",
    "WALL_PROCESS_CHOICES",
    "SharedWallFrame",
    "TileOverlay",
    "WallProcess",
    "WallTransport",
    "wall_in_own_process",
]

log = logging.getLogger(__name__)

WALL_PROCESS_CHOICES = ("auto", "own", "this")
"""Where a wall's decode and inference run: "own" a process of their own, "this" threads
of the window's process, "auto" as ``wall_in_own_process`` decides."""
_STOP_JOIN_S = 10.0


def wall_in_own_process(choice: str, device: str) -> bool:
    """Whether a wall on ``device`` plays in a process of its own for ``choice``
    (``WALL_PROCESS_CHOICES``; anything else is "auto"). Auto: on CUDA, yes: the window's
    thread then shares no Python lock with the pipeline and the picture comes through
    CUDA IPC (16 live 1080p sources on an H100: 435 results a second on screen against
    279, input answered in 9 ms against 31; docs/benchmarks.md); on the CPU, no: the child
    would take the very cores inference needs (4 sources on 2 cores: 22 results a second
    against 35)."""
    if choice == "own":
        return True
    if choice == "this":
        return False
    return device.startswith("cuda")


@dataclass(frozen=True)
class SharedWallFrame:
    """One published picture of the wall, valid until ``WallProcess.release(buffer)``:
    ``image`` a view of shared memory (BGR) on the host transport, ``device`` a
    DeviceFrame of an IPC buffer on the CUDA IPC one (the other None); ``transport`` the
    one it came by; ``overlays`` those of the tiles renewed since the previous picture
    (the others are as that picture had them), ``replaced`` every result drawn over in
    the child before it was published (since the start)."""

    buffer: int
    version: int
    image: Image | None
    overlays: dict[int, TileOverlay]
    replaced: int
    device: DeviceFrame | None = None
    transport: str = HOST

    @property
    def shown(self) -> int:
        """How many tiles this picture renews (each a result it is the first to show)."""
        return len(self.overlays)

    def after(self, older: SharedWallFrame) -> tuple[SharedWallFrame, int]:
        """This picture taken in place of ``older``, which will never be shown: the
        tiles ``older`` renewed and this one did not are renewed by this one too (the
        picture holds them: it was drawn on over them), so their overlays come along;
        and how many results ``older`` renewed that this one draws over (never seen)."""
        lost = len(older.overlays.keys() & self.overlays.keys())
        return replace(self, overlays={**older.overlays, **self.overlays}), lost

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of the picture."""
        if self.device is not None:
            return self.device.width, self.device.height
        assert self.image is not None
        return int(self.image.shape[1]), int(self.image.shape[0])


StateCallback = Callable[[Any], None]
ErrorCallback = Callable[[str], None]
PictureCallback = Callable[[SharedWallFrame], None]
TransportCallback = Callable[[WallTransport], None]


class WallProcess:
    """``specs`` played by a WallPlayer in a spawned process, its picture of ``size``
    pixels handed to this process (``transport``: "auto", "host" or "ipc", see
    ``wall_transport.TRANSPORTS``). Callbacks run on a reader thread of this process (a
    GUI marshals them onto its own), ``on_transport`` when the transport is settled or
    falls back."""

    def __init__(
        self,
        on_picture: PictureCallback,
        on_state: StateCallback,
        on_error: ErrorCallback,
        *,
        size: tuple[int, int] = (1280, 720),
        realtime: bool = True,
        stages: StageFactory | None = None,
        transport: str = "auto",
        on_transport: TransportCallback | None = None,
    ) -> None:
        self._on_picture, self._on_state, self._on_error = on_picture, on_state, on_error
        self._on_transport = on_transport
        self.width, self.height = size
        self._realtime, self._stages, self._wanted = realtime, stages, transport
        self.transport: WallTransport | None = None  # settled: what on_transport was told
        self._shm: SharedMemory | None = None
        self._host: PictureReceiver | None = None
        self._ipc: PictureReceiver | None = None
        self._via: dict[int, PictureReceiver] = {}  # each buffer's receiver, last picture
        self._process: Any = None
        self._to_child: Connection | None = None
        self._reader: threading.Thread | None = None
        self._closing = False
        self._ender: threading.Thread | None = None  # close(wait=False)'s
        self.ended = threading.Event()  # closed: the child gone, its memory freed
        self._send_lock = threading.Lock()
        self._deliver_lock = threading.Lock()  # a picture's delivery against close()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def open(self, specs: Sequence[str], settings: PipelineSettings) -> None:
        """Start the child on ``specs``; returns at once (the opening's errors arrive
        through ``on_error``)."""
        if self._process is not None:
            raise RuntimeError("a WallProcess opens its sources once")
        plan = choose_transport(settings.device, self._wanted)
        frame_bytes = self.width * self.height * 3
        self._shm = SharedMemory(create=True, size=frame_bytes * BUFFERS)
        size = (self.width, self.height)
        self._host = HostPictureReceiver(self._shm, size, self._release_now)
        ctx = multiprocessing.get_context("spawn")  # CUDA cannot be forked
        from_child, child_out = ctx.Pipe(duplex=False)
        child_in, to_child = ctx.Pipe(duplex=False)
        job = ChildJob(
            list(specs), settings, self._stages, self._realtime, self._shm.name, size, plan
        )
        self._process = ctx.Process(
            target=child_main,
            args=(job, child_in, child_out),
            name="fl-wall-process",
            daemon=True,
        )
        self._process.start()
        child_out.close()  # ours closed: the child's end closing (it died) is our EOF
        child_in.close()
        self._to_child = to_child
        if plan.kind == HOST:
            self._settle(plan)
        self._reader = NamedThread(
            target=self._read, args=(from_child,), name="fl-wall-reader", daemon=True
        )
        self._reader.start()

    def _settle(self, transport: WallTransport) -> None:
        self.transport = transport
        if self._on_transport is not None:
            self._on_transport(transport)

    def _open_ipc(self, handles: Any) -> None:
        """The child's IPC handles opened here, or shared memory for good (said why).
        Opened under the delivery lock: ``close`` either finds them open and closes them
        before the child is told to stop (and frees the buffers), or they are not opened."""
        with self._deliver_lock:
            if self._closing:  # the child stops without an answer ("stop" follows)
                return
            opened = open_receiver(handles, self._release_now)
            if not isinstance(opened, str):
                self._ipc = IpcReceiver(opened)
        if isinstance(opened, str):
            self._send(("transport", HOST))
            reason = f"CUDA IPC handles not opened here: {opened}"
            self._settle(WallTransport(HOST, reason, fell_back=True))
            return
        self._send(("transport", IPC))
        self._settle(WallTransport(IPC, device=handles.device))

    def _read(self, conn: Connection) -> None:
        last: WallState | None = None  # the child's last state
        failed = ""  # why the child stopped, in its own words
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                break
            kind = message[0]
            if kind == "picture":
                self._deliver(message)
            elif kind == "state":
                last = message[1]
                self._on_state(message[1])
            elif kind == "failed":  # it cannot go on: stopped, the end of the pipe next
                failed = message[1]
                self._send(("stop",))  # (its picture given up: the wall would play unseen)
            elif kind == "error":
                self._on_error(message[1])
            elif kind == "ipc-handles":
                self._open_ipc(message[1])
            elif kind == "transport":  # the child fell back to shared memory
                self._settle(WallTransport(HOST, message[1], fell_back=True))
        conn.close()
        if not self._closing:
            process = self._process
            process.join(_STOP_JOIN_S)
            code = process.exitcode
            why = failed or f"the video wall's process stopped unexpectedly (exit code {code})"
            if last is not None:  # the wall as it was, stopped: no rates, every tile down
                self._on_state(stopped(last, "the wall's process stopped"))
            self._on_error(f"{why}; its sources are no longer played")

    def _deliver(self, message: tuple[Any, ...]) -> None:
        _, buffer, version, overlays, replaced, via = message
        receiver = self._ipc if via == IPC else self._host
        with self._deliver_lock:
            if self._closing or receiver is None:
                return
            self._via[buffer] = receiver
            image, device = receiver.picture(buffer)
            frame = SharedWallFrame(
                buffer, version, image, overlays, replaced, device, receiver.kind
            )
            self._on_picture(frame)

    def _send(self, message: tuple[Any, ...]) -> None:
        with self._send_lock:
            if self._to_child is None:
                return
            with contextlib.suppress(OSError, BrokenPipeError):
                self._to_child.send(message)

    def _release_now(self, buffer: int) -> None:
        self._send(("release", buffer))

    def release(self, buffer: int, unseen_for: int | None = None) -> None:
        """The consumer is done with ``buffer`` (uploaded it, or gives it back unseen): the
        child may write it (on CUDA IPC once the copies out of it queued are done).
        ``unseen_for``: given back unseen for the newer picture of that version, which
        holds its tiles' results (``SharedWallFrame.after``): the child keeps those tiles'
        next results waiting for that picture instead."""
        if unseen_for is not None:  # before the release: the pipe keeps the order
            self._send(("carry", buffer, unseen_for))
        receiver = self._via.get(buffer, self._host)
        if receiver is not None:
            receiver.release(buffer)

    def display_copies_to_host(self, reason: str) -> None:
        """The consumer told that it shows device pictures only by copying them to host
        memory itself (``reason``: why it has no CUDA-GL interop): CUDA IPC would then put
        that copy on the consumer's thread, so the child downloads into shared memory
        instead, for good (said through ``on_transport``). Nothing while on shared memory."""
        transport = self.transport
        if transport is None or transport.kind != IPC:
            return
        self._send(("host",))
        self._settle(
            WallTransport(
                HOST,
                f"the window shows device pictures through host memory ({reason}): the "
                "wall's process copies them there instead",
                fell_back=True,
            )
        )

    def play(self) -> None:
        self._send(("play",))

    def pause(self) -> None:
        self._send(("pause",))

    def set_realtime(self, realtime: bool) -> None:
        self._send(("realtime", realtime))

    def close(self, *, wait: bool = True) -> None:
        """Close this process's IPC handles, stop the child (at once, or killed after a
        grace period) and free the shared memory; nothing is delivered after this
        returns. ``wait=False`` (a window closing): the child is waited for, stopped and
        its memory freed behind, on a thread of this object's (``ended`` is set then), so
        that a child slow to stop (still building its engines) does not hold the caller;
        the interpreter waits for that thread before it exits."""
        with self._deliver_lock:
            again, self._closing = self._closing, True
        if again:  # closed before: waited for here where asked
            if wait and self._ender is not None:
                self._ender.join()
            return
        if self._ipc is not None:  # before the child frees what they map
            self._ipc.close()
        self._send(("stop",))
        if wait:
            self._end_child()
        else:
            self._ender = NamedThread(target=self._end_child, name="fl-wall-close")
            self._ender.start()

    def _end_child(self) -> None:
        """The child waited for (killed past the grace period), the pipe and the reader
        closed, the shared memory freed; then ``ended`` is set."""
        process = self._process
        if process is not None:
            process.join(_STOP_JOIN_S)
            if process.is_alive():
                process.kill()
                process.join()
        with self._send_lock:
            if self._to_child is not None:
                self._to_child.close()
                self._to_child = None
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(_STOP_JOIN_S)
        self._host = self._ipc = None
        self._via.clear()
        if self._shm is not None:
            with contextlib.suppress(BufferError):  # a view still held: freed with it
                self._shm.close()
            with contextlib.suppress(FileNotFoundError):
                self._shm.unlink()
            self._shm = None
        self.ended.set()


def stopped(state: WallState, why: str) -> WallState:
    """``state`` of a wall whose process is gone: failed, no rates, each tile still
    playing or opening failed for ``why`` (one that had ended or failed keeps its own)."""
    tiles = tuple(
        t if t.status in ("ended", "failed") else replace(t, status="failed", reason=why, fps=0.0)
        for t in state.tiles
    )
    return replace(state, status="failed", fps=0.0, tiles=tiles)
