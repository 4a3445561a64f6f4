"""How long closing takes while a heavy model's engine call is under way.

    python3 benchmarks/stop_latency.py [--baseline REV] [--runs 5] [--settle 3]
                                       [--output benchmarks/results/stop-latency-....json]

Closing a wall of CPU super-resolution held the window for 24-30 s: the executor waited
for each worker to finish its batch, a frame of tiles of seconds each. Each run, in a
fresh process: the wall's session (``WallPlayer``) over the sample, with the heavy
super-resolution graph of tests/unit/onnx_factory.py (ESRGAN-like, 512-channel 3x3
convolutions) on the CPU with two threads, left to work ``--settle`` seconds (its first
frame's calls under way: the frame takes ~24 s on 2 cores), then closed. Reported: the
close's seconds, median and spread of ``--runs`` runs, and how many results had come.

``--baseline REV`` alternates, run by run, with REV's code (a git worktree, as
benchmarks/handoff.py does) and reports the ratio of the median closes (now over REV).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
sys.path.insert(0, str(HERE))

from handoff import revision_tree, spread  # noqa: E402
from host_monitor import machine  # noqa: E402
from scratch import scratch_folder  # noqa: E402


def one_close(model: str, settle_s: float) -> dict[str, Any]:
    """The child: open the wall, let it work, close it; what it took."""
    from framelens.core.models.catalog import resolve_model
    from framelens.core.pipeline.settings import PipelineSettings
    from framelens.core.sessions.wall import WallPlayer

    results: list[float] = []
    errors: list[str] = []
    wall = WallPlayer(
        lambda _result: results.append(time.perf_counter()),
        lambda _state: None,
        errors.append,
        realtime=False,
    )
    wall.open([str(SAMPLE)], PipelineSettings(resolve_model(model), threads=2))
    time.sleep(settle_s)
    t0 = time.perf_counter()
    wall.close()
    close_s = time.perf_counter() - t0
    import framelens

    return {
        "close_s": close_s,
        "results_before_close": len(results),
        "errors": errors,
        "code": str(Path(framelens.__file__).resolve().parent),
    }


def child(model: str, settle_s: float, path: Path | None) -> dict[str, Any]:
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = str(path) + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, __file__, "--child", "--model", model, "--settle", str(settle_s)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--settle", type=float, default=3.0, help="seconds before the close")
    parser.add_argument("--baseline", metavar="REV", help="alternate with REV's code")
    parser.add_argument("--output")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_close(args.model, args.settle)))
        return 0
    if args.runs < 1 or args.settle < 0:
        parser.error("--runs must be at least 1 and --settle not negative")

    sys.path.insert(0, str(ROOT / "tests" / "unit"))
    from onnx_factory import heavy_superres_model

    model = str(heavy_superres_model(scratch_folder("fl-stop-") / "heavy-sr.onnx"))
    result: dict[str, Any] = {
        "command": "python benchmarks/stop_latency.py " + " ".join(sys.argv[1:]),
        "machine": machine(),
        "what": "seconds WallPlayer.close() takes, the heavy SR graph's first frame under way "
        "on the CPU (2 threads)",
        "settle_s": args.settle,
        "baseline": args.baseline,
    }
    runs: dict[str, list[dict[str, Any]]] = {"now": [], "baseline": []}
    with contextlib.ExitStack() as stack:
        base = stack.enter_context(revision_tree(args.baseline)) if args.baseline else None
        order = [("now", None), ("baseline", base)] if base is not None else [("now", None)]
        for n in range(args.runs):
            for name, path in order:
                run = child(model, args.settle, path)
                runs[name].append(run)
                print(f"run {n + 1}, {name}: close {run['close_s']:.2f} s", flush=True)
    for name, done in runs.items():
        if done:
            result[name] = {
                "close_s": spread([r["close_s"] for r in done]),
                "close_s_runs": [round(r["close_s"], 2) for r in done],
                "results_before_close": [r["results_before_close"] for r in done],
                "errors": sorted({e for r in done for e in r["errors"]}),
            }
    if base is not None:
        result["close_ratio_now_over_baseline"] = round(
            result["now"]["close_s"]["median"] / result["baseline"]["close_s"]["median"], 3
        )
    text = json.dumps(result, indent=2)
    if args.output:  # whole or not at all
        out = Path(args.output)
        tmp = out.with_name(out.name + ".part")
        tmp.write_text(text + "\n")
        tmp.replace(out)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
