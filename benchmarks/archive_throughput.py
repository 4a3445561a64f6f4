"""Archive throughput: one batch of the person sample copied 8 times, run here in one
process (``framelens batch``) and on Ray with 1 and 2 workers, side by side in one run.

    python3 benchmarks/archive_throughput.py --frames 400 \
        --output benchmarks/results/archive-cpu-<date>.json
    python3 benchmarks/archive_throughput.py --device cuda:0 --output $OUT/archive-h200-<date>.json

Modes, each a fresh output folder (so nothing is skipped):
- ``local``: no Ray, the default (on the CPU one single-threaded inference worker per
  core; on CUDA the GPU pipeline);
- ``local-1``: no Ray, one inference worker: the work one Ray CPU actor does;
- ``ray-1``, ``ray-2``: Ray actors on a local cluster started once before the runs (as a
  running cluster would be): one CPU each, or on CUDA a GPU share each
  (``--gpus-per-worker``, by default 1 for one worker and 0.5 for two on one GPU).
After a warm-up of each mode (models loaded, Ray's workers started once), the modes run
``--repeats`` times in turn; the JSON has every wall time, the medians, fps and their
ratios, the time to the first frame processed (engines loaded; on Ray the actors'
processes started too), the steady fps after it, Ray's start (ray.init of a new local
instance, once) and Ray's overhead per file: the time after the first frame, ray-1
against local-1 (the same work with and without Ray), over the files.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"


def copy_sample(folder: Path, copies: int, frames: int | None) -> list[str]:
    """``copies`` copies of the sample (its first ``frames`` frames, packets copied as
    they are: the same pixels), as an archive folder holds them."""
    import av

    first = folder / "cam-1.mp4"
    if frames is None:
        shutil.copyfile(SAMPLE, first)
    else:
        with av.open(str(SAMPLE)) as inp, av.open(str(first), "w") as out:
            stream = inp.streams.video[0]
            target = out.add_stream_from_template(stream)
            for n, packet in enumerate(p for p in inp.demux(stream) if p.dts is not None):
                if n >= frames:
                    break
                packet.stream = target
                out.mux(packet)
    paths = [str(first)]
    for k in range(2, copies + 1):
        paths.append(str(shutil.copyfile(first, folder / f"cam-{k}.mp4")))
    return paths


def run_mode(mode: str, folder: Path, settings: Any, args: argparse.Namespace) -> dict[str, Any]:
    from framelens.core.sessions.archive import run_batch

    out = Path(tempfile.mkdtemp(prefix=f"fl-archive-{mode}-"))
    options: dict[str, Any] = {}
    if mode == "local-1":
        settings = replace(settings, threads=1) if settings.device == "cpu" else settings
    if mode.startswith("ray-"):
        workers = int(mode.split("-")[1])
        gpus = args.gpus_per_worker or (1.0 / workers)
        options = {"ray": "local", "workers": workers, "gpus_per_worker": gpus}
    first: list[float] = []

    def on_progress(event: Any) -> None:
        if not first and event.frames_done > 0:
            first.append(time.perf_counter())

    try:
        start = time.perf_counter()
        summary = run_batch(
            [str(folder)], out, settings, progress=False, on_progress=on_progress, **options
        )
        wall = time.perf_counter() - start
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if summary.done != args.copies:
        raise SystemExit(f"{mode}: {summary.failed} inputs failed: {summary.inputs}")
    to_first = first[0] - start if first else wall
    return {"wall_s": round(wall, 3), "first_frame_s": round(to_first, 3), "frames": summary.frames}


def ray_start_s(device: str) -> float:
    """How long a new local Ray instance takes to start (and stop)."""
    import ray

    start = time.perf_counter()
    ray.init(**_ray_options(device))
    took = time.perf_counter() - start
    ray.shutdown()
    return round(took, 3)


def _ray_options(device: str) -> dict[str, Any]:
    return {
        "num_cpus": os.cpu_count() or 1,
        "num_gpus": 1 if device.startswith("cuda") else 0,
        "include_dashboard": False,
        "log_to_driver": False,
        "logging_level": logging.WARNING,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda:N (GPU actors then)")
    parser.add_argument("--copies", type=int, default=8)
    parser.add_argument("--frames", type=int, default=None, help="of each copy (default: all)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--gpus-per-worker", type=float, default=None)
    parser.add_argument("--modes", default="local,local-1,ray-1,ray-2")
    parser.add_argument("--output", metavar="FILE.json")
    args = parser.parse_args()

    import ray
    from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
    from framelens.core.pipeline.build import default_batch
    from framelens.core.pipeline.settings import PipelineSettings

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    load_before = os.getloadavg()[0]  # another job on the machine skews every mode
    folder = Path(tempfile.mkdtemp(prefix="fl-archive-in-"))
    try:
        paths = copy_sample(folder, args.copies, args.frames)
        settings = default_batch(
            PipelineSettings(resolve_model(DEFAULT_MODEL), device=args.device), paths[0]
        )
        started = ray_start_s(args.device)
        ray.init(**_ray_options(args.device))
        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
        for mode in modes:  # warm-up: caches, Ray's worker processes
            print(f"warm-up {mode}", file=sys.stderr)
            run_mode(mode, folder, settings, args)
        for r in range(args.repeats):
            for mode in modes:
                runs[mode].append(run_mode(mode, folder, settings, args))
                print(f"run {r + 1} {mode}: {runs[mode][-1]}", file=sys.stderr)
        ray.shutdown()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    frames = runs[modes[0]][0]["frames"]
    median = {m: round(statistics.median(x["wall_s"] for x in runs[m]), 3) for m in modes}
    fps = {m: round(frames / median[m], 1) for m in modes}
    to_first = {m: round(statistics.median(x["first_frame_s"] for x in runs[m]), 3) for m in modes}
    after = {m: median[m] - to_first[m] for m in modes}
    steady = {m: round(frames / after[m], 1) for m in modes}
    ratios = {}
    for a, b in (
        ("ray-1", "local-1"),
        ("ray-2", "ray-1"),
        ("ray-2", "local"),
        ("local", "local-1"),
    ):
        if a in fps and b in fps:
            ratios[f"{a}_fps_over_{b}"] = round(fps[a] / fps[b], 3)
    result: dict[str, Any] = {
        "command": "python3 benchmarks/archive_throughput.py " + " ".join(sys.argv[1:]),
        "device": args.device,
        "cpu_count": os.cpu_count(),
        "load_average_1min": {
            "before": round(load_before, 2),
            "after": round(os.getloadavg()[0], 2),
        },
        "video": SAMPLE.name,
        "copies": args.copies,
        "frames_per_copy": frames // args.copies,
        "frames": frames,
        "model": settings.model.name,
        "batch": settings.batch,
        "repeats": args.repeats,
        "median_wall_s": median,
        "fps": fps,
        "ratios": ratios,
        "first_frame_s": to_first,
        "steady_fps": steady,
        "ray_start_s": started,
        "runs_wall_s": {m: [x["wall_s"] for x in runs[m]] for m in modes},
    }
    if "ray-1" in median and "local-1" in median:
        per_file = (after["ray-1"] - after["local-1"]) / args.copies
        result["ray_overhead_per_file_s"] = round(per_file, 3)
    text = json.dumps(result, indent=2)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
