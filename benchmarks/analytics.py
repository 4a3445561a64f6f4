"""What lines, zones and events cost per frame: the analytics stage (core/stages/analytics)
on 50 tracked objects against 10 lines and zones (5 lines, 5 zones), and, for context,
against 20 (10 and 10) and with 200 objects.

    .venv/bin/python benchmarks/analytics.py \
        --output benchmarks/results/analytics-cpu-2core-<date>.json

The scene: objects moving at random constant velocities across a 1920x1080 frame with
1.5 px of jitter, each its own track ID, replaced by a new track when it leaves; lines
across the frame at random (every object crosses some), zones random convex polygons
(quadrilaterals) with loitering on. Tracked ``Detections`` are made before timing. One
run: a new stage takes ``--frames`` frames, the first ``--settle`` untimed, the rest
timed frame by frame (``time.perf_counter`` around ``AnalyticsStage.update``, and
``time.thread_time``: CPU time, which other processes' load does not inflate). One
untimed warm-up run, then ``--runs`` runs. Reported per case: the median of the runs'
mean per-frame times, their spread (min, max, inter-quartile range over runs), the
median and p95 over every timed frame, the median CPU time, and the events per frame.
Target (issue 28): under 0.2 ms per frame at 50 tracks and 10 lines and zones.

The wall case (``wall``): 16 sources, each its own drawn stage (as each tile of the video
wall has: core/sessions/wall_zones.py), each with 50 tracks and 10 lines and zones of its
own; a wall frame is one frame of every source through ``AnalyticsStage.__call__`` (the
events and the tile's layer with its counts). Reported: milliseconds per wall frame (all
16 sources) and per source frame, and the share of a 30 fps frame's 33 ms they take:
the events of 16 sources stay live when that share is small.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from framelens.core.stages.analytics import AnalyticsStage, LineSpec, ZonesFile, ZoneSpec
from framelens.core.types import Detections, Frame, FrameResult, StageTimes

WIDTH, HEIGHT = 1920, 1080


def scene(objects: int, frames: int, seed: int) -> list[Detections]:
    rng = np.random.default_rng(seed)
    next_id = 1

    def spawn() -> list[float]:
        nonlocal next_id
        w = rng.uniform(30, 80)
        next_id += 1
        return [rng.uniform(0, WIDTH), rng.uniform(0, HEIGHT), rng.uniform(-8, 8),
                rng.uniform(-6, 6), w, 2 * w, next_id - 1]  # fmt: skip

    things = [spawn() for _ in range(objects)]
    out: list[Detections] = []
    for _ in range(frames):
        boxes, ids = [], []
        for i, (x, y, vx, vy, w, h, tid) in enumerate(things):
            x, y = x + vx, y + vy
            if not (0 <= x <= WIDTH and 0 <= y <= HEIGHT):
                things[i] = spawn()
                continue
            things[i][:2] = [x, y]
            jx, jy = rng.normal(0, 1.5, 2)
            boxes.append([x + jx - w / 2, y + jy - h / 2, x + jx + w / 2, y + jy + h / 2])
            ids.append(tid)
        n = len(boxes)
        out.append(
            Detections(np.array(boxes, np.float32).reshape(-1, 4), np.ones(n, np.float32),
                       np.zeros(n, np.int32), track_ids=np.array(ids, np.int64))
        )  # fmt: skip
    return out


def layout(lines: int, zones: int, seed: int) -> ZonesFile:
    rng = np.random.default_rng(seed)
    made_lines = tuple(
        LineSpec(f"line{i}", (float(rng.uniform(0, WIDTH)), 0.0),
                 (float(rng.uniform(0, WIDTH)), float(HEIGHT)))
        for i in range(lines)
    )  # fmt: skip
    made_zones = []
    for i in range(zones):
        cx, cy = rng.uniform(200, WIDTH - 200), rng.uniform(200, HEIGHT - 200)
        r = rng.uniform(80, 200, 4)
        corners = tuple(
            (float(cx + r[k] * np.cos(a)), float(cy + r[k] * np.sin(a)))
            for k, a in enumerate(np.linspace(0, 2 * np.pi, 4, endpoint=False))
        )
        made_zones.append(ZoneSpec(f"zone{i}", corners, loiter_s=2.0))
    return ZonesFile(made_lines, tuple(made_zones))


def one_run(
    spec: ZonesFile, frames: list[Detections], settle: int
) -> tuple[list[float], float, int]:
    stage = AnalyticsStage(spec)
    wall: list[float] = []
    cpu = 0.0
    events = 0
    for index, detections in enumerate(frames):
        t0, c0 = time.perf_counter(), time.thread_time()
        made = stage.update(index, index / 30.0, detections)
        t1, c1 = time.perf_counter(), time.thread_time()
        if index >= settle:
            wall.append((t1 - t0) * 1000.0)
            cpu += (c1 - c0) * 1000.0
            events += len(made)
    timed = len(wall)
    return wall, cpu / timed, events


def case(objects: int, lines: int, zones: int, args: argparse.Namespace) -> dict[str, Any]:
    frames = scene(objects, args.frames, seed=objects)
    spec = layout(lines, zones, seed=lines * 100 + zones)
    one_run(spec, frames, args.settle)  # warm-up
    runs = [one_run(spec, frames, args.settle) for _ in range(args.runs)]
    means = [float(np.mean(w)) for w, _, _ in runs]
    every = np.concatenate([w for w, _, _ in runs])
    q1, q3 = np.percentile(means, [25, 75])
    timed = args.frames - args.settle
    return {
        "objects": objects,
        "lines": lines,
        "zones": zones,
        "ms_per_frame_median_of_runs": round(float(np.median(means)), 4),
        "runs_min_max": [round(min(means), 4), round(max(means), 4)],
        "runs_iqr": round(float(q3 - q1), 4),
        "frame_median_ms": round(float(np.median(every)), 4),
        "frame_p95_ms": round(float(np.percentile(every, 95)), 4),
        "cpu_ms_per_frame_median": round(float(np.median([c for _, c, _ in runs])), 4),
        "events_per_frame": round(runs[0][2] / timed, 3),
        "runs": args.runs,
        "timed_frames_per_run": timed,
    }


def wall_run(
    specs: list[ZonesFile], scenes: list[list[Detections]], settle: int
) -> tuple[list[float], float]:
    """One run of the wall: every source's next frame through its drawn stage, in turn."""
    stages = [AnalyticsStage(spec, drawn=True) for spec in specs]
    image = np.zeros((2, 2, 3), np.uint8)  # the stage looks at no pixel
    wall: list[float] = []
    cpu = 0.0
    for index in range(len(scenes[0])):
        results = [
            FrameResult(Frame(image, index, index / 30.0, source_id=k), scene[index], StageTimes())
            for k, scene in enumerate(scenes)
        ]
        t0, c0 = time.perf_counter(), time.thread_time()
        for stage, result in zip(stages, results, strict=True):
            stage(result)
        t1, c1 = time.perf_counter(), time.thread_time()
        if index >= settle:
            wall.append((t1 - t0) * 1000.0)
            cpu += (c1 - c0) * 1000.0
    return wall, cpu / len(wall)


