"""Stage timing: one clock for the CPU path, shared by plots, bench and reports."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from framelens.core.types import StageTimes


@contextmanager
def stage(times: StageTimes, name: str) -> Iterator[None]:
    """Record the wall time of the enclosed block, in ms, as ``times.<name>``."""
    start = time.perf_counter()
    try:
        yield
    finally:
        setattr(times, name, (time.perf_counter() - start) * 1000.0)


def now_ms() -> float:
    return time.perf_counter() * 1000.0
