"""The video wall's session in a process of its own (core/sessions/wall_process.py): real
clips cut from the sample, the real YOLOX-Nano in the child, its picture read from shared
memory here (the CUDA IPC transport: tests/gpu/test_wall_ipc_gpu.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from multiprocessing.shared_memory import SharedMemory
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from framelens.core.gpu.context import cuda_usable
from framelens.core.models.catalog import DEFAULT_MODEL, DEFAULT_SUPERRES_MODEL, resolve_model
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions import wall_child, wall_process
from framelens.core.sessions.wall import DISPLAY_DEPTH, WallState
from framelens.core.sessions.wall_child import Publisher, queue_depth
from framelens.core.sessions.wall_process import (
    DEPTH_ENV,
    SharedWallFrame,
    TileOverlay,
    WallProcess,
    wall_in_own_process,
)
from framelens.core.sessions.wall_transport import HOST, WallTransport
from framelens.core.stages.draw.style import OverlayStyle, layout
from framelens.core.stages.sources.file import FileSource
from framelens.core.types import Detections, Frame, FrameResult, StageTimes
from media_factory import encode_frames

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
SIZE = (640, 360)
TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Two clips of 3 s at 10 fps (192x108), from two places of the sample."""
    images: list[np.ndarray] = []
    with FileSource(SAMPLE) as src:
        for frame in src:
            images.append(cv2.resize(frame.image, (192, 108)))
            if len(images) >= 700:
                break
    folder = tmp_path_factory.mktemp("wall_process")
    return [
        str(encode_frames(folder / f"cam{n + 1}.mp4", images[start : start + 30], rate=10))
        for n, start in enumerate((40, 640))
    ]


class Consumer:
    """What a canvas does: takes each picture, looks at it, releases its buffer."""

    def __init__(self, transport: str = "auto") -> None:
        self.pictures: list[SharedWallFrame] = []
        self.crops: dict[int, np.ndarray] = {}  # each tile as its newest picture shows it
        self.last: np.ndarray | None = None  # the newest picture, as a BGR copy
        self.states: list[WallState] = []
        self.errors: list[str] = []
        self.transports: list[WallTransport] = []
        self.wall = WallProcess(
            self.on_picture, self.states.append, self.errors.append, size=SIZE,
            transport=transport, on_transport=self.transports.append,
        )  # fmt: skip
        self.changed = threading.Event()

    def bgr(self, frame: SharedWallFrame) -> np.ndarray:
        """The picture as this consumer reads it (shared memory: in place)."""
        assert frame.image is not None, f"a picture through {frame.transport} has no image"
        return frame.image

    def on_picture(self, frame: SharedWallFrame) -> None:
        image = self.bgr(frame)
        for tile, overlay in frame.overlays.items():  # the tiles this picture renews
            x, y, w, h = overlay.rect
            self.crops[tile] = image[y : y + h, x : x + w].astype(np.int16)
        self.last = image.copy()
        self.pictures.append(frame)
        self.wall.release(frame.buffer)
        self.changed.set()

    def wait(self, done: Any) -> None:
        end = time.monotonic() + TIMEOUT_S
        while not done():
            assert time.monotonic() < end, "timed out"
            self.changed.wait(0.2)
            self.changed.clear()


def ended(consumer: Consumer) -> bool:
    tiles = consumer.states[-1].tiles if consumer.states else ()
    return len(tiles) == 2 and all(t.status in ("ended", "failed") for t in tiles)


def handed_all(consumer: Consumer) -> bool:
    """Ended, and every result made handed to the window or dropped for it: the wall's
    last state (its tiles end when their last results are made; those queued for a
    window that has not taken them yet go on after)."""
    tiles = consumer.states[-1].tiles if ended(consumer) else ()
    return bool(tiles) and all(t.shown + t.dropped == t.frames for t in tiles)


def all_shown(consumer: Consumer) -> bool:
    """Every tile ended and every result the wall handed out (made and not dropped for a
    full queue) in some picture received (the last results' picture may still be on its
    way when the last state comes)."""
    if not ended(consumer):
        return False
    handed = sum(t.shown for t in consumer.states[-1].tiles)
    return sum(p.shown for p in consumer.pictures) >= handed > 0


