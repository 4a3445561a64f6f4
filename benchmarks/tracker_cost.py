"""What tracking costs per frame: each tracker (ours and, for context, Roboflow's
``trackers`` package, the independent implementation our tests compare with) on
synthetic moving boxes at 3, 10, 50 and 200 objects, and BoT-SORT's camera-motion
compensation on a 1080p frame.

    .venv/bin/python benchmarks/tracker_cost.py \
        --output benchmarks/results/trackers-cpu-2core-<date>.json [--baseline REV]

Two of our rows per tracker and size: ``framelens``, the tracker's ``update`` alone,
and ``framelens-stage``, the tracking stage a run's sources go through (the tracker,
then IDs and 30-point trails on each box, the record for stepping back): what a
pipeline pays per frame. ``--baseline REV`` also times the tracking code as it was at
git revision REV (``framelens@REV``, ``framelens-stage@REV``), loaded beside today's
and interleaved with it in every run: a before/after measured alternately, under the
same load.

Every tracker sees the same detections: objects moving at random constant velocities
across a 1920x1080 frame with 1.5 px of jitter, 5% of boxes missed and 10% scored low
(0.2-0.45), entering as others leave. One run: a new tracker takes ``--frames`` frames;
the first ``--settle`` are not timed (tracks being born), the rest are, frame by frame
(``time.perf_counter`` around ``update``; ``time.thread_time`` too: the CPU time,
which load from other processes on the machine does not inflate). Detections are
made before timing (for Roboflow: its supervision Detections too). One untimed
warm-up run first, then ``--runs`` runs, trackers interleaved within each run so that
load from elsewhere falls on all alike. Reported per tracker and size: the median of
the runs' mean per-frame times, their spread (min, max and inter-quartile range over
runs; never the best alone), the median and p95 over every timed frame, and the
median CPU time per frame. BoT-SORT is timed without camera-motion
compensation (``cmc="none"``: the tracker's own cost); the compensation's cost per frame
is reported apart (``cmc``), since it depends on the frame size, not on the objects.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

WIDTH, HEIGHT = 1920, 1080
HERE = Path(__file__).resolve().parent
# this file is named like Roboflow's package: its folder must not shadow it
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]


def scene(objects: int, frames: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(boxes, scores) per frame: ``objects`` people on screen at any time."""
    rng = np.random.default_rng(seed)

    def spawn() -> list[float]:
        w = rng.uniform(30, 80)
        return [
            rng.uniform(0, WIDTH),
            rng.uniform(0, HEIGHT),
            rng.uniform(-4, 4),
            rng.uniform(-3, 3),
            w,
            w * 2,
        ]

    people = [spawn() for _ in range(objects)]
    out = []
    for _ in range(frames):
        boxes, scores = [], []
        for i, p in enumerate(people):
            p[0] += p[2]
            p[1] += p[3]
            if not (0 <= p[0] <= WIDTH and 0 <= p[1] <= HEIGHT):
                people[i] = p = spawn()  # one leaves, another comes
            if rng.random() < 0.05:
                continue
            jitter = rng.normal(0, 1.5, 4)
            cx, cy, w, h = p[0] + jitter[0], p[1] + jitter[1], p[4] + jitter[2], p[5] + jitter[3]
            boxes.append([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2])
            scores.append(rng.uniform(0.2, 0.45) if rng.random() < 0.1 else rng.uniform(0.6, 0.95))
        out.append((np.array(boxes, np.float32).reshape(-1, 4), np.array(scores, np.float32)))
    return out


Runner = Callable[[], tuple[list[float], float]]
"""A run: the wall time of every timed frame, and the CPU time of this thread over them."""


