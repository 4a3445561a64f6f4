"""The video wall: N sources played at once, a consumer of the one session.

    sources ──PacedSource (each on MergedSource's thread for it)──> Session
        (core/sessions/session.py: merged source, executor, per-source stages, failover)
        ──results──> collector thread
        ──per tile, at most ``display_depth`` results──> delivery thread ──> on_result

The session builds the workers as for the CLI's several-source run (the batch following
the number of sources, 8..32) and moves the sources of a failing GPU to the CPU. Pacing
happens where each source is read, on its own clock (its pts), so a 10 fps file and a 30
fps file each play at their own rate and the executor never holds frames back; "as fast
as possible" turns that off. The collector drains the session at once, whatever the
consumer does: a slow consumer costs dropped frames (the oldest of a tile's queue,
counted per tile), never a stalled pipeline or latency that grows. A source that fails
is reported (``on_error``, the source named) and its tile says why; the others go on
(MergedSource keeps reading them). Callbacks run on the wall's threads; a GUI marshals
them onto its own.
"""

from __future__ import annotations

import logging
import math
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from framelens.core.errors import SourceError, error_message
from framelens.core.pipeline.execute import DrawPolicy
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.outputs import output_names
from framelens.core.sessions.playback.clock import PlaybackClock
from framelens.core.sessions.session import Session, SessionOptions, session_batch
from framelens.core.stages.source_stages import StageFactory
from framelens.core.stages.sources import Source
from framelens.core.threads import NamedThread
from framelens.core.types import Frame, FrameResult

__all__ = ["DISPLAY_DEPTH", "PacedSource", "TileState", "WallPlayer", "WallState", "wall_batch"]

log = logging.getLogger(__name__)

DISPLAY_DEPTH = 2  # results queued per tile for the consumer; older ones are dropped
STATE_EVERY_S = 0.5  # state (with the measured rates) at most this often
_LATE_RESYNC_S = 0.25  # a source further behind its clock than this restarts the clock
_LATENCY_WINDOW = 30  # results a tile's latency is the median of
_RATE_SAMPLES = 6  # states the rates are measured over (about 2.5 s)
_NOT_READY_POLL_S = 0.02  # results wait for a consumer not ready: looked at again after

ResultCallback = Callable[[FrameResult], None]
StateCallback = Callable[["WallState"], None]
ErrorCallback = Callable[[str], None]


def wall_batch(settings: PipelineSettings, sources: int) -> PipelineSettings:
    """The batch of a wall of ``sources``: as the CLI's several-source run, one slot per
    source, at least MULTI_BATCH, at most MAX_BATCH (a batch asked for is kept)."""
    return session_batch(settings, sources)


@dataclass(frozen=True)
class TileState:
    """One source of the wall."""

    name: str  # what the tile is labelled (a file's stem, a camera's index, ...)
    spec: str  # as opened
    status: str = "opening"  # "opening" | "playing" | "ended" | "failed" | "reconnecting"
    reason: str = ""  # why it failed
    fps: float = 0.0  # results per second of this source
    latency_ms: float = math.nan  # median end to end (StageTimes.e2e) of the last results
    frames: int = 0  # results made
    shown: int = 0  # results handed to on_result
    dropped: int = 0  # results dropped because the consumer was behind
    width: int = 0
    height: int = 0


@dataclass(frozen=True)
class WallState:
    """A snapshot of the wall, sent on every change and periodically while playing."""

    status: str = "opening"  # "opening" | "playing" | "paused" | "ended" | "failed"
    tiles: tuple[TileState, ...] = ()
    fps: float = 0.0  # results per second, all sources together
    mean_batch: float = 0.0  # frames per engine call since the last state
    batch: int = 1  # the most frames an engine call may take
    realtime: bool = True
    path: str = ""  # how the workers run ("cpu pipeline", "gpu pipeline", ...)
    model: str = ""
    batches_run: int = 0  # engine calls so far
    frames_run: int = 0  # frames in them

    @property
    def playing(self) -> bool:
        return self.status == "playing"


@dataclass
class _Pacing:
    """What every PacedSource of one wall reads: play/pause, real time, stop."""

    playing: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)
    realtime: bool = True
    epoch: int = 0  # bumped on play and on a pacing change: every clock restarts


