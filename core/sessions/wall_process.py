"""The video wall's session in a process of its own; its picture shared with this one.

    child process: WallPlayer ──results──> WallPicture (host, this process's own copy)
        ──publish: one memcpy into a free buffer of shared memory──> Pipe: ("picture", ...)
    this process: reader thread ──on_picture(SharedWallFrame)──> the consumer (a canvas)
        ──release(buffer)──> Pipe ──> the buffer is free for the child again

Decode, inference, tracking and the drawing of every tile run in the child, so the
consumer's process (the GUI's) holds no pipeline thread that competes for its GIL. The
picture is double-buffered in ``multiprocessing.shared_memory``: the child writes only a
buffer the consumer has released, and the consumer reads the one it was handed in place
(``SharedWallFrame.image`` is a view of the shared memory, no copy), until it releases
it. The child publishes when a buffer is free, so a consumer that keeps up gets every
result of every tile in some picture; a tile renewed twice between two publishes counts
one ``replaced``. Overlays (detections, lines and zones), states and errors travel in
the pipe's messages. ``close`` stops the child and frees the shared memory; a child that
dies is one ``on_error`` message.

The GPU path would hand device memory the same way (docs/architecture.md: CUDA IPC); this
module is the host path and the seam (``SharedWallFrame``) that path would fill.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.shared_memory import SharedMemory
from typing import Any

import numpy as np
from framelens.core.errors import error_message
from framelens.core.gpu.wall_picture import WallPicture
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.stages.source_stages import StageFactory
from framelens.core.types import Detections, FrameResult, Image

__all__ = ["BUFFERS", "SharedWallFrame", "TileOverlay", "WallProcess"]

BUFFERS = 2
_DEPTH = 8  # results core queues per tile for the child's publisher (host frames)
_WAIT_S = 0.5  # the longest a result waits for its tile's previous one to be published
_STOP_JOIN_S = 10.0


@dataclass(frozen=True)
class TileOverlay:
    """What is painted over a tile: its newest result's detections and marks (lines and
    zones with their counts), for a frame of ``frame_size`` drawn into ``rect``."""

    detections: Detections
    marks: tuple[object, ...]
    frame_size: tuple[int, int]
    rect: tuple[int, int, int, int]


@dataclass(frozen=True)
class SharedWallFrame:
    """One published picture of the wall: ``image`` is a view of shared memory (BGR,
    valid until ``WallProcess.release(buffer)``), ``overlays`` by tile, ``shown`` the
    tiles renewed since the previous picture, ``replaced`` every result drawn over before
    it was published (since the start)."""

    buffer: int
    version: int
    image: Image
    overlays: dict[int, TileOverlay]
    shown: int
    replaced: int


StateCallback = Callable[[Any], None]
ErrorCallback = Callable[[str], None]
PictureCallback = Callable[[SharedWallFrame], None]


class WallProcess:
    """``specs`` played by a WallPlayer in a spawned process, its picture of ``size``
    pixels shared with this process. Callbacks run on a reader thread of this process
    (a GUI marshals them onto its own)."""

    def __init__(
        self,
        on_picture: PictureCallback,
        on_state: StateCallback,
        on_error: ErrorCallback,
        *,
        size: tuple[int, int] = (1280, 720),
        realtime: bool = True,
        stages: StageFactory | None = None,
    ) -> None:
        self._on_picture, self._on_state, self._on_error = on_picture, on_state, on_error
        self.width, self.height = size
        self._realtime, self._stages = realtime, stages
        self._shm: SharedMemory | None = None
        self._process: Any = None
        self._to_child: Connection | None = None
        self._reader: threading.Thread | None = None
        self._closing = False
        self._send_lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def open(self, specs: Sequence[str], settings: PipelineSettings) -> None:
        """Start the child on ``specs``; returns at once (the opening's errors arrive
        through ``on_error``)."""
        if self._process is not None:
            raise RuntimeError("a WallProcess opens its sources once")
        frame_bytes = self.width * self.height * 3
        self._shm = SharedMemory(create=True, size=frame_bytes * BUFFERS)
        ctx = multiprocessing.get_context("spawn")  # CUDA cannot be forked
        from_child, child_out = ctx.Pipe(duplex=False)
        child_in, to_child = ctx.Pipe(duplex=False)
        shape = (self.width, self.height)
        args = (list(specs), settings, self._stages, self._realtime, self._shm.name, shape)
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
        self._reader = threading.Thread(
            target=self._read, args=(from_child,), name="fl-wall-reader", daemon=True
        )
        self._reader.start()

    def _view(self, buffer: int) -> Image:
        assert self._shm is not None
        size = self.width * self.height * 3
        array: Image = np.ndarray(
            (self.height, self.width, 3), np.uint8, self._shm.buf, offset=buffer * size
        )
        return array

    def _read(self, conn: Connection) -> None:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                break
            kind = message[0]
            if kind == "picture":
                _, buffer, version, overlays, shown, replaced = message
                frame = SharedWallFrame(
                    buffer, version, self._view(buffer), overlays, shown, replaced
                )
                self._on_picture(frame)
            elif kind == "state":
                self._on_state(message[1])
            elif kind == "error":
                self._on_error(message[1])
        conn.close()
        if not self._closing:
            process = self._process
            process.join(_STOP_JOIN_S)
            code = process.exitcode
            self._on_error(
                f"the video wall's process stopped unexpectedly (exit code {code}); "
                "its sources are no longer played"
            )

    def _send(self, message: tuple[Any, ...]) -> None:
        with self._send_lock:
            if self._to_child is None:
                return
            with contextlib.suppress(OSError, BrokenPipeError):
                self._to_child.send(message)

    def release(self, buffer: int) -> None:
        """The consumer is done with ``buffer`` (uploaded it): the child may write it."""
        self._send(("release", buffer))

    def play(self) -> None:
        self._send(("play",))

    def pause(self) -> None:
        self._send(("pause",))

    def set_realtime(self, realtime: bool) -> None:
        self._send(("realtime", realtime))

    def close(self) -> None:
        """Stop the child (at once, or killed after a grace period) and free the shared
        memory; nothing is delivered after this returns."""
        self._closing = True
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
        if self._shm is not None:
            with contextlib.suppress(BufferError):  # a view still held: freed with it
                self._shm.close()
            with contextlib.suppress(FileNotFoundError):
                self._shm.unlink()
            self._shm = None


class _Publisher:
    """The child's side: results drawn into its own picture, copied into a free shared
    buffer when one is (at most one picture on its way, the rest waits for a release)."""

    def __init__(self, shm: SharedMemory, size: tuple[int, int], out: Connection) -> None:
        self.width, self.height = size
        self._shm, self._out = shm, out
        self.picture = WallPicture(size)
        self._lock = threading.Condition()
        self._free = list(range(BUFFERS))
        self._overlays: dict[int, TileOverlay] = {}
        self._renewed: set[int] = set()
        self._replaced = 0
        self._version = 0
        self.stopped = False

    def result(self, result: FrameResult) -> None:
        """On the wall's delivery thread: ``result`` drawn into its tile once the tile's
        previous result is published (a batch brings several results of a tile at once;
        core queues up to ``_DEPTH`` a tile meanwhile), or drawn over it after
        ``_WAIT_S`` (a consumer that does not keep up: counted as replaced)."""
        tile, frame = result.frame.source_id, result.frame
        with self._lock:
            self._lock.wait_for(lambda: self.stopped or tile not in self._renewed, _WAIT_S)
            if self.stopped or not self.picture.put(tile, frame):
                return
            if tile in self._renewed:
                self._replaced += 1
            self._renewed.add(tile)
            rect = self.picture.rect(tile) or (0, 0, 0, 0)
            self._overlays[tile] = TileOverlay(
                result.output, tuple(result.marks), (frame.width, frame.height), rect
            )
            self._lock.notify_all()

    def release(self, buffer: int) -> None:
        with self._lock:
            if buffer not in self._free:
                self._free.append(buffer)
            self._lock.notify_all()

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            self._lock.notify_all()

    def run(self) -> None:
        """Publish until stopped: whenever a tile is renewed and a buffer is free."""
        size = self.width * self.height * 3
        while True:
            with self._lock:
                while not self.stopped and not (self._renewed and self._free):
                    self._lock.wait()
                if self.stopped:
                    return
                buffer = self._free.pop(0)
                view: Image = np.ndarray(
                    (self.height, self.width, 3), np.uint8, self._shm.buf, offset=buffer * size
                )
                source = self.picture.picture()
                if not isinstance(source, np.ndarray):  # drawn on the GPU: one download
                    source = source.to_host_bgr()  # (the CUDA IPC seam: docs/architecture.md)
                np.copyto(view, source)
                shown, self._renewed = len(self._renewed), set()
                self._version += 1
                message = ("picture", buffer, self._version, dict(self._overlays), shown,
                           self._replaced)  # fmt: skip
                self._lock.notify_all()  # results waiting for their tile's publish
            try:
                self._out.send(message)
            except (OSError, BrokenPipeError):
                return


def _child_main(
    specs: list[str],
    settings: PipelineSettings,
    stages: StageFactory | None,
    realtime: bool,
    shm_name: str,
    size: tuple[int, int],
    commands: Connection,
    out: Connection,
) -> None:
    """The child: the wall played, its picture published, until "stop" or the parent
    goes away."""
    from framelens.core.sessions.wall import DISPLAY_DEPTH, WallPlayer

    shm = SharedMemory(name=shm_name)
    send_lock = threading.Lock()

    def send(message: tuple[Any, ...]) -> None:
        with send_lock, contextlib.suppress(OSError, BrokenPipeError):
            out.send(message)

    publisher = _Publisher(shm, size, out)
    publisher.picture.set_layout(len(specs))

    def on_state(state: Any) -> None:
        send(("state", state))

    def on_error(message: str) -> None:
        send(("error", message))

    # device frames hold their pipeline's pool buffers while queued: as few as in the
    # window's own process there (a burst of a batch beyond it is dropped and counted)
    depth = DISPLAY_DEPTH if settings.device.startswith("cuda") else _DEPTH
    player = WallPlayer(
        publisher.result, on_state, on_error, realtime=realtime, stages=stages, display_depth=depth
    )
    thread = threading.Thread(target=publisher.run, name="fl-wall-publish", daemon=True)
    thread.start()
    try:
        player.open(specs, settings)
        while True:
            try:
                command = commands.recv()
            except (EOFError, OSError):
                break  # the parent went away
            if command[0] == "release":
                publisher.release(int(command[1]))
            elif command[0] == "play":
                player.play()
            elif command[0] == "pause":
                player.pause()
            elif command[0] == "realtime":
                player.set_realtime(bool(command[1]))
            elif command[0] == "stop":
                break
    except Exception as exc:  # one line for the parent, not a traceback in its terminal
        send(("error", f"the video wall's process failed: {error_message(exc)}"))
    finally:
        publisher.stop()
        player.close()
        thread.join(5.0)
        with contextlib.suppress(Exception):
            del publisher
            shm.close()
