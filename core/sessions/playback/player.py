"""Interactive playback: a Qt-free worker that the GUI's controller drives.

A Player owns a few threads. The decode-ahead thread reads frames into a small
bounded queue; inference workers (one single-threaded pipeline per core on the
CPU, as in the CLI) process them ahead, in order; the player thread takes
commands (open, play, seek, update, ...) from a queue and hands every FrameResult
to ``on_result`` when it is due. All public methods
only enqueue a command, so they are safe to call from any thread and never block
on decoding or inference.

Callbacks run on the worker (or model-loading) thread; a GUI must marshal them
onto its own thread (the Qt controller does so with queued signals).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from functools import partial

from framelens.core.errors import FrameLensError, GpuError
from framelens.core.pipeline import build, decoding
from framelens.core.pipeline.plan import Plan
from framelens.core.pipeline.processor import FrameProcessor
from framelens.core.pipeline.settings import (
    PipelineSettings,
    live_changes,
    same_engine,
    with_changes,
)
from framelens.core.sessions.failover import Failover, device_words
from framelens.core.sessions.opening import SourceOpener
from framelens.core.sessions.playback.ab_loop import ABLoop
from framelens.core.sessions.playback.state import PlayerState, error_message
from framelens.core.sessions.playback.worker import (
    Built,
    Command,
    ErrorCallback,
    OpenFailedCallback,
    PlayerCore,
    ResultCallback,
    StateCallback,
    _close_drive,
)
from framelens.core.stages.source_stages import StageFactory
from framelens.core.stages.sources import Source
from framelens.core.threads import NamedThread

__all__ = ["Player", "PlayerState", "error_message"]

log = logging.getLogger(__name__)

_STALE = "stale"  # a decoder the player must not reuse: no pipeline wants frames from it


class Player(PlayerCore):
    """Plays a source through the executor's pipelines on a worker thread.

    Commands are queued and executed in order by the worker. The current frame
    is kept, so seeking and changing thresholds show their effect even while
    paused.

    ``on_result`` must not keep the results it is given beyond showing them: on CUDA a
    result's frame is a buffer of the decoder's device pool, and while every buffer is
    held the decoder waits, then fails with "no free device buffer". Keep what you need
    of a result (its index, times, detections), not the result.
    """

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
        super().__init__(
            on_result,
            on_state,
            on_error,
            decode_ahead=decode_ahead,
            spinning=spinning,
            drop_late=drop_late,
            stages=stages,
            on_open_failed=on_open_failed,
        )
        # a failing GPU: the session's one policy (the player's session has one device)
        self._failover = Failover((), None, self._on_error, spinning=spinning)
        self._thread.start()

    @property
    def state(self) -> PlayerState:
        return self._state

    def open(
        self, spec: str, settings: PipelineSettings | None = None, *, play: bool = False
    ) -> None:
        """Open a source (path, URL or camera spec); shows its first frame, paused, or
        plays it (``play``). One that cannot be opened leaves the current one as it was."""
        self._send(lambda: self._do_open(spec, settings, play))

    def play(self) -> None:
        self._send(self._do_play)

    def pause(self) -> None:
        self._send(self._do_pause)

    def toggle(self) -> None:
        self._send(lambda: self._do_pause() if self._state.playing else self._do_play())

    def step(self, delta: int = 1) -> None:
        """Show the next (+1) or previous (-1) frame and pause."""
        self._send(lambda: self._do_step(delta))

    def seek(self, index: int) -> None:
        """Show frame ``index`` processed; keeps playing if it was playing."""
        self._send(lambda: self._do_seek(index))

    def set_speed(self, speed: float) -> None:
        self._send(lambda: self._do_speed(speed))

    def press_loop(self) -> None:
        """The A-B loop's key (``l``): A at the frame on screen, then B, then cleared
        (core/sessions/playback/ab_loop.py); the state's ``loop`` says which."""
        self._send(self._do_loop)

    def clear_loop(self) -> None:
        self._send(lambda: self._do_loop(clear=True))

    def set_realtime(self, realtime: bool) -> None:
        self._send(lambda: self._do_realtime(realtime))

    def update(self, **changes: object) -> None:
        """Change conf, iou, classes or overlay; the current frame is re-processed (with
        per-source stages, an overlay change redraws it: its tracks stay as they were)."""
        self._send(lambda: self._do_update(changes))

    def set_stages(self, stages: StageFactory | None) -> None:
        """Per-source stages (a tracker; None: none) from the next frame on, without
        reopening the source; a paused frame is shown again through them."""
        self._send(lambda: self._do_stages(stages))

    def refresh(self) -> None:
        """Paused: the frame on screen processed again through the stages (the lines and
        zones just edited drawn on it; a tracker replays its IDs for the frame)."""
        self._send(self._refresh)

    def set_model(self, settings: PipelineSettings) -> None:
        """Build a pipeline for new settings in the background; swap it in when ready."""
        self._model_token += 1
        token = self._model_token
        self._send(lambda: self._publish(loading_model=True))
        NamedThread(
            target=self._build_model, args=(settings, token), name="fl-model", daemon=True
        ).start()

    def clear_model(self) -> None:
        """Play on without a model: frames shown as decoded (a model being built is
        dropped)."""
        self._model_token += 1
        self._send(self._do_clear_model)

    def close(self) -> None:
        """Stop the threads and release the source and the engine."""
        if self._closed:
            return
        self._closed = True
        self._commands.put(None)
        self._thread.join(timeout=20)

    def _send(self, command: Command) -> None:
        if not self._closed:
            self._commands.put(command)

    # ---- worker thread ---------------------------------------------------------

    def _fail(self, exc: BaseException) -> None:
        s = self._settings
        if isinstance(exc, GpuError) and s is not None and s.device.startswith("cuda"):
            self._fail_over(exc, s)
            return
        if not isinstance(exc, FrameLensError):
            log.exception("player command failed")
        self._loaded()
        if self._state.playing:
            self._publish(status="paused")
        self._on_error(error_message(exc))

    def _fail_over(self, exc: GpuError, settings: PipelineSettings) -> None:
        """A GPU failure while playing: go on where every session's sources go
        (core/sessions/failover.py: another GPU of the session, else the CPU) from the
        frame after the one on screen, and say so; playback does not stop."""
        targets = self._failover.targets(settings)
        for target in targets:
            self._on_error(f"GPU failed ({exc}); continuing on {device_words(target.device)}")
            try:
                pipeline, workers, *planned = self._build_pipelines(target)
                plan = planned[0] if planned else None
                if plan is not None:  # the plan the tooltip shows says where and why
                    before = self._plan.moves if self._plan is not None else ()
                    why = f"{settings.device} failed ({exc}), from the frame after the one shown"
                    plan = build.with_move(plan, target.device, why, before)
                self._install(pipeline, workers, plan)
            except BaseException as again:
                if target is not targets[-1] and isinstance(again, FrameLensError):
                    self._failover.cannot(target.device, again)
                    continue
                if self._state.playing:
                    self._publish(status="paused")
                self._loaded()  # nothing runs the new model's first frame now
                self._on_error(error_message(again))
            else:
                self._failover.moved.append(target.device)
                if not self._state.playing:  # paused: the frame on screen stays as it was
                    self._loaded()
            return

    # ---- command bodies (worker thread) -----------------------------------------

    def _do_open(self, spec: str, settings: PipelineSettings | None, play: bool = False) -> None:
        # The new source opens before the current one is let go: one that cannot be
        # opened (a camera that is not there) is reported and leaves the current source
        # as it was: its frame, playing or paused or ended (the play asked for is the
        # new source's).
        current_wants = self._source_wants
        try:
            source = self._open_frames(spec)
        except FrameLensError as exc:
            self._source_wants = current_wants  # the current source's, as before
            self._on_error(error_message(exc))
            if self._on_open_failed is not None:
                self._on_open_failed(spec)
            return
        wants, decoder_name = self._source_wants, self._state.decoder
        try:
            self._close_source()
            self._source_wants = wants
            self._publish(
                status="empty", index=-1, frame_count=None, source=None, fps=0.0,
                decoder=decoder_name, loop=ABLoop(),
            )  # fmt: skip
            self._spec = spec
            if settings is not None:
                try:
                    self._use_settings(settings)
                except Exception as exc:  # the video still plays, without a model
                    self._fail(exc)
                if decoding.source_device(self._pipeline, spec) != self._source_wants:
                    # the new model decodes elsewhere (NVDEC for GPU pipelines)
                    source.close()
                    source = self._open_frames(spec)
        except BaseException:
            source.close()
            raise
        self._drive = self._drive_over(source)
        info = source.info
        self._clock.configure(interval_s=1.0 / info.fps if info.fps > 0 else None)
        self._publish(source=info, frame_count=info.frame_count, status="paused")
        self._start_workers()
        self._show_next()
        if play:
            self._do_play()

    def _open_frames(self, spec: str) -> Source:
        """The source, decoded where the installed pipelines want their frames, as every
        session opens its sources (core/sessions/opening.py): NVDEC into device memory
        for GPU pipelines and video files, else on the host; where NVDEC cannot be set
        up, on the host for the same pipelines, said once."""
        pipeline = self._pipeline
        self._source_wants = decoding.source_device(pipeline, spec)
        opened = SourceOpener(pipeline, say=self._on_error).open(spec)
        self._publish(decoder=opened.decoder)
        return opened.source

    def _match_source(self, pipeline: FrameProcessor | None) -> None:
        """Reopen the source when the new pipelines want frames from another decoder (a
        switch between CPU and CUDA, or to another GPU); the caller seeks it back to where
        playback was. If the source cannot be reopened, the player is left empty."""
        drive, spec = self._drive, self._spec
        if drive is None or spec is None:
            return
        if decoding.source_device(pipeline, spec) == self._source_wants:
            return  # also after NVDEC failed for these pipelines: no retry on every swap
        try:
            source = self._open_frames(spec)
        except BaseException:
            self._drive = self._spec = None
            _close_drive(drive, self._state.decoder)
            self._publish(status="empty", index=-1, frame_count=None, source=None, decoder="")
            raise
        _close_drive(drive, self._state.decoder)
        self._drive = self._drive_over(source, dropped=drive.dropped)

    def _use_settings(self, settings: PipelineSettings) -> None:
        old = self._pipeline
        same = old is not None and self._settings and same_engine(old.settings, settings)
        self._settings = settings
        if same:
            self._apply(live_changes(settings))
            return
        self._publish(loading_model=True)
        try:
            self._install(*self._build_pipelines(settings))
        finally:
            self._publish(loading_model=False)

    def _apply(self, changes: dict[str, object]) -> None:
        """Threshold/overlay changes to every pipeline: the player's and the workers'."""
        if self._pipeline is not None:
            self._pipeline.update(**changes)
        if self._drive is not None and self._drive.running:
            self._drive.update(**changes)  # also marks frames processed ahead as stale
        else:
            for p in self._workers:
                p.update(**changes)

    def _install(
        self,
        pipeline: FrameProcessor | None,
        workers: list[FrameProcessor],
        plan: Plan | None = None,
    ) -> None:
        current = self._current
        if current is not None and not current.on_host:
            # its pixels live in the old pipelines' buffers: keep a host copy first
            try:
                self._current = current.holding(current.image)
            except FrameLensError:
                self._current = None
        self._ready = None
        self._last = None
        old, self._pipeline = self._pipeline, pipeline
        stopped = self._stop_workers()
        if not stopped:
            log.warning("an inference worker did not stop; its pipeline is left open")
            # it may still take frames from the decoder: the new workers get a source
            # of their own (the next line's _match_source reopens it)
            self._source_wants = _STALE
        # quietly: after a GPU failure the old pipelines' teardown may fail too
        build.close_quietly(
            [*(self._workers if stopped else []), *([old] if old is not None else [])]
        )
        self._workers = workers
        self._match_source(pipeline)
        source = self._drive.source if self._drive is not None else None
        resume = source is not None and source.info.seekable and self._state.index >= 0
        self._start_workers()
        if resume and self._state.status != "ended":
            # frames decoded for the old model are gone with its workers: continue after
            # the frame on screen (a seek), so playback goes on without a gap
            target, count = self._state.index + 1, self._state.frame_count
            self._ahead_seek(min(target, count - 1) if count else target)
        self._plan = plan
        if pipeline is None:  # no model: frames as decoded
            self._settings = None
            self._publish(model="", backend="", device="", precision="", plan=())
            return
        s = pipeline.settings
        latest = self._settings
        if latest is not None:  # thresholds may have changed while the model was built
            self._apply(live_changes(latest))
            s = replace(
                latest, model=s.model, backend=s.backend, device=s.device,
                precision=s.precision, threads=s.threads, batch=s.batch,
            )  # fmt: skip
        self._settings = s
        self._publish(
            model=s.model.name, backend=s.backend, device=s.device, precision=s.precision,
            plan=tuple(plan.lines()) if plan is not None else (),
        )  # fmt: skip

    def _do_clear_model(self) -> None:
        self._install(None, [])
        self._loaded(built=True)
        self._refresh()

    def _do_update(self, changes: dict[str, object]) -> None:
        if self._settings is not None:
            self._settings = with_changes(self._settings, changes)
        self._apply(changes)
        if set(changes) <= {"overlay"} and self._redraw():
            return  # only the look changed: the frame on screen drawn again
        self._refresh()

    def _build_pipelines(self, settings: PipelineSettings) -> Built:
        """The player thread's pipeline and the executor's workers (as many as the CLI's),
        from the builder: on CUDA the GPU pipeline when it can run (the canvas then takes
        the display kernel's RGBA frames), else CUDA inference with a message saying why."""
        built = build.workers(settings, extra=1, spinning=self._spinning, notify=self._on_error)
        return built.pipelines[0], built.pipelines[1:], built.plan

    def _build_model(self, settings: PipelineSettings, token: int) -> None:
        try:
            pipelines = self._build_pipelines(settings)
        except BaseException as exc:
            self._send(partial(self._model_failed, exc, token))
            return
        if self._closed:  # closed while building: nobody will install them
            for p in [pipelines[0], *pipelines[1]]:
                p.close()
            return
        self._send(partial(self._swap, pipelines, token))

    def _swap(self, pipelines: Built, token: int) -> None:
        if token != self._model_token:  # a newer request superseded this one
            for p in [pipelines[0], *pipelines[1]]:
                p.close()
            return
        self._install(*pipelines)
        # the status says "Loading model…" until the first frame through the new model
        # is shown (_show; paused, the frame on screen again, right here): a heavy
        # model's first frame on a GPU builds its kernels for seconds, which would
        # otherwise look like a stall
        shown = self._state.playing or self._current is not None
        self._loading_until_shown = self._pipeline is not None and shown
        if not self._loading_until_shown:
            self._loaded(built=True)
        self._refresh()

    def _model_failed(self, exc: BaseException, token: int) -> None:
        if token == self._model_token:
            self._loaded(built=True)
        if isinstance(exc, GpuError):
            # the new model could not be built on its GPU (out of memory, say): the one
            # that runs stays where it is, playing, until it fails itself (_fail then
            # moves it; failing it over now would move a healthy model to the CPU)
            self._on_error(error_message(exc))
            return
        self._fail(exc)
