"""How long a short ESRGAN run takes to start, and what its set-up choices cost.

``framelens run`` (in process: ``run_to_outputs``) of the first ``--frames`` frames of a
960x540 video through ESRGAN-thick x2 FP16 on the GPU, the configurations of ``--configs``
alternated run by run (round robin, ``--runs`` rounds), each run building its engines
afresh as a user's run does. A configuration is ``SEARCH:WORKERS[:WARM]``: cuDNN's
algorithm search (``FRAMELENS_CUDNN_SEARCH``: exhaustive, heuristic; ``plan`` for the
plan's own choice), the inference workers, and the super-resolution pipeline's warm-up:
the product's own where WARM is left out (since 0f94134 none for a heavy model),
``blank`` for its call on a 64x64 blank before the first frame (what every model did
before 0f94134), ``nowarm`` for none; patched in this process only. Per run:
the whole call, the time to the first frame done, the steady rate after it, the
summary's fps and p50/p99 per frame; per configuration the median and spread of each,
and its ratio to the first configuration.

    python3 benchmarks/sr_startup.py --configs exhaustive:2:blank,exhaustive:2 \\
        --output benchmarks/results/h200-sr-startup-<date>.json

The JSON is rewritten after every run, so a call cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from make_1080p import make_1080p  # noqa: E402
from superres import ESRGAN, _commit  # noqa: E402

SEARCH_ENV = "FRAMELENS_CUDNN_SEARCH"


def parse_configs(text: str) -> list[tuple[str, int, str]]:
    """``exhaustive:2:blank,heuristic:1`` -> [("exhaustive", 2, "blank"),
    ("heuristic", 1, "")] (the last: the warm-up, "" the product's own)."""
    configs = []
    for item in text.split(","):
        search, workers, *rest = [*item.split(":"), ""]
        rest = [r for r in rest if r]
        if (
            search not in ("exhaustive", "heuristic", "plan")
            or not workers.isdigit()
            or rest not in ([], ["blank"], ["nowarm"])
        ):
            raise SystemExit(f"--configs: {item!r} is not SEARCH:WORKERS[:blank|:nowarm]")
        configs.append((search, int(workers), rest[0] if rest else ""))
    return configs


def one_run(
    video: str, settings: Any, frames: int, search: str, workers: int, warm: str
) -> dict[str, Any]:
    """One run of ``frames`` frames with ``search``, ``workers`` and ``warm``."""
    from framelens.core.sessions.runs import run_to_outputs
    from framelens.core.stages.tasks.superres import device as sr_device

    half = sr_device.SuperResDevice
    original = half.__dict__.get("_original_warm_up") or half.warm_up
    half._original_warm_up = original  # type: ignore[attr-defined]
    half.warm_up = (lambda self: None) if warm == "nowarm" else original  # type: ignore[method-assign]
    heavy = sr_device.__dict__.get("_original_is_heavy") or sr_device.is_heavy
    sr_device._original_is_heavy = heavy  # type: ignore[attr-defined]
    sr_device.is_heavy = (lambda spec: False) if warm == "blank" else heavy  # the blank's call

    if search == "plan":
        os.environ.pop(SEARCH_ENV, None)
    else:
        os.environ[SEARCH_ENV] = search
    seen: list[tuple[float, int]] = []
    t0 = time.perf_counter()
    summary = run_to_outputs(
        video, settings, frames=frames, progress=False, workers=workers,
        on_progress=lambda done, _total: seen.append((time.perf_counter(), done)),
    )  # fmt: skip
    wall = time.perf_counter() - t0
    first = next((t - t0 for t, n in seen if n > 0), None)
    after = [(t, n) for t, n in seen if n > 0]
    steady = None
    if len(after) >= 2 and after[-1][1] > after[0][1]:
        steady = (after[-1][1] - after[0][1]) / (after[-1][0] - after[0][0])
    source = summary.sources[0]
    engine = summary.plan.get("engine", {}) if isinstance(summary.plan, dict) else {}
    return {
        "wall_s": round(wall, 2),
        "first_frame_s": None if first is None else round(first, 2),
        "steady_fps": None if steady is None else round(steady, 2),
        "fps": summary.fps,
        "frames": summary.frames,
        "p50_ms": source.p50_ms,
        "p99_ms": source.p99_ms,
        "engine_options": engine.get("value"),
        "workers": (summary.plan.get("workers") or {}).get("value")
        if isinstance(summary.plan, dict)
        else None,
    }


def _stats(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "median": round(statistics.median(values), 2),
        "min": round(min(values), 2),
        "max": round(max(values), 2),
        "spread": round(max(values) - min(values), 2),
    }


def summarize(runs: dict[str, list[dict[str, Any]]], first: str) -> dict[str, Any]:
    keys = ("wall_s", "first_frame_s", "steady_fps", "fps", "p99_ms")
    out: dict[str, Any] = {}
    for name, rows in runs.items():
        out[name] = {k: _stats([r[k] for r in rows if r[k] is not None]) for k in keys}
        out[name]["runs"] = len(rows)
    base = out.get(first, {}).get("wall_s")
    for name in out:
        mine = out[name].get("wall_s")
        if base and mine:
            out[name]["wall_s_over_first"] = round(mine["median"] / base["median"], 3)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--esrgan", default=str(ESRGAN))
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--configs", default="exhaustive:2:blank,exhaustive:2")
    parser.add_argument("--frames", type=int, default=40)
    parser.add_argument("--runs", type=int, default=5, help="rounds of every configuration")
    parser.add_argument("--warm-up", type=int, default=1, help="runs before the timed ones")
    parser.add_argument("--output")
    args = parser.parse_args()
    configs = parse_configs(args.configs)

    from framelens.core.models.catalog import resolve_model
    from framelens.core.pipeline import build
    from framelens.core.pipeline.settings import PipelineSettings

    video = str(Path(tempfile.gettempdir()) / "framelens-person-540p.mp4")
    if not Path(video).is_file():
        make_1080p(video, frames=args.frames + 30, size=(960, 540))
    spec = resolve_model(args.esrgan)
    settings = PipelineSettings(spec, device=args.device, precision="fp16")
    build.resolve(settings)  # the FP16 graph converted and cached before any run
    names = [f"{s}:{w}" + (f":{warm}" if warm else "") for s, w, warm in configs]
    result: dict[str, Any] = {
        "command": "python3 benchmarks/sr_startup.py " + " ".join(sys.argv[1:]),
        "code": _commit(),
        "model": spec.path.name,
        "video": "person sample scaled to 960x540, H.264 yuv420p (make_1080p.py)",
        "frames": args.frames,
        "configs": names,
        "runs": {n: [] for n in names},
    }

    def save() -> None:
        result["summary"] = summarize(result["runs"], names[0])
        if args.output:
            out = Path(args.output)
            tmp = out.with_name(f".{out.name}.partial")
            tmp.write_text(json.dumps(result, indent=2) + "\n")
            os.replace(tmp, out)

    started = time.perf_counter()
    for _ in range(args.warm_up):  # the process's first CUDA, cuDNN and decoder loads
        one_run(video, settings, args.frames, *configs[-1])
    for r in range(args.runs):
        for name, config in zip(names, configs, strict=True):
            row = one_run(video, settings, args.frames, *config)
            result["runs"][name].append(row)
            save()
            print(f"[{time.perf_counter() - started:6.1f} s] round {r + 1} {name}: "
                  f"{row['wall_s']} s whole, first frame {row['first_frame_s']} s, "
                  f"steady {row['steady_fps']} fps", flush=True)  # fmt: skip
    save()
    print(json.dumps(result["summary"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
