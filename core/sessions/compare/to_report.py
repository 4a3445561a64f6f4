"""One complete comparison: source -> lock-step panes -> report directory.

The report is staged in a hidden sibling directory created before anything else
(so an unwritable target fails in a second, not after the run) and renamed into
place at the end; an error, Ctrl+C or ``cancel`` leaves nothing behind.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from framelens.core import __version__
from framelens.core.errors import Cancelled, ConfigError, SourceError
from framelens.core.pipeline.compare.events import EVENT_TOLERANCE
from framelens.core.pipeline.compare.panes import (
    CompareRunner,
    CompareStep,
    PaneSpec,
    check_panes,
)
from framelens.core.pipeline.compare.records import CompareLog
from framelens.core.pipeline.compare.report import REPORT_FILES, write_report_files
from framelens.core.pipeline.ranges import RunRange
from framelens.core.progress import Progress, make_bar
from framelens.core.sessions.compare.lockstep import (
    open_for_panes,
    pane_failover,
    pane_trackers,
    run_lockstep,
)
from framelens.core.stages.sinks.atomic import StrPath
from framelens.core.stages.sinks.atomic_dir import AtomicDir
from framelens.core.stages.source_stages import StageFactory

if TYPE_CHECKING:
    from framelens.core.stages.analytics.zones import ZonesFile
    from framelens.core.stages.tracking.mot import MotSequence
    from framelens.core.stages.tracking.settings import TrackerSettings

__all__ = ["compare_to_report"]

PanesOrPrepare = Sequence[PaneSpec] | Callable[[], Sequence[PaneSpec]]


def compare_to_report(
    source_spec: str,
    panes: PanesOrPrepare,
    report: StrPath,
    *,
    reference: int | str = 0,
    start: int = 0,
    frames: int | None = None,
    progress: Progress = False,
    on_progress: Callable[[int, int], None] | None = None,
    cancel: threading.Event | None = None,
    stages: StageFactory | None = None,
    tracking: TrackerSettings | None = None,
    ground_truth: MotSequence | None = None,
    zones: ZonesFile | None = None,
    event_tolerance: int = EVENT_TOLERANCE,
) -> dict[str, Any]:
    """Compare ``panes`` on a range of a source and write the report; returns the summary.

    ``panes`` may be a callable that builds them (preparing INT8 variants takes
    minutes): it is called once the report directory is known to be writable.
    ``reference``: a pane label or index. ``progress`` draws a terminal bar;
    ``on_progress(done, total)`` (total 0 when unknown) is called at most ten times
    a second and at the end; setting ``cancel`` stops with Cancelled and no report.
    ``stages``: per-source stages after the task, a chain for every pane.
    ``tracking``: every pane tracks its boxes with a tracker of its own (at the source's
    frame rate), and the report scores each pane's tracks against the reference's and,
    given ``ground_truth`` (frame 1 = frame ``start``), against it
    (core/pipeline/compare/tracks.py). ``zones``: each pane's tracks are counted against
    these lines and zones, and its counts and events held against the reference's
    (events within ``event_tolerance`` frames are the same; core/pipeline/compare/events.py).
    """
    if zones is not None and tracking is None:
        raise ConfigError("lines and zones count tracks: it needs tracking on (--track)")
    if event_tolerance < 0:
        raise ConfigError("the events' frame tolerance must not be negative")
    if stages is not None and tracking is not None:
        raise ValueError("give stages or tracking, not both")
    if ground_truth is not None and tracking is None:
        raise ConfigError("ground truth scores tracks: it needs tracking on (--track)")
    if not callable(panes):
        check_panes(panes, reference)
    with AtomicDir(report, REPORT_FILES) as staging:
        specs = panes() if callable(panes) else panes
        reference_index = check_panes(specs, reference)
        log = _compare(
            source_spec,
            specs,
            reference_index,
            RunRange(start, frames),
            progress,
            on_progress,
            cancel,
            stages,
            tracking,
            ground_truth,
            zones,
            event_tolerance,
        )
        tracker = {} if tracking is None else {"tracker": tracking.kind}
        summary = log.summary(
            source=source_spec,
            start=start,
            **tracker,
            app_version=__version__,
            notes=list(log.notes),
        )
        write_report_files(staging.tmp, log, summary)
        path = staging.commit()
    return {**summary, "report": str(path)}


def _compare(
    source_spec: str,
    specs: Sequence[PaneSpec],
    reference: int,
    rng: RunRange,
    progress: Progress,
    on_progress: Callable[[int, int], None] | None,
    cancel: threading.Event | None,
    stages: StageFactory | None = None,
    tracking: TrackerSettings | None = None,
    ground_truth: MotSequence | None = None,
    zones: ZonesFile | None = None,
    event_tolerance: int = EVENT_TOLERANCE,
) -> CompareLog:
    log = CompareLog(specs, reference, ground_truth, zones, event_tolerance)
    with (
        open_for_panes(source_spec) as source,
        CompareRunner(
            specs,
            reference=reference,
            stages=stages if tracking is None else pane_trackers(tracking, source.info.fps),
            on_message=log.notes.append,
            failover=pane_failover(specs, log.notes.append),
        ) as runner,  # fmt: skip
    ):
        count = source.info.frame_count
        total = rng.count if rng.count is not None else max(0, (count or 0) - rng.start)
        bar = make_bar(progress, total=total or None)
        last_report = 0.0

        def on_step(step: CompareStep) -> None:
            nonlocal last_report
            log(step)
            bar.update()
            if on_progress is not None and time.monotonic() - last_report >= 0.1:
                last_report = time.monotonic()
                on_progress(len(log.rows), total)

        try:
            done = run_lockstep(source, runner, rng, on_step, cancel)
        finally:
            bar.close()
    if cancel is not None and cancel.is_set():
        raise Cancelled("cancelled")
    if done == 0:
        raise SourceError(f"{source_spec} has no frames to compare from frame {rng.start}")
    if on_progress is not None:
        on_progress(done, max(done, total))
    return log