def test_every_result_of_a_modest_wall_reaches_this_process_through_shared_memory(
    clips: list[str],
) -> None:
    consumer = Consumer()
    style = OverlayStyle(scores=False)  # not the default: the child lays out in the wall's
    consumer.wall.open(clips, PipelineSettings(model=resolve_model(DEFAULT_MODEL), overlay=style))
    try:
        consumer.wait(lambda: bool(consumer.pictures))
        # a window without CUDA-GL interop says so: nothing changes on shared memory
        consumer.wall.display_copies_to_host("no CUDA-GL interop in this window")
        consumer.wait(lambda: all_shown(consumer))
        time.sleep(0.3)  # a picture too many would come now
        final = consumer.states[-1]
        assert not consumer.errors
        # on the CPU the picture is in host memory: shared memory, and the reason said once
        assert len(consumer.transports) == 1 and consumer.transports[0].kind == HOST
        assert consumer.transports[0].reason == "the wall runs on the CPU"
        assert not consumer.transports[0].fell_back
        assert all(p.transport == HOST and p.device is None for p in consumer.pictures)
        assert all(t.status == "ended" for t in final.tiles)
        made = sum(t.frames for t in final.tiles)
        assert made >= 50  # 2 clips of 30 frames: nothing lost to a slow start
        last = consumer.pictures[-1]
        assert last.image.shape == (SIZE[1], SIZE[0], 3)
        assert last.replaced == 0, f"{last.replaced} of {made} results drawn over unseen"
        assert sum(p.shown for p in consumer.pictures) == made  # every result in a picture
        crops = [consumer.crops[tile] for tile in sorted(consumer.crops)]
        assert len(crops) == 2 and all(c.std() > 12 for c in crops), "a tile looks blank"
        h = min(len(crops[0]), len(crops[1]))
        assert np.abs(crops[0][:h] - crops[1][:h]).mean() > 8  # each tile its own source
        assert any(len(o.detections) for p in consumer.pictures for o in p.overlays.values())
        # each overlay laid out in the child, as this process would (the wall's labels and
        # style): the window's thread does not lay them out again
        labels = tuple(resolve_model(DEFAULT_MODEL).labels)
        for overlay in (o for p in consumer.pictures for o in p.overlays.values()):
            assert overlay.shapes is not None
            w, h = overlay.frame_size
            expected = layout(overlay.detections, labels, style, w, h)
            assert overlay.shapes.boxes == expected.boxes
    finally:
        consumer.wall.close()


def showing(clips: list[str]) -> tuple[Consumer, Any, str]:
    """A wall of ``clips`` whose first picture came: its consumer, its child process and
    the name of its shared memory."""
    consumer = Consumer()
    consumer.wall.open(clips, PipelineSettings(model=resolve_model(DEFAULT_MODEL)))
    process, name = consumer.wall._process, consumer.wall._shm.name  # type: ignore[union-attr]
    try:
        consumer.wait(lambda: bool(consumer.pictures))
    except BaseException:
        consumer.wall.close()
        raise
    return consumer, process, name


def test_closing_stops_the_child_and_frees_the_shared_memory(clips: list[str]) -> None:
    consumer, process, name = showing(clips)
    consumer.wall.close()
    assert not process.is_alive() and process.exitcode == 0  # stopped, not killed
    with pytest.raises(FileNotFoundError):
        SharedMemory(name=name)
    seen = len(consumer.pictures)
    time.sleep(0.3)
    assert len(consumer.pictures) == seen and not consumer.errors


