"""The gates that keep stream captures apart from context-wide waits (core/gpu/graphs.py).

A capture (ours, or one inside an ONNX Runtime run) beside a context-wide
synchronisation fails one or the other, so: exclusive work runs alone, shared work runs
together otherwise, and a waiting exclusive holder is not starved by a stream of shared
work. Threads and timing only; no GPU.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from framelens.core.gpu.graphs import CaptureGate


def wait_until(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    end = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.001)


def test_shared_work_runs_together_and_a_capture_runs_alone() -> None:
    gate = CaptureGate()
    inside = {"shared": 0, "most_shared": 0, "capture_saw_shared": -1}
    lock = threading.Lock()
    both_in = threading.Barrier(2, timeout=5)
    both_inside = threading.Event()

    def shared() -> None:
        with gate.shared():
            with lock:
                inside["shared"] += 1
                inside["most_shared"] = max(inside["most_shared"], inside["shared"])
            both_in.wait()  # both shared holders inside at once, or this times out
            both_inside.set()
            time.sleep(0.05)
            with lock:
                inside["shared"] -= 1

    def capture() -> None:
        both_inside.wait(5)  # the capture comes while both are inside
        with gate.exclusive(), lock:
            inside["capture_saw_shared"] = inside["shared"]

    threads = [threading.Thread(target=f, daemon=True) for f in (shared, shared, capture)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert inside["most_shared"] == 2
    assert inside["capture_saw_shared"] == 0  # it waited for both to leave


def test_a_waiting_capture_goes_before_new_shared_work_and_reentry_does_not_block() -> None:
    gate = CaptureGate()
    order: list[str] = []
    holding = threading.Event()
    release = threading.Event()

    def first() -> None:
        with gate.shared():
            holding.set()
            release.wait(5)
            with gate.shared():  # again, from a thread inside: no deadlock behind the capture
                order.append("re-entered")

    def capture() -> None:
        with gate.exclusive():
            order.append("capture")

    def late() -> None:
        with gate.shared():
            order.append("late shared")

    a = threading.Thread(target=first, daemon=True)
    a.start()
    holding.wait(5)
    b = threading.Thread(target=capture, daemon=True)
    b.start()
    wait_until(lambda: gate._waiting == 1)  # the capture waits for the first to leave
    c = threading.Thread(target=late, daemon=True)
    c.start()
    time.sleep(0.05)
    assert order == []  # the late shared work waits behind the waiting capture
    release.set()
    for t in (a, b, c):
        t.join(5)
    assert order == ["re-entered", "capture", "late shared"]


def test_a_capture_from_inside_shared_work_is_refused_not_a_deadlock() -> None:
    gate = CaptureGate()
    with (
        gate.shared(),
        pytest.raises(RuntimeError, match="inside shared work"),
        gate.exclusive(),
    ):
        pass
    with gate.exclusive():  # and the gate still works afterwards
        pass


def test_the_exclusive_holder_enters_again_and_runs_shared_work_itself() -> None:
    """A pool whose allocation failed frees what it got from inside its own exclusive
    hold; that must not wait for itself."""
    gate = CaptureGate()
    done = threading.Event()

    def nested() -> None:
        with gate.exclusive(), gate.exclusive(), gate.shared():
            done.set()

    t = threading.Thread(target=nested, daemon=True)
    t.start()
    t.join(5)
    assert done.is_set()
    # and the gate is open again, to exclusive work from another thread too
    with gate.shared():
        pass
    assert gate._shared == 0
    entered = threading.Event()

    def alone() -> None:
        with gate.exclusive():
            entered.set()

    other = threading.Thread(target=alone, daemon=True)
    other.start()
    assert entered.wait(5)


def test_an_exception_inside_leaves_the_gate_open() -> None:
    gate = CaptureGate()
    with pytest.raises(ValueError), gate.exclusive(), gate.shared(), gate.exclusive():
        raise ValueError("inside")
    with pytest.raises(ValueError), gate.shared():
        raise ValueError("inside")
    entered = threading.Event()

    def alone() -> None:
        with gate.exclusive():
            entered.set()

    t = threading.Thread(target=alone, daemon=True)
    t.start()
    assert entered.wait(5)


def test_shared_work_that_waited_goes_before_the_next_exclusive_holder() -> None:
    """A thread looping on exclusive work (pool after pool closing) must not keep the
    engines' runs out for good."""
    gate = CaptureGate()
    order: list[str] = []
    first_in = threading.Event()
    release = threading.Event()

    def first() -> None:
        with gate.exclusive():
            first_in.set()
            release.wait(5)
            order.append("exclusive 1")

    def run() -> None:
        with gate.shared():
            order.append("shared")

    def second() -> None:
        with gate.exclusive():
            order.append("exclusive 2")

    a = threading.Thread(target=first, daemon=True)
    a.start()
    first_in.wait(5)
    b = threading.Thread(target=run, daemon=True)
    b.start()
    wait_until(lambda: gate._shared_waiting == 1)
    c = threading.Thread(target=second, daemon=True)
    c.start()
    wait_until(lambda: gate._waiting == 1)
    release.set()
    for t in (a, b, c):
        t.join(5)
    assert order == ["exclusive 1", "shared", "exclusive 2"]


def test_a_context_wide_wait_comes_after_the_library_runs_in_flight() -> None:
    """``quiet()`` (a cuCtxSynchronize, a free, an allocation) waits for the ONNX Runtime
    runs under way (``library_run()``, which may capture a stream inside), and runs started
    while it waits come after it."""
    from framelens.core.gpu.graphs import SYNC_GATE, library_run, quiet

    order: list[str] = []
    running = threading.Event()
    finish = threading.Event()

    def run() -> None:
        with library_run():
            running.set()
            finish.wait(5)
            order.append("run in flight ends")

    def sync() -> None:
        with quiet():
            order.append("context-wide wait")

    def later_run() -> None:
        with library_run():
            order.append("later run")

    a = threading.Thread(target=run, daemon=True)
    a.start()
    running.wait(5)
    b = threading.Thread(target=sync, daemon=True)
    b.start()
    wait_until(lambda: SYNC_GATE._waiting == 1)
    c = threading.Thread(target=later_run, daemon=True)
    c.start()
    time.sleep(0.05)
    assert order == []  # the wait is held back by the run, the later run by the wait
    finish.set()
    for t in (a, b, c):
        t.join(5)
    assert order == ["run in flight ends", "context-wide wait", "later run"]
