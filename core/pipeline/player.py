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
import math
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, cast

from framelens.core.errors import FrameLensError, GpuError, SourceError
from framelens.core.pipeline.decode_ahead import DecodeAhead, DecodeItem, End, Failed
from framelens.core.pipeline.frame_pipeline import (
    FrameProcessor,
    PipelineSettings,
    same_engine,
    with_precision_model,
)
from framelens.core.pipeline.infer_ahead import AheadItem, InferAhead, Processed
from framelens.core.pipeline.run import build_pipelines, close_quietly, cpu_workers, on_the_cpu
from framelens.core.stages.sources import Source, open_source
from framelens.core.stages.timing import now_ms
from framelens.core.types import Detections, Frame, FrameResult, SourceInfo, StageTimes

log = logging.getLogger(__name__)

ResultCallback = Callable[[FrameResult], None]
StateCallback = Callable[["PlayerState"], None]
ErrorCallback = Callable[[str], None]

_LATE_RESYNC_S = 0.25  # further behind the clock than this, re-anchor instead of rushing
_STATE_EVERY_S = 0.5  # while playing, state (with the measured fps) at most this often


@dataclass(frozen=True)
class PlayerState:
    """A snapshot of the player, sent on every change and periodically while playing."""

    status: str = "empty"  # "empty" | "paused" | "playing" | "ended"
    index: int = -1  # source index of the frame last shown, -1 before the first
    frame_count: int | None = None
    fps: float = 0.0  # measured rate of results while playing
    source: SourceInfo | None = None
    model: str = ""
    backend: str = ""
    device: str = ""
    precision: str = ""
    speed: float = 1.0
    realtime: bool = True
    loading_model: bool = False
    decoder: str = ""  # what decodes the source: "cpu", "nvdec (PyNvVideoCodec)", ...

    @property
    def playing(self) -> bool:
        return self.status == "playing"


def error_message(exc: BaseException) -> str:
    """One line for the user: FrameLensError text as is, anything else named."""
    if isinstance(exc, FrameLensError):
        text = str(exc)
    else:
        text = f"unexpected error: {type(exc).__name__}: {exc}"
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


class _RateMeter:
    """Results per second over the last few seconds."""

    def __init__(self, window: int = 60) -> None:
        self._stamps: deque[float] = deque(maxlen=window)

    def tick(self) -> None:
        self._stamps.append(time.perf_counter())

    def reset(self) -> None:
        self._stamps.clear()

    @property
    def fps(self) -> float:
        if len(self._stamps) < 2:
            return 0.0
        span = self._stamps[-1] - self._stamps[0]
        return (len(self._stamps) - 1) / span if span > 0 else 0.0


def _thresholds(s: PipelineSettings) -> dict[str, object]:
    return {"conf": s.conf, "iou": s.iou, "classes": s.classes, "overlay": s.overlay}


Command = Callable[[], None]