def test_a_window_closing_is_not_held_by_a_child_that_does_not_stop(
    clips: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing the window returns at once even while the wall's process does not answer
    (stopped here: as one still building its engines would be, for longer): nothing is
    delivered after, and behind the window the child is killed after its grace period
    and the shared memory freed."""
    monkeypatch.setattr(wall_process, "_STOP_JOIN_S", 0.5)
    consumer, process, name = showing(clips)
    try:
        os.kill(process.pid, signal.SIGSTOP)  # it stays stopped: killed so, as it would be
        consumer.wall.close(wait=False)
        seen = len(consumer.pictures)
        assert process.is_alive() and not consumer.wall.ended.is_set()  # not waited for
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGCONT)
        consumer.wall.close()
        raise
    assert consumer.wall.ended.wait(TIMEOUT_S)
    assert not process.is_alive() and process.exitcode == -signal.SIGKILL
    with pytest.raises(FileNotFoundError):
        SharedMemory(name=name)
    assert len(consumer.pictures) == seen and not consumer.errors
    consumer.wall.close()  # again, waiting: nothing left to do


def test_a_child_that_dies_is_one_message(clips: list[str]) -> None:
    consumer = Consumer()
    style = OverlayStyle(scores=False)  # not the default: the child lays out in the wall's
    consumer.wall.open(clips, PipelineSettings(model=resolve_model(DEFAULT_MODEL), overlay=style))
    try:
        consumer.wait(lambda: bool(consumer.pictures))
        pid = consumer.wall.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        consumer.wait(lambda: bool(consumer.errors))
        time.sleep(0.3)
        assert len(consumer.errors) == 1
        assert "video wall's process stopped unexpectedly" in consumer.errors[0]
        assert "\n" not in consumer.errors[0]
        # the window is told the wall stopped, not left showing its last rates as if it
        # played on: the wall failed, every tile down with why, no rate
        state = consumer.states[-1]
        assert state.status == "failed" and state.fps == 0.0
        assert all(t.status == "failed" and t.fps == 0.0 for t in state.tiles), state.tiles
        assert all(t.reason == "the wall's process stopped" for t in state.tiles)
    finally:
        consumer.wall.close()


def test_ctrl_c_in_the_terminal_is_the_windows_not_the_childs(clips: list[str]) -> None:
    """Ctrl+C in the terminal reaches every process of its group: the child leaves it to
    the window (which closes the wall) and goes on, no traceback, no message (before: a
    KeyboardInterrupt traceback, and the wall's process gone)."""
    consumer = Consumer()
    consumer.wall.open(clips, PipelineSettings(model=resolve_model(DEFAULT_MODEL)))
    try:
        consumer.wait(lambda: bool(consumer.pictures))
        process = consumer.wall._process
        os.kill(process.pid, signal.SIGINT)
        seen = len(consumer.pictures)
        consumer.wait(lambda: len(consumer.pictures) > seen + 3)
        assert process.is_alive() and not consumer.errors, consumer.errors
    finally:
        consumer.wall.close()


def test_a_child_that_fails_says_why_in_its_own_words_once(
    clips: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child cannot attach the picture's shared memory (gone from /dev/shm before it
    came up: a tmp cleaner, say; fault injection: its name removed as soon as it is made,
    before the child starts, so the child never finds it): the one message is the child's
    own reason, not a traceback in the terminal and "stopped unexpectedly (exit code 1)"."""

    def made_then_removed(*args: Any, **kwargs: Any) -> SharedMemory:
        shm = SharedMemory(*args, **kwargs)
        shm.unlink()  # this process keeps its mapping; the name is gone
        return shm

    monkeypatch.setattr(wall_process, "SharedMemory", made_then_removed)
    consumer = Consumer()
    consumer.wall.open(clips, PipelineSettings(model=resolve_model(DEFAULT_MODEL)))
    try:
        consumer.wait(lambda: bool(consumer.errors))
        time.sleep(1.0)  # the end of the pipe comes after the child's last words
        assert len(consumer.errors) == 1, consumer.errors
        error = consumer.errors[0]
        assert error.startswith("the video wall's process failed: ") and "\n" not in error
        assert "stopped unexpectedly" not in error
        assert error.endswith("its sources are no longer played"), error
    finally:
        consumer.wall.close()


@pytest.mark.skipif(cuda_usable("cuda:0") is None, reason="CUDA IPC would be set up here")
def test_cuda_ipc_that_the_child_cannot_set_up_falls_back_to_shared_memory_with_one_reason(
    clips: list[str],
) -> None:
    consumer = Consumer(transport="ipc")  # tried without this process's own check
    consumer.wall.open(clips, PipelineSettings(model=resolve_model(DEFAULT_MODEL)))
    try:
        consumer.wait(lambda: all_shown(consumer))
        time.sleep(0.3)
    finally:
        consumer.wall.close()
    assert not consumer.errors, consumer.errors  # a fallback, not an error
    assert len(consumer.transports) == 1, consumer.transports
    fallback = consumer.transports[0]
    assert fallback.kind == HOST and fallback.fell_back and consumer.wall.transport == fallback
    assert fallback.reason.startswith("CUDA IPC not set up in the wall's process: ")
    assert "\n" not in fallback.reason
    assert all(p.transport == HOST for p in consumer.pictures)
    made = sum(t.frames for t in consumer.states[-1].tiles)
    assert made >= 50 and sum(p.shown for p in consumer.pictures) == made


def test_a_picture_taken_in_place_of_an_unseen_one_carries_its_tiles_on() -> None:
    """A consumer that takes the newer of two pictures (the older never shown) still
    shows the results the older renewed and the newer did not (the newer picture was
    drawn on over them): their overlays come along, and only the tiles renewed in both
    count as drawn over unseen."""

    def overlay(x: float) -> TileOverlay:
        boxes = np.array([[x, 0, x + 10, 10]], np.float32)
        dets = Detections(boxes, np.ones(1, np.float32), np.zeros(1, np.int32))
        return TileOverlay(dets, (), (192, 108), (0, 0, 96, 54))

    a, b, c, d = overlay(1), overlay(2), overlay(3), overlay(4)
    older = SharedWallFrame(0, 7, None, {0: a, 1: b}, replaced=0)
    newer = SharedWallFrame(1, 8, None, {1: c, 2: d}, replaced=0)
    taken, lost = newer.after(older)
    assert lost == 1  # tile 1: b was drawn over by c before any paint
    assert taken.overlays == {0: a, 1: c, 2: d} and taken.shown == 3
    assert (taken.buffer, taken.version) == (1, 8)  # the newer's picture


class PaintingConsumer(Consumer):
    """What the wall's window does with the pictures: the newest waits for the next
    paint (an older one still waiting is given back unseen, the newer carrying its tiles
    on), a paint every ``every_s`` holds its picture while it copies it (``hold_s``)."""

    def __init__(self, every_s: float, hold_s: float) -> None:
        super().__init__()
        self._every_s, self._hold_s = every_s, hold_s
        self._lock = threading.Lock()
        self._waiting: SharedWallFrame | None = None
        self.lost = 0  # results given back unseen that a newer picture drew over
        self.painted: list[SharedWallFrame] = []
        self._stop = threading.Event()
        self._painter = threading.Thread(target=self._paint, daemon=True)
        self._painter.start()

    def on_picture(self, frame: SharedWallFrame) -> None:
        with self._lock:
            older = self._waiting
            if older is not None:
                self.wall.release(older.buffer, unseen_for=frame.version)
                frame, lost = frame.after(older)
                self.lost += lost
            self._waiting = frame
        self.pictures.append(frame)
        self.changed.set()

    def _paint(self) -> None:
        while not self._stop.wait(self._every_s):
            with self._lock:
                frame, self._waiting = self._waiting, None
            if frame is not None:
                time.sleep(self._hold_s)  # the copy into the texture
                self.painted.append(frame)
                self.wall.release(frame.buffer)
                self.changed.set()

    def stop(self) -> None:
        self._stop.set()
        self._painter.join(5)


@pytest.mark.serial  # times itself: runs alone (installer/test.sh)
@pytest.mark.parametrize(
    "every_s, hold_s", [(0.05, 0.03), (0.1, 0.06)], ids=["20-paints-a-s", "6-paints-a-s"]
)
def test_a_window_that_paints_at_its_own_pace_shows_every_result_handed_to_it(
    clips: list[str], every_s: float, hold_s: float
) -> None:
    """Two 10 fps cameras, a window painting at its own pace (faster than each camera,
    or slower) that holds each picture a while and takes only the newest: every result
    handed to the window reaches a paint, none is drawn over unseen, in the child or here
    (a tile's next result waits for the picture that holds its previous one to come
    back). A window faster than the cameras gets every result made; one slower than them
    leaves core to drop results for it, each counted (the tile's ``dropped``)."""
    consumer = PaintingConsumer(every_s, hold_s)
    consumer.wall.open(clips, PipelineSettings(model=resolve_model(DEFAULT_MODEL)))
    try:
        consumer.wait(lambda: handed_all(consumer))

        def handed() -> int:  # results handed to the window, by the newest state
            return sum(t.shown for t in consumer.states[-1].tiles)

        end = time.monotonic() + 5.0  # the last pictures' paints, the last state
        while sum(p.shown for p in consumer.painted) != handed() and time.monotonic() < end:
            time.sleep(0.05)
        time.sleep(0.3)  # nothing more comes
        final = consumer.states[-1]
        made = sum(t.frames for t in final.tiles)
        assert not consumer.errors
        assert made >= 50
        assert consumer.lost == 0, f"{consumer.lost} results drawn over before a paint"
        assert consumer.pictures[-1].replaced == 0  # none drawn over in the child either
        assert sum(p.shown for p in consumer.painted) == handed()  # each painted once
        assert handed() + sum(t.dropped for t in final.tiles) == made  # the rest counted
        if every_s * 10 < 1:  # more paints than each camera's frames: nothing dropped
            assert handed() == made
    finally:
        consumer.stop()
        consumer.wall.close()


@pytest.mark.parametrize(
    "choice, device, own",
    [("auto", "cuda:0", True), ("auto", "cpu", False), ("own", "cpu", True),
     ("this", "cuda:1", False), ("bogus", "cuda:0", True)],
)  # fmt: skip
def test_where_a_wall_plays_by_choice_and_device(choice: str, device: str, own: bool) -> None:
    """Automatic: a process of its own on CUDA (the window's thread then shares no lock
    with the pipeline), this process on the CPU (the child would take inference's cores);
    an unknown choice is automatic."""
    assert wall_in_own_process(choice, device) is own


class _Broken:
    """A sender whose every hand-over fails (shared memory gone bad, say)."""

    kind = HOST

    def publish(self, buffer: int, picture: Any) -> None:
        raise OSError("the picture's memory cannot be written (injected)")


def test_a_picture_that_cannot_be_handed_over_stops_the_wall_with_one_reason() -> None:
    """The publisher cannot write a picture: it stops and tells the parent the wall
    failed (which then stops the child and says why once), rather than an error shown
    for 10 s over a wall that goes on decoding and inferring unseen."""
    sent = _Sent()
    publisher = Publisher(_Broken(), None, (64, 36), sent.send, ("person",), OverlayStyle())
    publisher.picture.set_layout(1)
    thread = threading.Thread(target=publisher.run, daemon=True)
    thread.start()
    frame = Frame(np.zeros((36, 64, 3), np.uint8), 0, 0.0, source_id=0)
    publisher.result(FrameResult(frame, Detections(), StageTimes()))
    thread.join(10)
    assert not thread.is_alive()
    assert [m[0] for m in sent.messages] == ["failed"], sent.messages
    assert "could not be handed over: " in sent.messages[0][1]
    assert "cannot be written (injected)" in sent.messages[0][1]


class _Sent:
    """The child's sender and pipe, kept here: what was published into which buffer."""

    kind = HOST

    def __init__(self) -> None:
        self.messages: list[tuple[Any, ...]] = []
        self.arrived = threading.Condition()

    def publish(self, buffer: int, picture: Any) -> None:
        pass

    def send(self, message: tuple[Any, ...]) -> None:
        with self.arrived:
            self.messages.append(message)
            self.arrived.notify_all()

    def picture(self, count: int) -> tuple[Any, ...]:
        """The ``count``-th picture message (1-based), once it came."""
        with self.arrived:
            assert self.arrived.wait_for(
                lambda: sum(m[0] == "picture" for m in self.messages) >= count, 10
            )
            return [m for m in self.messages if m[0] == "picture"][count - 1]


def test_a_tile_painted_is_free_at_once_and_one_given_back_unseen_waits_for_the_newer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The child's rule, message by message: a tile whose picture was painted may take
    its next result; a tile of a picture given back unseen for a newer one waits until
    that newer one comes back (it holds the tile's result)."""
    monkeypatch.setattr(wall_child, "_WAIT_S", 60.0)  # a slow machine gives up on none
    sent = _Sent()
    publisher = Publisher(sent, None, (64, 36), sent.send, ("person",), OverlayStyle())
    publisher.picture.set_layout(3)
    thread = threading.Thread(target=publisher.run, daemon=True)
    thread.start()
    image = np.zeros((36, 64, 3), np.uint8)

    def result(tile: int) -> FrameResult:
        frame = Frame(image, 0, 0.0, source_id=tile)
        return FrameResult(frame, Detections(), StageTimes())

    try:
        publisher.result(result(0))
        _, first, _, renewed, _, _ = sent.picture(1)
        assert set(renewed) == {0}
        publisher.result(result(1))
        _, second, _, renewed, _, _ = sent.picture(2)
        assert set(renewed) == {1}
        assert not publisher.ready(0) and not publisher.ready(1)  # both on their way
        publisher.release(first)  # painted: tile 0 shown
        assert publisher.ready(0) and not publisher.ready(1)
        publisher.result(result(0))
        _, third, v3, renewed, _, _ = sent.picture(3)
        assert third == first and set(renewed) == {0}
        # the window takes the newest (v3) and gives v2 back unseen: v3 holds tile 1 too
        publisher.carry(second, v3)
        publisher.release(second)
        assert not publisher.ready(1) and not publisher.ready(0)
        publisher.release(third)  # v3 painted: both shown
        assert publisher.ready(0) and publisher.ready(1)
    finally:
        publisher.stop()
        thread.join(5)


def test_a_tile_whose_picture_never_comes_back_is_given_up_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A consumer that stops painting (a window hidden, a hung paint) holds a tile's next
    result only ``_WAIT_S``: then it is drawn over its unseen predecessor (counted as
    replaced, the wall goes on); stopping frees every tile at once."""
    monkeypatch.setattr(wall_child, "_WAIT_S", 1.5)  # a slow machine's pause is shorter
    sent = _Sent()
    woken = threading.Event()
    publisher = Publisher(sent, None, (64, 36), sent.send, ("person",), OverlayStyle())
    publisher.on_ready = woken.set
    publisher.picture.set_layout(2)
    image = np.zeros((36, 64, 3), np.uint8)
    frame = Frame(image, 0, 0.0, source_id=0)
    publisher.result(FrameResult(frame, Detections(), StageTimes()))  # no publisher thread
    assert not publisher.ready(0) and publisher.ready(1)
    deadline = time.monotonic() + 10
    while not publisher.ready(0) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert publisher.ready(0)
    publisher.result(FrameResult(frame, Detections(), StageTimes()))
    assert publisher._replaced == 1  # drawn over before any publish
    assert not woken.is_set()
    publisher.stop()
    assert woken.is_set() and publisher.ready(0)


@pytest.mark.parametrize(("sources", "depth"), [(4, 5), (16, 5), (32, 5), (64, 2), (200, 2)])
def test_a_gpu_wall_queues_as_many_results_a_tile_as_its_display_frames_allow(
    sources: int, depth: int
) -> None:
    """Queued device results hold their pipeline's display frames (8 per batch slot, the
    batch one slot a source up to 32): a small wall rides out a paint ~5 frames late, a
    large one queues fewer, never fewer than the window's own process does; a
    super-resolution model's frames are few per pipeline: as the window's own process."""
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), device="cuda:0")
    assert queue_depth(settings, sources) == depth
    assert depth >= DISPLAY_DEPTH
    upscaling = PipelineSettings(resolve_model(DEFAULT_SUPERRES_MODEL), device="cuda:0")
    assert queue_depth(upscaling, sources) == DISPLAY_DEPTH


def test_another_gpu_queue_depth_is_asked_for_within_the_same_bound(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The benchmark's A/B (``--depths``) sets the depth through the environment: taken
    as asked, on the GPU never past what the display frames allow; a value that is no depth is
    said to be ignored."""
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), device="cuda:0")
    monkeypatch.setenv(DEPTH_ENV, "2")
    assert queue_depth(settings, 16) == 2
    monkeypatch.setenv(DEPTH_ENV, "40")
    assert queue_depth(settings, 16) == 5  # 8 a slot, less two batches and two results
    monkeypatch.setenv(DEPTH_ENV, "deep")
    assert queue_depth(settings, 16) == 5
    assert f"{DEPTH_ENV}=deep ignored" in caplog.text
    on_cpu = PipelineSettings(resolve_model(DEFAULT_MODEL))  # host frames: no such bound
    assert queue_depth(on_cpu, 16) == 8
    monkeypatch.setenv(DEPTH_ENV, "40")
    assert queue_depth(on_cpu, 16) == 40
