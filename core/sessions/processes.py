"""Device slots of a several-source run, each in a process of its own.

``framelens run SRC... --export-dir DIR --device cuda:0,cuda:0 --processes``: the groups
that ``run_many`` (core/sessions/runs.py) forms, one session per device slot, run in
spawned processes instead of threads of this one. Each process has its own interpreter,
so the per-frame Python work of its sources and workers (demuxing, queueing, decoding
boxes) no longer waits for one GIL
shared with every other group: on a big GPU with many streams that lock, not the GPU, is
what limits one process. Each group writes its own sources' outputs (the same files, the
same way, as in a thread); the progress bar, cancel and Ctrl+C stay in this process, which
tells the groups to stop through an event they poll once a frame.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import queue
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

from framelens.core.errors import FrameLensError, error_message
from framelens.core.pipeline.plan import Plan
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.stages.sinks.atomic import remove_stale_file_temps

PartT = TypeVar("PartT")
PartT_co = TypeVar("PartT_co", covariant=True)


class Counter(Protocol):
    """What counts the frames written (a terminal bar, a counter shared with the parent)."""

    def update(self, n: int = 1) -> object: ...


class StopFlag(Protocol):
    def is_set(self) -> bool: ...


class DeviceGroup(Protocol[PartT_co]):
    """What a device group does with its sources in its process (picklable; the run's
    ``GroupJob`` of core/sessions/runs.py): its outputs' folder, and a run that returns
    what the group did."""

    @property
    def out_dir(self) -> str: ...

    def run(
        self,
        specs: Sequence[str],
        names: Sequence[str],
        settings: PipelineSettings,
        *,
        ids: Sequence[int],
        counter: Counter | None,
        on_message: Callable[[str], None] | None,
        cancel: StopFlag | None,
        on_plan: Callable[[Plan], None] | None = None,
    ) -> PartT_co: ...


__all__ = ["run_groups_in_processes"]

_POLL_S = 0.2
_JOIN_S = 30.0  # a group told to stop finishes its batch and closes its outputs first


class _CountingBar:
    """What a group's run updates for each frame: a counter this process reads."""

    def __init__(self, counter: Any) -> None:
        self._counter = counter

    def update(self, n: int = 1) -> None:
        self._counter.value += n


class _StopFlag:
    """The parent's "stop" as a group reads it once a frame: a shared byte, no lock (a
    group killed while reading a locked event would leave its lock held and hang the
    others), and set as well when the parent itself is gone (killed: nothing else would
    tell the group)."""

    def __init__(self, value: Any) -> None:
        self._value = value

    def set(self) -> None:
        self._value.value = 1

    def is_set(self) -> bool:
        if self._value.value:
            return True
        parent = multiprocessing.parent_process()
        return parent is not None and not parent.is_alive()