class PacedSource(Source):
    """``inner`` read no faster than its frames' pts (when real time is on and the source
    is recorded: a file, a folder, a recording over HTTP; live sources come at their own
    rate), and not at all while the
    wall is paused. Runs on MergedSource's thread for this source."""

    def __init__(self, inner: Source, pacing: _Pacing) -> None:
        self.inner = inner
        self.info = inner.info
        self._pacing = pacing
        # fell behind (a slow model) by more than a quarter second: restart, don't rush
        self._clock = PlaybackClock(resync_s=_LATE_RESYNC_S)
        self._epoch = -1
        self._paced = inner.recorded and inner.info.fps > 0

    @property
    def reconnecting(self) -> bool:
        return self.inner.reconnecting

    def read(self) -> Frame | None:
        p = self._pacing
        while not p.playing.is_set():
            if p.stop.is_set():
                return None
            p.playing.wait(0.05)
        frame = self.inner.read()
        if frame is None or not self._paced or not p.realtime:
            return frame
        if self._epoch != p.epoch:  # play or a pacing change: the clock restarts
            self._clock.reset()
            self._epoch = p.epoch
        due = self._clock.due(float(frame.pts))  # late or jumped: restarts, due now
        while not p.stop.is_set() and (left := due - time.perf_counter()) > 0:
            p.stop.wait(min(left, 0.05))
        # the frame's release: when it was due, as a camera delivers it (decoded ahead of
        # it here, so decoding is not in its latency; a frame more than the clock's resync
        # late counts from the resync). Its latency counts from here (end to end, the
        # tile's, the screen's), not from the read that waited for it.
        if due > 0:  # 0: the clock does not pace
            frame.arrived = min(due, time.perf_counter()) * 1000.0  # now_ms's clock
        return frame

    def seek(self, index: int) -> None:
        self._clock.reset()
        self.inner.seek(index)

    def close(self) -> None:
        self.inner.close()


class _Tile:
    """A tile's queue for the consumer and its measurements (guarded by the wall's lock)."""

    def __init__(self, state: TileState) -> None:
        self.state = state
        self.queue: deque[FrameResult] = deque()
        self.latency: deque[float] = deque(maxlen=_LATENCY_WINDOW)