def ours(
    kind: str,
    frames: list[tuple[np.ndarray, np.ndarray]],
    settle: int,
    package: str = "framelens.core.stages.tracking",
    stage: bool = False,
) -> Runner:
    """Our tracker (``stage``: its tracking stage) from ``package`` (today's, or a
    baseline's loaded by :func:`load_baseline`)."""
    import importlib

    from framelens.core.types import Detections, Frame, FrameResult, StageTimes

    settings_module = importlib.import_module(f"{package}.settings")
    registry = importlib.import_module(f"{package}.registry")
    stage_module = importlib.import_module(f"{package}.stage")
    dets = [Detections(b, s, np.zeros(len(b), np.int32)) for b, s in frames]
    settings = settings_module.TrackerSettings.for_kind(kind, cmc="none")
    pixels = np.zeros((8, 8, 3), np.uint8)
    results = [FrameResult(Frame(pixels, i, i / 30), d, StageTimes()) for i, d in enumerate(dets)]

    def run() -> list[float]:
        tracker = registry.make_tracker(settings)
        call = tracker.update
        if stage:
            call = stage_module.TrackingStage(tracker, settings.trail_length)
            for r, d in zip(results, dets, strict=True):
                r.output = d  # the stage replaced it last run
        items = results if stage else dets
        times, cpu = [], 0.0
        for i, item in enumerate(items):
            c0, t0 = time.thread_time(), time.perf_counter()
            call(item)
            if i >= settle:
                times.append(time.perf_counter() - t0)
                cpu += time.thread_time() - c0
        return times, cpu

    return run


