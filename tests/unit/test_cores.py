"""The cores a run counts its CPU workers and processes by (core/pipeline/cores.py): a
container's CPU limit, not the host's cores. The control groups here are folders laid out
as the kernel shows them (/proc/self/cgroup and the cgroup file system), with the files
the kernel writes, in the formats of cgroup v2, of v1, and of hybrid hosts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from framelens.core.pipeline import cores
from framelens.core.pipeline.cores import cpu_quota
from framelens.core.pipeline.devices import device_slots


def cgroups(tmp_path: Path, membership: str, files: dict[str, str]) -> tuple[Path, Path]:
    """A cgroup file system under ``tmp_path`` holding ``files`` and this process's
    membership as /proc/self/cgroup would give it."""
    root = tmp_path / "cgroup"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text + "\n")
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text(membership + "\n")
    return root, proc


@pytest.mark.parametrize(
    ("membership", "files", "quota"),
    [
        # cgroup v2, as a container sees itself (docker run --cpus 1.5)
        ("0::/", {"cpu.max": "150000 100000"}, 1.5),
        ("0::/", {"cpu.max": "max 100000"}, None),
        # a Kubernetes pod's limit above the container's group: the lowest on the way up
        ("0::/pod/app", {"pod/cpu.max": "200000 100000", "pod/app/cpu.max": "max 100000"}, 2.0),
        ("0::/pod/app", {"pod/cpu.max": "400000 100000", "pod/app/cpu.max": "50000 100000"},
         0.5),
        # cgroup v1, and a hybrid host (the cpu controller on v1, an empty v2 beside it)
        ("4:cpu,cpuacct:/docker/ab12", {"cpu,cpuacct/docker/ab12/cpu.cfs_quota_us": "300000",
                                        "cpu,cpuacct/docker/ab12/cpu.cfs_period_us": "100000"},
         3.0),
        ("1:cpu:/\n0::/", {"cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us": "100000"},
         None),
        # v1 in a container: the host's path of its group is not there, its mount is its own
        ("2:cpu:/kubepods/x", {"cpu/cpu.cfs_quota_us": "250000",
                               "cpu/cpu.cfs_period_us": "100000"}, 2.5),
        ("0::/", {}, None),  # no cpu controller enabled
    ],
)  # fmt: skip
def test_a_containers_cpu_limit_is_read_as_the_kernel_writes_it(
    tmp_path: Path, membership: str, files: dict[str, str], quota: float | None
) -> None:
    assert cpu_quota(*cgroups(tmp_path, membership, files)) == quota


def test_this_machines_own_control_groups_are_read_without_error() -> None:
    """Whatever this machine's cgroup layout, the count is a number of cores it may use."""
    quota = cpu_quota()
    assert quota is None or quota > 0
    assert 1 <= cores.usable_cpus() <= len(os.sched_getaffinity(0))


def test_sixty_four_files_in_a_two_cpu_container_get_processes_for_two_cpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run of 64 files on one GPU in a container limited to 2 CPUs on a host of many
    cores: its processes are counted by the 2 CPUs it may use, not the host's cores."""
    root, proc = cgroups(tmp_path, "0::/", {"cpu.max": "200000 100000"})
    monkeypatch.setattr(cores, "CGROUP_ROOT", root)
    monkeypatch.setattr(cores, "PROC_CGROUP", proc)
    monkeypatch.setattr(cores.os, "sched_getaffinity", lambda pid: set(range(64)))
    assert cores.usable_cpus() == 2
    slots, in_processes = device_slots(["cuda:0"], 64, None)
    assert (slots, in_processes) == (["cuda:0"], False)  # 2 cores: no processes to spare
