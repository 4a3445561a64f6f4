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

The child publishes when a buffer is free, and a tile's next result waits (up to
``_WAIT_S``) until the consumer has handed back the picture holding the previous one, so a
consumer that keeps up gets every result of every tile in some picture and shows each
(one it gives back unseen for a newer picture hands its tiles on to it:
``SharedWallFrame.after``); a tile renewed twice between two publishes counts one
``replaced``. Overlays (detections, lines and zones), states and errors travel in the
pipe's messages. ``close`` closes this process's IPC handles, stops the child (which then
frees its buffers) and frees the shared memory; a child that dies is one ``on_error``
message.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from multiprocessing.shared_memory import SharedMemory
from typing import Any

from framelens.core.errors import EngineError, error_message
from framelens.core.gpu.context import get_context
from framelens.core.gpu.interop import DeviceFrame
from framelens.core.gpu.wall_ipc import IpcPictureSender, open_receiver
from framelens.core.gpu.wall_picture import WallPicture
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.wall_transport import (
    HOST,
    IPC,
    HostPictureReceiver,
    HostPictureSender,
    IpcReceiver,
    IpcSender,
    PictureReceiver,
    PictureSender,
    WallTransport,
    choose_transport,
)
from framelens.core.stages.draw.style import Overlay, OverlayStyle, layout
from framelens.core.stages.source_stages import StageFactory
from framelens.core.threads import NamedThread
from framelens.core.types import Detections, FrameResult, Image

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

