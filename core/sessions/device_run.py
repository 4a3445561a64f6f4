"""One device's sources through one session into their outputs (``run_device``): every
run's last step, whichever way it came (``framelens run`` of one source or many, a device
group in a process of its own, an archive's job).

Results are written as they come; a source's outputs are committed at the end or, when it
failed, discarded (a partial video is no evidence). A file run stopped half way
(Ctrl+C, a cancel) keeps nothing; a camera's or stream's recording has no end, so the
same stop ends it and keeps what was recorded. The device's part of the summary says
what ran, how fast, and each source's latency (p50/p99 from decode to written).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol

import numpy as np
from framelens.core.errors import Cancelled
from framelens.core.pipeline.plan import Plan
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.pipeline.stats import RunStats
from framelens.core.sessions.outputs import SourceOutputs, run_meta
from framelens.core.sessions.processes import Counter, StopFlag
from framelens.core.sessions.session import Say, Session, SessionOptions, SessionSource
from framelens.core.sessions.summary import DeviceSummary, EngineCalls, Ran, SourceSummary
from framelens.core.stages.source_stages import StageFactory
from framelens.core.stages.tasks import AnyTask
from framelens.core.stages.timing import now_ms
from framelens.core.types import SourceInfo

__all__ = ["LIVE_KINDS", "OutputsFor", "run_device"]

LIVE_KINDS = ("stream", "camera")
"""Sources without an end: a run of them stops on Ctrl+C and keeps its outputs."""


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
