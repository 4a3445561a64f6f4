"""The driver's view of a batch: each input's jobs (one, or one per segment), their
progress as the workers report it, the state that goes into the manifest and the
events that go to the caller (the terminal's bars, the GUI's Batch window).

An input is done when all its jobs are; then a split input's detections are merged
into one JSON and CSV. An input that fails or is cancelled keeps none of its outputs
(the segments it finished included), so the archive never holds part of an input.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from framelens.core.errors import FrameLensError, error_message
from framelens.core.sessions.archive.jobs import PARTS_DIR, Job, JobResult
from framelens.core.sessions.archive.manifest import Entry, Manifest
from framelens.core.sessions.archive.segments import merge_parts, remove_parts
from framelens.core.sessions.archive.types import InputProgress, InputState

log = logging.getLogger(__name__)

Listener = Callable[[InputProgress], None]


def remove_outputs(output_dir: Path, outputs: Sequence[str]) -> None:
    """Remove an input's outputs (paths relative to the output folder)."""
    for rel in outputs:
        (output_dir / rel).unlink(missing_ok=True)


class InputTracker:
    """Each input of a batch, as its jobs start, progress and finish. Used on the
    driver's thread only; ``listeners`` are called there."""

    def __init__(
        self,
        manifest: Manifest,
        output_dir: Path,
        listeners: Sequence[Listener],
        *,
        labels: Sequence[str],
        faces: bool,
    ) -> None:
        self.manifest = manifest
        self.output_dir = output_dir
        self.listeners = list(listeners)
        self.labels, self.faces = tuple(labels), faces
        self.jobs: dict[str, list[Job]] = {}
        self.frames = 0  # frames of the jobs that finished
        self._results: dict[str, dict[int, JobResult]] = {}
        self._progress: dict[str, dict[int, int]] = {}
        self._started: dict[str, float] = {}
        self._running: dict[str, set[int]] = {}

    def emit(self, entry: Entry, state: InputState | None = None) -> None:
        event = entry.progress(state)
        for listener in self.listeners:
            listener(event)

    def add(self, jobs: Sequence[Job]) -> None:
        """The jobs of one input, all pending."""
        self.jobs[jobs[0].path] = list(jobs)
        self._results[jobs[0].path] = {}
        self._progress[jobs[0].path] = {}
        self._running[jobs[0].path] = set()

    def wanted(self, job: Job) -> bool:
        """False once the job's input failed: its other segments need not run."""
        return self.manifest.entry(job.path).state != "failed"

    def started(self, job: Job, worker: str) -> None:
        entry = self.manifest.entry(job.path)
        self._started.setdefault(job.path, time.perf_counter())
        self._running[job.path].add(job.segment.index)
        entry.state, entry.worker = "running", worker
        self.emit(entry)
        self.manifest.save(force=False)

    def progressed(self, job: Job, done: int, worker: str) -> None:
        entry = self.manifest.entry(job.path)
        if entry.state != "running":
            return  # a late report of an input that failed meanwhile
        self._progress[job.path][job.segment.index] = done
        entry.frames = sum(self._progress[job.path].values())
        entry.worker = worker
        elapsed = time.perf_counter() - self._started.get(job.path, time.perf_counter())
        entry.fps = round(entry.frames / elapsed, 2) if elapsed > 0 else 0.0
        self.emit(entry)

    def finished(self, result: JobResult, worker: str) -> None:
        job = result.job
        entry = self.manifest.entry(job.path)
        self._running[job.path].discard(job.segment.index)
        for note in result.notes:
            log.info("%s: %s", job.path, note)
        if result.error is None and not result.cancelled:
            self._results[job.path][job.segment.index] = result
            self.frames += result.frames
            self._progress[job.path][job.segment.index] = result.frames
        if entry.state == "failed":  # an earlier segment failed: this one's go too
            self._discard(job.path)
        elif result.error is not None:
            self.fail(job.path, result.error, worker)
        elif result.cancelled:
            self._discard(job.path)
            if not self._running[job.path]:
                entry.state, entry.frames, entry.fps = "pending", 0, 0.0
                self.emit(entry)
        elif len(self._results[job.path]) == len(self.jobs[job.path]):
            self._complete(entry, worker)
        self.manifest.save(force=False)

    def fail(self, path: str, error: str, worker: str = "") -> None:
        """Record ``path`` as failed with its one-line reason; its outputs are removed."""
        entry = self.manifest.entry(path)
        entry.state, entry.error, entry.fps = "failed", error, 0.0
        entry.worker = worker or entry.worker
        if path in self.jobs:
            self._discard(path)
        self.emit(entry)

    def _discard(self, path: str) -> None:
        results = self._results.get(path, {})
        for result in results.values():
            for output in result.outputs:
                Path(output).unlink(missing_ok=True)
        results.clear()
        remove_parts(self.output_dir / PARTS_DIR / self.manifest.entry(path).name)

    def _complete(self, entry: Entry, worker: str) -> None:
        jobs = self.jobs[entry.path]
        results = [self._results[entry.path][j.segment.index] for j in jobs]
        outputs = [Path(o) for r in results for o in r.outputs]
        if len(jobs) > 1 and jobs[0].detections:
            parts = [j.part_json() for j in jobs]
            targets = [self.output_dir / f"{entry.name}{ext}" for ext in (".json", ".csv")]
            try:
                merged = merge_parts(
                    parts, [j.segment.stop for j in jobs], targets, self.labels, faces=self.faces
                )
            except FrameLensError as exc:
                self.fail(entry.path, error_message(exc), worker)
                return
            remove_parts(parts[0].parent)
            outputs = [o for o in outputs if o not in parts] + merged
        elapsed = time.perf_counter() - self._started.get(entry.path, time.perf_counter())
        entry.state, entry.error, entry.worker = "done", None, worker
        entry.frames = sum(r.frames for r in results)
        entry.frames_total = max(entry.frames_total, entry.frames)
        entry.fps = round(entry.frames / elapsed, 2) if elapsed > 0 else 0.0
        entry.outputs = sorted(str(o.relative_to(self.output_dir)) for o in outputs)
        entry.analytics = results[0].analytics if len(results) == 1 else None
        self.emit(entry)