class Player:
    """Plays a source through a FramePipeline on a worker thread.

    Commands are queued and executed in order by the worker. The current frame
    is kept, so seeking and changing thresholds show their effect even while
    paused.
    """

    def __init__(
        self,
        on_result: ResultCallback,
        on_state: StateCallback,
        on_error: ErrorCallback,
        *,
        decode_ahead: int = 2,
        spinning: bool = False,
    ) -> None:
        self._on_result = on_result
        self._on_state = on_state
        self._on_error = on_error
        self._depth = decode_ahead
        self._spinning = spinning  # ORT busy-waiting would starve the GUI thread of a core
        self._commands: queue.Queue[Command | None] = queue.Queue()
        self._decoder: DecodeAhead | None = None
        self._spec: str | None = None  # the open source, to reopen it for another decoder
        self._source_wants: str | None = None  # the device the source decodes for; None: host
        self._pipeline: FrameProcessor | None = None  # for the player thread's own work
        self._ahead: InferAhead | None = None  # workers processing frames ahead
        self._workers: list[FrameProcessor] = []  # their pipelines, kept across sources
        self._settings: PipelineSettings | None = None
        self._state = PlayerState()
        self._current: Frame | None = None
        self._ready: FrameResult | None = None  # processed, waiting for its time
        self._anchor: tuple[float, float] | None = None  # (wall s, pts s) of the clock
        self._rate = _RateMeter()
        self._last_state_s = 0.0
        self._model_token = 0
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="fl-player", daemon=True)
        self._thread.start()

    # ---- commands (any thread) -------------------------------------------------

    @property
    def state(self) -> PlayerState:
        return self._state

    def open(self, spec: str, settings: PipelineSettings | None = None) -> None:
        """Open a source (path, URL or camera spec); shows its first frame, paused."""
        self._send(lambda: self._do_open(spec, settings))

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

    def set_realtime(self, realtime: bool) -> None:
        self._send(lambda: self._do_realtime(realtime))

    def update(self, **changes: object) -> None:
        """Change conf, iou, classes or overlay; the current frame is re-processed."""
        self._send(lambda: self._do_update(changes))

    def set_model(self, settings: PipelineSettings) -> None:
        """Build a pipeline for new settings in the background; swap it in when ready."""
        self._model_token += 1
        token = self._model_token
        self._send(lambda: self._publish(loading_model=True))
        threading.Thread(
            target=self._build_model, args=(settings, token), name="fl-model", daemon=True
        ).start()

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
                return
            self._ready = result
            if self._due(result) > now():
                return  # the loop waits on the command queue until it is due
        result, self._ready = self._ready, None
        self._show(result)

    def _due(self, result: FrameResult) -> float:
        """Wall time at which ``result`` should be shown; 0 when not paced."""
        if not self._state.realtime:
            return 0.0
        pts = float(result.frame.pts)
        wall = now()
        if self._anchor is None:
            self._anchor = (wall, pts)
        due = self._anchor[0] + (pts - self._anchor[1]) / self._state.speed
        if wall - due > _LATE_RESYNC_S or due - wall > 2.0:
            self._anchor = (wall, pts)  # fell behind (slow model) or jumped: restart the clock
            due = wall
        return due

    def _fetch_processed(self, timeout: float) -> FrameResult | None:
        item: AheadItem | DecodeItem | None
        if self._ahead is not None:
            item = self._ahead.get(timeout)
        elif self._decoder is not None:
            item = self._decoder.get(timeout)
        else:
            return None
        if item is None:
            return None
        if isinstance(item, End):
            self._publish(status="ended")
            return None
        if isinstance(item, Failed):
            raise item.error
        if isinstance(item, Processed):
            if self._ahead is not None and item.version == self._ahead.version:
                return item.result
            # made before a threshold change: redo it with the current settings
            res = item.result
            return self._process(res.frame, res.times.decode, item.start_ms)
        frame, decode_ms, t0 = item
        return self._process(frame, decode_ms, t0)

    def _process(
        self, frame: Frame, decode_ms: float = math.nan, t0: float | None = None
    ) -> FrameResult:
        start = now_ms() if t0 is None else t0
        if self._pipeline is None:  # no model (yet): show the plain frame
            result = FrameResult(frame, Detections.empty(), StageTimes(decode=decode_ms))
            result.annotated = frame.image
        else:
            result = self._pipeline.process(frame, decode_ms)
        result.times.e2e = now_ms() - start
        return result

    def _show(self, result: FrameResult) -> None:
        self._current = result.frame
        self._rate.tick()
        self._on_result(result)
        changes: dict[str, object] = {"index": result.frame.index}
        if self._state.playing:
            changes["fps"] = self._rate.fps
        wall = now()
        if not self._state.playing or wall - self._last_state_s >= _STATE_EVERY_S:
            self._publish(**changes)
        else:
            self._state = replace(self._state, **cast(dict[str, Any], changes))

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

    def _fail(self, exc: BaseException) -> None:
        s = self._settings
        if isinstance(exc, GpuError) and s is not None and s.device.startswith("cuda"):
            self._fall_back_to_cpu(exc, s)
            return
        if not isinstance(exc, FrameLensError):
            log.exception("player command failed")
        if self._state.playing:
            self._publish(status="paused")
        self._on_error(error_message(exc))

    def _fall_back_to_cpu(self, exc: GpuError, settings: PipelineSettings) -> None:
        """A GPU failure while playing: go on on the CPU from the frame after the one on
        screen, and say so; playback does not stop."""
        cpu = on_the_cpu(settings)
        self._on_error(f"GPU failed ({exc}); continuing on the CPU")
        try:
            self._install(*self._build_pipelines(cpu))
        except BaseException as again:
            if self._state.playing:
                self._publish(status="paused")
            self._on_error(error_message(again))

    # ---- command bodies (worker thread) -----------------------------------------

    def _do_open(self, spec: str, settings: PipelineSettings | None) -> None:
        self._close_source()
        self._publish(status="empty", index=-1, frame_count=None, source=None, fps=0.0, decoder="")
        self._spec = spec
        if settings is not None:
            # the model first: its pipelines decide the decoder (NVDEC for GPU pipelines)
            try:
                self._use_settings(settings)
            except Exception as exc:  # the video still plays, without a model
                self._fail(exc)
        source = self._open_frames(spec)
        self._decoder = DecodeAhead(source, self._depth)
        info = source.info
        self._publish(source=info, frame_count=info.frame_count, status="paused")
        self._start_workers()
        self._show_next()

    def _open_frames(self, spec: str) -> Source:
        """The source, decoded where the installed pipelines want their frames: NVDEC into
        device memory for GPU pipelines and video files, else on the host."""
        pipeline = self._pipeline
        wanted = _source_device(pipeline, spec)
        self._source_wants = wanted
        if pipeline is not None and wanted is not None:
            from framelens.core.pipeline.gpu_launch import open_gpu_frames

            try:
                source, name = open_gpu_frames(spec, pipeline.settings)
            except FrameLensError as exc:  # no CUDA context, no NVDEC, no memory for buffers
                self._on_error(f"NVDEC not used ({exc}); decoding on the CPU")
            else:
                self._publish(decoder=name)
                return source
        source = open_source(spec)
        self._publish(decoder="cpu")
        return source

    def _match_source(self, pipeline: FrameProcessor) -> None:
        """Reopen the source when the new pipelines want frames from another decoder (a
        switch between CPU and CUDA, or to another GPU); the caller seeks it back to where
        playback was. If the source cannot be reopened, the player is left empty."""
        decoder, spec = self._decoder, self._spec
        if decoder is None or spec is None:
            return
        if _source_device(pipeline, spec) == self._source_wants:
            return  # also after NVDEC failed for these pipelines: no retry on every swap
        try:
            source = self._open_frames(spec)
        except BaseException:
            self._decoder = self._spec = None
            _close_decoder(decoder, self._state.decoder)
            self._publish(status="empty", index=-1, frame_count=None, source=None, decoder="")
            raise
        _close_decoder(decoder, self._state.decoder)
        self._decoder = DecodeAhead(source, self._depth)

    def _use_settings(self, settings: PipelineSettings) -> None:
        old = self._pipeline
        same = old is not None and self._settings and same_engine(old.settings, settings)
        self._settings = settings
        if same:
            self._apply(_thresholds(settings))
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
        if self._ahead is not None:
            self._ahead.update(**changes)  # also marks frames processed ahead as stale
        else:
            for p in self._workers:
                p.update(**changes)

    def _install(self, pipeline: FrameProcessor, workers: list[FrameProcessor]) -> None:
        current = self._current
        if current is not None and not current.on_host:
            # its pixels live in the old pipelines' buffers: keep a host copy first
            try:
                self._current = Frame(
                    current.image, current.index, current.pts, source_id=current.source_id
                )
            except FrameLensError:
                self._current = None
        self._ready = None
        old, self._pipeline = self._pipeline, pipeline
        stopped = self._stop_workers()
        if not stopped:
            log.warning("an inference worker did not stop; its pipeline is left open")
        # quietly: after a GPU failure the old pipelines' teardown may fail too
        close_quietly([*(self._workers if stopped else []), *([old] if old is not None else [])])
        self._workers = workers
        self._match_source(pipeline)
        source = self._decoder.source if self._decoder is not None else None
        resume = source is not None and source.info.seekable and self._state.index >= 0
        self._start_workers()
        if resume and self._state.status != "ended":
            # frames decoded for the old model are gone with its workers: continue after
            # the frame on screen (a seek), so playback goes on without a gap
            target, count = self._state.index + 1, self._state.frame_count
            self._ahead_seek(min(target, count - 1) if count else target)
        s = pipeline.settings
        latest = self._settings
        if latest is not None:  # thresholds may have changed while the model was built
            self._apply(_thresholds(latest))
            s = replace(
                latest, model=s.model, backend=s.backend, device=s.device,
                precision=s.precision, threads=s.threads,
            )  # fmt: skip
        self._settings = s
        self._publish(model=s.model.name, backend=s.backend, device=s.device, precision=s.precision)

    def _do_play(self) -> None:
        if self._decoder is None:
            return
        if self._state.status == "ended":
            self._ahead_seek(0)
            self._ready = None
        self._anchor = None
        self._rate.reset()
        self._publish(status="playing")

    def _do_pause(self) -> None:
        if self._state.playing:
            self._publish(status="paused", fps=0.0)

    def _do_step(self, delta: int) -> None:
        if self._decoder is None:
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
        if self._decoder is None:
            return
        count = self._state.frame_count
        if count:
            index = min(index, count - 1)
        index = max(0, index)
        self._ready = None
        self._anchor = None
        self._ahead_seek(index)
        if self._state.status == "ended":
            self._publish(status="paused")
        self._show_next()

    def _do_speed(self, speed: float) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        self._anchor = None
        self._publish(speed=float(speed))

    def _do_realtime(self, realtime: bool) -> None:
        self._anchor = None
        self._rate.reset()
        self._publish(realtime=bool(realtime))

    def _do_update(self, changes: dict[str, object]) -> None:
        if self._settings is not None:
            self._settings = replace(self._settings, **cast(dict[str, Any], changes))
        self._apply(changes)
        self._refresh()

    def _refresh(self) -> None:
        """Re-process the frame on screen so a paused view reflects a change."""
        if self._current is None or self._state.playing:
            return
        self._ready = None
        self._show(self._process(self._current))

    def _build_pipelines(
        self, settings: PipelineSettings
    ) -> tuple[FrameProcessor, list[FrameProcessor]]:
        """The player thread's pipeline and the inference workers' (as many as the CLI).

        On CUDA the GPU pipeline (CUDA preprocessing, IOBinding, the display kernel's
        RGBA frame for the canvas) when it can run, else ONNX Runtime's CUDA provider
        with host preprocessing, and a message that says why.
        """
        # the precision's graph first: an INT8 not prepared is one error, whatever the device
        settings = with_precision_model(settings)
        if settings.device.startswith("cuda"):
            try:
                from framelens.core.pipeline.gpu_launch import GPU_WORKERS, gpu_pipelines

                gpu: list[FrameProcessor] = list(
                    gpu_pipelines(settings, GPU_WORKERS + 1, spinning=self._spinning)
                )
                return gpu[0], gpu[1:]
            except FrameLensError as exc:  # no usable CUDA context, kernels, NVDEC...
                self._on_error(f"GPU pipeline not used ({exc}); CUDA inference only")
        worker_settings, count = cpu_workers(settings)
        built = build_pipelines([settings, *[worker_settings] * count], spinning=self._spinning)
        return built[0], built[1:]

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

    def _swap(self, pipelines: tuple[FrameProcessor, list[FrameProcessor]], token: int) -> None:
        if token != self._model_token:  # a newer request superseded this one
            for p in [pipelines[0], *pipelines[1]]:
                p.close()
            return
        self._install(*pipelines)
        self._publish(loading_model=False)
        self._refresh()

    def _model_failed(self, exc: BaseException, token: int) -> None:
        if token == self._model_token:
            self._publish(loading_model=False)
        self._fail(exc)

    def _ahead_seek(self, index: int) -> None:
        if self._ahead is not None:
            self._ahead.seek(index)
        elif self._decoder is not None:
            self._decoder.seek(index)

    def _start_workers(self) -> None:
        if self._decoder is not None and self._workers and self._ahead is None:
            self._ahead = InferAhead(self._decoder, self._workers)

    def _stop_workers(self) -> bool:
        """Stop the inference workers; False when one did not stop in time."""
        if self._ahead is not None:
            ahead, self._ahead = self._ahead, None
            return ahead.close(close_pipelines=False)
        return True

    def _close_source(self) -> None:
        self._ready = None
        self._current = None
        self._spec = None
        self._source_wants = None
        self._stop_workers()
        if self._decoder is not None:
            decoder, self._decoder = self._decoder, None
            decoder.close()

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


def _source_device(pipeline: FrameProcessor | None, spec: str) -> str | None:
    """The device whose NVDEC should decode ``spec`` for ``pipeline``; None: the host."""
    if pipeline is None or not pipeline.takes_device_frames:
        return None
    from framelens.core.pipeline.gpu_launch import decodes_on_device

    return pipeline.settings.device if decodes_on_device(spec) else None


def _close_decoder(decoder: DecodeAhead, name: str) -> None:
    try:
        decoder.close()
    except Exception as exc:  # a broken GPU's decoder must not stop the switch
        log.warning("closing the %s decoder failed: %s", name, exc)


def now() -> float:
    return time.perf_counter()
