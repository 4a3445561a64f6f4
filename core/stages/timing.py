"""Stage timers: one interface, measured by perf_counter on the host or by CUDA events on
a stream. Stage names are those of ``StageTimes`` and mean the same work on both paths;
the plots, the benchmark and the compare report read the same numbers."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from framelens.core.types import StageTimes


def now_ms() -> float:
    """The clock of stage times and of a paced frame's ``arrived``: perf_counter, in ms
    (CLOCK_MONOTONIC on Linux, one clock for every process of the machine)."""
    return time.perf_counter() * 1000.0


def ms_since(then_ms: float | None) -> float | None:
    """Milliseconds from ``then_ms`` (on ``now_ms``'s clock) to now; None for None."""
    return None if then_ms is None else now_ms() - then_ms


@contextmanager
def stage(times: StageTimes, name: str) -> Iterator[None]:
    """Record the wall time of the enclosed block, in ms, as ``times.<name>``."""
    start = time.perf_counter()
    try:
        yield
    finally:
        setattr(times, name, (time.perf_counter() - start) * 1000.0)


class StageTimer(ABC):
    """Times named stages of one frame or batch; ``collect`` writes them into StageTimes.

    ``with timer.stage("preprocess"): ...`` marks the work queued or done inside the
    block. A host timer measures it at once; a CUDA timer records events on its stream
    and reads them in ``collect``, after the stream reached the last one.
    """

    @abstractmethod
    @contextmanager
    def stage(self, name: str) -> Iterator[None]: ...

    @abstractmethod
    def collect(self, times_each: Sequence[StageTimes]) -> None:
        """Write each stage timed since the last collect into every frame's times (a
        batch's stage time goes to each of its frames: the latency each one saw)."""

    @abstractmethod
    def reset(self) -> None:
        """Forget what was timed since the last collect (a batch that failed)."""


class HostStageTimer(StageTimer):
    """perf_counter around the block (the CPU path, and host stages of the GPU path)."""

    def __init__(self) -> None:
        self._measured: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self._measured[name] = (time.perf_counter() - start) * 1000.0

    def collect(self, times_each: Sequence[StageTimes]) -> None:
        for name, ms in self._measured.items():
            for times in times_each:
                setattr(times, name, ms)
        self._measured.clear()

    def reset(self) -> None:
        self._measured.clear()


class CudaStageTimer(StageTimer):
    """CUDA events recorded on ``stream`` before and after each stage's queued work.

    A stage entered several times before ``collect`` (preprocessing each frame of a
    batch) counts the sum. Events are allocated once and reused; ``collect`` waits for
    the last event recorded and reads the elapsed times (what the GPU spent, not what
    Python waited).
    """

    def __init__(self, stream: Any, event_factory: Any) -> None:
        self._stream = stream
        self._new_event = event_factory  # pycuda.driver.Event, in the stream's context
        self._events: dict[str, list[tuple[Any, Any]]] = {}
        self._used: dict[str, int] = {}  # pairs recorded per stage since the last collect
        self._last: Any = None

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        pairs = self._events.setdefault(name, [])
        n = self._used.get(name, 0)
        if n == len(pairs):
            pairs.append((self._new_event(), self._new_event()))
        start, end = pairs[n]
        start.record(self._stream)
        try:
            yield
        finally:
            end.record(self._stream)
            self._used[name] = n + 1
            self._last = end

    def collect(self, times_each: Sequence[StageTimes], *, synced: bool = False) -> None:
        """Write each stage's time into ``times_each``; waits for the last event unless
        ``synced`` says the caller already waited for the stream."""
        if self._last is None:
            return
        if not synced:
            self._last.synchronize()
        for name, n in self._used.items():
            ms = sum(float(s.time_till(e)) for s, e in self._events[name][:n])
            for times in times_each:
                setattr(times, name, ms)
        self._used.clear()
        self._last = None

    def reset(self) -> None:
        self._used.clear()
        self._last = None
