"""Many streams on one device: aggregate detection throughput against the hardware's limit.

    python3 benchmarks/streams.py --output h200-streams-<date>.json     # the H200's default
    python3 benchmarks/streams.py --sources 16 --processes 4 --repeats 5 --ceiling 16x4,64x8
    python3 benchmarks/streams.py --device cpu --sources 2 --processes 1,2 --frames 20 \\
        --repeats 2 --ceiling 2x2 --video SMALL.mp4                     # the same, small
    python3 benchmarks/streams.py --paced ...                            # live cameras: paced.py

Rows: every number of sources (``--sources``) with every process count (``--processes``,
as ``framelens run --processes``), each ``--repeats`` times, on the 1080p H.264 video made
from the person sample (make_1080p.py), after one warm-up run. Per row:

- aggregate_fps: the median of ``aggregate_fps_runs`` (every run, in order; spread
  ``aggregate_fps_min_max``): ``framelens run`` with N copies of the video (run_many: N
  decoders, batches across sources, detections written per source; no video export),
  the frames over the span they were processed in; ``wall_s`` (median of ``wall_s_runs``):
  the whole call, processes started, engines built and decoders opened included, and
  ``whole_call_fps`` the frames over it; p50_ms / p99_ms per frame (median of the runs'
  median-of-sources p50 and worst-source p99, every run's in ``*_runs``);
- hardware_nvdec_fps: the hardware's decoding limit measured in the same call
  (``hardware_nvdec``): bare PyNvVideoCodec decoders spread over processes
  (nvdec_ceiling.py), every ``--ceiling`` configuration ``--repeats`` times, the best
  configuration's median; ``of_hardware_nvdec``: aggregate_fps over it;
- product_source_fps: N of the product's own decoding sources in threads of one process
  (no inference); engine_only_fps: the batched engine alone at the run's batch size.

Runs of every row and every ceiling configuration are taken in turn (round after round),
so slow drift of the machine falls on all of them alike. A progress line is printed
after each run and the JSON rewritten (temporary file, then renamed), so a run cut short
keeps what it measured; ``--budget-s`` stops before a round that would not fit.

Also: ``--track [KIND]`` each row with and without a tracker, alternated (tracking_ab.py);
``--profile`` stack samples of the runs with the most sources; ``--ab-host-candidates``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from host_monitor import machine  # noqa: E402
from make_1080p import make_1080p  # noqa: E402
from nvdec_ceiling import kind as ceiling_kind  # noqa: E402
from nvdec_ceiling import measure as ceiling_run  # noqa: E402
from nvdec_ceiling import parse_configs  # noqa: E402
from stack_sampler import StackSampler  # noqa: E402
from tracking_ab import alternate  # noqa: E402

TARGETS = {"aggregate_fps_16": 2400, "of_hardware_nvdec_16": 0.8}


def decode_only_fps(video: str, n: int, frames: int, device: str) -> float:
    """N decoders in threads, each reading ``frames`` frames; frames per second in all."""
    from framelens.core.stages.sources import open_source

    def reader(out: list[int]) -> None:
        if device.startswith("cuda"):
            import pycuda.driver as cuda
            from framelens.core.gpu.context import get_context
            from framelens.core.stages.sources.nvdec import open_gpu_source

            ctx = get_context(device)
            with ctx.active():
                stream = cuda.Stream()
            source = open_gpu_source(video, ctx, stream, pool_size=8)
        else:
            source = open_source(video)
        try:
            count = 0
            while count < frames and (frame := source.read()) is not None:
                release = getattr(frame, "release", None)
                if release is not None:
                    release()  # an NVDEC buffer back to the decoder's pool at once
                count += 1
            out.append(count)
        finally:
            source.close()

    return threads_fps(reader, n)


def threads_fps(reader: Callable[[list[int]], None], n: int) -> float:
    """Run ``reader`` in ``n`` threads at once; the frames they append, per second."""
    done: list[int] = []
    threads = [threading.Thread(target=reader, args=(done,)) for _ in range(n)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / (time.perf_counter() - start)


def engine_only_fps(settings: Any, calls: int = 50) -> float:
    """The batched engine alone: images per second at ``settings.batch``."""
    from framelens.core.pipeline import build

    b = settings.batch
    h, w = settings.model.input_size
    if not settings.device.startswith("cuda"):
        pipeline = build.host_pipeline(settings)
        x = np.zeros((b, 3, h, w), dtype=np.float32)
        try:
            pipeline.engine.infer(x)
            start = time.perf_counter()
            for _ in range(calls):
                pipeline.engine.infer(x)
            return b * calls / (time.perf_counter() - start)
        finally:
            pipeline.close()
    import pycuda.driver as cuda

    pipeline: Any = build.gpu_pipelines(settings, 1)[0]
    try:
        with pipeline.ctx.active():
            buf = cuda.mem_alloc(b * 3 * h * w * 4)
            cuda.memset_d8(buf, 0, b * 3 * h * w * 4)
        shape = (b, 3, h, w)
        pipeline.engine.infer_device(int(buf), shape, np.float32)
        start = time.perf_counter()
        for _ in range(calls):
            pipeline.engine.infer_device(int(buf), shape, np.float32)
        return b * calls / (time.perf_counter() - start)
    finally:
        pipeline.close()


def save_json(path: str | None, data: dict[str, Any]) -> None:
    """``data`` written whole to ``path`` (a temporary file renamed over it)."""
    if not path:
        return
    target = Path(path)
    tmp = target.with_name(f".{target.name}.partial")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, target)


def _median(values: list[float]) -> float:
    return round(float(statistics.median(values)), 2)


def _min_max(values: list[float]) -> list[float]:
    return [round(min(values), 2), round(max(values), 2)]


def summarise_row(row: dict[str, Any], hardware: float | None) -> None:
    """The row's medians and spread from its runs so far, and its share of the ceiling."""
    runs = row["aggregate_fps_runs"]
    if not runs:
        return
    row["aggregate_fps"] = _median(runs)
    row["aggregate_fps_min_max"] = _min_max(runs)
    row["runs"] = len(runs)
    for key in ("wall_s", "whole_call_fps", "p50_ms", "p99_ms", "mean_batch"):
        row[key] = _median(row[f"{key}_runs"])
    row["hardware_nvdec_fps"] = hardware
    row["of_hardware_nvdec"] = round(row["aggregate_fps"] / hardware, 3) if hardware else None
    plain = row.get("no_graphs_fps_runs")
    if plain:  # --graphs-ab: the same runs with engines made without CUDA graphs
        row["no_graphs_fps"] = _median(plain)
        row["no_graphs_fps_min_max"] = _min_max(plain)
        row["graphs_over_no_graphs"] = round(row["aggregate_fps"] / row["no_graphs_fps"], 3)


