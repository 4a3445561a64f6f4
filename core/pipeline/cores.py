"""The CPU cores a run may use: what its CPU workers and its processes are counted by."""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")


def usable_cpus() -> int:
    """The cores this process may run on (its affinity: taskset, a container's CPU set),
    cut to its CPU quota where one is set (``docker run --cpus``, a Kubernetes CPU limit:
    ``cpu_quota``, rounded up); not the machine's count."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1
    quota = cpu_quota()
    return max(1, min(cores, math.ceil(quota))) if quota is not None else cores


def cpu_quota(root: Path | None = None, proc_cgroup: Path | None = None) -> float | None:
    """The CPUs' worth of time this process's control group may use, e.g. 1.5: cgroup v2's
    ``cpu.max`` (the lowest on the group's way up to the root), else, where the cpu
    controller is on cgroup v1 (hybrid hosts), its CFS quota over its period; None where
    none is set or none can be read."""
    root = CGROUP_ROOT if root is None else root
    try:
        lines = (PROC_CGROUP if proc_cgroup is None else proc_cgroup).read_text().splitlines()
    except OSError:
        return None
    groups = dict(line.split(":", 2)[1:] for line in lines if line.count(":") >= 2)
    v1 = next((name for name in groups if "cpu" in name.split(",")), None)
    if v1 is not None:
        return _v1_quota(root / v1, groups[v1])
    if "" in groups:  # cgroup v2 alone: one hierarchy, its controllers at the root
        return _v2_quota(root, groups[""])
    return None


def _v2_quota(root: Path, group: str) -> float | None:
    """The lowest ``cpu.max`` from ``group`` up to ``root`` (a container sees its own
    group as the root)."""
    folder, lowest = root / group.strip("/"), None
    while True:
        quota = _ratio(_read(folder / "cpu.max").split())
        if quota is not None:
            lowest = quota if lowest is None else min(lowest, quota)
        if folder == root or root not in folder.parents:
            return lowest
        folder = folder.parent


def _v1_quota(mount: Path, group: str) -> float | None:
    """The CFS quota of ``group`` under the cpu controller's ``mount``; its mount's own
    where the group is not visible there (a container's view of the host's path)."""
    for folder in (mount / group.strip("/"), mount):
        quota = _read(folder / "cpu.cfs_quota_us")
        if quota:
            return _ratio([quota, _read(folder / "cpu.cfs_period_us")])
    return None


def _read(file: Path) -> str:
    try:
        return file.read_text().strip()
    except OSError:
        return ""


def _ratio(fields: list[str]) -> float | None:
    """quota / period, where the quota is a positive number ("max", -1: no limit)."""
    try:
        quota, period = int(fields[0]), int(fields[1])
    except (IndexError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None
