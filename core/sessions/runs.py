"""Runs: sources through a session into files (``framelens run``, one source or many).

A run of one source is the several-source run with one source: both open a Session
(core/sessions/session.py) per device, give each source its outputs
(core/sessions/outputs.py) once it is open, and write every result as it comes. They
differ only in where the outputs go: one source's where the user named them, several
sources' as ``DIR/<name>.mp4`` and ``DIR/<name>.json``. Every source keeps its own
decoder (NVDEC on the GPU); frames of all of them go through one executor per device,
whose workers take up to ``batch`` frames at a time from whichever sources have them:
DeepStream's nvstreammux -> nvinfer -> nvstreamdemux. A source that fails among several
is reported and the others go on; its partial outputs are discarded, never renamed in.
A device that fails mid-run hands its sources to another device of the run, or to the
CPU, each from the frame it had reached (the session's one failover policy).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from framelens.core.errors import Cancelled, ConfigError
from framelens.core.pipeline.plan import Plan
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.pipeline.stats import RunStats
from framelens.core.pipeline.variant import prepare_precision
from framelens.core.progress import Progress, make_bar
from framelens.core.sessions.outputs import (
    RunOutputs,
    SourceOutputs,
    output_names,
    run_meta,
)
from framelens.core.sessions.processes import Counter, StopFlag, run_groups_in_processes
from framelens.core.sessions.session import Session, SessionOptions, SessionSource
from framelens.core.sessions.summary import (
    DeviceSummary,
    EngineCalls,
    Ran,
    RunSummary,
    SourceSummary,
)
from framelens.core.sessions.tracks import (
    MOT_SUFFIX,
    MotTracks,
    drawn_or_not,
    tracker_json,
    with_tracking,
)
from framelens.core.stages.analytics.events import EVENTS_SUFFIX, EventsWriter
from framelens.core.stages.analytics.heatmap import (
    HEATMAP_SUFFIX,
    HeatmapPng,
    HeatmapSettings,
    HeatmapStages,
)
from framelens.core.stages.analytics.stage import AnalyticsStages, Tally
from framelens.core.stages.analytics.zones import ZonesFile
from framelens.core.stages.sinks.lossless import open_exporter
from framelens.core.stages.sinks.video import provenance_metadata
from framelens.core.stages.source_stages import StageFactory, chain_stages
from framelens.core.stages.sources.paced import Realtime
from framelens.core.stages.tasks import AnyTask
from framelens.core.stages.tasks.base import OutputWriter
from framelens.core.stages.timing import now_ms
from framelens.core.stages.tracking.settings import TrackerSettings
from framelens.core.threads import NamedThread
from framelens.core.types import SourceInfo

__all__ = ["LIVE_KINDS", "OutputsFor", "run_device", "run_many", "run_to_outputs"]

LIVE_KINDS = ("stream", "camera")
"""Sources without an end: a run of them stops on Ctrl+C and keeps its outputs."""

Say = Callable[[str], None]


class OutputsFor(Protocol):
    """A source's outputs, made once it is open: its entry, what it shows, the run's
    provenance for it and the task."""

    def __call__(
        self, entry: SessionSource, info: SourceInfo, meta: dict[str, Any], task: AnyTask
    ) -> SourceOutputs: ...


def run_device(
    specs: Sequence[str],
    names: Sequence[str],
    settings: PipelineSettings,
    outputs_for: OutputsFor,
    *,
    options: SessionOptions,
    stages: StageFactory | None = None,
    devices: Sequence[str] = (),
    failed_devices: list[str] | None = None,
    counter: Counter | None = None,
    on_message: Say | None = None,
    on_frame: Callable[[int], None] | None = None,
    cancel: StopFlag | None = None,
    session: Session | None = None,
    ids: Sequence[int] | None = None,
    on_plan: Callable[[Plan], None] | None = None,
) -> DeviceSummary:
    """One device's sources through one session into their outputs. ``session``: one
    already open (an archive's, with workers kept across files); else opened here and
    closed at the end. ``on_frame(frames written)`` after every result."""
    own = session is None
    if session is None:
        session = Session(
            specs, settings, names=names, options=options, stages=stages, devices=devices,
            failed=failed_devices, say=on_message, ids=ids, on_plan=on_plan,
        )  # fmt: skip
    outputs: dict[int, SourceOutputs] = {}
    try:
        if own:
            session.open()
        ran = session.ran
        task = session.workers.pipelines[0].task
        for i, entry in enumerate(session.sources):
            if entry.source is None:
                continue
            info = entry.source.info
            meta = run_meta(entry.spec, replace(settings, backend=ran.backend), info)
            outputs[i] = outputs_for(entry, info, meta, task)
        given = (settings.device, tuple(range(len(specs))) if ids is None else tuple(ids))
        return _write_all(session, outputs, counter, on_frame, cancel, given)
    except BaseException:
        for out in outputs.values():
            out.abort()
        raise
    finally:
        if own:
            session.close()


def _write_all(
    session: Session,
    outputs: dict[int, SourceOutputs],
    counter: Counter | None,
    on_frame: Callable[[int], None] | None,
    cancel: StopFlag | None,
    given: tuple[str, tuple[int, ...]],
) -> DeviceSummary:
    stats = RunStats()
    latency: dict[int, list[float]] = {i: [] for i in outputs}
    written = 0
    stop = cancel.is_set if cancel is not None else lambda: False
    ended_by_user = False
    try:
        for result in session.results(stop):
            i = result.frame.source_id
            t0 = now_ms()
            outputs[i].add(result)
            result.times.e2e += now_ms() - t0  # the writing is part of the frame's way
            stats(result)
            latency[i].append(result.times.e2e)
            written += 1
            if counter is not None:
                counter.update()
            if on_frame is not None:
                on_frame(written)
    except KeyboardInterrupt:
        if not _live(session):
            raise  # a file run stopped half way: nothing is kept
        ended_by_user = True
    if stop() and not ended_by_user:
        if not _live(session):
            raise Cancelled("cancelled")
        ended_by_user = True
    if ended_by_user:
        # a camera or stream has no end: Ctrl+C (or ``kill``) is how a recording stops,
        # and what was recorded is kept, complete
        session.note(f"stopped by Ctrl+C after {written} frames of the live source")
    stats.stop()
    return _part(session, outputs, stats, latency, given)


def _live(session: Session) -> bool:
    """Whether every open source of the session is a camera or a stream."""
    kinds = {s.source.info.kind for s in session.sources if s.source is not None}
    return bool(kinds) and kinds <= set(LIVE_KINDS)


def _part(
    session: Session,
    outputs: dict[int, SourceOutputs],
    stats: RunStats,
    latency: dict[int, list[float]],
    given: tuple[str, tuple[int, ...]],
) -> DeviceSummary:
    """The device's part: ``given`` the device it was given and its sources' numbers."""
    entries: list[SourceSummary] = []
    failures = session.failures()  # a merged feed's too, when Ctrl+C ended the run
    for i, entry in enumerate(session.sources):
        out = outputs.get(i)
        if out is None:  # never opened
            entries.append(SourceSummary(entry.spec, entry.name, error=entry.failure))
            session.note(f"{entry.spec} not opened: {entry.failure}")
            continue
        p50 = p99 = None
        if latency[i]:
            q50, q99 = np.percentile(latency[i], [50, 99])
            p50, p99 = round(float(q50), 2), round(float(q99), 2)
        failure = failures.get(i)
        dropped = entry.source.dropped if entry.source is not None else None
        if failure is not None:
            out.abort()  # a partial video is no evidence: nothing renamed in
            session.note(f"{entry.spec} failed after {out.frames} frames: {failure}")
            entries.append(
                SourceSummary(entry.spec, entry.name, out.frames, error=failure,
                              p50_ms=p50, p99_ms=p99, dropped=dropped)
            )  # fmt: skip
            continue
        damage = entry.source.damage_note() if entry.source is not None else None
        written = out.close()
        if damage:  # a damaged file: what the outputs hold
            session.note(f"{damage}; the outputs hold the {out.frames} frames processed")
        entries.append(
            SourceSummary(entry.spec, entry.name, out.frames, tuple(written), p50_ms=p50,
                          p99_ms=p99, tracks=out.tracks, analytics=out.analytics,
                          dropped=dropped)
        )  # fmt: skip
    ran = session.ran
    encoders = [o.encoder for o in outputs.values() if o.encoder]
    return DeviceSummary(
        device=given[0],
        ids=given[1],
        outcomes=tuple(entries),
        frames=sum(o.frames for o in outputs.values()),
        fps=round(stats.fps, 2),
        span=(session.started, session.finished),
        stage_ms=stats.medians(),
        calls=EngineCalls(session.batches_run, session.frames_run),
        ran=Ran(
            path=session.path,
            backend=ran.backend,
            batch=ran.batch,
            workers=session.worker_count,
            plan=session.plan.as_json() if session.plan is not None else None,
        ),
        encoder=encoders[0] if encoders else None,
        notes=tuple(session.notes),
        moved_to=tuple(session.moved_to),
    )


# ---- one source ---------------------------------------------------------------------------


def run_to_outputs(
    source_spec: str,
    settings: PipelineSettings,
    *,
    export: str | None = None,
    detections: str | None = None,
    lossless: bool = False,
    start: int = 0,
    frames: int | None = None,
    progress: Progress = False,
    on_progress: Callable[[int, int], None] | None = None,
    on_message: Callable[[str], None] | None = None,
    on_prepare: Callable[[str, float], None] | None = None,
    cancel: threading.Event | None = None,
    stages: StageFactory | None = None,
    on_plan: Callable[[Plan], None] | None = None,
    tracker: TrackerSettings | None = None,
    tracks: str | None = None,
    zones: ZonesFile | None = None,
    events: str | None = None,
    realtime: bool = False,
    heatmap: HeatmapSettings | None = None,
    heatmap_png: str | None = None,
) -> RunSummary:
    """Process a range of a source; outputs appear only when complete.

    ``progress`` draws a terminal bar; ``on_progress(done, total)`` (total 0 when
    unknown) is called at most ten times a second and at the end; setting ``cancel``
    (or Ctrl+C) stops a file run with Cancelled (KeyboardInterrupt) and removes the
    partial outputs, and ends a camera's or stream's recording and keeps it.
    ``export``: a video file, ``DIR/`` for one PNG per frame, or with ``lossless`` an
    ``.mkv`` in FFV1 (both lossless: decoding gives back the exact pixels).
    ``on_message`` receives one-line notes (a GPU failure and the switch to the CPU).
    If the GPU fails mid-run, the run goes on from the same frame on the CPU.
    For fp16/int8 the variant is prepared first (see prepare_precision; INT8
    calibrates on this source), reported through ``on_prepare(text, 0..1)``.
    ``stages``: per-source stages after the task (core/stages/source_stages.py).
    ``on_plan`` is told the run's plan (core/pipeline/plan.py) before it builds.
    ``tracker``: a tracker before ``stages`` (core/sessions/tracks.py), its frame rate
    the source's; the detections written carry its track IDs, ``tracks`` names a MOT
    Challenge text file of them, and the summary says the tracker and the tracks.
    ``zones``: lines and zones counted after the tracker (core/stages/analytics), their
    counts in the summary, their events as CSV in ``events``. ``heatmap``: where the
    tracks have been, drawn under the overlay of ``export`` (core/stages/analytics/
    heatmap.py); ``heatmap_png``: the final heatmap over the last frame as a PNG.
    ``realtime``: a file played as a camera delivers it (core/stages/sources/paced.py):
    frames not taken in time are dropped, counted in the summary, and latency counts
    from each frame's release.
    """
    if tracks is not None and tracker is None:
        raise ConfigError("tracks are written by a tracker: give one to export them")
    if zones is not None and tracker is None:
        raise ConfigError("lines and zones count tracks: add a tracker (--track)")
    if events is not None and zones is None:
        raise ConfigError("events are made by lines and zones: give them (--zones)")
    labels = tuple(settings.model.labels or ())
    stages = _analytics(stages, tracker, zones, labels, heatmap, bool(heatmap_png), bool(export))
    tracker = drawn_or_not(tracker, bool(export))
    began = time.perf_counter()
    settings, variant = prepare_precision(
        source_spec, settings, progress=progress, on_prepare=on_prepare, cancel=cancel
    )
    options = SessionOptions(draw="all" if export else "none", pixels=bool(export),
                             start=start, frames=frames,
                             wrap=Realtime(frames=frames) if realtime else None)  # fmt: skip
    session = Session(
        [source_spec], settings, options=options, stages=with_tracking(stages, tracker),
        say=on_message, on_plan=on_plan,
    )  # fmt: skip
    with session:
        summary = run_one(
            session,
            RunOutputs(
                export,
                [detections] if detections else [],
                lossless,
                tracks=tracks,
                zones=zones,
                events=events,
                labels=labels,
                heatmap_png=heatmap_png,
            ),
            progress=progress,
            on_progress=on_progress,
            cancel=cancel,
        )
    return replace(
        summary,
        variant=None if variant is None else variant.summary(),
        tracker=tracker_json(tracker),
        wall_s=round(time.perf_counter() - began, 2),  # the whole call, the variant's too
    )


def _analytics(
    stages: StageFactory | None,
    tracker: TrackerSettings | None,
    zones: ZonesFile | None,
    labels: tuple[str, ...],
    heatmap: HeatmapSettings | None,
    png: bool,
    drawn: bool,
) -> StageFactory | None:
    """``stages`` followed by the lines and zones, then the heatmap, of a run (both
    after its tracker: ConfigError without one); the lines and zones ``drawn`` with their
    counts where a video is."""
    if heatmap is None and png:
        raise ConfigError("the heatmap's PNG needs a heatmap (--heatmap)")
    if heatmap is not None and tracker is None:
        raise ConfigError("a heatmap shows where tracks have been: add a tracker (--track)")
    if zones is not None:
        stages = chain_stages(stages, AnalyticsStages(zones, dict(enumerate(labels)), drawn))
    if heatmap is not None:
        stages = chain_stages(stages, HeatmapStages(heatmap, keep_frame=png))
    return stages


def run_one(
    session: Session,
    outputs: RunOutputs,
    *,
    progress: Progress = False,
    on_progress: Callable[[int, int], None] | None = None,
    cancel: StopFlag | None = None,
) -> RunSummary:
    """An open one-source session into ``outputs`` (a run, an archive's job); its
    ``wall_s`` from this call on (the session was opened before)."""
    began = time.perf_counter()
    entry = session.sources[0]
    assert entry.source is not None
    info = entry.source.info
    start, frames = session.options.start, session.options.frames
    total = frames
    if total is None and info.frame_count:
        total = max(0, info.frame_count - start)
    bar = make_bar(progress, total=total)
    last_report = 0.0

    def report(done: int) -> None:
        nonlocal last_report
        if on_progress is not None and time.monotonic() - last_report >= 0.1:
            last_report = time.monotonic()
            on_progress(done, total or 0)

    def outputs_for(
        entry: SessionSource, info: SourceInfo, meta: dict[str, Any], task: AnyTask
    ) -> SourceOutputs:
        meta = {**meta, "source": outputs.label or entry.spec}
        writers = [task.open_writer(path, meta) for path in outputs.detections]
        writers += [make(meta) for make in outputs.extra]
        if outputs.tracks:
            writers.append(MotTracks(outputs.tracks))
        labels = dict(enumerate(outputs.labels))
        if outputs.heatmap_png:
            writers.append(HeatmapPng(outputs.heatmap_png))
        if outputs.events:
            try:
                writers.append(EventsWriter(outputs.events, labels))
            except BaseException:
                for w in writers:
                    w.abort()
                raise
        video = None
        if outputs.export:
            fps = info.fps if info.fps > 0 else 30.0
            out_w, out_h = task.output_size(info.width, info.height)
            try:
                video = open_exporter(
                    outputs.export, lossless=outputs.lossless, width=out_w, height=out_h,
                    fps=fps, meta=meta, tags=provenance_metadata(meta),
                    audio_source=entry.spec if info.has_audio else None,
                    audio_start_s=start / fps,
                    audio_end_s=None if frames is None else (start + frames) / fps,
                )  # fmt: skip
            except BaseException:
                for w in writers:
                    w.abort()
                raise
        tally = Tally(outputs.zones, labels) if outputs.zones is not None else None
        return SourceOutputs(video, writers, tally)

    try:
        part = run_device(
            [entry.spec], [entry.name], session.settings, outputs_for,
            options=session.options, counter=bar, on_frame=report, cancel=cancel,
            session=session,
        )  # fmt: skip
    finally:
        bar.close()
    if on_progress is not None:
        on_progress(part.frames, max(part.frames, total or 0))
    return _summary([part], session.device, session.settings, time.perf_counter() - began)


# ---- several sources ------------------------------------------------------------------------


def run_many(
    specs: Sequence[str],
    settings: PipelineSettings,
    export_dir: str,
    *,
    devices: Sequence[str] | None = None,
    videos: bool = True,
    lossless: bool = False,
    frames: int | None = None,
    progress: Progress = False,
    on_message: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
    max_wait_ms: float | None = None,
    workers: int | None = None,
    processes: bool = False,
    stages: StageFactory | None = None,
    on_plan: Callable[[int, Plan], None] | None = None,
    tracker: TrackerSettings | None = None,
    tracks: bool = False,
    zones: ZonesFile | None = None,
    events: bool = False,
    realtime: bool = False,
    heatmap: HeatmapSettings | None = None,
    heatmap_png: bool = False,
) -> RunSummary:
    """Process every frame of ``specs`` together; outputs per source in ``export_dir``.

    ``devices``: several ("cuda:0", "cuda:1", ... or the same one twice: two device
    slots) spread the sources round robin, one session (batcher, engine and workers) per
    device, all running at once; None: ``settings.device``. ``frames``: at most that many
    of each source. ``max_wait_ms``: how long a batch waits for more frames after its
    first (DeepStream's batched-push-timeout; None: the executor's default of a few ms).
    ``workers``: inference workers (pipelines, each with its stream and thread) per
    device; None: the run path's default. ``processes``: each device's session in a
    process of its own (core/sessions/processes.py) instead of a thread of this one.
    Returns a summary with one entry per source (its outputs, frames, and why it stopped
    early if it did) and, with several devices, one per device. ``on_plan(k, plan)`` is
    told each device slot's plan (``k``: its number in ``devices``), a process's as it
    reports it. ``tracker``: each source's own tracker (IDs from 1 per source) before
    ``stages``; ``tracks``: each source's tracks as MOT text, ``DIR/<name>.tracks.txt``.
    ``zones``: each source's lines and zones counted after its tracker, the counts in its
    summary; ``events``: its events as CSV, ``DIR/<name>.events.csv``. ``heatmap``: each
    source's heatmap drawn into its video; ``heatmap_png``: its final heatmap,
    ``DIR/<name>.heatmap.png``. ``realtime``: each file played as a camera delivers it,
    on its own clock (paced where it is read: core/stages/sources/paced.py); frames not
    taken in time dropped and counted per source, latency from each frame's release."""
    if len(specs) < 1:
        raise ConfigError("give at least one source")
    if tracks and tracker is None:
        raise ConfigError("tracks are written by a tracker: give one to export them")
    if zones is not None and tracker is None:
        raise ConfigError("lines and zones count tracks: add a tracker (--track)")
    if events and zones is None:
        raise ConfigError("events are made by lines and zones: give them (--zones)")
    labels = tuple(settings.model.labels or ())
    stages = _analytics(stages, tracker, zones, labels, heatmap, heatmap_png, videos)
    tracker = drawn_or_not(tracker, videos)
    out_dir = Path(export_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create {out_dir}: {exc.strerror or exc}") from None
    names = output_names(specs)
    slots = list(devices) if devices else [settings.device]
    groups = [list(range(k, len(specs), len(slots))) for k in range(len(slots))]
    groups = [g for g in groups if g]
    bar = make_bar(progress)
    start = time.perf_counter()
    job = GroupJob(
        out_dir=str(out_dir), videos=videos, lossless=lossless,
        options=SessionOptions(draw="all" if videos else "none", pixels=videos, frames=frames,
                               max_wait_ms=max_wait_ms, workers=workers, merged=True,
                               wrap=Realtime(frames=frames) if realtime else None),
        devices=tuple(slots), stages=with_tracking(stages, tracker), tracks=tracks,
        zones=zones, events=events, labels=labels, heatmap_png=heatmap_png,
    )  # fmt: skip
    try:
        if len(groups) == 1:  # on the caller's thread: Ctrl+C reaches the run itself
            parts = [
                job.run([specs[i] for i in groups[0]], [names[i] for i in groups[0]],
                        replace(settings, device=slots[0]), ids=groups[0], counter=bar,
                        on_message=on_message, cancel=cancel, on_plan=_slot_plan(on_plan, 0))
            ]  # fmt: skip
        elif processes:
            parts = run_groups_in_processes(
                job, groups, slots, specs, names, settings, counter=bar,
                on_message=on_message, cancel=cancel, on_plan=on_plan,
            )  # fmt: skip
        else:
            parts = _run_groups(
                job, groups, slots, specs, names, settings, bar, on_message, cancel, on_plan
            )
    finally:
        bar.close()
    summary = _summary(parts, ",".join(slots), settings, time.perf_counter() - start)
    return replace(summary, tracker=tracker_json(tracker))


@dataclass(frozen=True)
class GroupJob:
    """What every device group of a several-source run does with its sources (picklable:
    a group may run in a process of its own)."""

    out_dir: str
    videos: bool
    lossless: bool
    options: SessionOptions
    devices: tuple[str, ...]
    stages: StageFactory | None = None
    tracks: bool = False  # each source's tracks as MOT text, DIR/<name>.tracks.txt
    zones: ZonesFile | None = None  # lines and zones counted (counts in the summary)
    events: bool = False  # each source's events as CSV, DIR/<name>.events.csv
    labels: tuple[str, ...] = ()  # the model's class names
    heatmap_png: bool = False  # each source's final heatmap, DIR/<name>.heatmap.png

    def run(
        self,
        specs: Sequence[str],
        names: Sequence[str],
        settings: PipelineSettings,
        *,
        ids: Sequence[int],
        counter: Counter | None,
        on_message: Say | None,
        cancel: StopFlag | None,
        failed_devices: list[str] | None = None,
        on_plan: Callable[[Plan], None] | None = None,
    ) -> DeviceSummary:
        """The group's sources (``ids``: their numbers in the run) through one session."""
        return run_device(
            specs, names, settings, self.outputs_for, options=self.options, stages=self.stages,
            devices=self.devices, failed_devices=failed_devices, counter=counter,
            on_message=on_message, cancel=cancel, ids=ids, on_plan=on_plan,
        )  # fmt: skip

    def outputs_for(
        self, entry: SessionSource, info: SourceInfo, meta: dict[str, Any], task: AnyTask
    ) -> SourceOutputs:
        out_dir = Path(self.out_dir)
        video = None
        if self.videos:
            out_w, out_h = task.output_size(info.width, info.height)
            suffix = ".mkv" if self.lossless else ".mp4"
            video = open_exporter(
                out_dir / f"{entry.name}{suffix}", lossless=self.lossless, width=out_w,
                height=out_h, fps=info.fps if info.fps > 0 else 30.0, meta=meta,
                tags=provenance_metadata(meta),
            )  # fmt: skip
        writers: list[OutputWriter[Any]] = []
        try:
            if task.writes_outputs:
                writers.append(task.open_writer(out_dir / f"{entry.name}.json", meta))
            if self.tracks:
                writers.append(MotTracks(out_dir / f"{entry.name}{MOT_SUFFIX}"))
            if self.events:
                labels = dict(enumerate(self.labels))
                writers.append(EventsWriter(out_dir / f"{entry.name}{EVENTS_SUFFIX}", labels))
            if self.heatmap_png:
                writers.append(HeatmapPng(out_dir / f"{entry.name}{HEATMAP_SUFFIX}"))
        except BaseException:
            for w in (video, *writers):
                if w is not None:
                    w.abort()
            raise
        tally = None if self.zones is None else Tally(self.zones, dict(enumerate(self.labels)))
        return SourceOutputs(video, writers, tally)


def _run_groups(
    job: GroupJob,
    groups: list[list[int]],
    slots: Sequence[str],
    specs: Sequence[str],
    names: Sequence[str],
    settings: PipelineSettings,
    counter: Counter,
    on_message: Say | None,
    cancel: threading.Event | None,
    on_plan: Callable[[int, Plan], None] | None = None,
) -> list[DeviceSummary]:
    """Each device's group of sources on a thread of its own; the first error of any
    group is raised once all have stopped."""
    parts: list[DeviceSummary | None] = [None] * len(groups)
    errors: list[BaseException] = []
    stop = cancel or threading.Event()
    failed: list[str] = []  # shared: a device one group saw fail, no group moves to

    def run(k: int) -> None:
        try:
            parts[k] = job.run(
                [specs[i] for i in groups[k]], [names[i] for i in groups[k]],
                replace(settings, device=slots[k]), ids=groups[k], counter=counter,
                on_message=on_message, cancel=stop, failed_devices=failed,
                on_plan=_slot_plan(on_plan, k),
            )  # fmt: skip
        except BaseException as exc:  # the others are told to stop; raised below
            errors.append(exc)
            stop.set()

    threads = [
        NamedThread(target=run, args=(k,), name=f"fl-device-{k}", daemon=True)
        for k in range(len(groups))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return [p for p in parts if p is not None]


def _slot_plan(
    on_plan: Callable[[int, Plan], None] | None, k: int
) -> Callable[[Plan], None] | None:
    """Device slot ``k``'s session tells ``on_plan`` its plans with its number."""
    return None if on_plan is None else functools.partial(on_plan, k)


def _summary(
    parts: Sequence[DeviceSummary], device: str, settings: PipelineSettings, wall_s: float
) -> RunSummary:
    return RunSummary(
        devices=tuple(parts),
        model=settings.model.name,
        precision=settings.precision,
        device=device,
        wall_s=round(wall_s, 2),
    )
