"""The CPU cores a run may use: what its CPU workers and its processes are counted by."""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """The cores this process may run on (its affinity: taskset, a container's CPU set),
    not the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1