class WallPlayer:
    """Plays ``specs`` together on threads of its own; ``open`` once, then play/pause,
    close. ``draw``: overlays drawn into the results' frames ("host"), or left to the
    consumer ("none": it paints ``result.output``). ``realtime``: files at their own
    pace; else as fast as the pipeline goes."""

    def __init__(
        self,
        on_result: ResultCallback,
        on_state: StateCallback,
        on_error: ErrorCallback,
        *,
        realtime: bool = True,
        draw: DrawPolicy = "none",
        display_depth: int = DISPLAY_DEPTH,
        spinning: bool = False,
        stages: StageFactory | None = None,
        ready: Callable[[int], bool] | None = None,
    ) -> None:
        if display_depth < 1:
            raise ValueError("display_depth must be at least 1")
        self._on_result, self._on_state, self._on_error = on_result, on_state, on_error
        self._draw: DrawPolicy = draw
        self._depth = display_depth
        # whether the consumer takes a tile's next result now (it holds the previous one
        # until it is on screen): the delivery thread hands out the tiles that are, and
        # never waits on one tile while others could go on (``wake`` when one becomes so)
        self._ready = ready
        self._wakes = 0  # wake() calls: one that came while the consumer was asked counts
        self._spinning = spinning
        self._stages = stages  # per-source stages after the task, one chain per tile
        self._session: Session | None = None
        self._pacing = _Pacing(realtime=realtime)
        self._lock = threading.Condition()
        # a state is built and told under this one, so states reach on_state in the order
        # they were made (a rate update made just before a pause is never told after it)
        self._telling = threading.RLock()
        self._tiles: list[_Tile] = []
        self._state = WallState(realtime=realtime)
        # (time, results per tile) at the last few states: rates over a few seconds
        self._samples: deque[tuple[float, tuple[int, ...]]] = deque(maxlen=_RATE_SAMPLES)
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._opened = False
        self._want_playing = True

    @property
    def state(self) -> WallState:
        return self._state

    # ---- commands (any thread) ------------------------------------------------------------

    def open(self, specs: Sequence[str], settings: PipelineSettings, *, play: bool = True) -> None:
        """Open every source and start (``play``) or hold them; returns at once, the
        opening happens on the wall's thread (errors through ``on_error``)."""
        if self._opened:
            raise RuntimeError("a WallPlayer opens its sources once")
        if not specs:
            raise SourceError("no sources for the wall")
        self._opened = True
        self._want_playing = play
        names = output_names(specs)
        self._tiles = [_Tile(TileState(n, s)) for n, s in zip(names, specs, strict=True)]
        self._state = replace(self._state, tiles=tuple(t.state for t in self._tiles))
        self._threads = [
            NamedThread(
                target=self._collect, args=(list(specs), settings), name="fl-wall", daemon=True
            ),
            NamedThread(target=self._deliver, name="fl-wall-show", daemon=True),
        ]
        for t in self._threads:
            t.start()

    def play(self) -> None:
        self._want_playing = True
        if self._state.status in ("paused", "opening"):
            self._pacing.epoch += 1
            self._pacing.playing.set()
            if self._state.status == "paused":
                self._publish(status="playing")

    def pause(self) -> None:
        self._want_playing = False
        self._pacing.playing.clear()
        if self._state.status == "playing":
            self._publish(status="paused", fps=0.0)

    def toggle(self) -> None:
        if self._state.playing or (self._state.status == "opening" and self._want_playing):
            self.pause()
        else:
            self.play()

    def set_realtime(self, realtime: bool) -> None:
        self._pacing.realtime = bool(realtime)
        self._pacing.epoch += 1
        self._publish(realtime=bool(realtime))

    def close(self) -> None:
        """Stop every thread, then release the sources and the pipelines."""
        if self._closed:
            return
        self._closed = True
        self._pacing.stop.set()
        self._pacing.playing.set()  # a paused source's reader wakes up and sees stop
        with self._lock:
            self._lock.notify_all()
        for t in self._threads:
            t.join(timeout=30)

    # ---- the collector thread: opens, drains the session, measures -------------------

    def _collect(self, specs: list[str], settings: PipelineSettings) -> None:
        reported_errors: set[str] = set()

        def batch_failed(error: BaseException) -> None:
            text = error_message(error)
            if text not in reported_errors:  # once: a batch fails frame by frame
                reported_errors.add(text)
                self._on_error(text)

        options = SessionOptions(
            draw=self._draw, copy=True, depth=1, decode_depth=1, merged=True,
            wrap=lambda source: PacedSource(source, self._pacing), on_error=batch_failed,
        )  # fmt: skip
        session = Session(
            specs, settings, names=[t.state.name for t in self._tiles], options=options,
            stages=self._stages, say=self._on_error, spinning=self._spinning,
        )  # fmt: skip
        self._session = session

        def opened(i: int) -> None:  # each tile says so as its source opens, or why not
            entry = session.sources[i]
            if entry.source is not None:
                info = entry.source.info
                self._set_tile(i, status="playing", width=info.width, height=info.height)
            elif entry.failure is not None:
                self._tile_failed(i, f"cannot open: {entry.failure}")

        try:
            session.open(stop=lambda: self._closed, on_opened=opened)
            if self._closed:
                return
            ran = session.ran
            status = "playing" if self._want_playing else "paused"
            self._publish(status=status, batch=ran.batch, path=session.path, model=ran.model.name)
            if self._want_playing:
                self._pacing.playing.set()
            self._drain(session)
        except BaseException as exc:
            if not self._closed:
                # every tile already said why it could not open: no line more for that
                if not all(s.failure is not None for s in session.sources):
                    self._on_error(error_message(exc))
                self._publish(status="failed")
        finally:
            self._pacing.stop.set()
            with self._lock:
                self._lock.notify_all()
            session.close()

    def _drain(self, session: Session) -> None:
        reported: set[int] = set()
        marks = (0, 0)  # (batches, frames) at the last state

        def tick() -> None:
            nonlocal marks
            self._check_failures(session, reported)
            if time.perf_counter() - self._last_state_s >= STATE_EVERY_S:
                marks = self._publish_rates(session, marks)

        for result in session.results(lambda: self._closed, tick):
            self._take(session, result)
            tick()
        if self._closed:
            return
        self._publish_rates(session, marks)
        for i in range(len(self._tiles)):
            if self._tiles[i].state.status not in ("failed", "opening"):
                self._set_tile(i, status="ended", fps=0.0)
        self._check_failures(session, reported)
        self._publish(status="ended", fps=0.0)

    def _take(self, session: Session, result: FrameResult) -> None:
        tile = self._tiles[result.frame.source_id]  # the session numbers sources as tiles
        source = session.sources[result.frame.source_id].source
        with self._lock:
            if math.isfinite(result.times.e2e):
                tile.latency.append(result.times.e2e)
            tile.state = replace(tile.state, frames=tile.state.frames + 1)
            count = source.info.frame_count if source is not None else None
            if count is not None and tile.state.frames >= count:
                tile.state = replace(tile.state, status="ended", fps=0.0)
            while len(tile.queue) >= self._depth:  # live: the newest frames, not all
                tile.queue.popleft()
                tile.state = replace(tile.state, dropped=tile.state.dropped + 1)
            tile.queue.append(result)
            self._lock.notify_all()

    def _check_failures(self, session: Session, reported: set[int]) -> None:
        for i, why in session.failures().items():
            if i not in reported:
                reported.add(i)
                if self._tiles[i].state.status != "failed":
                    self._tile_failed(i, why)
        for i, entry in enumerate(session.sources):
            tile = self._tiles[i]
            if entry.source is None or tile.state.status not in ("playing", "reconnecting"):
                continue
            down = entry.source.reconnecting
            status = "reconnecting" if down else "playing"
            if status != tile.state.status:
                self._set_tile(i, status=status)

    def _tile_failed(self, i: int, why: str) -> None:
        tile = self._tiles[i]
        self._set_tile(i, status="failed", reason=why, fps=0.0)
        self._on_error(f"{tile.state.name} ({tile.state.spec}) failed: {why}")

    # ---- the delivery thread: the consumer's pace, newest frames first ------------------

    def wake(self) -> None:
        """The consumer is ready for a tile it was not (``ready``): deliver again."""
        with self._lock:
            self._wakes += 1
            self._lock.notify_all()

    def _deliver(self) -> None:
        turn = 0
        while True:
            with self._lock:
                while True:
                    if self._closed:
                        return
                    n = len(self._tiles)
                    in_turn = ((turn + k) % n for k in range(n))
                    queued = [i for i in in_turn if self._tiles[i].queue]
                    if queued or self._pacing.stop.is_set():
                        break
                    self._lock.wait(0.1)
                wakes = self._wakes
            if not queued:  # the wall has ended and every result was handed out
                if not self._closed:
                    self._publish()  # the final counts of what was shown
                return
            # asked outside the lock: the consumer may take its own lock for a while (a
            # picture being published), and the collector must not wait for that
            chosen = next((i for i in queued if self._is_ready(i)), None)
            with self._lock:
                if chosen is None:
                    # a tile becomes ready by wake(), or by the consumer's own time limit
                    if self._wakes == wakes and not self._closed:
                        self._lock.wait(_NOT_READY_POLL_S)
                    continue
                tile = self._tiles[chosen]
                result = tile.queue.popleft()  # never emptied but here
                tile.state = replace(tile.state, shown=tile.state.shown + 1)
                turn = (chosen + 1) % len(self._tiles)
            try:
                self._on_result(result)
            except Exception:  # a consumer's bug must not stop the wall
                log.exception("the wall's consumer failed on a result")

    def _is_ready(self, tile: int) -> bool:
        if self._ready is None:
            return True
        try:
            return self._ready(tile)
        except Exception:  # a consumer's bug must not stall the wall: deliver
            log.exception("the wall's consumer could not say whether it takes a result")
            return True

    # ---- state ----------------------------------------------------------------------------

    _last_state_s = 0.0

    def _set_tile(self, i: int, **changes: object) -> None:
        with self._lock:
            tile = self._tiles[i]
            tile.state = replace(tile.state, **cast(dict[str, Any], changes))
        self._publish()

    def _publish_rates(self, session: Session, marks: tuple[int, int]) -> tuple[int, int]:
        batches, frames = session.engine_calls
        calls = batches - marks[0]
        with self._telling:  # a pause told meanwhile would be told before these rates
            mean = (frames - marks[1]) / calls if calls else self._state.mean_batch
            playing = self._state.playing
            now = time.perf_counter()
            with self._lock:
                counts = tuple(t.state.frames for t in self._tiles)
                self._samples.append((now, counts))
                t0, first = self._samples[0]
                span = now - t0
                for tile, n0, n1 in zip(self._tiles, first, counts, strict=True):
                    if tile.latency:  # an ended tile's too: a short clip ends before a tick
                        latency = statistics.median(tile.latency)
                        tile.state = replace(tile.state, latency_ms=latency)
                    if tile.state.status in ("playing", "reconnecting"):
                        fps = (n1 - n0) / span if playing and span > 0 else 0.0
                        tile.state = replace(tile.state, fps=fps)
                total = sum(counts) - sum(first)
            self._publish(
                fps=total / span if playing and span > 0 else 0.0, mean_batch=mean,
                batches_run=batches, frames_run=frames, path=session.path,
            )  # fmt: skip
        return batches, frames

    def _publish(self, **changes: object) -> None:
        with self._telling:
            with self._lock:
                tiles = tuple(t.state for t in self._tiles)
                if changes.get("status") == "playing":
                    self._samples.clear()  # a pause is no part of the rate
                self._state = replace(self._state, tiles=tiles, **cast(dict[str, Any], changes))
                state = self._state
            self._last_state_s = time.perf_counter()
            self._on_state(state)
