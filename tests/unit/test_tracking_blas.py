"""A process that tracks holds OpenBLAS to one thread (core/stages/tracking/blas.py): its
pool, a thread per core, spun beside the pipeline's threads for the trackers' 8x8
products. Each case in a fresh process, as a run's processes are."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import json
import numpy  # its OpenBLAS loaded, as in any process of the product
from threadpoolctl import threadpool_info
def blas():
    return sorted({p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"})
before = blas()
from framelens.core.stages.tracking.registry import make_tracker
from framelens.core.stages.tracking.settings import TrackerSettings
after_import = blas()
make_tracker(TrackerSettings.for_kind("bytetrack"))
print(json.dumps({"before": before, "after_import": after_import, "after": blas()}))
"""


def _probe(env_extra: dict[str, str]) -> dict[str, list[int]]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}  # fmt: skip
    env.update(env_extra)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    out: dict[str, list[int]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: the pool is one thread")
def test_the_first_tracker_holds_the_blas_to_one_thread() -> None:
    got = _probe({})
    assert got["before"] and max(got["before"]) >= 2  # OpenBLAS's pool: a thread per core
    assert got["after_import"] == got["before"]  # importing changes nothing
    assert got["after"] == [1]


def test_a_pool_size_the_user_set_stands() -> None:
    got = _probe({"OPENBLAS_NUM_THREADS": "2"})
    assert got["before"] == got["after"] == [2]
