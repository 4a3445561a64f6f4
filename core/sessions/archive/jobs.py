"""A batch's worker: one set of pipelines (the engine loaded once) kept across the files
and segments it is given, each run as ``framelens run`` runs one source: a session
(core/sessions/session.py) into its outputs (core/sessions/runs.py ``run_one``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from framelens.core.errors import Cancelled, FrameLensError, error_message
from framelens.core.pipeline.build import Workers
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.archive.events import EVENTS_DIR, ParquetEvents
from framelens.core.sessions.archive.parquet import DETECTIONS_DIR, ParquetRows
from framelens.core.sessions.archive.segments import WHOLE, Segment
from framelens.core.sessions.outputs import RunOutputs, WriterFactory
from framelens.core.sessions.runs import run_one
from framelens.core.sessions.session import Session, SessionOptions
from framelens.core.stages.analytics.zones import ZonesFile
from framelens.core.stages.source_stages import StageFactory

PARTS_DIR = ".segments"
"""Where a split input's segments keep their detections until they are merged."""

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Job:
    """One input, or one segment of it, for a worker: ``path`` the input as given (the
    ``source`` its outputs record), ``file`` and ``output_dir`` absolute (a worker's
    working directory is not the driver's), ``name`` its outputs' stem."""

    path: str
    file: str
    name: str
    output_dir: str
    segment: Segment = WHOLE
    segments: int = 1
    frames_total: int = 0
    detections: bool = True  # JSON, CSV and Parquet rows (not for super-resolution)
    video: bool = False
    zones: ZonesFile | None = None  # lines and zones counted: counts, events as Parquet

    @property
    def events(self) -> bool:
        """Whether the job writes events (its input is whole: a tracked one is)."""
        return self.zones is not None and self.detections and self.segments == 1

    def outputs(self) -> RunOutputs:
        """Where this job writes: a whole input straight to its files in DIR, a
        segment its JSON part (merged by the driver) and its own Parquet file."""
        out = Path(self.output_dir)
        files: list[str] = []
        if self.detections:
            if self.segments == 1:
                files = [str(out / f"{self.name}.json"), str(out / f"{self.name}.csv")]
            else:
                files = [str(self.part_json())]
        video = str(out / f"{self.name}.mp4") if self.video else None
        return RunOutputs(export=video, detections=files, label=self.path, extra=(),
                          zones=self.zones)  # fmt: skip

    def parquet_path(self) -> Path:
        out = Path(self.output_dir) / DETECTIONS_DIR
        if self.segments == 1:
            return out / f"{self.name}.parquet"
        return out / f"{self.name}.seg{self.segment.index:04d}.parquet"

    def events_path(self) -> Path:
        return Path(self.output_dir) / EVENTS_DIR / f"{self.name}.parquet"

    def part_json(self) -> Path:
        return Path(self.output_dir) / PARTS_DIR / self.name / f"{self.segment.index:04d}.json"


@dataclass(frozen=True)
class JobResult:
    """How a job ended: its frames, fps and outputs, or why it did not finish
    (``cancelled``: stopped by the user, outputs discarded; ``error``: one line)."""

    job: Job
    frames: int = 0
    fps: float = 0.0
    outputs: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    error: str | None = None
    cancelled: bool = False
    analytics: dict[str, Any] | None = None  # counts by line and zone (lines and zones counted)


class JobRunner:
    """Runs jobs one after another on pipelines built once, for the first job, and kept
    (after a GPU failure, the CPU ones the run went on with). Close it when done.
    ``stages``: per-source stages after the task, fresh for every job."""

    def __init__(
        self,
        settings: PipelineSettings,
        *,
        workers: int | None = None,
        stages: StageFactory | None = None,
    ) -> None:
        self.settings = settings  # precision prepared already (the variant's model)
        self.count = workers
        self.stages = stages
        self._built: Workers | None = None

    def run(
        self,
        job: Job,
        *,
        on_progress: Progress | None = None,
        cancel: threading.Event | None = None,
    ) -> JobResult:
        """Run ``job``; failures come back in the result (a one-line ``error``), as
        does a cancel; nothing of an unfinished job is left on disk."""
        notes: list[str] = []
        options = SessionOptions(
            draw="all" if job.video else "none", pixels=job.video,
            start=job.segment.start, frames=job.segment.frames, workers=self.count,
        )  # fmt: skip
        built, self._built = self._built, None
        session = Session(
            [job.file], self.settings, options=options, stages=self.stages, built=built,
            say=notes.append,
        )  # fmt: skip
        try:
            session.open()
            summary = run_one(session, self._outputs(job), on_progress=on_progress,
                              cancel=cancel)  # fmt: skip
        except Cancelled:
            return JobResult(job, cancelled=True)
        except FrameLensError as exc:
            return JobResult(job, error=error_message(exc), notes=tuple(notes))
        finally:
            self._built = session.release_workers()
            session.close()
        return JobResult(
            job,
            frames=summary.frames,
            fps=summary.fps,
            outputs=tuple(summary.outputs),
            notes=tuple(notes),
            analytics=summary.sources[0].analytics if summary.sources else None,
        )

    def _outputs(self, job: Job) -> RunOutputs:
        outputs = job.outputs()
        if job.detections:
            labels = self.settings.model.labels
            target, stop = job.parquet_path(), job.segment.stop

            def parquet(meta: dict[str, Any]) -> ParquetRows:
                return ParquetRows(target, meta, labels, stop=stop)

            extra: list[WriterFactory] = [parquet]
            if job.events:
                events = job.events_path()

                def parquet_events(meta: dict[str, Any]) -> ParquetEvents:
                    return ParquetEvents(events, meta, labels)

                extra.append(parquet_events)
                events.parent.mkdir(parents=True, exist_ok=True)
            outputs = replace(outputs, extra=tuple(extra), labels=tuple(labels))
            target.parent.mkdir(parents=True, exist_ok=True)
            if job.segments > 1:
                job.part_json().parent.mkdir(parents=True, exist_ok=True)
        return outputs

    def close(self) -> None:
        if self._built is not None:
            self._built.close()
            self._built = None
