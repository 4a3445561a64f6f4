"""The video wall's process, the child's side: its WallPlayer's results drawn into the
wall's picture and published to the consumer's process (core/sessions/wall_process.py,
which starts it with ``child_main`` and says how the two hand pictures over).

``Publisher`` puts the picture into a buffer the consumer has released, through CUDA IPC
or shared memory (``wall_transport``), and holds a tile's next result until the picture
with its previous one is handed back, so no result is drawn over unseen by a consumer that
keeps up. ``queue_depth`` is how many results core queues a tile meanwhile.
``child_main`` runs the player and answers the parent's commands until "stop" or until
the parent goes away.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.shared_memory import SharedMemory
from typing import Any

from framelens.core.errors import EngineError, error_message
from framelens.core.gpu.context import get_context
from framelens.core.gpu.wall_ipc import IpcPictureSender
from framelens.core.gpu.wall_picture import WallPicture
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.wall_transport import (
    HOST,
    IPC,
    HostPictureSender,
    IpcSender,
    PictureSender,
    WallTransport,
)
from framelens.core.stages.draw.style import Overlay, OverlayStyle, layout
from framelens.core.stages.source_stages import StageFactory
from framelens.core.threads import NamedThread
from framelens.core.types import Detections, FrameResult

__all__ = ["BUFFERS", "DEPTH_ENV", "Publisher", "TileOverlay", "child_main", "queue_depth"]

log = logging.getLogger(__name__)

BUFFERS = 2  # the picture is double-buffered
_DEPTH = 8  # results core queues per tile for the publisher (host frames)
_DEVICE_DEPTH = 5  # on the GPU, at most (``queue_depth``): a paint ~5 frames late costs none
DEPTH_ENV = "FRAMELENS_WALL_DEPTH"  # another depth (benchmarks/wall_screen.py --depths)
_WAIT_S = 0.5  # the longest a result waits for its tile's previous one to reach the consumer
_HANDSHAKE_S = 30.0  # the longest the child waits for the parent to open its IPC handles


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


class Publisher:
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
        # the wall would go on unseen: the parent stops it and says why (wall_process.py)
        self._send(("failed", f"the video wall's picture could not be handed over: {failed}"))


def queue_depth(settings: PipelineSettings, sources: int) -> int:
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


@dataclass(frozen=True)
class ChildJob:
    """What the wall's process is given (pickled to it): its sources and settings, the
    picture's shared memory and size, and the transport planned."""

    specs: list[str]
    settings: PipelineSettings
    stages: StageFactory | None
    realtime: bool
    shm_name: str
    size: tuple[int, int]
    plan: WallTransport


def child_main(job: ChildJob, commands: Connection, out: Connection) -> None:
    """The child: the wall played, its picture published, until "stop" or the parent
    goes away. What stops it otherwise reaches the parent as one line ("failed"), the
    last thing it sends, wherever it came from (setting up, opening, playing)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the GUI's: it closes the wall
    send_lock = threading.Lock()

    def send(message: tuple[Any, ...]) -> None:
        with send_lock, contextlib.suppress(OSError, BrokenPipeError):
            out.send(message)

    try:
        _serve(job, commands, send)
    except Exception as exc:  # one line for the parent, not a traceback in its terminal
        send(("failed", f"the video wall's process failed: {error_message(exc)}"))


def _serve(job: ChildJob, commands: Connection, send: Callable[[tuple[Any, ...]], None]) -> None:
    from framelens.core.sessions.wall import WallPlayer

    specs, settings, size, plan = job.specs, job.settings, job.size, job.plan
    shm = SharedMemory(name=job.shm_name)
    early: list[tuple[Any, ...]] = []
    ipc = _ipc_sender(plan, size, commands, send, early) if plan.kind == IPC else None
    publisher = Publisher(
        HostPictureSender(shm, size), IpcSender(ipc) if ipc is not None else None, size, send,
        tuple(settings.model.labels), settings.overlay,
    )  # fmt: skip
    publisher.picture.set_layout(len(specs))

    def on_state(state: Any) -> None:
        send(("state", state))

    def on_error(message: str) -> None:
        send(("error", message))

    player = WallPlayer(
        publisher.result, on_state, on_error, realtime=job.realtime, stages=job.stages,
        display_depth=queue_depth(settings, len(specs)), ready=publisher.ready,
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
    finally:  # an error goes on to child_main, which says it to the parent last
        publisher.stop()
        player.close()
        thread.join(5.0)
        if ipc is not None:  # the parent closed its handles before it said "stop"
            ipc.close()
        with contextlib.suppress(Exception):
            del publisher
            shm.close()
