"""A run over a range of a source: the executor's results handed to the sinks in order.

The executor (core/pipeline/execute.py) decodes ahead on one thread and runs one
pipeline per worker thread (drawing the overlays there when the run exports); the
calling thread hands each result, in frame order, to the sinks (exporter, detections
writer) and then to the observers (stats, progress). Bounded queues keep memory flat.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from framelens.core.errors import Cancelled, EngineError, SourceError
from framelens.core.pipeline.execute import Done, DrawPolicy, Executor, PipelineWorker
from framelens.core.pipeline.processor import FrameProcessor
from framelens.core.stages.sources import Source
from framelens.core.stages.timing import now_ms
from framelens.core.types import FrameResult

ResultSink = Callable[[FrameResult], None]

RUN_DEPTH = 4
"""Frames in flight per worker and batch slot (taken, processed, not yet handed out): a
run keeps more in flight than a paused player may hold, and no more than a GPU pipeline
has display buffers (8 per batch slot), so a worker never waits long on a slow sink. On
the H200, 2 workers at batch 4 ran at NVDEC's ceiling with it (530 fps; 540 at 8)."""


@dataclass(frozen=True)
class RunRange:
    start: int = 0
    count: int | None = None  # None = to the end of the source


def seek_to_start(source: Source, rng: RunRange) -> None:
    if rng.start:
        if not source.info.seekable:
            raise SourceError(f"{source.info.uri} cannot seek; --start needs a file")
        source.seek(rng.start)


class PipelineRunner:
    """Executor -> sinks on the caller's thread. The source stays open (the caller's)."""

    def __init__(
        self,
        source: Source,
        pipeline: FrameProcessor,
        sinks: Iterable[ResultSink] = (),
        *,
        observers: Iterable[ResultSink] = (),
        draw: bool = True,
        queue_size: int = 4,
        extra_pipelines: Iterable[FrameProcessor] = (),
        max_wait_ms: float | None = None,
    ) -> None:
        self.source = source
        self.pipeline = pipeline
        self.workers = [pipeline, *extra_pipelines]
        self.sinks = list(sinks)  # output work (export, detections), timed in e2e
        self.observers = list(observers)  # see the finished result (stats, progress)
        self.draw = draw
        self.queue_size = queue_size
        self.max_wait_ms = max_wait_ms  # a batch's wait for more frames (None: default)
        self._cancel_requested = False
        self.frames_done = 0
        self.wall_s = 0.0
        self.batches_run = 0  # engine calls of the last run, and the frames in them
        self.frames_run = 0

    @property
    def mean_batch(self) -> float:
        """Frames per engine call over the last run (0 before one)."""
        return self.frames_run / self.batches_run if self.batches_run else 0.0

    def cancel(self) -> None:
        """Stop the run from any thread (Ctrl+C, GUI); run() then raises Cancelled."""
        self._cancel_requested = True

    def run(self, rng: RunRange = RunRange()) -> int:
        """Process the range; returns the number of frames handed to the sinks.

        Raises the first error of any stage, or Cancelled after cancel().
        """
        seek_to_start(self.source, rng)
        draw: DrawPolicy = "all" if self.draw else "none"
        batch = self.pipeline.settings.batch
        executor = Executor.open(
            self.source,
            # no export: nothing needs the frames' pixels, only the outputs
            [PipelineWorker(p, draw, copy=False, pixels=self.draw) for p in self.workers],
            batch=batch,
            decode_depth=self.queue_size,
            depth=RUN_DEPTH * len(self.workers) * batch,
            limit=rng.count,
            max_wait_ms=self.max_wait_ms,
        )
        start = time.perf_counter()
        try:
            for item in executor.in_order(rng.count, lambda: self._cancel_requested):
                self._deliver(item)
        finally:
            # the source is the caller's: stop the threads, leave it open
            stopped = executor.close()
            self.wall_s = time.perf_counter() - start
            self.batches_run, self.frames_run = executor.batches_run, executor.frames_run
        if not stopped:  # its pipeline is still in use: no second thread may take it
            raise EngineError("an inference worker did not stop; its pipelines are still busy")
        if self._cancel_requested:
            raise Cancelled("cancelled")
        return self.frames_done

    def _deliver(self, item: Done[FrameResult]) -> None:
        result = item.value
        for sink in self.sinks:
            sink(result)
        result.times.e2e = now_ms() - item.start_ms
        self.frames_done += 1
        for observer in self.observers:
            observer(result)