def _group_main(
    k: int,
    job: DeviceGroup[Any],
    ids: list[int],
    specs: list[str],
    names: list[str],
    settings: PipelineSettings,
    counter: Any,
    stop: Any,
    results: Any,
    plans: bool = False,
) -> None:
    """A group's process: its session, then ("ok", part) or ("error", exception) on
    ``results``; the messages it would have printed travel with either. ``plans``: each
    plan its session makes is sent as ("plan", plan) when it is made."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the parent's: it sets ``stop``
    messages: list[str] = []

    def send_plan(plan: Plan) -> None:
        results.put((k, "plan", plan, []))

    try:
        part = job.run(
            specs, names, settings, ids=ids, counter=_CountingBar(counter),
            on_message=messages.append, cancel=_StopFlag(stop),
            on_plan=send_plan if plans else None,
        )  # fmt: skip
        results.put((k, "ok", part, messages))
    except BaseException as exc:
        if not isinstance(exc, FrameLensError):  # may not pickle: its one line does
            exc = FrameLensError(error_message(exc))
        results.put((k, "error", exc, messages))


def run_groups_in_processes(
    job: DeviceGroup[PartT],
    groups: Sequence[Sequence[int]],
    slots: Sequence[str],
    specs: Sequence[str],
    names: Sequence[str],
    settings: PipelineSettings,
    *,
    counter: Counter,
    on_message: Callable[[str], None] | None,
    cancel: threading.Event | None,
    on_plan: Callable[[int, Plan], None] | None = None,
) -> list[PartT]:
    """``run_many``'s groups, group ``k`` on ``slots[k]`` in a spawned process; what
    each did, in group order. The first error of any group is raised once all have
    stopped (the others are told to stop, and discard what they had not finished).
    ``on_plan(k, plan)``: each plan group ``k`` makes, as its process reports it."""
    ctx = multiprocessing.get_context("spawn")  # CUDA cannot be forked
    shared_stop = ctx.Value("b", 0, lock=False)
    stop = _StopFlag(shared_stop)
    results = ctx.Queue()
    counters = [ctx.Value("q", 0, lock=False) for _ in groups]
    processes = []
    for k, group in enumerate(groups):
        args = (k, job, list(group), [specs[i] for i in group], [names[i] for i in group],
                replace(settings, device=slots[k]), counters[k], shared_stop,
                results, on_plan is not None)  # fmt: skip
        processes.append(ctx.Process(target=_group_main, args=args, name=f"fl-device-{k}"))
    parts: list[PartT | None] = [None] * len(groups)
    out_dir = Path(job.out_dir)
    errors: list[BaseException] = []
    counted = 0
    try:
        _start(processes)
        pending = set(range(len(groups)))
        while pending:
            if cancel is not None and cancel.is_set():
                stop.set()
            try:
                k, status, payload, messages = results.get(timeout=_POLL_S)
            except queue.Empty:
                for k in list(pending):
                    if processes[k].exitcode is not None and results.empty():
                        pending.discard(k)  # ended without a word: killed, or crashed
                        _remove_temporaries(out_dir, [names[i] for i in groups[k]])
                        errors.append(FrameLensError(
                            f"the process of device {slots[k]} ended unexpectedly "
                            f"(exit code {processes[k].exitcode}); its sources' outputs "
                            "were not written"
                        ))  # fmt: skip
                        stop.set()
            else:
                if status == "plan":
                    if on_plan is not None:
                        on_plan(k, payload)
                    continue
                pending.discard(k)
                for text in messages:
                    if on_message is not None:
                        on_message(text)
                if status == "ok":
                    parts[k] = payload
                else:
                    errors.append(payload)
                    stop.set()
            total = sum(int(c.value) for c in counters)
            counter.update(total - counted)
            counted = total
    finally:
        stop.set()  # a no-op after a normal end; else every group stops and cleans up
        _end(processes, results)
    if errors:
        raise errors[0]
    return [p for p in parts if p is not None]


def _start(processes: list[Any]) -> None:
    """Start the groups with Ctrl+C ignored, which they inherit from their first
    instruction on (a Ctrl+C while they import would print a traceback from each);
    this process keeps its own handler."""
    here = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if here else None
    try:
        for p in processes:
            p.start()
    finally:
        if here:
            signal.signal(signal.SIGINT, previous)


def _end(processes: list[Any], results: Any) -> None:
    """Wait for the started processes within one deadline (draining what they still
    send, so none blocks on a full pipe), then terminate those still running."""
    deadline = time.monotonic() + _JOIN_S
    started = [p for p in processes if p.pid is not None]
    while any(p.is_alive() for p in started) and time.monotonic() < deadline:
        with contextlib.suppress(queue.Empty, OSError, EOFError):
            results.get(timeout=_POLL_S)
    for p in started:
        if p.is_alive():
            p.terminate()
        p.join()
    results.close()


def _remove_temporaries(out_dir: Path, names: Sequence[str]) -> None:
    """The half-written outputs a killed group left (its lock on them died with it)."""
    for name in names:
        for suffix in (".mp4", ".mkv", ".json"):
            remove_stale_file_temps(out_dir / f"{name}{suffix}")
