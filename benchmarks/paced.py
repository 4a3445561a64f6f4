"""Live cameras: how many 1080p30 sources one device keeps up with, every frame in time.

    python3 benchmarks/streams.py --paced --output h200-paced-<date>.json   # the H200's
    python3 benchmarks/streams.py --paced --device cpu --sources 1,2 --seconds 2 \\
        --settle-s 0.5 --video SMALL.mp4 --step 1                          # the same, small

N copies of a 1080p30 file, each played at its own real time as a camera delivers it
(``framelens run --realtime``: core/stages/sources/paced.py; a frame is released at its
timestamp, decoded once released, and dropped, counted, if the product's reader has not
taken it before the next is released), through the product's several-source run
(run_many: the sessions, processes as ``framelens run`` spreads them, ``--processes``
auto), detection and ByteTrack tracking on, detections written per source. The cameras
of a process are switched on together, so their frames come at nearly the same instants
(the worst case for latency, the best for batching). Latency per
frame: from its release to its result, after the tracker (a probe stage chained after
it writes each frame's index, pts and end-to-end time; paced_probe.py).

Per N (``runs``): ``sources``; ``dropped``: frames of the measured window (camera time
after ``settle_s``: the start's engine calls at new batch sizes and the processes'
spin-up are left out, and shown apart) not processed; ``p99_ms``/``p50_ms`` over every
frame of every source in that window; the same over the whole run
(``dropped_whole_run``: the sources' own count, ``p99_ms_whole_run``); the host's and
the GPU's meters over the window (host_monitor.py: each process's CPU in % of one core,
the host's, GPU and NVDEC utilization). ``passed``: none dropped and p99 under
``--p99-ms`` (100) in the window.

The search: ``--sources`` in turn (16, 32, ... 96) until one fails, then halving the gap
between the last that passed and the first that failed down to ``--step`` sources;
``max_live_sources`` is the largest N that passed; ``first_limit`` says what the meters
showed at the smallest N that failed (NVDEC, the engine, the host's CPU, one process's
GIL), a reading of the meters, not a proof. The JSON is rewritten after each N; a
``--budget-s`` stops the search before an N that would not fit (the result then says
it is a lower bound).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from host_monitor import HostMonitor, machine  # noqa: E402
from paced_probe import LatencyProbe, read_probe  # noqa: E402

P99_LIMIT_MS = 100.0
TARGET_SOURCES = 64


def window_figures(
    probes: list[dict[str, np.ndarray]], frames: int, fps: float, settle_s: float
) -> dict[str, Any]:
    """What the probes saw: drops and latency in the window after ``settle_s`` and over
    the whole run. A frame index of the run's range that no probe saw was dropped."""
    first = math.ceil(settle_s * fps - 1e-9)  # the window's first frame index
    window: list[np.ndarray] = []
    everything: list[np.ndarray] = []
    dropped = missing_all = 0
    worst = 0.0
    t_first, t_last = math.inf, -math.inf
    for p in probes:
        idx, e2e, t = p["index"], p["e2e"], p["t"]
        inside = idx >= first
        seen = len(np.unique(idx[inside]))
        dropped += max(0, frames - first) - seen
        missing_all += frames - len(np.unique(idx))
        window.append(e2e[inside])
        everything.append(e2e)
        if inside.any():
            worst = max(worst, float(np.percentile(e2e[inside], 99)))
            t_first, t_last = min(t_first, float(t[inside].min())), max(t_last, float(t.max()))
    win = np.concatenate(window) if window else np.zeros(0)
    allx = np.concatenate(everything) if everything else np.zeros(0)

    def pct(x: np.ndarray, q: float) -> float | None:
        return round(float(np.percentile(x, q)), 2) if len(x) else None

    return {
        "dropped": int(dropped),
        "p50_ms": pct(win, 50),
        "p99_ms": pct(win, 99),
        "p99_ms_worst_source": round(worst, 2),
        "max_ms": pct(win, 100),
        "frames_in_window": len(win),
        "missing_whole_run": int(missing_all),
        "p50_ms_whole_run": pct(allx, 50),
        "p99_ms_whole_run": pct(allx, 99),
        "window_s": [t_first / 1000.0, t_last / 1000.0] if win.size else None,
    }


