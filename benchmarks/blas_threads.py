"""What OpenBLAS's thread pool costs a tracker's process: ByteTrack over the same frames
in fresh processes, OpenBLAS left with its default pool (a thread per core) and held to
one thread (``OPENBLAS_NUM_THREADS=1``), alternated.

    python3 benchmarks/blas_threads.py --repeats 5 \\
        --output benchmarks/results/blas-threads-cpu-2core-<date>.json

The trackers' Kalman updates multiply stacks of 8x8 matrices (``@``: OpenBLAS's gemm).
OpenBLAS wakes its pool for them and its threads spin a while before they sleep, so a
process that tracks burns more CPU than it uses. Per run: the tracker's frames per
second, the process's CPU seconds per wall second (1.0: one busy thread, nothing
spinning), and the same beside a CPU-bound neighbour process (``neighbour``: its loop's
iterations per second, what the spinning takes from other work where cores are
shared). Medians of ``--repeats`` runs per side and their spread.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def busy(seconds: float) -> None:
    """A CPU-bound neighbour: prints its iterations per second."""
    n, began = 0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        for _ in range(1000):
            n += 1
    print(n / seconds)


def track(seconds: float, boxes: int, neighbour: bool) -> None:
    """ByteTrack over ``boxes`` moving boxes for ``seconds``: prints the JSON of a run."""
    import numpy as np
    from framelens.core.stages.tracking.registry import make_tracker
    from framelens.core.stages.tracking.settings import TrackerSettings
    from framelens.core.types import Detections

    rng = np.random.default_rng(0)
    tracker = make_tracker(TrackerSettings.for_kind("bytetrack"))
    base = rng.uniform(100, 1500, (boxes, 2))
    frames = []
    for k in range(2000):
        xy = base + k * 2.0 + rng.normal(0, 1, base.shape)
        frames.append(
            Detections(
                np.concatenate([xy, xy + 80], 1).astype(np.float32),
                np.full(boxes, 0.8, np.float32),
                np.zeros(boxes, np.int32),
            )
        )
    for d in frames[:200]:  # warm-up
        tracker.update(d, None)
    other = None
    if neighbour:
        other = subprocess.Popen(
            [sys.executable, __file__, "--busy", str(seconds + 0.5)],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        time.sleep(0.2)
    r0, began, done = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter(), 0
    while time.perf_counter() - began < seconds:
        for d in frames[done % 2000 : done % 2000 + 100]:
            tracker.update(d, None)
        done += 100
    wall = time.perf_counter() - began
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    out: dict[str, Any] = {"fps": round(done / wall, 1), "cpu_per_wall": round(cpu / wall, 3)}
    if other is not None:
        out["neighbour_it_per_s"] = round(float(other.communicate()[0]), 0)
    print(json.dumps(out))


def one_run(limited: bool, seconds: float, boxes: int, neighbour: bool) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop("OPENBLAS_NUM_THREADS", None)
    if limited:
        env["OPENBLAS_NUM_THREADS"] = "1"
    argv = [sys.executable, __file__, "--track-run", str(seconds), "--boxes", str(boxes)]
    if neighbour:
        argv.append("--with-neighbour")
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"runs": runs}
    for key in runs[0]:
        values = [r[key] for r in runs]
        median = statistics.median(values)
        out[key] = median
        out[f"{key}_spread"] = round((max(values) - min(values)) / median, 3) if median else 0
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0, help="each run's tracking time")
    parser.add_argument("--boxes", type=int, default=8, help="boxes a frame")
    parser.add_argument("--output")
    parser.add_argument("--busy", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--track-run", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--with-neighbour", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.busy is not None:
        busy(args.busy)
        return 0
    if args.track_run is not None:
        track(args.track_run, args.boxes, args.with_neighbour)
        return 0
    sides: dict[str, list[dict[str, Any]]] = {}
    for neighbour in (False, True):
        for k in range(args.repeats):  # alternated, ABBA
            for limited in (False, True) if k % 2 == 0 else (True, False):
                name = ("one thread" if limited else "default pool") + (
                    ", beside a busy process" if neighbour else ", alone"
                )
                got = one_run(limited, args.seconds, args.boxes, neighbour)
                sides.setdefault(name, []).append(got)
                print(f"  {name}: {got}", file=sys.stderr, flush=True)
    result = {
        "command": "python3 benchmarks/blas_threads.py " + " ".join(sys.argv[1:]),
        "cores": os.cpu_count(),
        "boxes": args.boxes,
        "seconds": args.seconds,
        "repeats": args.repeats,
        "sides": {name: summary(runs) for name, runs in sides.items()},
    }
    text = json.dumps(result, indent=2)
    if args.output:
        tmp = Path(args.output).with_suffix(".tmp")
        tmp.write_text(text + "\n")
        tmp.replace(args.output)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