def summarise_ceiling(configs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Each configuration's median and spread; the best median is the ceiling."""
    for c in configs:
        if c["fps_runs"]:
            c["fps"] = _median(c["fps_runs"])
            c["fps_min_max"] = _min_max(c["fps_runs"])
            c["wall_s"] = _median(c["wall_s_runs"])
    measured = [c for c in configs if c["fps_runs"]]
    if not measured:
        return None
    best = max(measured, key=lambda c: c["fps"])
    return {"streams": best["streams"], "processes": best["processes"], "fps": best["fps"]}


def cpu_seconds() -> float:
    """CPU time (user + system) of this process and its ended children so far."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def cpu_per_frame(cpu: dict[bool, list[float]]) -> dict[str, Any]:
    """The CPU milliseconds per frame of the runs with and without tracking (every
    process of a run together) and their ratio: where tracking's fps loss is CPU the
    machine spends (the ratio near the fps ratio's inverse) or waiting (near 1)."""
    with_, without = statistics.median(cpu[True]), statistics.median(cpu[False])
    return {
        "cpu_ms_per_frame_with": cpu[True],
        "cpu_ms_per_frame_without": cpu[False],
        "cpu_ms_per_frame_ratio": round(with_ / without, 3),
    }


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--paced" in argv:  # live cameras: benchmarks/paced.py
        from paced import main as paced_main

        return paced_main([a for a in argv if a != "--paced"])
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--sources", default="16", help="numbers of sources, a list: 1,16")
    parser.add_argument(
        "--processes", default="8,4",
        help="processes the sources are spread over (device slots of --device, each in a "
        "process of its own: run --processes N), a list sweeps: 1,2,4",
    )  # fmt: skip
    parser.add_argument("--frames", type=int, default=450, help="frames of each source")
    parser.add_argument("--repeats", type=int, default=5, help="runs of every row and ceiling")
    parser.add_argument(
        "--ceiling", default="16x4,16x8,32x8,64x8", metavar="SxP,...",
        help="the hardware ceiling's configurations: S bare decoders over P processes; "
        "'none' leaves it out",
    )  # fmt: skip
    parser.add_argument(
        "--ceiling-frames", type=int, default=None,
        help="frames per decoder of the ceiling (default: --frames, as many as a row's source)",
    )  # fmt: skip
    parser.add_argument(
        "--budget-s", type=float, default=420.0,
        help="stop before a round of runs that would end past this many seconds",
    )  # fmt: skip
    parser.add_argument("--video", help="a 1080p video to use instead of making one")
    parser.add_argument(
        "--model", help="a catalogue name or ONNX file instead of the default detector"
    )
    parser.add_argument(
        "--tiny-model", type=int, metavar="BOXES",
        help="a constant detector made here instead (handoff.py's: 32x32 input, BOXES boxes "
        "a frame): inference costs ~nothing, so the CPU shows the pipeline's and the "
        "tracker's Python as a GPU run's processes do",
    )  # fmt: skip
    parser.add_argument(
        "--workers", default="2", help="inference workers per run, a list sweeps: 2,3,4"
    )
    parser.add_argument(
        "--profile", action="store_true",
        help="sample every thread's stack during the runs with the most sources (JSON: profiles)",
    )  # fmt: skip
    parser.add_argument(
        "--ab-host-candidates", action="store_true",
        help="run each also with detection outputs copied whole to the host (the A/B of "
        "the device candidate gather)",
    )  # fmt: skip
    parser.add_argument(
        "--switch-interval", type=float, default=None, metavar="S",
        help="sys.setswitchinterval for this process (Python's default 0.005): how long a "
        "thread may hold the GIL while others wait for it; the processes of a row with "
        "--processes > 1 are spawned and keep the default",
    )  # fmt: skip
    parser.add_argument(
        "--track", nargs="?", const="bytetrack", default=None,
        choices=("bytetrack", "ocsort", "botsort"),
        help="each row also with and without tracking, alternated (bare: bytetrack)",
    )  # fmt: skip
    parser.add_argument("--track-repeats", type=int, default=5, metavar="N")
    parser.add_argument(
        "--graphs-ab", action="store_true",
        help="every run with FRAMELENS_CUDA_GRAPHS=1, each followed by the same run with "
        "FRAMELENS_CUDA_GRAPHS=0: no_graphs_fps and graphs_over_no_graphs per row",
    )  # fmt: skip
    parser.add_argument("--output")
    args = parser.parse_args(argv)
    if args.graphs_ab:  # the product's side with graphs, whatever the default
        os.environ["FRAMELENS_CUDA_GRAPHS"] = "1"
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.ceiling_frames is None:
        args.ceiling_frames = args.frames
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    began = time.perf_counter()

    def say(text: str) -> None:
        print(f"[streams {time.perf_counter() - began:6.1f}s] {text}", flush=True)

    from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
    from framelens.core.pipeline.settings import PipelineSettings
    from framelens.core.sessions.runs import run_many
    from framelens.core.stages.tasks.detect.device import HOST_CANDIDATES_ENV

    video = args.video or str(Path(tempfile.gettempdir()) / "framelens-person-1080p.mp4")
    if not Path(video).is_file():
        make_1080p(video, frames=max(args.frames, args.ceiling_frames) + 30)
    model = args.model or DEFAULT_MODEL
    if args.tiny_model is not None:
        from handoff import tiny_model

        model = tiny_model(args.tiny_model)
    settings = PipelineSettings(resolve_model(model), device=args.device)
    sources = [int(n) for n in args.sources.split(",")]
    configs = [] if args.ceiling == "none" else parse_configs(args.ceiling)
    result: dict[str, Any] = {
        "command": "python3 benchmarks/streams.py " + " ".join(argv),
        "device": args.device,
        "machine": machine(),
        "video": "person sample scaled to 1920x1080, H.264 yuv420p (make_1080p.py)"
        if not args.video
        else args.video,
        "frames_per_source": args.frames,
        "repeats": args.repeats,
        "switch_interval_s": sys.getswitchinterval(),
        "how": "each row and each ceiling configuration run once per round, rounds in turn; "
        "aggregate_fps: the median of aggregate_fps_runs (frames over the span they were "
        "processed in); wall_s: the whole call with setup; hardware_nvdec_fps: the best "
        "ceiling configuration's median",
        "hardware_nvdec": {
            "kind": ceiling_kind(args.device),
            "frames_per_decoder": args.ceiling_frames,
            "configs": [
                {"streams": s, "processes": p, "fps_runs": [], "wall_s_runs": []}
                for s, p in configs
            ],
            "best": None,
        },
        "hardware_nvdec_fps": None,
        "streams": [],
        "targets": TARGETS,
    }
    rows: list[dict[str, Any]] = [
        {
            "sources": n, "processes": int(k), "workers": int(w),
            "aggregate_fps_runs": [], "wall_s_runs": [], "whole_call_fps_runs": [],
            "p50_ms_runs": [], "p99_ms_runs": [], "mean_batch_runs": [],
        }
        for n in sources for w in args.workers.split(",") for k in args.processes.split(",")
        if int(k) <= n
    ]  # fmt: skip
    result["streams"] = rows

    def save() -> None:
        best = summarise_ceiling(result["hardware_nvdec"]["configs"])
        result["hardware_nvdec"]["best"] = best
        hardware = best["fps"] if best else None
        result["hardware_nvdec_fps"] = hardware
        for row in rows:
            summarise_row(row, hardware)
        result["elapsed_s"] = round(time.perf_counter() - began, 1)
        save_json(args.output, result)

    engines: dict[int, float] = {}  # engine alone, by batch size
    with tempfile.TemporaryDirectory() as tmp:
        say(
            f"warm-up run; rows {[(r['sources'], r['processes']) for r in rows]}, "
            f"ceiling {args.ceiling}, {args.repeats} rounds, budget {args.budget_s:.0f} s"
        )
        run_many([video], settings, tmp, videos=False, frames=10, progress=False)

        def one_row(row: dict[str, Any], k: int) -> None:
            n, workers, procs = row["sources"], row["workers"], row["processes"]
            sampler = StackSampler() if args.profile and n == max(sources) else None
            spread: dict[str, Any] = (
                {"devices": [args.device] * procs, "processes": True} if procs > 1 else {}
            )
            t0 = time.perf_counter()
            try:
                with sampler or contextlib.nullcontext():
                    summary = run_many(
                        [video] * n, settings, str(Path(tmp) / f"n{n}w{workers}p{procs}r{k}"),
                        videos=False, frames=args.frames, progress=False, workers=workers,
                        **spread,
                    )  # fmt: skip
            except Exception as exc:  # said and kept; the other rows go on
                why = f"{type(exc).__name__}: {exc}".splitlines()[0]
                row.setdefault("errors", []).append(why)
                say(f"{n} sources in {procs} processes, run {k + 1}: failed: {why}")
                return
            call_s = time.perf_counter() - t0
            per = summary.sources
            errors = [s.error for s in per if s.error]
            if errors:
                row.setdefault("errors", []).append(errors[0])
            row["aggregate_fps_runs"].append(round(summary.fps, 2))
            row["wall_s_runs"].append(round(call_s, 2))
            row["whole_call_fps_runs"].append(round(summary.frames / call_s, 2))
            row["p50_ms_runs"].append(round(statistics.median(s.p50_ms or 0.0 for s in per), 2))
            row["p99_ms_runs"].append(round(max(s.p99_ms or 0.0 for s in per), 2))
            row["mean_batch_runs"].append(summary.mean_batch)
            row.update(batch=int(summary.batch), inference_workers=summary.inference_workers,
                       path=summary.path, frames=summary.frames,
                       stage_ms=summary.stage_ms)  # fmt: skip
            say(
                f"{n} sources in {procs} processes, run {k + 1}/{args.repeats}: "
                f"{summary.fps:.0f} fps, whole call {call_s:.1f} s "
                f"({summary.frames / call_s:.0f} fps), p99 {row['p99_ms_runs'][-1]} ms"
                + (f", {len(errors)} sources failed: {errors[0]}" if errors else "")
            )

            def again(env: str, value: str, suffix: str) -> Any:
                """The same run with ``env`` set to ``value`` (its processes inherit it)."""
                before = os.environ.get(env)
                os.environ[env] = value
                try:
                    return run_many(
                        [video] * n, settings, str(Path(tmp) / f"n{n}w{workers}p{procs}{suffix}"),
                        videos=False, frames=args.frames, progress=False, workers=workers,
                        **spread,
                    )  # fmt: skip
                finally:
                    if before is None:
                        os.environ.pop(env, None)
                    else:
                        os.environ[env] = before

            if args.graphs_ab:  # the same run, its engines without CUDA graphs
                plain = again("FRAMELENS_CUDA_GRAPHS", "0", f"r{k}g")
                row.setdefault("no_graphs_fps_runs", []).append(round(plain.fps, 2))
                say(f"  the same without CUDA graphs: {plain.fps:.0f} fps")
            if sampler is not None:
                result.setdefault("profiles", []).append(
                    {"sources": n, "workers": workers, "run": k, **sampler.report()}
                )
            if k > 0:
                return
            # once per row: the product's sources alone, the engine alone, the A/Bs
            batch = int(summary.batch)
            if batch not in engines:
                engines[batch] = round(engine_only_fps(replace(settings, batch=batch)), 1)
            row["engine_only_fps"] = engines[batch]
            row["product_source_fps"] = round(
                decode_only_fps(video, n, args.frames, args.device), 1
            )
            if args.ab_host_candidates:  # the same run, whole outputs copied to the host
                other = again(HOST_CANDIDATES_ENV, "1", "h")
                row["host_candidates_fps"] = other.fps
                row["device_vs_host_candidates"] = round(summary.fps / other.fps, 3)
            if args.track:  # tracking's cost: the same run with and without, alternated
                from framelens.core.stages.tracking.settings import TrackerSettings

                tracker = TrackerSettings.for_kind(args.track)
                where = str(Path(tmp) / f"n{n}w{workers}p{procs}t")

                cpu: dict[bool, list[float]] = {True: [], False: []}
                track_ms: list[float] = []

                def tracked_run(tracked: bool) -> float:
                    used = cpu_seconds()
                    got = run_many(
                        [video] * n, settings, where, videos=False, frames=args.frames,
                        progress=False, workers=workers, tracker=tracker if tracked else None,
                        **spread,
                    )  # fmt: skip
                    # the CPU of this process and of the run's processes (ended: counted)
                    cpu[tracked].append(round((cpu_seconds() - used) * 1000 / got.frames, 3))
                    if tracked:  # the tracker's own ms a frame (one process's median)
                        track_ms.append(got.stage_ms.get("track", float("nan")))
                    return float(got.fps)

                tracked_run(True)  # warm-up of the tracked path
                cpu[True].clear()
                track_ms.clear()
                row["tracking"] = alternate(tracked_run, args.track_repeats, args.track)
                row["tracking"].update(cpu_per_frame(cpu))
                row["tracking"]["tracker_ms_per_frame_runs"] = track_ms

        def one_ceiling(config: dict[str, Any], k: int) -> None:
            s, p = config["streams"], config["processes"]
            try:
                got = ceiling_run(video, s, p, args.ceiling_frames, args.device)
            except Exception as exc:  # said, and the ceiling goes on without this run
                config.setdefault("errors", []).append(str(exc).splitlines()[0])
                say(f"ceiling {s} decoders over {p} processes, run {k + 1}: failed: {exc}")
                return
            config["fps_runs"].append(got["fps"])
            config["wall_s_runs"].append(got["wall_s"])
            say(
                f"ceiling {s} decoders over {p} processes, run {k + 1}/{args.repeats}: "
                f"{got['fps']:.0f} fps (whole call {got['wall_s']:.1f} s)"
            )

        last_round = 0.0
        for k in range(args.repeats):
            elapsed = time.perf_counter() - began
            if k > 0 and elapsed + last_round > args.budget_s:
                result["stopped"] = (
                    f"after {k} rounds of {args.repeats}: another ({last_round:.0f} s) would "
                    f"end past --budget-s {args.budget_s:.0f}"
                )
                say(result["stopped"])
                break
            t_round = time.perf_counter()
            for config in result["hardware_nvdec"]["configs"]:
                one_ceiling(config, k)
                save()
            for row in rows:
                one_row(row, k)
                save()
            last_round = time.perf_counter() - t_round
    save()
    if not args.output:
        print(json.dumps(result, indent=2))
    for row in rows:
        say(
            f"{row['sources']} sources, {row['processes']} processes: median "
            f"{row.get('aggregate_fps')} fps {row.get('aggregate_fps_min_max')} over "
            f"{row.get('runs')} runs, {row.get('of_hardware_nvdec')} of the hardware's "
            f"{result['hardware_nvdec_fps']}; whole call {row.get('wall_s')} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
