"""The player's worker thread: pacing, fetching processed frames, showing them, and the
session's drive (core/sessions/drive.py: the source decoded ahead, the executor's workers)
it plays from. ``Player`` (core/sessions/playback/player.py) adds the
public commands and model swaps on top. Every frame shown passes the per-source stages
(core/stages/source_stages.py) first; a seek, a restart, a model swap's resume and a
frame processed again reset them. With stages, a host frame's overlays are drawn after
them, on the player's thread (a tracker's IDs and trails are in the picture); without,
the executor's workers draw them as they process, ahead of the clock."""

from __future__ import annotations

import logging
import math
import queue
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any, cast

from framelens.core.errors import SourceError
from framelens.core.pipeline.decode_ahead import DecodeItem, End, Failed
from framelens.core.pipeline.execute import Done, DrawPolicy, PipelineWorker
from framelens.core.pipeline.plan import Plan
from framelens.core.pipeline.processor import FrameProcessor
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.drive import Drive
from framelens.core.sessions.playback.ab_loop import ABLoop
from framelens.core.sessions.playback.clock import PlaybackClock, now
from framelens.core.sessions.playback.state import PlayerState, RateMeter
from framelens.core.stages.source_stages import SourceStages, StageFactory
from framelens.core.stages.sources import Source
from framelens.core.stages.timing import now_ms
from framelens.core.threads import NamedThread
from framelens.core.types import Detections, Frame, FrameResult, StageTimes

__all__ = ["PlayerCore"]

log = logging.getLogger(__name__)

ResultCallback = Callable[[FrameResult], None]
StateCallback = Callable[["PlayerState"], None]
ErrorCallback = Callable[[str], None]
OpenFailedCallback = Callable[[str], None]

_STATE_EVERY_S = 0.5  # while playing, state (with the measured fps) at most this often


Command = Callable[[], None]

Built = tuple[FrameProcessor, list[FrameProcessor], Plan | None]
"""The player thread's pipeline, the executor's workers, and the plan they follow."""


