"""The one executor: decode ahead, inference workers, in-order delivery, seek and cancel.

    Source ──DecodeAhead (thread)──> frames ──N workers (threads), a batch each──> results
                                                                   └─> get() in decode order

It is made and driven in one place, the session's Drive (core/sessions/drive.py), which
the session (core/sessions/session.py: runs, archives, the wall, the benchmark),
playback (core/sessions/playback/worker.py) and comparison's lock-step feed
(core/sessions/compare/lockstep.py) read through. A worker owns one pipeline (pipelines
are not shared between threads) or one compare runner; ONNX Runtime and CUDA release the
GIL, so the workers overlap. A worker takes up to ``batch`` consecutive frames and
processes them in one call (one engine call). Results are handed out in decode order,
tagged with the settings version they were made with, so a consumer can redo a result
that a threshold change made stale; a seek invalidates everything in flight.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, Protocol, TypeVar

from framelens.core.interrupt import InterruptibleCalls, interruptible
from framelens.core.pipeline.decode_ahead import DecodeAhead, End, Failed
from framelens.core.pipeline.processor import FrameProcessor
from framelens.core.stages.sources import Source
from framelens.core.stages.timing import now_ms
from framelens.core.threads import NamedThread
from framelens.core.types import Frame, FrameResult, StageTimes

DEFAULT_MAX_WAIT_MS = 5.0
"""How long a batch waits for more frames after its first: short, so a live source's
frame is never held back for long; several sources fill a batch within it."""

STOP_TIMEOUT_S = 30.0
"""How long a worker may take to finish its batch when stopped: longer than a GPU
pipeline waits for a display buffer (10 s), so a stop never overtakes that wait."""

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

Decoded = tuple[Frame, float]  # a frame and its decode time (ms)


class Worker(Protocol[T_co]):
    """What runs on one worker thread: a batch of decoded frames in, one value per frame."""

    def run(self, batch: Sequence[Decoded]) -> Sequence[T_co]: ...

    def update(self, **changes: object) -> None: ...

    def close(self) -> None: ...


DrawPolicy = Literal["all", "host", "none"]


class PipelineWorker:
    """A pipeline as an executor worker. ``draw``: overlays on every result (export),
    on host frames only (playback: device frames are overlaid by the canvas), or none
    (the wall: its canvas overlays them). ``copy``: draw on a copy, keeping the frame
    clean (playback re-draws it on a change; a run that only exports draws in place).
    ``pixels=False``: results carry no display frame (a run that writes only
    detections; the GPU pipeline then makes only the model input)."""

    def __init__(
        self,
        pipeline: FrameProcessor,
        draw: DrawPolicy = "host",
        *,
        copy: bool = True,
        pixels: bool = True,
    ) -> None:
        self.pipeline = pipeline
        self.draw = draw
        self.copy = copy
        pipeline.pixels = pixels

    def run(self, batch: Sequence[Decoded]) -> list[FrameResult]:
        frames = [frame for frame, _ in batch]
        times = [StageTimes(decode=ms) for _, ms in batch]
        results = self.pipeline.infer_batch(frames, times)
        if self.draw != "none":
            for result in results:
                if self.draw == "all" or result.frame.on_host:
                    self.pipeline.draw(result, copy=self.copy)
        return results

    def update(self, **changes: object) -> None:
        self.pipeline.update(**changes)

    def close(self) -> None:
        self.pipeline.close()


@dataclass(slots=True)
class Done(Generic[T]):
    """A frame processed ahead of the consumer; ``version``: the settings it used."""

    value: T
    frame: Frame
    start_ms: float  # decode start, for the end-to-end time
    version: int


@dataclass(slots=True)
class _Taken:
    frame: Frame
    decode_ms: float
    start_ms: float


class Executor(Generic[T]):
    """Worker threads between a decode-ahead thread and one consumer.

    ``depth`` bounds how many frames may be in flight or waiting ahead of the consumer
    (a paused player holds at most that many). ``open(source, ...)`` makes the decoder
    too (tests, the raw-executor benchmark); the session's Drive keeps its decoder across
    sets of workers (a player's model swaps) and gives each set an executor of its own.
    Workers and source are closed only when ``close`` is asked to.
    """

    @classmethod
    def open(
        cls,
        source: Source,
        workers: Sequence[Worker[T]],
        *,
        batch: int = 1,
        depth: int | None = None,
        decode_depth: int = 4,
        limit: int | None = None,
        max_wait_ms: float | None = None,
    ) -> Executor[T]:
        """An executor with a decode-ahead thread of its own over ``source``."""
        decoder = DecodeAhead(source, max(decode_depth, batch))
        wait = DEFAULT_MAX_WAIT_MS if max_wait_ms is None else max_wait_ms
        try:
            executor = cls(
                decoder, workers, batch=batch, depth=depth, limit=limit, max_wait_ms=wait
            )
        except BaseException:
            decoder.close()
            raise
        executor._owns_decoder = True
        return executor

    def __init__(
        self,
        decoder: DecodeAhead,
        workers: Sequence[Worker[T]],
        *,
        batch: int = 1,
        depth: int | None = None,
        limit: int | None = None,
        max_wait_ms: float = DEFAULT_MAX_WAIT_MS,
        skip: Callable[[Frame, bool], bool] | None = None,
    ) -> None:
        if not workers:
            raise ValueError("an Executor needs at least one worker")
        if batch < 1:
            raise ValueError("batch must be at least 1")
        self._decoder = decoder
        self._owns_decoder = False  # made by open(): its thread stops with the executor
        self._workers = list(workers)
        self._batch = batch
        if max_wait_ms < 0:
            raise ValueError("max_wait_ms must not be negative")
        self._max_wait_s = max_wait_ms / 1000.0
        # real-time playback: decoded frames too late to be worth processing are dropped
        # here, before a worker spends time on them (core/sessions/playback/clock.py); it is
        # told whether a newer decoded frame waits behind the one asked about
        self._skip = skip
        self.dropped = 0
        self._depth = depth or 2 * len(workers) * batch
        # frames to take in all (a run's range): none is decoded into work beyond it, so
        # no worker holds buffers for results nobody will take
        self._limit = limit
        self._take = threading.Lock()  # one worker takes the next frames and their numbers
        # one lock guards everything below, with two conditions on it, so that a hand-off
        # wakes only the thread it is for: a result stored wakes the consumer (``_cond``),
        # a result taken, a seek's end or a stop wakes the workers (``_room``)
        guard = threading.RLock()
        self._cond = threading.Condition(guard)  # the consumer waits here for its result
        self._room = threading.Condition(guard)  # workers wait here for room to take more
        self._generation = 0
        self.batches_run = 0  # engine calls taken so far, and the frames in them:
        self.frames_run = 0  # their ratio is the batch size the load gave (mean_batch)
        self._next_seq = 0  # number given to the next item taken
        self._expected = 0  # number the consumer gets next
        self._done: dict[int, Done[T] | End | Failed] = {}
        self._version = 0
        self._stop = False
        self._calls = InterruptibleCalls()  # the workers' engine calls (core/interrupt.py)
        self._seeking = 0  # seeks waiting for the take lock
        self._threads = [
            NamedThread(target=self._work, args=(w,), name=f"fl-worker-{i}", daemon=True)
            for i, w in enumerate(self._workers)
        ]
        for t in self._threads:
            t.start()

    @property
    def source(self) -> Source:
        return self._decoder.source

    @property
    def workers(self) -> Sequence[Worker[T]]:
        return self._workers

    @property
    def version(self) -> int:
        return self._version

    def _ahead(self) -> int:
        return self._next_seq - self._expected

    # ---- worker threads -----------------------------------------------------------------

    def _work(self, worker: Worker[T]) -> None:
        with interruptible(self._calls):  # stop_workers ends the engine call under way
            self._work_loop(worker)

    def _work_loop(self, worker: Worker[T]) -> None:
        while True:
            with self._cond:
                # a seek waiting for the take lock goes first: a lock is not fair, and
                # workers looping on it (nothing to decode at the end of a file) took it
                # again and again before a player's seek could (issue 26)
                while not self._stop and (self._ahead() >= self._depth or self._seeking):
                    self._room.wait(0.1)
                if self._stop:
                    return
            with self._take:
                taken, tail = self._take_batch()
                if not taken and tail is None:
                    continue
                with self._cond:
                    gen, version, first = self._generation, self._version, self._next_seq
                    self._next_seq += len(taken) + (tail is not None)
                    if taken:
                        self.batches_run += 1
                        self.frames_run += len(taken)
            done = self._run(worker, taken, version)
            with self._cond:
                if gen == self._generation and not self._stop:
                    for i, item in enumerate(done):
                        self._done[first + i] = item
                    if tail is not None:
                        self._done[first + len(taken)] = tail
                    if self._expected in self._done:  # the one the consumer waits for
                        self._cond.notify_all()

    def _take_batch(self) -> tuple[list[_Taken], End | Failed | None]:
        """Up to ``batch`` consecutive frames, and the end or failure that cut it short.

        The first frame is waited for briefly; the rest for at most ``max_wait_ms`` in
        all after it (DeepStream's batched-push-timeout): a batch is sent when full or
        when that time is up, so a late source never holds the others' frames back.
        """
        taken: list[_Taken] = []
        want = self._batch
        if self._limit is not None:
            # _next_seq changes only under the take lock, which the caller holds
            want = min(want, self._limit - self._next_seq)
            if want <= 0:
                return taken, End()
        deadline = 0.0
        while len(taken) < want and not (self._seeking and not taken):
            if not taken:
                item = self._decoder.get(0.05)
            else:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                item = self._decoder.get(left)
            if item is None:
                break
            if isinstance(item, End | Failed):
                return taken, item
            frame, decode_ms, start_ms = item
            if self._skip is not None and self._skip(frame, self._decoder.waiting):
                self._drop(frame)
                continue
            if not taken:
                deadline = time.monotonic() + self._max_wait_s
            taken.append(_Taken(frame, decode_ms, start_ms))
        return taken, None

    def _drop(self, frame: Frame) -> None:
        frame.release()  # an NVDEC buffer back to its decoder at once
        with self._cond:
            self.dropped += 1

    @staticmethod
    def _run(worker: Worker[T], taken: list[_Taken], version: int) -> list[Done[T] | Failed]:
        if not taken:
            return []
        try:
            values = worker.run([(t.frame, t.decode_ms) for t in taken])
        except BaseException as exc:  # handed to the consumer, reported there
            # no local keeps the list: the traceback's frames must not hold the batch
            return [Failed(exc) for _ in taken]
        return [
            Done(value, t.frame, t.start_ms, version)
            for value, t in zip(values, taken, strict=True)
        ]

    # ---- the consumer ---------------------------------------------------------------------

    def get(self, timeout: float) -> Done[T] | End | Failed | None:
        """The next item in decode order, or None after ``timeout`` seconds."""
        with self._cond:
            item = self._done.pop(self._expected, None)
            if item is None:
                if not self._cond.wait_for(lambda: self._expected in self._done, timeout):
                    return None
                item = self._done.pop(self._expected)
            self._expected += 1
            self._room.notify_all()  # a worker waiting for room takes the next frames
        if isinstance(item, Done) and isinstance(item.value, FrameResult):
            # from the frame's release where a paced source says when (a camera's frame
            # waits in queues before it is decoded ahead), else from its decode's start
            arrived = item.frame.arrived
            item.value.times.e2e = now_ms() - (item.start_ms if arrived is None else arrived)
        return item

    def in_order(
        self, count: int | None = None, stop: Callable[[], bool] = lambda: False
    ) -> Iterator[Done[T]]:
        """Items in decode order until the end of the source, ``count`` items, or ``stop()``;
        a worker's or the decoder's failure is raised here."""
        handed = 0
        while (count is None or handed < count) and not stop():
            item = self.get(0.1)
            if item is None:
                continue
            if isinstance(item, End):
                return
            if isinstance(item, Failed):
                raise item.error
            handed += 1
            yield item

    def update(self, **changes: object) -> None:
        """Apply parameter/overlay changes to every worker; results made before are stale."""
        for w in self._workers:
            w.update(**changes)
        # after the workers: a frame taken in between is redone, never shown stale
        with self._cond:
            self._version += 1

    def seek(self, index: int) -> None:
        """Reposition the source; nothing processed before is handed out after."""
        with self._cond:
            self._seeking += 1
        try:
            with self._take:
                self._decoder.seek(index)
                with self._cond:
                    self._generation += 1
                    self._next_seq = self._expected = 0
                    self._done.clear()
        finally:
            with self._cond:
                self._seeking -= 1
                self._room.notify_all()
                self._cond.notify_all()

    def stop_workers(self) -> bool:
        """Stop the worker threads; the source stays open. An engine call under way is
        ended where its backend allows (ONNX Runtime on the CPU: between two nodes) and
        its batch dropped; others finish their batch first.

        False when a worker is still busy after the wait (a first GPU run can take long).
        """
        with self._cond:
            self._stop = True
            # results nobody will take: their buffers go back now, so a worker waiting
            # for one (a GPU pipeline's display frames) finishes its batch
            self._done.clear()
            self._room.notify_all()
            self._cond.notify_all()
        self._calls.interrupt()
        for t in self._threads:
            t.join(timeout=STOP_TIMEOUT_S)
        return not any(t.is_alive() for t in self._threads)

    @property
    def decoder(self) -> DecodeAhead:
        return self._decoder

    def close(self, *, close_workers: bool = False, close_source: bool = False) -> bool:
        """Stop the workers, and the decode-ahead thread ``open`` made; then close the
        source and the workers' pipelines if asked (only those whose threads stopped: a
        busy pipeline is not pulled from under it). Returns False when a worker did not
        stop."""
        stopped = self.stop_workers()
        if close_source:
            self._decoder.close()
        elif self._owns_decoder:
            self._decoder.stop()
        with self._cond:
            self._done.clear()
        if close_workers and stopped:
            for w in self._workers:
                w.close()
        return stopped
