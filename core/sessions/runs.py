"""Runs: sources through a session into files (``framelens run``, one source or many).

A run of one source is the several-source run with one source: both open a Session
(core/sessions/session.py) per device, give each source its outputs
(core/sessions/outputs.py ``open_outputs``) once it is open, and write every result as
it comes (core/sessions/device_run.py). They
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
from typing import Any

from framelens.core.errors import ConfigError
from framelens.core.pipeline.plan import Plan
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.pipeline.variant import prepare_precision
from framelens.core.progress import Progress, make_bar
from framelens.core.sessions.device_run import run_device
from framelens.core.sessions.outputs import RunOutputs, SourceOutputs, open_outputs, output_names
from framelens.core.sessions.processes import Counter, StopFlag, run_groups_in_processes
from framelens.core.sessions.session import Say, Session, SessionOptions, SessionSource
from framelens.core.sessions.summary import DeviceSummary, RunSummary
from framelens.core.sessions.tracks import MOT_SUFFIX, drawn_or_not, tracker_json, with_tracking
from framelens.core.stages.analytics.events import EVENTS_SUFFIX
from framelens.core.stages.analytics.heatmap import HEATMAP_SUFFIX, HeatmapSettings, HeatmapStages
from framelens.core.stages.analytics.stage import AnalyticsStages
from framelens.core.stages.analytics.zones import ZonesFile
from framelens.core.stages.source_stages import StageFactory, chain_stages
from framelens.core.stages.sources.paced import Realtime
from framelens.core.stages.tasks import AnyTask
from framelens.core.stages.tracking.settings import TrackerSettings
from framelens.core.threads import NamedThread
from framelens.core.types import SourceInfo

__all__ = ["run_many", "run_one", "run_to_outputs"]

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
    workers: int | None = None,
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
    from each frame's release. ``workers``: inference workers (None: as the plan chooses).
    """
    if workers is not None and workers < 1:
        raise ConfigError(f"inference workers must be at least 1, not {workers}")
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
                             start=start, frames=frames, workers=workers, one_off=True,
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
        return open_outputs(outputs, entry.spec, info, meta, task, start=start, frames=frames)

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
        """``DIR/<name>.mp4`` (``.mkv`` lossless), ``DIR/<name>.json`` and the rest the
        run asked for, each source's under its name."""
        named = Path(self.out_dir) / entry.name
        outputs = RunOutputs(
            export=f"{named}{'.mkv' if self.lossless else '.mp4'}" if self.videos else None,
            detections=[f"{named}.json"] if task.writes_outputs else [],
            lossless=self.lossless,
            tracks=f"{named}{MOT_SUFFIX}" if self.tracks else None,
            zones=self.zones,
            events=f"{named}{EVENTS_SUFFIX}" if self.events else None,
            labels=self.labels,
            heatmap_png=f"{named}{HEATMAP_SUFFIX}" if self.heatmap_png else None,
        )
        frames = self.options.frames
        return open_outputs(outputs, entry.spec, info, meta, task, frames=frames)


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