class PlayerCore(ABC):
    """The state and the worker-thread half of a Player (see core/sessions/playback/player.py)."""

    def __init__(
        self,
        on_result: ResultCallback,
        on_state: StateCallback,
        on_error: ErrorCallback,
        *,
        decode_ahead: int = 2,
        spinning: bool = False,
        drop_late: bool = True,
        stages: StageFactory | None = None,
        on_open_failed: OpenFailedCallback | None = None,
    ) -> None:
        self._on_result = on_result
        # a source that could not be opened (after on_error said why): the one open stays
        self._on_open_failed = on_open_failed
        self._stages = SourceStages(stages)
        self._executing: list[PipelineWorker] = []  # the drive's workers while it runs
        self._last: FrameResult | None = None  # the result on screen (an overlay redrawn)
        self._drop_late = drop_late  # False: every frame queues (the benchmark's baseline)
        self._on_state = on_state
        self._on_error = on_error
        self._depth = decode_ahead
        self._spinning = spinning  # ORT busy-waiting would starve the GUI thread of a core
        self._commands: queue.Queue[Command | None] = queue.Queue()
        # the open source decoded ahead, and the workers processing its frames ahead
        self._drive: Drive[FrameResult] | None = None
        self._spec: str | None = None  # the open source, to reopen it for another decoder
        self._source_wants: str | None = None  # the device the source decodes for; None: host
        self._pipeline: FrameProcessor | None = None  # for the player thread's own work
        self._workers: list[FrameProcessor] = []  # the drive's pipelines, kept across sources
        self._settings: PipelineSettings | None = None
        self._plan: Plan | None = None  # what the installed pipelines were built from
        self._state = PlayerState()
        self._current: Frame | None = None
        self._ready: FrameResult | None = None  # processed, waiting for its time
        # Play on the last frame (End): the end comes before any new frame is shown
        self._shown_since_play = False
        self._play_from = -1  # the frame on screen when Play was pressed
        self._sought: int | None = None  # a seek's target until a frame is shown
        self._loop_prev: int | None = None  # the frame shown before, None after a seek
        self._clock = PlaybackClock()  # due times; the workers drop frames it calls stale
        self._waiting: FrameResult | None = None  # the ready result, since when it waits
        self._waiting_since = 0.0
        # a model just installed while playing: "loading" until its first frame is shown
        # (a heavy model's first call on a GPU builds its kernels: seconds)
        self._loading_until_shown = False
        self._rate = RateMeter()
        self._last_state_s = 0.0
        self._model_token = 0
        self._closed = False
        self._thread = NamedThread(target=self._loop, name="fl-player", daemon=True)

    # ---- commands (any thread) -------------------------------------------------

    @abstractmethod
    def _fail(self, exc: BaseException) -> None:
        """Report a failed command (or fall back to the CPU after a GPU failure)."""

    @abstractmethod
    def _swap(self, pipelines: Built, token: int) -> None:
        """Install pipelines built in the background (unless a newer request came)."""

    def _loop(self) -> None:
        while True:
            command = self._next_command()
            if command is None and self._closed:
                break
            try:
                if command is not None:
                    command()
                elif self._state.playing:
                    self._advance()
            except BaseException as exc:
                self._fail(exc)
        self._shutdown()

    def _next_command(self) -> Command | None:
        """A command, waiting only as long as playback allows (None: nothing came)."""
        timeout: float | None = None
        if self._state.playing:
            timeout = 0.0 if self._ready is None else max(0.0, self._due(self._ready) - now())
        try:
            if timeout is None:
                return self._commands.get()
            if timeout <= 0:
                return self._commands.get_nowait()
            return self._commands.get(timeout=timeout)
        except queue.Empty:
            return None

    def _advance(self) -> None:
        """One step of playback: fetch and process a frame, or show the ready one."""
        if self._ready is None:
            result = self._fetch_processed(timeout=0.05)
            if result is None:
                self._follow_reconnect()
                return
            self._ready = result
            self._waiting, self._waiting_since = result, now()  # handed over, not yet due
            if self._due(result) > now():
                return  # the loop waits on the command queue until it is due
        result, self._ready = self._ready, None
        self._show(result)

    def _follow_reconnect(self) -> None:
        """Publish a live stream going down (reconnecting with backoff) and coming back."""
        source = self._drive.source if self._drive is not None else None
        down = source is not None and source.reconnecting
        if down != self._state.reconnecting:
            self._publish(reconnecting=down)

    def _due(self, result: FrameResult) -> float:
        """Wall time at which ``result`` should be shown; 0 when not paced."""
        return self._clock.due(float(result.frame.pts))

    def _stale(self, frame: Frame, newer_waiting: bool) -> bool:
        """A decoded frame to drop unprocessed: playing in real time, and already too late
        (core/sessions/playback/clock.py). Steps and seeks show every frame they ask for."""
        if not (self._drop_late and self._state.playing):
            return False
        return self._clock.drop(float(frame.pts), newer_waiting)

    def _fetch_processed(self, timeout: float) -> FrameResult | None:
        item: Done[FrameResult] | DecodeItem | None
        drive = self._drive
        if drive is None:
            return None
        item = drive.get(timeout) if drive.running else drive.decoded(timeout)
        if item is None:
            return None
        if isinstance(item, End):
            info = self._state.source
            restart = info is not None and info.seekable and self._state.index > 0
            if self._state.playing and not self._shown_since_play and restart:
                # Play pressed on the last frame: from the start, as players do
                self._shown_since_play = True  # once: a file that ends at once ends
                self._ready = None
                self._clock.reset()
                self._ahead_seek(0)
                return None
            self._publish(status="ended", **self._cut_short())
            self._loaded()  # no frame comes to say the new model's first was shown
            return None
        if isinstance(item, Failed):
            raise item.error
        if isinstance(item, Done):
            if item.version == drive.version:
                return item.value
            # made before a threshold change: redo it with the current settings
            res = item.value
            return self._process(res.frame, res.times.decode, item.start_ms)
        frame, decode_ms, t0 = item
        return self._process(frame, decode_ms, t0)

    def _cut_short(self) -> dict[str, object]:
        """The end of a file that holds fewer frames than its index says (cut short, or
        damaged): the frames really there (as the source counted them) and, once, a
        message naming what was found. Nothing when the end came straight after a seek."""
        source = self._drive.source if self._drive is not None else None
        there = source.frames_there if source is not None else None
        if source is None or there is None or self._sought is not None:
            return {}
        # the source's count: frames dropped late at the end were there, not shown
        count = self._state.frame_count
        if count is None or not 0 < there < count:
            return {}
        found = source.damage_note()
        self._on_error(f"{found or 'the file is cut short'}: the {there} frames there play")
        return {"frame_count": there}

    def _process(
        self, frame: Frame, decode_ms: float = math.nan, t0: float | None = None
    ) -> FrameResult:
        start = now_ms() if t0 is None else t0
        if self._pipeline is None:  # no model (yet): show the plain frame
            result = FrameResult(frame, Detections.empty(), StageTimes(decode=decode_ms))
            result.annotated = frame.image
        elif self._stages:  # drawn once the stages have seen it (_show)
            result = self._pipeline.infer(frame, StageTimes(decode=decode_ms))
        else:
            result = self._pipeline.process(frame, decode_ms)
        result.times.e2e = now_ms() - start
        return result

    def _show(self, result: FrameResult) -> None:
        # the frame on screen again (a model swap re-shows it) is no frame played
        self._shown_since_play |= result.frame.index != self._play_from
        if self._state.playing and self._clock.realtime and math.isfinite(result.times.e2e):
            # what the viewer waits for: from the frame's time to the screen, its time
            # being when it was decoded or, decoded ahead of the clock, when it was due;
            # never less than the frame's own work
            now_s = now()
            waited_ms = 0.0 if result is not self._waiting else (now_s - self._waiting_since) * 1e3
            since_decode = result.times.e2e + waited_ms
            since_due = (now_s - self._clock.due(float(result.frame.pts))) * 1000.0
            t = result.times
            work = math.fsum(
                v for v in (t.decode, t.preprocess, t.inference, t.postprocess) if math.isfinite(v)
            )
            result.times.e2e = max(work, min(since_decode, since_due))
        self._waiting = None
        self._sought = None
        self._current = result.frame
        self._rate.tick()
        if self._stages:
            self._stages(result)
            self._draw(result)
        self._last = result
        self._on_result(result)
        index = result.frame.index
        previous, self._loop_prev = self._loop_prev, index
        if self._state.playing:
            self._loop_back(previous, index, shown_now=True)
        changes: dict[str, object] = {"index": index}
        if self._state.playing:
            changes["fps"] = self._rate.fps
        if self._drive is not None:
            changes["dropped"] = self._drive.dropped
        back = self._state.reconnecting  # a frame came: the stream is back, say so now
        if back:
            changes["reconnecting"] = False
        loaded = self._loading_until_shown  # the new model's first frame: loaded now
        if loaded:
            self._loading_until_shown = False
            changes["loading_model"] = False
        wall = now()
        if back or loaded or not self._state.playing or wall - self._last_state_s >= _STATE_EVERY_S:
            self._publish(**changes)
        else:
            self._state = replace(self._state, **cast(dict[str, Any], changes))

    def _draw(self, result: FrameResult) -> None:
        """A host frame's overlays, drawn after the stages (device frames are overlaid by
        the screen, from the result's output)."""
        if self._pipeline is not None and result.frame.on_host:
            self._pipeline.draw(result)

    def _do_stages(self, stages: StageFactory | None) -> None:
        """Stages of another kind from the next frame on (the frame on screen again when
        paused): every source's chain made afresh; the workers draw only without them."""
        self._stages = SourceStages(stages)
        for worker in self._executing:
            worker.draw = "none" if self._stages else "host"
        self._refresh()

    def _refresh(self) -> None:
        """Re-process the frame on screen so a paused view reflects a change."""
        if self._current is None or self._state.playing:
            return
        self._stages.reset()  # the frame on screen again: its stages see it afresh
        self._ready = None
        self._show(self._process(self._current))

    def _redraw(self) -> bool:
        """The result on screen drawn again with the overlay now set (paused, with stages:
        processing it again would restart them, a tracker's IDs with them); False when
        there is none to redraw."""
        last = self._last
        if (
            last is None
            or not self._stages
            or self._state.playing
            or last.frame is not self._current
        ):
            return False
        self._draw(last)
        self._on_result(last)
        return True

    def _show_next(self, timeout: float = 15.0) -> bool:
        """Decode, process and show the next frame synchronously; False at the end."""
        deadline = now() + timeout
        while now() < deadline and not self._closed:
            result = self._fetch_processed(timeout=0.1)
            if result is not None:
                self._show(result)
                return True
            if self._state.status == "ended":
                return False
        if self._closed:
            return False
        raise SourceError("timed out waiting for a frame from the source")

    def _publish(self, **changes: object) -> None:
        self._state = replace(self._state, **cast(dict[str, Any], changes))
        self._last_state_s = now()
        self._on_state(self._state)

    def _do_play(self) -> None:
        if self._drive is None:
            return
        if self._state.status == "ended":
            self._ahead_seek(0)
            self._ready = None
        self._shown_since_play = False
        self._play_from = self._state.index
        self._clock.reset()
        self._rate.reset()
        self._publish(status="playing")
        if self._state.status == "playing" and self._state.index >= 0:
            self._loop_back(None, self._state.index)  # paused on B: A comes next

    def _loop_back(self, previous: int | None, shown: int, *, shown_now: bool = False) -> None:
        """Playing: after frame B of the A-B loop, frame A comes next (a seek ahead). B
        just shown (``shown_now``) stays on screen its frame's time, as every frame does:
        A is due one interval later, not as soon as it is decoded."""
        target = self._state.loop.wrap(previous, shown)
        if target is not None and self._drive is not None:
            self._ready = None
            self._clock.reset(now() + self._clock.interval_s if shown_now else None)
            self._ahead_seek(target)

    def _do_loop(self, clear: bool = False) -> None:
        """``l``: A at the frame on screen, then B, then no loop (``clear``: none now)."""
        state = self._state
        if not clear and (state.source is None or not state.source.seekable):
            return  # a camera or a stream plays live: no frame to go back to
        loop = ABLoop() if clear or state.index < 0 else state.loop.press(state.index)
        self._publish(loop=loop)

    def _do_pause(self) -> None:
        if self._state.playing:
            self._publish(status="paused", fps=0.0)
        self._loaded()  # paused before the new model's first frame: no frame will say so

    def _loaded(self, *, built: bool = False) -> None:
        """A new model's first frame will not be shown (paused, ended, failed): the status
        stops saying "Loading model…". ``built``: the loading itself ended (installed
        with no frame to show, failed, cleared); without it a model still being built in
        the background goes on saying so."""
        if self._loading_until_shown or (built and self._state.loading_model):
            self._loading_until_shown = False
            self._publish(loading_model=False)

    def _do_step(self, delta: int) -> None:
        if self._drive is None:
            return
        self._do_pause()
        if delta < 0 or delta > 1:
            self._do_seek(max(0, self._state.index + delta))
        elif self._ready is not None:
            result, self._ready = self._ready, None
            self._show(result)
        elif self._state.status != "ended":
            self._show_next()

    def _do_seek(self, index: int) -> None:
        if self._drive is None:
            return
        count = self._state.frame_count
        if count:
            index = min(index, count - 1)
        index = max(0, index)
        self._ready = None
        self._clock.reset()
        self._ahead_seek(index)
        if self._state.status == "ended":
            self._publish(status="paused")
        self._show_next()

    def _do_speed(self, speed: float) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        self._clock.configure(speed=float(speed))
        self._publish(speed=float(speed))

    def _do_realtime(self, realtime: bool) -> None:
        self._clock.configure(realtime=bool(realtime))
        self._rate.reset()
        self._publish(realtime=bool(realtime))

    def _ahead_seek(self, index: int) -> None:
        self._stages.reset()  # what comes next does not follow what was shown
        self._sought = index
        self._loop_prev = None
        if self._drive is not None:
            self._drive.seek(index)

    def _start_workers(self) -> None:
        drive = self._drive
        if drive is not None and self._workers and not drive.running:
            draw: DrawPolicy = "none" if self._stages else "host"  # with stages: after them
            workers = [PipelineWorker(p, draw) for p in self._workers]
            self._executing = workers
            drive.start(workers, batch=self._workers[0].settings.batch)

    def _stop_workers(self) -> bool:
        """Stop the inference workers (the decoder goes on); False when one did not stop
        in time."""
        return self._drive.stop() if self._drive is not None else True

    def _drive_over(self, source: Source, dropped: int = 0) -> Drive[FrameResult]:
        """``source`` decoded ahead for the workers, late frames dropped while playing
        (``dropped``: by the drive it replaces, the same video's)."""
        return Drive(source, decode_depth=self._depth, skip=self._stale, dropped=dropped)

    def _close_source(self) -> None:
        self._stages.clear()  # another source: stages of its own
        self._ready = None
        self._current = None
        self._last = None
        self._spec = None
        self._source_wants = None
        if self._drive is not None:
            drive, self._drive = self._drive, None
            drive.close()

    def _shutdown(self) -> None:
        while True:  # a model built while closing: its swap never ran, close it here
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                break
            if isinstance(command, partial) and command.func == self._swap:
                built = command.args[0]
                for p in [built[0], *built[1]]:
                    p.close()
        try:
            self._close_source()
        finally:
            for p in [*([self._pipeline] if self._pipeline else []), *self._workers]:
                p.close()
            self._pipeline, self._workers = None, []


def _close_drive(drive: Drive[FrameResult], name: str) -> None:
    try:
        drive.close()
    except Exception as exc:  # a broken GPU's decoder must not stop the switch
        log.warning("closing the %s decoder failed: %s", name, exc)