def limit_of(row: dict[str, Any]) -> dict[str, Any]:
    """What the meters of a failed N point to (the first that reads at its limit)."""
    m = row.get("meters") or {}
    dec, gpu, host = (
        m.get("decoder_pct_median"),
        m.get("gpu_pct_median"),
        m.get("host_cpu_pct_median"),
    )
    groups = [p for p in m.get("processes", []) if not p["this"]]
    busiest = max((p["cpu_pct_median"] for p in groups), default=None)
    read = {"decoder_pct": dec, "gpu_pct": gpu, "host_cpu_pct": host,
            "busiest_process_cpu_pct": busiest}  # fmt: skip
    if row.get("errors"):
        return {"what": "failures", "why": row["errors"][0], **read}
    if dec is not None and dec >= 85:
        return {"what": "NVDEC", "why": f"the decoders {dec}% busy", **read}
    if gpu is not None and gpu >= 90:
        return {"what": "engine", "why": f"the GPU {gpu}% busy", **read}
    if host is not None and host >= 85:
        return {"what": "host CPU", "why": f"the host's cores {host}% busy", **read}
    if busiest is not None and 85 <= busiest <= 160:
        return {
            "what": "GIL",
            "why": f"a process of the run at {busiest}% of one core while the GPU, NVDEC "
            "and the host have room: its Python threads wait for one lock",
            **read,
        }
    return {"what": "unclear", "why": "no meter at its limit: see p99_ms and stage_ms", **read}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="streams.py --paced")
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--sources", default="16,32,48,64,80,96", help="the ladder of N")
    parser.add_argument("--step", type=int, default=4, help="the search stops this close")
    parser.add_argument("--seconds", type=float, default=15.0, help="camera time measured")
    parser.add_argument(
        "--settle-s", type=float, default=5.0,
        help="camera time first, not in the window (engines' first calls, spin-up)",
    )  # fmt: skip
    parser.add_argument("--p99-ms", type=float, default=P99_LIMIT_MS)
    parser.add_argument("--processes", default=None, help="N, or auto (framelens run's rule)")
    parser.add_argument("--workers", type=int, default=None, help="inference workers per slot")
    parser.add_argument("--track", default="bytetrack", help="a tracker, or none")
    parser.add_argument("--threads", type=int, default=None, help="ONNX Runtime threads (CPU)")
    parser.add_argument(
        "--precision", default="fp32", choices=("fp32", "fp16", "int8"),
        help="the detector's precision (the product's toggle; fp16 and int8 are made once)",
    )  # fmt: skip
    parser.add_argument("--budget-s", type=float, default=400.0)
    parser.add_argument("--video", help="a 1080p30 video (made from the sample when absent)")
    parser.add_argument("--output")
    args = parser.parse_args(argv)
    began = time.perf_counter()

    def say(text: str) -> None:
        print(f"[paced {time.perf_counter() - began:6.1f}s] {text}", flush=True)

    from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
    from framelens.core.pipeline.devices import device_slots
    from framelens.core.pipeline.settings import PipelineSettings
    from framelens.core.sessions.runs import run_many
    from framelens.core.stages.sources import open_source
    from framelens.core.stages.tracking.settings import TrackerSettings
    from make_1080p import make_1080p
    from streams import save_json

    video = args.video
    if video is None:
        need = int((args.settle_s + args.seconds) * 30) + 30
        video = str(Path(tempfile.gettempdir()) / f"framelens-person-1080p-{need}.mp4")
        if not Path(video).is_file():
            say(f"making {video} ({need} frames)")
            make_1080p(video, frames=need)
    with open_source(video) as src:
        info = src.info
    fps = info.fps if info.fps > 0 else 30.0
    frames = round((args.settle_s + args.seconds) * fps)
    if info.frame_count is not None and info.frame_count < frames:
        raise SystemExit(
            f"{video} holds {info.frame_count} frames; {args.settle_s + args.seconds:g} s at "
            f"{fps:g} fps need {frames}"
        )
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), device=args.device,
                                threads=args.threads, precision=args.precision)  # fmt: skip
    tracker = None if args.track == "none" else TrackerSettings.for_kind(args.track)
    result: dict[str, Any] = {
        "command": "python3 benchmarks/streams.py --paced " + " ".join(argv or sys.argv[1:]),
        "device": args.device,
        "machine": machine(),
        "video": f"{video}: {info.width}x{info.height} at {fps:g} fps",
        "frames_per_source": frames,
        "settle_s": args.settle_s,
        "seconds_measured": args.seconds,
        "tracker": args.track,
        "precision": args.precision,
        "criterion": f"in the window after settle_s: no frame dropped and p99 < "
        f"{args.p99_ms:g} ms (end to end, from the frame's release to its result after "
        "the tracker); the whole run's figures beside",
        "camera_buffer_frames": 1,
        "max_live_sources": None,
        "runs": [],
        "target_sources": TARGET_SOURCES,
    }
    tried: dict[int, dict[str, Any]] = {}

    def one(n: int) -> dict[str, Any]:
        slots, procs = device_slots([args.device], n, args.processes, True)
        with tempfile.TemporaryDirectory() as tmp:
            probe = LatencyProbe(str(Path(tmp) / "probe"))
            Path(probe.folder).mkdir()
            say(f"{n} sources ({len(slots)} process{'es' if procs else ''}) ...")
            t0 = time.perf_counter()
            with HostMonitor(gpu_index=_gpu_index(args.device)) as monitor:
                try:
                    summary = run_many(
                        [video] * n, settings, str(Path(tmp) / "out"), devices=slots,
                        videos=False, frames=frames, progress=False, workers=args.workers,
                        processes=procs, tracker=tracker, stages=probe, realtime=True,
                    )  # fmt: skip
                except Exception as exc:  # this N failed as a whole: said, and the search goes on
                    why = f"{type(exc).__name__}: {exc}".splitlines()[0]
                    say(f"{n} sources: the run failed: {why}")
                    return {"sources": n, "processes": len(slots) if procs else 1,
                            "errors": [why], "passed": False, "dropped": None,
                            "p99_ms": None, "dropped_whole_run": None,
                            "p99_ms_whole_run": None, "meters": monitor.report()}  # fmt: skip
            call_s = time.perf_counter() - t0
            probes = [read_probe(probe.folder, k) for k in range(n)]
        figures = window_figures(probes, frames, fps, args.settle_s)
        window = figures.pop("window_s")
        errors = [s.error for s in summary.sources if s.error]
        dropped_run = sum(s.dropped or 0 for s in summary.sources)
        row: dict[str, Any] = {
            "sources": n,
            "processes": len(slots) if procs else 1,
            **figures,
            "dropped_whole_run": dropped_run,
            "frames": summary.frames,
            "fps": summary.fps,
            "wall_s": round(call_s, 2),
            "mean_batch": summary.mean_batch,
            "batch": summary.batch,
            "inference_workers": summary.inference_workers,
            "path": summary.path,
            "stage_ms": summary.stage_ms,
            "meters": monitor.report(*(window or (None, None))),
        }
        if errors:
            row["errors"] = errors[:3]
        row["passed"] = (
            not errors and row["dropped"] == 0 and row["p99_ms"] is not None
            and row["p99_ms"] < args.p99_ms
        )  # fmt: skip
        m = row["meters"]
        say(f"{n} sources: {'passed' if row['passed'] else 'FAILED'}: dropped {row['dropped']} "
            f"(whole run {dropped_run}), p50 {row['p50_ms']} / p99 {row['p99_ms']} ms "
            f"(whole run {row['p99_ms_whole_run']}), GPU {m['gpu_pct_median']}%, NVDEC "
            f"{m['decoder_pct_median']}%, host CPU {m['host_cpu_pct_median']}%, "
            f"{call_s:.0f} s")  # fmt: skip
        return row

    def record(row: dict[str, Any]) -> None:
        tried[row["sources"]] = row
        result["runs"] = [tried[k] for k in sorted(tried)]
        passed = [k for k, r in tried.items() if r["passed"]]
        failed = [k for k, r in tried.items() if not r["passed"]]
        result["max_live_sources"] = max(passed, default=0)
        strict = [k for k, r in tried.items() if r["passed"] and r["dropped_whole_run"] == 0
                  and (r["p99_ms_whole_run"] or math.inf) < args.p99_ms]  # fmt: skip
        result["max_live_sources_whole_run"] = max(strict, default=0)
        if failed:
            first = tried[min(failed)]
            result["first_limit"] = {"at_sources": first["sources"], **limit_of(first)}
        result["elapsed_s"] = round(time.perf_counter() - began, 1)
        save_json(args.output, result)

    ladder = [int(n) for n in args.sources.split(",")]
    lo, hi = 0, None  # the largest that passed, the smallest that failed
    last_s = 0.0

    def fits() -> bool:
        if time.perf_counter() - began + last_s * 1.2 <= args.budget_s:
            return True
        result["stopped"] = (
            f"by --budget-s {args.budget_s:g} after {len(tried)} runs: max_live_sources is "
            "a lower bound"
        )
        say(result["stopped"])
        save_json(args.output, result)
        return False

    def attempt(n: int) -> bool:
        """N cameras tried and recorded: whether every frame was in time."""
        nonlocal last_s
        t = time.perf_counter()
        row = one(n)
        last_s = time.perf_counter() - t
        record(row)
        return bool(row["passed"])

    for n in ladder:
        if tried and not fits():
            break
        if not attempt(n):
            hi = n
            break
        lo = max(lo, n)
    while hi is not None and hi - lo > args.step and "stopped" not in result:
        n = (lo + hi) // 2
        if not fits():
            break
        if attempt(n):
            lo = n
        else:
            hi = n
    if hi is None and "stopped" not in result:
        result["note"] = f"every N tried passed: {max(ladder)} is a lower bound"
    result["elapsed_s"] = round(time.perf_counter() - began, 1)
    save_json(args.output, result)
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=2))
    say(f"max_live_sources {result['max_live_sources']} (whole run, start included: "
        f"{result.get('max_live_sources_whole_run')}); first limit: "
        f"{result.get('first_limit', {}).get('what')}")  # fmt: skip
    return 0


def _gpu_index(device: str) -> int | None:
    if not device.startswith("cuda"):
        return None
    _, _, index = device.partition(":")
    return int(index or 0)


if __name__ == "__main__":
    sys.exit(main())
