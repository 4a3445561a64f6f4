"""The session's drive: the one place the executor is made and driven.

    Source ──DecodeAhead (kept for the drive's life)──> Executor (core/pipeline/execute.py)
           ──a set of workers at a time: started, stopped, swapped──> get(timeout)

Every consumer reads results through a Drive: the session (core/sessions/session.py:
runs, archives, the wall, the benchmark), playback (core/sessions/playback/worker.py)
and comparison's lock-step feed (core/sessions/compare/lockstep.py). What each needs
of the executor is here once: a decoder that outlives its workers (a player's model or
precision switch keeps the decoder and the frame it reached), a drop policy for
real-time playback (``skip``: decoded frames too late to be worth processing), pulling
one result with a timeout (the consumer paces itself), a seek after which nothing
processed before is handed out, workers of any kind (pipelines, compare's lock-step
panes), and frames straight from the decoder while no workers run (a player without a
model).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from framelens.core.pipeline.decode_ahead import DecodeAhead, DecodeItem, End, Failed
from framelens.core.pipeline.execute import DEFAULT_MAX_WAIT_MS, Done, Executor, Worker
from framelens.core.stages.sources import Source
from framelens.core.types import Frame

__all__ = ["Drive", "Skip"]

T = TypeVar("T")

Skip = Callable[[Frame, bool], bool]
"""A decoded frame to drop unprocessed (real-time playback: too late); told whether a
newer decoded frame waits behind it."""


class Drive(Generic[T]):
    """``source`` decoded ahead (``decode_depth`` frames) for one set of workers at a
    time. Not thread-safe: one consumer thread calls everything but the workers' own
    threads. ``close`` closes the source (``stop_decoding`` leaves it open)."""

    def __init__(
        self,
        source: Source,
        *,
        decode_depth: int = 4,
        skip: Skip | None = None,
        dropped: int = 0,
    ) -> None:
        self._decoder = DecodeAhead(source, decode_depth)
        self._skip = skip
        self._executor: Executor[T] | None = None
        self._dropped = dropped  # by worker sets stopped before (or a drive this replaces)
        self._batches = self._frames = 0

    @property
    def source(self) -> Source:
        return self._decoder.source

    @property
    def running(self) -> bool:
        """Whether workers take the frames (else ``decoded`` hands them out as read)."""
        return self._executor is not None

    @property
    def workers(self) -> Sequence[Worker[T]]:
        return self._executor.workers if self._executor is not None else ()

    def start(
        self,
        workers: Sequence[Worker[T]],
        *,
        batch: int = 1,
        depth: int | None = None,
        limit: int | None = None,
        max_wait_ms: float | None = None,
    ) -> None:
        """Workers take the frames from where the decoder stands. ``depth``: frames in
        flight or waiting ahead of the consumer; ``limit``: frames to take in all;
        ``max_wait_ms``: how long a batch waits for more frames after its first."""
        if self._executor is not None:
            raise RuntimeError("the drive's workers run already: stop them first")
        self._executor = Executor(
            self._decoder, workers, batch=batch, depth=depth, limit=limit, skip=self._skip,
            max_wait_ms=DEFAULT_MAX_WAIT_MS if max_wait_ms is None else max_wait_ms,
        )  # fmt: skip

    def get(self, timeout: float) -> Done[T] | End | Failed | None:
        """The next processed item in decode order, or None after ``timeout`` seconds."""
        if self._executor is None:
            raise RuntimeError("no workers run: start them first")
        return self._executor.get(timeout)

    def decoded(self, timeout: float) -> DecodeItem | None:
        """The next decoded frame as read, while no workers run (a player without a model)."""
        if self._executor is not None:
            raise RuntimeError("workers take the frames: read them with get")
        return self._decoder.get(timeout)

    def seek(self, index: int) -> None:
        """Reposition the source; nothing decoded or processed before is handed out after
        (a seek waiting for the workers' lock goes first: core/pipeline/execute.py)."""
        if self._executor is not None:
            self._executor.seek(index)
        else:
            self._decoder.seek(index)

    def update(self, **changes: object) -> None:
        """Changes for every worker; results made before them are stale (``version``)."""
        if self._executor is not None:
            self._executor.update(**changes)

    @property
    def version(self) -> int:
        """The settings version of the running workers (see ``Done.version``)."""
        return self._executor.version if self._executor is not None else 0

    @property
    def dropped(self) -> int:
        """Frames dropped unprocessed by ``skip`` over the drive's life."""
        executor = self._executor
        return self._dropped + (executor.dropped if executor is not None else 0)

    @property
    def engine_calls(self) -> tuple[int, int]:
        """Batches taken over the drive's life and the frames in them."""
        executor = self._executor
        if executor is None:
            return self._batches, self._frames
        return self._batches + executor.batches_run, self._frames + executor.frames_run

    def stop(self, *, close_workers: bool = False) -> bool:
        """Stop the workers (a CPU engine call under way is ended, core/interrupt.py;
        others finish their batch); the decoder and source go on.
        ``close_workers``: close them too, if they stopped. False when one did not stop
        in time (its pipeline is still in use)."""
        executor, self._executor = self._executor, None
        if executor is None:
            return True
        stopped = executor.close(close_workers=close_workers)
        self._dropped += executor.dropped
        self._batches += executor.batches_run
        self._frames += executor.frames_run
        return stopped

    def stop_decoding(self) -> bool:
        """Stop the workers and the decoder's thread; the source stays open."""
        stopped = self.stop()
        self._decoder.stop()
        return stopped

    def close(self) -> bool:
        """Stop the workers and the decoder, and close the source."""
        try:
            stopped = self.stop()
        finally:
            self._decoder.close()
        return stopped
