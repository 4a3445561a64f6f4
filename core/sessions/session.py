"""ONE session for every way of watching: sources -> executor -> per-source stages -> consumer.

    specs ──opened where the workers want their frames (NVDEC or host)──> Source, or
          MergedSource of several (each on its own reader thread)
      ──Drive (core/sessions/drive.py) of the Executor (core/pipeline/execute.py: decode
        ahead, N workers, batches span sources)
      ──results in decode order, each stamped with its source's number in the session
      ──SourceStages (core/stages/source_stages.py: trackers, analytics)──> the consumer

DeepStream's graph (mux -> infer -> tracker -> analytics -> sinks) with the consumer as
the sink: ``framelens run`` with one or many sources and an archive's jobs write files
(core/sessions/runs.py), the wall shows tiles (core/sessions/wall.py); each iterates
``results`` and differs only in what it does with a result and how it paces its
sources (``SessionOptions.wrap``). Everything else lives here once: opening the sources
for the workers built for them (as the plan says: core/sessions/opening.py), the
executor's sizes, what each source has delivered, a source that fails (several: it stops
alone; one: the session fails), and one policy for a GPU that fails: its sources move to
another GPU of the session, else the CPU, each from the frame it had reached, with a
message (core/sessions/failover.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from framelens.core.errors import (
    Cancelled,
    ConfigError,
    EngineError,
    FrameLensError,
    GpuError,
    SourceError,
    error_message,
)
from framelens.core.pipeline import build
from framelens.core.pipeline.decode_ahead import End, Failed
from framelens.core.pipeline.execute import DrawPolicy, PipelineWorker
from framelens.core.pipeline.plan import Plan
from framelens.core.pipeline.processor import draw_after_stages
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.drive import Drive
from framelens.core.sessions.failover import Failover, device_words
from framelens.core.sessions.opening import SourceOpener, run_length
from framelens.core.stages.source_stages import SourceStages, StageFactory, wants_pixels
from framelens.core.stages.sources import Source
from framelens.core.stages.sources.merged import MergedSource
from framelens.core.types import FrameResult, SourceInfo

__all__ = [
    "MAX_BATCH",
    "MULTI_BATCH",
    "RUN_DEPTH",
    "Say",
    "Session",
    "SessionOptions",
    "SessionSource",
    "session_batch",
]

MULTI_BATCH = 8
"""Frames per engine call, across sources, when none is asked for: batches fill with the
frames that are ready (never waiting for a late source), so this is an upper bound."""

MAX_BATCH = 32

RUN_DEPTH = 4
"""Frames in flight per worker and batch slot (taken, processed, not yet handed out): a
run keeps more in flight than a paused player may hold, and no more than a GPU pipeline
has display buffers (8 per batch slot), so a worker never waits long on a slow sink. On
the H200, 2 workers at batch 4 ran at NVDEC's ceiling with it (530 fps; 540 at 8)."""

Say = Callable[[str], None]


def session_batch(settings: PipelineSettings, sources: int) -> PipelineSettings:
    """As DeepStream's batch-size: one slot per source, at least MULTI_BATCH, at most
    MAX_BATCH, for several sources when no batch was asked for (one asked for is kept)."""
    if settings.batch == 1 and sources > 1:
        return replace(settings, batch=min(MAX_BATCH, max(MULTI_BATCH, sources)))
    return settings