def load_baseline(revision: str) -> str:
    """The tracking package (core/stages/tracking) as of git ``revision``, importable
    beside today's under another name; returns that name."""
    import subprocess

    from scratch import scratch_folder

    root = HERE.parent
    folder = "core/stages/tracking"
    names = subprocess.run(
        ["git", "-C", str(root), "ls-tree", "--name-only", f"{revision}:{folder}"],
        check=True, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    package = "framelens_tracking_baseline"
    target = scratch_folder("tracker-baseline-") / package
    target.mkdir()
    for name in names:
        if name.endswith(".py"):
            text = subprocess.run(
                ["git", "-C", str(root), "show", f"{revision}:{folder}/{name}"],
                check=True, capture_output=True, text=True,
            ).stdout  # fmt: skip
            (target / name).write_text(text.replace("framelens.core.stages.tracking", package))
    sys.path.insert(0, str(target.parent))
    return package


def roboflow(kind: str, frames: list[tuple[np.ndarray, np.ndarray]], settle: int) -> Runner:
    import supervision as sv
    import trackers

    make: Callable[[], Any] = {
        "bytetrack": lambda: trackers.ByteTrackTracker(
            minimum_iou_threshold=0.2, high_conf_det_threshold=0.5, track_activation_threshold=0.6
        ),
        "ocsort": lambda: trackers.OCSORTTracker(),
        "botsort": lambda: trackers.BoTSORTTracker(enable_cmc=False),
    }[kind]
    dets = [
        sv.Detections(
            xyxy=b.astype(np.float64),
            confidence=s.astype(np.float64),
            class_id=np.zeros(len(b), int),
        )
        for b, s in frames
    ]

    def run() -> list[float]:
        tracker = make()
        times, cpu = [], 0.0
        for i, d in enumerate(dets):
            c0, t0 = time.thread_time(), time.perf_counter()
            tracker.update(d)
            if i >= settle:
                times.append(time.perf_counter() - t0)
                cpu += time.thread_time() - c0
        return times, cpu

    return run


def cmc_runner(method: str, downscale: int, frames: int) -> Runner:
    """The camera-motion estimate per 1080p frame of a textured view panning 6 px a frame."""
    import cv2
    from framelens.core.stages.tracking.cmc import CameraMotion

    rng = np.random.default_rng(0)
    shape = (HEIGHT + 64, WIDTH + 6 * frames + 64)
    world = np.zeros(shape)
    for scale in (1, 3, 9, 27):
        coarse = cv2.GaussianBlur(
            rng.normal(0, 1, (shape[0] // scale + 2, shape[1] // scale + 2)), (0, 0), 2.0
        )
        world += scale * cv2.resize(coarse, (shape[1], shape[0]), interpolation=cv2.INTER_CUBIC)
    grey = cv2.normalize(world, None, 0, 255, cv2.NORM_MINMAX).astype(np.uint8)
    bgr = cv2.cvtColor(grey, cv2.COLOR_GRAY2BGR)
    views = [
        np.ascontiguousarray(bgr[32 : 32 + HEIGHT, 6 * f : 6 * f + WIDTH]) for f in range(frames)
    ]

    def run() -> list[float]:
        motion = CameraMotion(method, downscale)  # type: ignore[arg-type]
        times, cpu = [], 0.0
        for i, v in enumerate(views):
            c0, t0 = time.thread_time(), time.perf_counter()
            motion.apply(v)
            if i >= 1:
                times.append(time.perf_counter() - t0)
                cpu += time.thread_time() - c0
        return times, cpu

    return run


def paired_speedup(
    before: Sequence[tuple[list[float], float]], after: Sequence[tuple[list[float], float]]
) -> dict[str, float]:
    """How many times faster ``after`` is than ``before``: the median of the ratios of
    run k of each (runs alternate, so run k of each saw the same load), wall and CPU."""
    pairs = list(zip(before, after, strict=True))
    wall = [np.mean(b) / np.mean(a) for (b, _), (a, _) in pairs]
    cpu = [cb / len(b) / (ca / len(a)) for (b, cb), (a, ca) in pairs]
    return {
        "speedup_median_of_paired_runs": round(float(np.median(wall)), 2),
        "speedup_cpu_median_of_paired_runs": round(float(np.median(cpu)), 2),
    }


def machine(load_before: Sequence[float], load_after: Sequence[float]) -> dict[str, Any]:
    """The machine a result was measured on, and its load before and after."""
    import scipy

    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
    }


def summary(runs: Sequence[tuple[list[float], float]]) -> dict[str, Any]:
    per_run = np.array([np.mean(r) * 1000 for r, _ in runs])
    cpu_run = np.array([cpu / len(r) * 1000 for r, cpu in runs])
    every = np.concatenate([np.asarray(r) for r, _ in runs]) * 1000
    q1, q3 = np.percentile(per_run, [25, 75])
    return {
        "ms_per_frame_median": round(float(np.median(per_run)), 4),
        "ms_per_frame_runs": [round(float(x), 4) for x in per_run],
        "spread_ms": {
            "min": round(float(per_run.min()), 4),
            "max": round(float(per_run.max()), 4),
            "iqr": round(float(q3 - q1), 4),
        },
        "frame_ms_median": round(float(np.median(every)), 4),
        "frame_ms_p95": round(float(np.percentile(every, 95)), 4),
        "frames_timed": int(every.size),
        "fps_median": round(1000.0 / float(np.median(per_run)), 1),
        "cpu_ms_per_frame_median": round(float(np.median(cpu_run)), 4),
        "cpu_ms_per_frame_runs": [round(float(x), 4) for x in cpu_run],
    }


def subprocess_rev(revision: str) -> str:
    """The short commit hash of a git revision of this repository."""
    import subprocess

    return subprocess.run(
        ["git", "-C", str(HERE.parent), "rev-parse", "--short", revision],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip


def _dirty() -> bool:
    """Whether the tracking code or this benchmark differ from the commit."""
    import subprocess

    return bool(
        subprocess.run(
            ["git", "-C", str(HERE.parent), "status", "--porcelain", "--",
             "core/stages/tracking", "benchmarks/tracker_cost.py"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
    )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objects", default="3,10,50,200", help="comma-separated object counts")
    ap.add_argument("--kinds", default="bytetrack,ocsort,botsort")
    ap.add_argument("--frames", type=int, default=300, help="frames per run")
    ap.add_argument("--settle", type=int, default=30, help="first frames of a run not timed")
    ap.add_argument("--runs", type=int, default=7, help="timed runs (after one warm-up run)")
    ap.add_argument("--cmc-frames", type=int, default=60)
    ap.add_argument("--no-roboflow", action="store_true", help="only our trackers")
    ap.add_argument("--no-cmc", action="store_true", help="no camera-motion rows")
    ap.add_argument(
        "--baseline", metavar="REV", help="also time the tracking code of this git revision"
    )
    ap.add_argument("--note", default="")
    ap.add_argument("--output", type=Path, required=True)
    args = ap.parse_args(argv)
    if args.runs < 5:
        ap.error("--runs must be at least 5")

    counts = [int(x) for x in args.objects.split(",")]
    kinds = args.kinds.split(",")
    impls: list[tuple[str, Callable[..., Runner]]] = [
        ("framelens", ours),
        ("framelens-stage", functools.partial(ours, stage=True)),
    ]
    baseline = None
    if args.baseline:
        package = load_baseline(args.baseline)
        baseline = subprocess_rev(args.baseline)
        impls += [
            (f"framelens@{baseline}", functools.partial(ours, package=package)),
            (f"framelens-stage@{baseline}", functools.partial(ours, package=package, stage=True)),
        ]
    if not args.no_roboflow:
        impls.append(("roboflow-trackers", roboflow))
    cases: dict[tuple[str, str, int], Runner] = {}
    for n in counts:
        frames = scene(n, args.frames, seed=n)
        for kind in kinds:
            for name, make in impls:
                cases[(name, kind, n)] = make(kind, frames, args.settle)
    cmc_cases = {
        (m, d): cmc_runner(m, d, args.cmc_frames)
        for m in ([] if args.no_cmc else ["sparse", "ecc"])
        for d in (2, 4)
    }

    load_before = os.getloadavg()
    for run in [*cases.values(), *cmc_cases.values()]:  # warm-up
        run()
    timed: dict[Any, list[tuple[list[float], float]]] = {k: [] for k in [*cases, *cmc_cases]}
    for r in range(args.runs):
        for key, run in [*cases.items(), *cmc_cases.items()]:
            timed[key].append(run())
        print(f"run {r + 1}/{args.runs} done", file=sys.stderr)
    load_after = os.getloadavg()

    rows = [
        {"implementation": name, "tracker": kind, "objects": n, **summary(timed[(name, kind, n)])}
        for (name, kind, n) in cases
    ]
    cmc_rows = [
        {"method": m, "downscale": d, "frame": f"{WIDTH}x{HEIGHT}", **summary(timed[(m, d)])}
        for (m, d) in cmc_cases
    ]
    ours50 = next(
        (
            r
            for r in rows
            if r["implementation"] == "framelens"
            and r["tracker"] == "bytetrack"
            and r["objects"] == 50
        ),
        None,
    )
    import cv2

    before_after = []
    for name, kind, n in cases if baseline else []:
        if name not in ("framelens", "framelens-stage"):
            continue
        now, then = timed[(name, kind, n)], timed[(f"{name}@{baseline}", kind, n)]
        before_after.append(
            {
                "what": "stage" if name.endswith("stage") else "tracker",
                "tracker": kind,
                "objects": n,
                "before_ms": summary(then)["ms_per_frame_median"],
                "after_ms": summary(now)["ms_per_frame_median"],
                "before_cpu_ms": summary(then)["cpu_ms_per_frame_median"],
                "after_cpu_ms": summary(now)["cpu_ms_per_frame_median"],
                **paired_speedup(then, now),
            }
        )

    result = {
        "benchmark": "trackers",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "date_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {**machine(load_before, load_after), "opencv": cv2.__version__},
        "method": {
            "frames_per_run": args.frames,
            "settle_frames": args.settle,
            "runs": args.runs,
            "warm_up_runs": 1,
            "scene": "objects at random constant velocities over 1920x1080, 1.5 px jitter, "
            "5% missed, 10% scored 0.2-0.45, one enters as one leaves",
            "botsort": "tracker timed with cmc='none'; camera-motion compensation in 'cmc'",
        },
        "target": {
            "bytetrack_50_objects_ms": 0.5,
            "met_wall": None if ours50 is None else ours50["ms_per_frame_median"] < 0.5,
            "met_cpu": None if ours50 is None else ours50["cpu_ms_per_frame_median"] < 0.5,
        },
        "note": args.note,
        "revision": subprocess_rev("HEAD") + ("+changes" if _dirty() else ""),
        "baseline": None
        if baseline is None
        else {"revision": baseline, "before_after": before_after},
        "trackers": rows,
        "cmc": cmc_rows,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.output.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    tmp.replace(args.output)
    for r in rows:
        spread = r["spread_ms"]
        print(
            f"{r['implementation']:18s} {r['tracker']:9s} {r['objects']:4d} objects: "
            f"{r['ms_per_frame_median']:.3f} ms/frame "
            f"(runs {spread['min']:.3f}-{spread['max']:.3f}; "
            f"CPU {r['cpu_ms_per_frame_median']:.3f})"
        )
    for change in before_after:
        print(
            f"{change['what']:7s} {change['tracker']:9s} {change['objects']:4d} objects: "
            f"{change['before_ms']:.3f} -> {change['after_ms']:.3f} ms/frame, "
            f"{change['speedup_median_of_paired_runs']:.2f}x (CPU "
            f"{change['speedup_cpu_median_of_paired_runs']:.2f}x)"
        )
    for r in cmc_rows:
        print(
            f"cmc {r['method']:6s} /{r['downscale']}: {r['ms_per_frame_median']:.2f} ms/frame "
            f"(CPU {r['cpu_ms_per_frame_median']:.2f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