BUFFERS = 2
WALL_PROCESS_CHOICES = ("auto", "own", "this")
"""Where a wall's decode and inference run: "own" a process of their own, "this" threads
of the window's process, "auto" as ``wall_in_own_process`` decides."""
_DEPTH = 8  # results core queues per tile for the child's publisher (host frames)
_DEVICE_DEPTH = 5  # on the GPU, at most (``_queue_depth``): a paint ~5 frames late costs none
DEPTH_ENV = "FRAMELENS_WALL_DEPTH"  # another depth (benchmarks/wall_screen.py --depths)
_WAIT_S = 0.5  # the longest a result waits for its tile's previous one to reach the consumer
_STOP_JOIN_S = 10.0
_HANDSHAKE_S = 30.0  # the longest the child waits for this process to open its IPC handles


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
class TileOverlay:
    """What is painted over a tile: its newest result's detections and marks (lines and
    zones with their counts), for a frame of ``frame_size`` drawn into ``rect``;
    ``shapes``: the detections' overlay laid out by the child (core's ``layout`` with the
    wall's labels and style, the same the consumer would make: its process spends no time
    on it), None where it was not; ``arrived``: when the source released the frame (on
    ``now_ms``'s clock, which every process of the machine shares), None for a frame read
    when asked for."""

    detections: Detections
    marks: tuple[object, ...]
    frame_size: tuple[int, int]
    rect: tuple[int, int, int, int]
    shapes: Overlay | None = None
    arrived: float | None = None


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
        args = (list(specs), settings, self._stages, self._realtime, self._shm.name, size, plan)
        self._process = ctx.Process(
            target=_child_main,
            args=(*args, child_in, child_out),
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
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                break
            kind = message[0]
            if kind == "picture":
                self._deliver(message)
            elif kind == "state":
                self._on_state(message[1])
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
            self._on_error(
                f"the video wall's process stopped unexpectedly (exit code {code}); "
                "its sources are no longer played"
            )

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

    def close(self) -> None:
        """Close this process's IPC handles, stop the child (at once, or killed after a
        grace period) and free the shared memory; nothing is delivered after this
        returns."""
        with self._deliver_lock:
            self._closing = True
        if self._ipc is not None:  # before the child frees what they map
            self._ipc.close()
        self._send(("stop",))
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


class _Publisher:
    """The child's side: results drawn into its own picture, put into a free buffer by
    the sender in use when one is (the rest waits for a release). A tile's next result
    waits until the picture holding its previous one is handed back by the consumer
    (shown, or given back unseen for a newer picture that holds it too), so no result is
    drawn over before the consumer could show it. CUDA IPC that fails falls back to shared
    memory for good, said once."""

    def __init__(
        self,
        host: PictureSender,
        ipc: PictureSender | None,
        size: tuple[int, int],
        send: Callable[[tuple[Any, ...]], None],
        labels: tuple[str, ...],
        style: OverlayStyle,
    ) -> None:
        self.width, self.height = size
        self._labels, self._style = labels, style
        self._host, self._sender, self._send = host, ipc or host, send
        self.picture = WallPicture(size)
        self._lock = threading.Condition()
        self._free = list(range(BUFFERS))
        self._overlays: dict[int, TileOverlay] = {}
        self._renewed: set[int] = set()  # tiles renewed since the last publish
        # buffer -> (its picture's version, the tiles whose newest result it holds for the
        # consumer: renewed in it, or carried on from an older picture given back unseen)
        self._in_flight: dict[int, tuple[int, set[int]]] = {}
        self._replaced = 0
        self._version = 0
        self._drawn_at: dict[int, float] = {}  # tile -> when its newest result was drawn
        self.on_ready: Callable[[], None] = lambda: None  # a tile may take its next result
        self.stopped = False

    def _waiting(self, tile: int) -> bool:
        """Whether ``tile``'s newest result has yet to reach the consumer."""
        return tile in self._renewed or any(tile in t for _, t in self._in_flight.values())

    def ready(self, tile: int) -> bool:
        """Whether ``tile`` takes its next result now: its previous one is with the
        consumer, or has waited ``_WAIT_S`` for it (a consumer that does not keep up). The
        wall's delivery thread asks before it hands a result over (``WallPlayer``'s
        ``ready``), so one tile waiting holds up no other (core queues a tile's results
        meanwhile: a batch brings several at once, a paint comes late)."""
        with self._lock:
            if self.stopped or not self._waiting(tile):
                return True
            return time.perf_counter() - self._drawn_at.get(tile, 0.0) >= _WAIT_S

    def result(self, result: FrameResult) -> None:
        """On the wall's delivery thread: ``result`` drawn into its tile (when ``ready``
        says; drawn over before a publish, it counts as replaced)."""
        tile, frame = result.frame.source_id, result.frame
        shapes = None  # laid out here, before the lock: the consumer's thread need not
        if isinstance(result.output, Detections):
            shapes = layout(result.output, self._labels, self._style, frame.width, frame.height)
        with self._lock:
            if self.stopped or not self.picture.put(tile, frame):
                return
            if tile in self._renewed:
                self._replaced += 1
            self._renewed.add(tile)
            self._drawn_at[tile] = time.perf_counter()
            rect = self.picture.rect(tile) or (0, 0, 0, 0)
            self._overlays[tile] = TileOverlay(
                result.output, tuple(result.marks), (frame.width, frame.height), rect, shapes,
                arrived=frame.arrived,
            )  # fmt: skip
            self._lock.notify_all()

    def use_host(self) -> None:
        """Pictures from now on through shared memory (the consumer asked)."""
        with self._lock:
            self._sender = self._host

    def carry(self, buffer: int, version: int) -> None:
        """The picture in ``buffer`` is given back unseen for the picture of ``version``,
        which holds its tiles' results: they wait for that one now."""
        with self._lock:
            held = self._in_flight.pop(buffer, None)
            newer = next((t for v, t in self._in_flight.values() if v == version), None)
            if held is not None and newer is not None:
                newer.update(held[1])
            self._lock.notify_all()

    def release(self, buffer: int) -> None:
        """The consumer is done with ``buffer``: its tiles' results were shown (or, told
        by ``carry`` first, are held by a newer picture)."""
        with self._lock:
            self._in_flight.pop(buffer, None)
            if buffer not in self._free:
                self._free.append(buffer)
            self._lock.notify_all()
        self.on_ready()  # outside the lock: waking the wall takes the wall's lock

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            self._lock.notify_all()
        self.on_ready()

    def _put(self, buffer: int) -> None:
        """The picture into ``buffer`` by the sender in use; a CUDA IPC sender that
        cannot is dropped for shared memory (the reason sent once)."""
        source = self.picture.picture()
        if self._sender is not self._host:
            try:
                self._sender.publish(buffer, source)
                return
            except EngineError as exc:
                why = self.picture.note or str(exc)
                self._sender = self._host
                self._send(("transport", f"CUDA IPC given up in the wall's process: {why}"))
        self._sender.publish(buffer, source)

    def run(self) -> None:
        """Publish until stopped: whenever a tile is renewed and a buffer is free."""
        while True:
            with self._lock:
                while not self.stopped and not (self._renewed and self._free):
                    self._lock.wait()
                if self.stopped:
                    return
                buffer = self._free.pop(0)
                try:
                    self._put(buffer)
                except Exception as exc:  # one message, not a wall that stalls unseen
                    self.stopped = True
                    self._lock.notify_all()
                    failed = error_message(exc)
                    break
                # only the renewed tiles' overlays: the others are the consumer's already
                renewed = {tile: self._overlays[tile] for tile in self._renewed}
                self._version += 1
                self._in_flight[buffer] = (self._version, self._renewed)
                self._renewed = set()
                message = ("picture", buffer, self._version, renewed, self._replaced,
                           self._sender.kind)  # fmt: skip
                self._lock.notify_all()
            self._send(message)
        self.on_ready()  # stopped: every tile takes its results (and drops them)
        self._send(("error", f"the video wall's picture could not be handed over: {failed}"))


def _queue_depth(settings: PipelineSettings, sources: int) -> int:
    """Results core queues a tile for the publisher while the consumer has yet to show
    the previous one. Host frames: ``_DEPTH``. Device frames each hold one of the display
    frames their pipeline keeps (``GpuFramePipeline.RGBA_BUFFERS`` per batch slot), less
    two batches (the one being made, the one drawn from) and the two results on their way
    (the collector's, the delivery thread's): fewer tiles than slots, up to
    ``_DEVICE_DEPTH``; more, fewer, never under the window's own ``DISPLAY_DEPTH``. A task
    that does not batch frames (super-resolution) keeps its display frames per pipeline,
    not per slot: the window's own depth there.
    ``FRAMELENS_WALL_DEPTH`` asks for another (a deeper queue rides out later paints and
    adds latency while it drains), on the GPU within the same bound."""
    from framelens.core.pipeline.gpu_pipeline import GpuFramePipeline
    from framelens.core.sessions.wall import DISPLAY_DEPTH, wall_batch
    from framelens.core.stages.tasks.registry import kind_of

    bound: int | None = None  # host frames hold no pool's buffers
    depth = _DEPTH
    if settings.device.startswith("cuda"):
        batch = wall_batch(settings, sources).batch
        spare = ((GpuFramePipeline.RGBA_BUFFERS - 2) * batch - 2) // max(1, sources)
        if not kind_of(settings.model).batches_frames:  # its display frames: per pipeline
            spare = DISPLAY_DEPTH
        bound = max(DISPLAY_DEPTH, spare)
        depth = min(_DEVICE_DEPTH, bound)
    asked = os.environ.get(DEPTH_ENV, "")
    if asked.isdigit() and int(asked) > 0:
        return int(asked) if bound is None else min(int(asked), bound)
    if asked:
        log.warning("%s=%s ignored: it takes a number of results, 1 or more", DEPTH_ENV, asked)
    return depth


def _ipc_sender(
    plan: WallTransport,
    size: tuple[int, int],
    commands: Connection,
    send: Callable[[tuple[Any, ...]], None],
    early: list[tuple[Any, ...]],
) -> IpcPictureSender | None:
    """The CUDA IPC buffers made and their handles opened by the parent, or None (the
    reason sent). Commands that come meanwhile are kept in ``early``."""
    try:
        sender = IpcPictureSender(get_context(plan.device or 0), *size, BUFFERS)
    except EngineError as exc:
        send(("transport", f"CUDA IPC not set up in the wall's process: {exc}"))
        return None
    send(("ipc-handles", sender.handles))
    answer: tuple[Any, ...] = ("transport", HOST)
    try:
        while commands.poll(_HANDSHAKE_S):
            command = commands.recv()
            if command[0] == "transport":
                answer = command
                break
            early.append(command)
            if command[0] == "stop":
                break
        else:
            send(("transport", "CUDA IPC: the consumer's process did not open the handles"))
    except (EOFError, OSError):  # the parent went away
        early.append(("stop",))
    if answer[1] != IPC:
        sender.close()
        return None
    return sender


def _child_main(
    specs: list[str],
    settings: PipelineSettings,
    stages: StageFactory | None,
    realtime: bool,
    shm_name: str,
    size: tuple[int, int],
    plan: WallTransport,
    commands: Connection,
    out: Connection,
) -> None:
    """The child: the wall played, its picture published, until "stop" or the parent
    goes away."""
    from framelens.core.sessions.wall import WallPlayer

    shm = SharedMemory(name=shm_name)
    send_lock = threading.Lock()

    def send(message: tuple[Any, ...]) -> None:
        with send_lock, contextlib.suppress(OSError, BrokenPipeError):
            out.send(message)

    early: list[tuple[Any, ...]] = []
    ipc = _ipc_sender(plan, size, commands, send, early) if plan.kind == IPC else None
    publisher = _Publisher(
        HostPictureSender(shm, size), IpcSender(ipc) if ipc is not None else None, size, send,
        tuple(settings.model.labels), settings.overlay,
    )  # fmt: skip
    publisher.picture.set_layout(len(specs))

    def on_state(state: Any) -> None:
        send(("state", state))

    def on_error(message: str) -> None:
        send(("error", message))

    player = WallPlayer(
        publisher.result, on_state, on_error, realtime=realtime, stages=stages,
        display_depth=_queue_depth(settings, len(specs)), ready=publisher.ready,
    )  # fmt: skip
    publisher.on_ready = player.wake
    thread = NamedThread(target=publisher.run, name="fl-wall-publish", daemon=True)
    thread.start()

    def next_command() -> tuple[Any, ...]:
        if early:
            return early.pop(0)
        command: tuple[Any, ...] = commands.recv()
        return command

    try:
        if not any(command[0] == "stop" for command in early):
            player.open(specs, settings)
        while True:
            try:
                command = next_command()
            except (EOFError, OSError):
                break  # the parent went away
            if command[0] == "release":
                publisher.release(int(command[1]))
            elif command[0] == "carry":
                publisher.carry(int(command[1]), int(command[2]))
            elif command[0] == "play":
                player.play()
            elif command[0] == "pause":
                player.pause()
            elif command[0] == "realtime":
                player.set_realtime(bool(command[1]))
            elif command[0] == "host":
                publisher.use_host()
            elif command[0] == "stop":
                break
    except Exception as exc:  # one line for the parent, not a traceback in its terminal
        send(("error", f"the video wall's process failed: {error_message(exc)}"))
    finally:
        publisher.stop()
        player.close()
        thread.join(5.0)
        if ipc is not None:  # the parent closed its handles before it said "stop"
            ipc.close()
        with contextlib.suppress(Exception):
            del publisher
            shm.close()
