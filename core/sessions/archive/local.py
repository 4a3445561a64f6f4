"""A batch in this process, without Ray: the jobs one after another on one
JobRunner (the engine built once), on the caller's thread."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.archive.jobs import Job, JobRunner
from framelens.core.sessions.archive.progress import InputTracker
from framelens.core.stages.source_stages import StageFactory

WORKER = "local"


def run_local(
    jobs: Sequence[Job],
    settings: PipelineSettings,
    tracker: InputTracker,
    cancel: threading.Event | None,
    *,
    stages: StageFactory | None = None,
) -> bool:
    """Run ``jobs`` in order; True when ``cancel`` stopped the batch (the input being
    processed goes back to pending, its partial outputs removed)."""
    processor = JobRunner(settings, stages=stages)
    try:
        for job in jobs:
            if cancel is not None and cancel.is_set():
                return True
            if not tracker.wanted(job):
                continue
            tracker.started(job, WORKER)

            def report(done: int, _total: int, job: Job = job) -> None:
                tracker.progressed(job, done, WORKER)

            result = processor.run(job, on_progress=report, cancel=cancel)
            tracker.finished(result, WORKER)
            if result.cancelled:
                return True
    finally:
        processor.close()
    return False
