"""The report of a live comparison: what it computed, written without running it again.

``save_kept_report`` writes the report files (report.py) from a KeptFrames: the frames
from the first to the last the view compared. Only frames in that range that were
never computed (a gap left by a jump such as Home) go through the panes now, on a
runner of the same panes; they are kept too, so a second save computes nothing. The
summary says how many frames were computed for the report (``computed_for_report``).
Like compare_to_report, the report appears complete or not at all.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from framelens.core import __version__
from framelens.core.errors import Cancelled, SourceError
from framelens.core.pipeline.compare.kept import KeptFrames
from framelens.core.pipeline.compare.panes import CompareRunner, CompareStep
from framelens.core.pipeline.compare.records import FrameRow, frame_row
from framelens.core.pipeline.compare.report import REPORT_FILES, write_report_files
from framelens.core.sessions.compare.lockstep import (
    open_for_panes,
    pane_failover,
    pane_trackers,
    run_lockstep,
)
from framelens.core.stages.sinks.atomic import StrPath
from framelens.core.stages.sinks.atomic_dir import AtomicDir

__all__ = ["save_kept_report"]


def save_kept_report(
    source_spec: str,
    kept: KeptFrames,
    report: StrPath,
    *,
    on_progress: Callable[[int, int], None] | None = None,
    cancel: threading.Event | None = None,
) -> dict[str, Any]:
    """Write the report of the frames ``kept`` holds; returns the summary and its path.

    ``on_progress(done, total)`` counts the missing frames computed now (at most ten
    calls a second, and one at the end); nothing is called when none is missing.
    Setting ``cancel`` stops with Cancelled and no report.
    """
    span = kept.span
    if span is None:
        raise SourceError("compare a few frames first: nothing to report yet")
    with AtomicDir(report, REPORT_FILES) as staging:
        computed = _compute_missing(source_spec, kept, on_progress, cancel)
        log = kept.log()
        tracker = {} if kept.tracking is None else {"tracker": kept.tracking.kind}
        summary = log.summary(
            source=source_spec,
            start=span[0],
            **tracker,
            computed_for_report=computed,
            app_version=__version__,
        )
        write_report_files(staging.tmp, log, summary)
        path = staging.commit()
    return {**summary, "report": str(path)}


def _compute_missing(
    source_spec: str,
    kept: KeptFrames,
    on_progress: Callable[[int, int], None] | None,
    cancel: threading.Event | None,
) -> int:
    """The frames between the first and last kept that were never computed, computed
    and kept; returns how many."""
    gaps = kept.missing()
    total = sum(g.count or 0 for g in gaps)
    if not total:
        return 0
    done, last_report = 0, 0.0
    offsets = kept.max_track_ids()

    def on_step(step: CompareStep) -> None:
        nonlocal done, last_report
        row, matches = frame_row(step)
        kept.add_row(_ids_above(row, offsets), matches)
        done += 1
        if on_progress is not None and time.monotonic() - last_report >= 0.1:
            last_report = time.monotonic()
            on_progress(done, total)

    with (
        open_for_panes(source_spec) as source,
        CompareRunner(
            kept.specs,
            reference=kept.reference,
            stages=None if kept.tracking is None else pane_trackers(kept.tracking, source.info.fps),
            failover=pane_failover(kept.specs, lambda _: None),
        ) as runner,  # fmt: skip
    ):
        for gap in gaps:
            if cancel is not None and cancel.is_set():
                raise Cancelled("cancelled")
            runner.reset_stages()  # each gap's tracks start afresh
            run_lockstep(source, runner, gap, on_step, cancel)
    if on_progress is not None:
        on_progress(done, total)
    return done


def _ids_above(row: FrameRow, offsets: Sequence[int]) -> FrameRow:
    """``row`` with each pane's track IDs raised by its offset: a gap's trackers number
    from 1, and their tracks are not the ones kept under those numbers."""
    panes = tuple(
        p
        if p.tracks is None or not offset
        else dataclasses.replace(p, tracks=dataclasses.replace(p.tracks, ids=p.tracks.ids + offset))
        for p, offset in zip(row.panes, offsets, strict=True)
    )
    return dataclasses.replace(row, panes=panes)
