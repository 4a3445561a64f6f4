"""Run a pipeline over a source with decoding, inference and output on separate threads.

Three stages overlap: a decode thread reads frames ahead, an inference thread runs
preprocess/engine/postprocess (ONNX Runtime releases the GIL), and the calling
thread draws and hands results to the sinks (exporter, detections writer,
progress). Bounded queues keep memory flat and give back-pressure.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import cast

from framelens.core.errors import Cancelled, SourceError
from framelens.core.pipeline.frame_pipeline import FrameProcessor
from framelens.core.stages.sources import Source
from framelens.core.stages.timing import now_ms
from framelens.core.types import Frame, FrameResult, StageTimes

ResultSink = Callable[[FrameResult], None]
_END = object()


@dataclass(frozen=True)
class RunRange:
    start: int = 0
    count: int | None = None  # None = to the end of the source


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


def _put(q: queue.Queue[object], item: object, stop: threading.Event) -> bool:
    while not stop.is_set():
        try:
            q.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False


def _get(q: queue.Queue[object], stop: threading.Event) -> object:
    while True:
        try:
            return q.get(timeout=0.1)
        except queue.Empty:
            if stop.is_set():
                return _END


def iter_range(source: Source, rng: RunRange) -> Iterable[tuple[Frame, float, float]]:
    """Frames of the range with their decode time (ms) and decode start (ms clock)."""
    if rng.start:
        if not source.info.seekable:
            raise SourceError(f"{source.info.uri} cannot seek; --start needs a file")
        source.seek(rng.start)
    produced = 0
    while rng.count is None or produced < rng.count:
        t0 = now_ms()
        frame = source.read()
        if frame is None:
            return
        yield frame, now_ms() - t0, t0
        produced += 1


class PipelineRunner:
    """Decode thread -> inference thread -> sinks on the caller's thread."""

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
    ) -> None:
        self.source = source
        self.pipeline = pipeline
        # More pipelines = more inference workers taking frames from the same queue;
        # results are put back in frame order before the sinks see them.
        self.workers = [pipeline, *extra_pipelines]
        self.sinks = list(sinks)  # output work (export, detections), timed in e2e
        self.observers = list(observers)  # see the finished result (stats, progress)
        self.draw = draw
        self._frames: queue.Queue[object] = queue.Queue(queue_size)
        self._results: queue.Queue[object] = queue.Queue(queue_size)
        self._stop = threading.Event()
        self._cancel_requested = False
        self.frames_done = 0
        self.wall_s = 0.0

    def cancel(self) -> None:
        """Stop the run from any thread (Ctrl+C, GUI); run() then raises Cancelled."""
        self._cancel_requested = True
        self._stop.set()

    def _decode_loop(self, rng: RunRange) -> None:
        try:
            for seq, (frame, decode_ms, t0) in enumerate(iter_range(self.source, rng)):
                if not _put(self._frames, (seq, frame, decode_ms, t0), self._stop):
                    return
        except BaseException as exc:  # handed to the consumer, raised there
            _put(self._frames, _Failure(exc), self._stop)
            return
        for _ in self.workers:
            _put(self._frames, _END, self._stop)

    def _infer_loop(self, pipeline: FrameProcessor) -> None:
        while True:
            item = _get(self._frames, self._stop)
            if item is _END or isinstance(item, _Failure):
                _put(self._results, item, self._stop)
                return
            seq, frame, decode_ms, t0 = cast(tuple[int, Frame, float, float], item)
            try:
                result = pipeline.infer(frame, StageTimes(decode=decode_ms))
            except BaseException as exc:
                _put(self._results, _Failure(exc), self._stop)
                return
            if not _put(self._results, (seq, result, t0), self._stop):
                return

    def run(self, rng: RunRange = RunRange()) -> int:
        """Process the range; returns the number of frames handed to the sinks.

        Raises the first error of any stage, or Cancelled after cancel().
        """
        threads = [
            threading.Thread(target=self._decode_loop, args=(rng,), name="fl-decode", daemon=True),
            *(
                threading.Thread(target=self._infer_loop, args=(p,), name="fl-infer", daemon=True)
                for p in self.workers
            ),
        ]
        start = time.perf_counter()
        for t in threads:
            t.start()
        pending: dict[int, tuple[FrameResult, float]] = {}
        next_seq, ends = 0, 0
        try:
            while ends < len(self.workers):
                item = _get(self._results, self._stop)
                if item is _END:
                    ends += 1
                    if self._stop.is_set():
                        break
                    continue
                if isinstance(item, _Failure):
                    raise item.error
                seq, result_, t0_ = cast(tuple[int, FrameResult, float], item)
                pending[seq] = (result_, t0_)
                while next_seq in pending:
                    result, t0 = pending.pop(next_seq)
                    next_seq += 1
                    self._deliver(result, t0)
        finally:
            self._stop.set()
            for t in threads:
                t.join(timeout=5)
            self.wall_s = time.perf_counter() - start
        if self._cancel_requested:
            raise Cancelled("cancelled")
        return self.frames_done

    def _deliver(self, result: FrameResult, t0: float) -> None:
        if self.draw:
            self.pipeline.draw(result, copy=False)
        for sink in self.sinks:
            sink(result)
        result.times.e2e = now_ms() - t0
        self.frames_done += 1
        for observer in self.observers:
            observer(result)