def wall_case(sources: int, objects: int, args: argparse.Namespace) -> dict[str, Any]:
    scenes = [scene(objects, args.frames, seed=1000 + k) for k in range(sources)]
    specs = [layout(5, 5, seed=2000 + k) for k in range(sources)]
    wall_run(specs, scenes, args.settle)  # warm-up
    runs = [wall_run(specs, scenes, args.settle) for _ in range(args.runs)]
    means = [float(np.mean(w)) for w, _ in runs]
    every = np.concatenate([w for w, _ in runs])
    median = float(np.median(means))
    return {
        "wall_sources": sources,
        "objects_per_source": objects,
        "lines_and_zones_per_source": 10,
        "ms_per_wall_frame_median_of_runs": round(median, 4),
        "runs_min_max": [round(min(means), 4), round(max(means), 4)],
        "wall_frame_p95_ms": round(float(np.percentile(every, 95)), 4),
        "ms_per_source_frame": round(median / sources, 4),
        "cpu_ms_per_wall_frame_median": round(float(np.median([c for _, c in runs])), 4),
        "share_of_30fps_frame": round(median / (1000.0 / 30.0), 4),
        "runs": args.runs,
        "timed_frames_per_run": args.frames - args.settle,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--frames", type=int, default=630)
    p.add_argument("--settle", type=int, default=30)
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--output", type=Path)
    args = p.parse_args(argv)
    load_before = os.getloadavg()
    cases = [case(50, 5, 5, args), case(50, 10, 10, args), case(200, 5, 5, args),
             wall_case(16, 50, args)]  # fmt: skip
    result = {
        "benchmark": "analytics",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "date_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "load_average_before": [round(v, 2) for v in load_before],
            "load_average_after": [round(v, 2) for v in os.getloadavg()],
        },
        "target": "under 0.2 ms per frame at 50 tracks and 10 lines and zones (issue 28)",
        "cases": cases,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.output:
        args.output.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