@dataclass(frozen=True)
class SessionOptions:
    """How a consumer drives the session.

    ``draw``/``copy``/``pixels``: the workers' overlays and display frames (see
    ``PipelineWorker``). ``start``: the first frame (one seekable source). ``frames``: at
    most that many frames of each source. ``depth``: frames in flight per worker and
    batch slot (a run keeps the GPU busy; the wall keeps latency low with 1).
    ``decode_depth``: frames decoded ahead (at least a batch). ``max_wait_ms``: how long
    a batch waits for more frames after its first (None: the executor's default).
    ``workers``: inference workers per device (None: the path's default).
    ``wrap``: each opened source wrapped (the wall's pacing), also after a move.
    ``on_error``: a failed batch reported and the session goes on (the wall); without it
    the first such failure ends the session (a run). ``merged``: one source read through
    the merger too, so that its failure ends it alone and the session goes on (the wall).
    ``one_off``: the workers this session builds end with it (a one-source run), so the
    plan may fit them to the run's length (opening.run_length, Task.gpu_workers).
    """

    draw: DrawPolicy = "all"
    copy: bool = False
    pixels: bool = True
    start: int = 0
    frames: int | None = None
    depth: int = RUN_DEPTH
    decode_depth: int = 4
    max_wait_ms: float | None = None
    workers: int | None = None
    wrap: Callable[[Source], Source] | None = None
    on_error: Callable[[BaseException], None] | None = None
    merged: bool = False
    one_off: bool = False


@dataclass
class SessionSource:
    """One source of the session: what it is, how far it got, and why it stopped early.

    ``index`` and ``pts`` of the frames handed out continue across a move to another
    device: a live source reopened counts on from where it was (``rebase``)."""

    spec: str
    name: str
    source: Source | None = None  # what is read now (None: not open, failed or ended)
    delivered: int = 0  # results handed to the consumer
    next_index: int = 0  # the frame it is to hand out next (where a move resumes it)
    failure: str | None = None
    complete: bool = False  # every frame it had to give was handed out
    decoder: str = ""
    _base: int = 0  # delivered when the current source opened
    _offsets: tuple[int, float] = (0, 0.0)
    _last_pts: float = 0.0
    _rebase: bool = False


