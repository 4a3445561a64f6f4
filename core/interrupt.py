"""Stopping a long engine call from another thread.

An executor that stops waits for each worker to finish its batch; on the CPU one batch
of a heavy model (ESRGAN: seconds a frame, tile after tile) held a closing window for
up to 30 s. A worker thread therefore runs inside ``interruptible(calls)``: an engine
call made there registers how to end it (``while_interruptible``; ONNX Runtime's
``RunOptions.terminate`` on the CPU, checked between the graph's nodes), and
``calls.interrupt()`` ends every such call in progress and refuses any that starts
after (a tiled frame's next tile). The call then raises ``Interrupted``, which the
stopping executor drops with the batch. CUDA runs and TensorRT finish their call.

The scope is the thread's, not the engine's: the same pipeline, called outside a
worker (a player showing one frame) or by the next executor's workers, is untouched.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = [
    "Interrupted",
    "InterruptibleCalls",
    "interruptible",
    "while_interruptible",
]


class Interrupted(Exception):
    """An engine call ended early because its worker was told to stop (never a user's
    error: the stopping executor drops the batch it was running)."""


class InterruptibleCalls:
    """The engine calls of one set of workers, interrupted together."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._interrupted = False
        self._ends: set[Callable[[], None]] = set()  # how to end each call under way

    def interrupt(self) -> None:
        """End every call in progress (each raises Interrupted as soon as its backend
        can) and every call that starts from now on."""
        with self._lock:
            self._interrupted = True
            ends = list(self._ends)
        for end in ends:
            end()

    @contextmanager
    def _call(self, end: Callable[[], None]) -> Iterator[None]:
        with self._lock:
            if self._interrupted:
                raise Interrupted("the worker was stopped before the call")
            self._ends.add(end)
        try:
            yield
        finally:
            with self._lock:
                self._ends.discard(end)


_scope = threading.local()


@contextmanager
def interruptible(calls: InterruptibleCalls) -> Iterator[None]:
    """Engine calls this thread makes inside the block can be ended by
    ``calls.interrupt()``."""
    previous = getattr(_scope, "calls", None)
    _scope.calls = calls
    try:
        yield
    finally:
        _scope.calls = previous


@contextmanager
def while_interruptible(end: Callable[[], None]) -> Iterator[None]:
    """Around one engine call: ``end()`` is how another thread ends it (outside
    ``interruptible``, nothing does); raises Interrupted at once when its calls were
    already interrupted."""
    calls: InterruptibleCalls | None = getattr(_scope, "calls", None)
    if calls is None:
        yield
        return
    with calls._call(end):
        yield
