"""Where a many-threaded run spends its time: every thread's Python stack, sampled.

    with StackSampler() as sampler:
        run_many(...)
    report = sampler.report()   # per thread kind: the lines it sat on, most seen first

A thread wakes every ``interval_s`` and reads every other thread's current frame
(``sys._current_frames``), so it needs no wheel on the GPU machine and no ptrace. A
thread inside a C call (NVDEC, ONNX Runtime, a CUDA wait) shows the Python line that
called it. The sampler also measures how late it wakes: to run at all it must take the
GIL, so that lateness is how long a thread waits for the interpreter (GIL contention).
"""

from __future__ import annotations

import re
import statistics
import sys
import threading
import time
from collections import Counter
from types import FrameType, TracebackType
from typing import Any

DEPTH = 3  # innermost frames kept per sample


def _kind(name: str) -> str:
    """Threads of one kind together: "fl-source-12" -> "fl-source"."""
    return re.sub(r"[-_]?\d+$", "", name) or name


def _stack(frame: FrameType | None) -> str:
    """The innermost DEPTH frames outside the standard library, which is named only by
    its innermost function ("queue.put" while a thread waits in queue.Queue.put)."""
    parts: list[str] = []
    stdlib = ""
    while frame is not None and len(parts) < DEPTH:
        code = frame.f_code
        if "site-packages" not in code.co_filename and "/lib/python3" in code.co_filename:
            stdlib = stdlib or f"[{code.co_filename.rsplit('/', 1)[-1][:-3]}.{code.co_name}]"
        else:
            path = code.co_filename.split("site-packages/")[-1].split("framelens/")[-1]
            parts.append(f"{path}:{code.co_name}:{frame.f_lineno}")
        frame = frame.f_back
    return " < ".join(([stdlib] if stdlib else []) + parts)


class StackSampler:
    """Samples every thread's stack on a thread of its own while in a ``with`` block."""

    def __init__(self, interval_s: float = 0.002) -> None:
        self.interval_s = interval_s
        self._counts: dict[str, Counter[str]] = {}
        self._samples: Counter[str] = Counter()
        self._late_ms: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stack-sampler", daemon=True)

    def __enter__(self) -> StackSampler:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        me = threading.get_ident()
        while not self._stop.is_set():
            asleep = time.perf_counter()
            time.sleep(self.interval_s)
            self._late_ms.append((time.perf_counter() - asleep - self.interval_s) * 1000.0)
            names = {t.ident: t.name for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                kind = _kind(names.get(ident, "?"))
                self._samples[kind] += 1
                self._counts.setdefault(kind, Counter())[_stack(frame)] += 1

    def report(self, top: int = 12) -> dict[str, Any]:
        """Per thread kind: samples, and its most seen stacks with their share."""
        late = self._late_ms or [0.0]
        threads: dict[str, Any] = {}
        for kind, counts in sorted(self._counts.items(), key=lambda kv: -self._samples[kv[0]]):
            total = self._samples[kind]
            threads[kind] = {
                "samples": total,
                "stacks": [
                    {"share": round(n / total, 3), "stack": stack}
                    for stack, n in counts.most_common(top)
                ],
            }
        return {
            "interval_ms": self.interval_s * 1000.0,
            "wakeups": len(self._late_ms),
            # how long the sampler waited for the GIL beyond its sleep
            "gil_wait_ms": {
                "median": round(statistics.median(late), 3),
                "p90": round(sorted(late)[int(0.9 * (len(late) - 1))], 3),
                "max": round(max(late), 3),
            },
            "threads": threads,
        }