class Session:
    """``specs`` through workers built for ``settings``; ``open``, iterate ``results``,
    ``close`` (or use as a context manager).

    ``stages``: the per-source stage factory. ``devices``: the devices a failed one's
    sources may move to (a several-device run's; the CPU is always last); ``failed``:
    devices known to have failed (shared between a run's device groups). ``built``:
    workers to use (an archive keeps them across files; ``release_workers`` hands them
    back). ``say``: one-line notes for the user (a GPU failure, a fallback).
    """

    def __init__(
        self,
        specs: Sequence[str],
        settings: PipelineSettings,
        *,
        names: Sequence[str] | None = None,
        options: SessionOptions = SessionOptions(),
        stages: StageFactory | None = None,
        devices: Sequence[str] = (),
        failed: list[str] | None = None,
        built: build.Workers | None = None,
        say: Say | None = None,
        spinning: bool = True,
        ids: Sequence[int] | None = None,
        on_plan: Callable[[Plan], None] | None = None,
    ) -> None:
        if not specs:
            raise SourceError("give at least one source")
        if options.start and len(specs) > 1:
            raise ConfigError("several sources are read from their starts; --start needs one")
        self.settings = session_batch(settings, len(specs))
        if not options.pixels and wants_pixels(stages):  # BoT-SORT's motion compensation
            options = replace(options, pixels=True)
        self.options = options
        self.sources = [
            SessionSource(spec, name)
            for spec, name in zip(specs, names or [str(s) for s in specs], strict=True)
        ]
        self.stages = SourceStages(stages, ids, self._source_info)
        self._draws_late = False  # overlays drawn after the stages (see _drive)
        self.notes: list[str] = []
        self._say = say
        self._spinning = spinning
        self._built = built
        self._lent = built is not None  # the caller's workers: handed back, not closed
        self._on_plan = on_plan
        self._batch_why = (
            f"one slot per source of {len(specs)}, at least {MULTI_BATCH}, at most "
            f"{MAX_BATCH} (DeepStream's batch-size); batches fill with the frames ready"
            if self.settings.batch != settings.batch else None
        )  # fmt: skip
        self.plan: Plan | None = None  # what the workers were built from, and why
        self._busy = False  # a worker did not stop: its pipelines must not be closed
        self._feed: Source | None = None
        self._route: list[int] = []  # the feed's source_id -> the session's source
        self._failover = Failover(
            devices, options.workers, self.note, failed=failed or [], spinning=spinning
        )
        self.batches_run = 0  # engine calls over every device used, and the frames in them
        self.frames_run = 0
        self.started = self.finished = 0.0  # perf_counter span of results()
        self.device = self.settings.device
        self._driving: Drive[FrameResult] | None = None
        self._ran_as: tuple[PipelineSettings, str, int] = (self.settings, "", 0)

    def _source_info(self, i: int) -> SourceInfo | None:
        """What source ``i`` of the session is (its stages' frame rate), while open."""
        source = self.sources[i].source
        return None if source is None else source.info

    # ---- what the consumer reads ---------------------------------------------------------

    @property
    def workers(self) -> build.Workers:
        if self._built is None:
            raise RuntimeError("the session is not open")
        return self._built

    @property
    def path(self) -> str:
        """How the last workers ran, in words, with the decoder of a single source."""
        return self._ran_as[1]

    @property
    def ran(self) -> PipelineSettings:
        """The settings the last workers ran with (TensorRT where it cannot run: ONNX
        Runtime); still known after a failed device's workers were closed."""
        return self._ran_as[0]

    @property
    def worker_count(self) -> int:
        return self._ran_as[2]

    def _note_workers(self) -> None:
        built = self.workers
        path = built.path
        if built.on_device and len(self.sources) == 1 and self.sources[0].decoder:
            path = f"{built.path}, decoder {self.sources[0].decoder}"
        self._ran_as = (built.pipelines[0].settings, path, len(built.pipelines))

    @property
    def moved_to(self) -> list[str]:
        return list(self._failover.moved)

    @property
    def engine_calls(self) -> tuple[int, int]:
        """Engine calls so far and the frames in them (their ratio: the batch the load gave)."""
        drive = self._driving
        if drive is None:
            return self.batches_run, self.frames_run
        batches, frames = drive.engine_calls
        return self.batches_run + batches, self.frames_run + frames

    def failures(self) -> dict[int, str]:
        """Why each source that stopped early did (a merged feed's, as they happen)."""
        out = {i: s.failure for i, s in enumerate(self.sources) if s.failure is not None}
        feed = self._feed
        if isinstance(feed, MergedSource):
            for k, why in list(feed.failures.items()):
                out.setdefault(self._route[k], why)
        return out

    def note(self, text: str) -> None:
        self.notes.append(text)
        if self._say is not None:
            self._say(text)

    # ---- opening ----------------------------------------------------------------------------

    def open(
        self,
        stop: Callable[[], bool] = lambda: False,
        on_opened: Callable[[int], None] | None = None,
    ) -> Session:
        """Build the workers (unless given) and open every source where they want its
        frames; a source that cannot be opened is recorded (one source read without the
        merger: raised). ``stop()`` is asked between sources (Cancelled);
        ``on_opened(i)`` is told as each source opens or fails to. On any failure the
        sources opened and the workers built here are closed again."""
        try:
            if self._built is None:
                self._built = build.workers(
                    self.settings, planned=self._planned(), notify=self.note,
                    spinning=self._spinning, count=self.options.workers,
                )  # fmt: skip
            else:
                self._planned(self._built.plan)
            opened = self._open_all(stop, on_opened)
            if not opened:
                why = "; ".join(s.failure or "" for s in self.sources)
                raise SourceError(f"no source could be opened: {why}")
            sources = [self.sources[i].source for i in opened]
            self._feed = self._feed_of([s for s in sources if s is not None], opened)
        except BaseException:
            build.close_quietly([s.source for s in self.sources if s.source is not None])
            for entry in self.sources:
                entry.source = None
            if not self._lent:
                self._close_workers()
            raise
        self._note_workers()
        return self

    def _planned(self, made: Plan | None = None) -> Plan:
        """The plan of this session's sources: made here, or the one given workers (or a
        move's) were built from, its decoders those of these sources."""
        specs = [s.spec for s in self.sources]
        if made is None:
            opts = self.options
            made = build.plan(
                self.settings, specs, count=opts.workers, batch_why=self._batch_why,
                run_frames=(lambda: run_length(specs, opts.start, opts.frames))
                if opts.one_off else None,
            )  # fmt: skip
        else:
            made = build.replan_sources(made, specs)
        return self._use_plan(made)

    def _use_plan(self, made: Plan) -> Plan:
        self.plan = made
        if self._on_plan is not None:
            self._on_plan(made)
        return made

    def _close_workers(self) -> None:
        """Close the workers (quietly: a failed GPU's teardown may fail too), unless a
        worker thread still uses them."""
        built, self._built = self._built, None
        if built is not None and not self._busy:
            built.close()

    def _open_all(
        self, stop: Callable[[], bool], on_opened: Callable[[int], None] | None
    ) -> list[int]:
        """Every source opened for the workers; the numbers of those that opened."""
        opened: list[int] = []
        opener = SourceOpener(self.workers.pipelines[0], plan=self.plan, say=self.note)
        try:
            for i, entry in enumerate(self.sources):
                if stop():
                    raise Cancelled("cancelled while opening the sources")
                try:
                    source, entry.decoder = opener.open(entry.spec).pair
                except SourceError as exc:
                    entry.failure = error_message(exc)
                    if not self._merges:
                        raise
                    if on_opened is not None:
                        on_opened(i)
                    continue
                entry.failure = None
                entry.source = source
                opened.append(i)
                if self.options.start:
                    _seek_to_start(source, self.options.start)
                    entry.next_index = self.options.start
                if on_opened is not None:
                    on_opened(i)
        except BaseException:
            build.close_quietly([s.source for s in self.sources if s.source is not None])
            for s in self.sources:
                s.source = None
            raise
        return opened

    @property
    def _merges(self) -> bool:
        return len(self.sources) > 1 or self.options.merged

    def _feed_of(self, sources: list[Source], route: list[int]) -> Source:
        """What the executor reads: the one source itself, or the sources merged (each
        limited to the frames it has left to give)."""
        wrap = self.options.wrap
        if wrap is not None:
            sources = [wrap(s) for s in sources]
        for i, source in zip(route, sources, strict=True):
            self.sources[i].source = source
        self._route = list(route)
        if not self._merges:
            sources[0].source_id = 0
            return sources[0]
        frames = self.options.frames
        limits = [None if frames is None else max(0, frames - self.sources[i].delivered)
                  for i in route]  # fmt: skip
        return MergedSource(sources, limits=limits, raise_gpu_errors=True)

    # ---- the one loop ---------------------------------------------------------------------

    def results(
        self, stop: Callable[[], bool] = lambda: False, tick: Callable[[], None] | None = None
    ) -> Iterator[FrameResult]:
        """Every result of every source, in decode order (so each source's in frame order),
        through its source's stages; ``tick`` is called when none came for a moment.
        Returns at the end of every source or once ``stop()``; raises a failure that
        ends the session (one source's, a batch's without ``on_error``, Cancelled when
        stopped during a move)."""
        if self._feed is None:
            raise RuntimeError("open the session first")
        self.started = time.perf_counter()
        try:
            while self._feed is not None:
                try:
                    yield from self._drive(stop, tick)
                    break
                except GpuError as exc:
                    if not self.device.startswith("cuda"):
                        raise
                    self._move(exc, stop)
        finally:
            self.finished = time.perf_counter()
        self._settle_end()

    def _drive(
        self, stop: Callable[[], bool], tick: Callable[[], None] | None
    ) -> Iterator[FrameResult]:
        assert self._feed is not None
        built, ran = self.workers, self.ran
        opts = self.options
        # overlays show what the per-source stages add (track IDs): with stages, the
        # consumer draws after them, else each worker draws its own results
        late = self._draws_late = bool(self.stages) and opts.draw != "none"
        workers = [
            PipelineWorker(p, "none" if late else opts.draw, copy=opts.copy, pixels=opts.pixels)
            for p in built.pipelines
        ]
        single_limit = None if self._merges else opts.frames
        if single_limit is not None:
            single_limit = max(0, single_limit - self.sources[0].delivered)
        drive: Drive[FrameResult] = Drive(
            self._feed, decode_depth=max(opts.decode_depth, ran.batch)
        )
        try:
            drive.start(
                workers, batch=ran.batch, depth=opts.depth * len(workers) * ran.batch,
                limit=single_limit, max_wait_ms=opts.max_wait_ms,
            )  # fmt: skip
        except BaseException:
            drive.stop_decoding()
            raise
        self._driving = drive
        handed = 0
        try:
            while not stop():
                if single_limit is not None and handed >= single_limit:
                    break
                item = drive.get(0.05)
                if item is None:
                    if tick is not None:
                        tick()
                    continue
                if isinstance(item, End):
                    return
                if isinstance(item, Failed):
                    self._failed_batch(item.error)
                    continue
                handed += 1
                yield self._deliver(item.value)
        finally:
            stopped = drive.stop_decoding()  # the source stays: a move reads where it was
            self._busy = self._busy or not stopped
            self._driving = None
            batches, frames = drive.engine_calls
            self.batches_run += batches
            self.frames_run += frames
        if not stopped:  # its pipeline is still in use: no second thread may take it
            raise EngineError("an inference worker did not stop; its pipelines are still busy")

    def _failed_batch(self, error: BaseException) -> None:
        if isinstance(error, GpuError) or self.options.on_error is None:
            raise error
        self.options.on_error(error)

    def _deliver(self, result: FrameResult) -> FrameResult:
        self._arrive(result)
        self.stages(result)
        self._draw_late(result)
        return result

    def _arrive(self, result: FrameResult) -> None:
        """The result counted as its session source's next: its index and time go on
        from where the source was (after a move), its source is the session's."""
        frame = result.frame
        i = self._route[frame.source_id]
        entry = self.sources[i]
        if entry._rebase:  # a live source counts on after a move
            interval = _interval(entry)
            entry._offsets = (
                entry.next_index - frame.index,
                entry._last_pts + interval - frame.pts,
            )
            entry._rebase = False
        if entry._offsets != (0, 0.0):
            frame.index += entry._offsets[0]
            frame.pts += entry._offsets[1]
        frame.source_id = i
        entry.delivered += 1
        entry.next_index, entry._last_pts = frame.index + 1, frame.pts

    def _draw_late(self, result: FrameResult) -> None:
        """The overlays drawn after the stages (what they added: track IDs)."""
        if self._draws_late and (self.options.draw == "all" or result.frame.on_host):
            draw_after_stages(self.workers.pipelines[0], result, copy=self.options.copy)

    def _settle_end(self) -> None:
        """At the end: sources the merged feed saw fail; one source's failure raised."""
        feed = self._feed
        if isinstance(feed, MergedSource):
            for k, why in feed.failures.items():
                self.sources[self._route[k]].failure = why
        failure = self.sources[0].failure
        if len(self.sources) == 1 and not self.options.merged and failure is not None:
            raise SourceError(failure)

    # ---- a GPU that fails -------------------------------------------------------------------

    def _move(self, exc: GpuError, stop: Callable[[], bool]) -> None:
        """The failed device's sources to another device, each from the frame it reached."""
        gone, self._feed = self._feed, None
        failed_device = self.device
        try:
            self._close_workers()  # a broken CUDA context fails its own teardown: quietly
        finally:
            build.close_quietly([gone] if gone is not None else [])
        self._mark_finished(gone)
        left = [
            i for i, s in enumerate(self.sources)
            if s.failure is None and not s.complete and s.source is not None
        ]  # fmt: skip
        for s in self.sources:
            s.source = None
        if not left:
            self.note(f"{failed_device} failed ({exc}) with no source left to move")
            return
        if stop():
            raise Cancelled("cancelled") from exc
        at = [(self.sources[i].next_index, self.sources[i].delivered) for i in left]
        specs = [self.sources[i].spec for i in left]
        try:
            settings, built, reopened = self._failover.move(
                self.settings, specs, at, planned=self.plan, why=error_message(exc)
            )
        except FrameLensError as move_error:  # not even the CPU: they end here
            self.note(
                f"{failed_device} failed ({exc}); no device could take its sources: "
                f"{error_message(move_error)}"
            )
            for i in left:
                self.sources[i].failure = f"{failed_device} failed and no device could take it"
            if len(self.sources) == 1:
                raise
            return
        self.settings, self._built, self.device = settings, built, settings.device
        if built.plan is not None:  # planned for the sources moved, saying where and why
            self._use_plan(built.plan)
        self._note_workers()
        for j, reason in reopened.not_kept.items():
            self.sources[left[j]].failure = reason
        kept = reopened.kept
        where = (
            f" from frame {at[kept[0]][0]}" if len(kept) == 1
            else ", each from the frame it had reached"
        )  # fmt: skip
        self.note(
            f"{failed_device} failed ({exc}); {_count(len(kept))} going on on "
            f"{device_words(settings.device)}{where}"
        )
        if not kept:
            return
        route = [left[j] for j in kept]
        for i, source in zip(route, reopened.sources, strict=True):
            entry = self.sources[i]
            entry._base = entry.delivered
            entry._rebase = not source.info.seekable
        self._feed = self._feed_of(reopened.sources, route)

    def _mark_finished(self, gone: Source | None) -> None:
        """Which sources had handed out every frame they had before the failure."""
        limit = self.options.frames
        if isinstance(gone, MergedSource):
            for k, why in gone.failures.items():
                self.sources[self._route[k]].failure = why
            for k, n in gone.read_all.items():
                entry = self.sources[self._route[k]]
                # read to its end is not enough: every frame read must have been handed out
                entry.complete = entry.delivered - entry._base == n
            return
        entry = self.sources[0]
        count = entry.source.info.frame_count if entry.source is not None else None
        entry.complete = (limit is not None and entry.delivered >= limit) or (
            count is not None and entry.next_index >= count
        )

    # ---- closing ------------------------------------------------------------------------------

    def release_workers(self) -> build.Workers | None:
        """The workers, handed to the caller (kept across an archive's files), not closed;
        None when there are none fit to keep (closed after a failure, or still busy)."""
        built, self._built = self._built, None
        return None if self._busy else built

    def close(self) -> None:
        """Stop the executor if a consumer left it running, close the sources (a merged
        feed's reader threads first) and the workers."""
        drive, self._driving = self._driving, None
        if drive is not None:
            self._busy = self._busy or not drive.stop_decoding()
        feed, self._feed = self._feed, None
        try:
            if feed is not None:
                feed.close()
            else:
                build.close_quietly([s.source for s in self.sources if s.source is not None])
        finally:
            for s in self.sources:
                s.source = None
            self._close_workers()

    def __enter__(self) -> Session:
        return self.open() if self._feed is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _seek_to_start(source: Source, start: int) -> None:
    if not source.info.seekable:
        raise SourceError(f"{source.info.uri} cannot seek; --start needs a file")
    source.seek(start)


def _interval(entry: SessionSource) -> float:
    fps = entry.source.info.fps if entry.source is not None else 0.0
    return 1.0 / fps if fps > 0 else 1.0 / 30


def _count(n: int) -> str:
    return f"{n} source{'' if n == 1 else 's'}"
