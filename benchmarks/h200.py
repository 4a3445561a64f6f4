"""The GPU pipeline against a naive per-frame loop, and each stage alone, on one GPU.

    python3 benchmarks/h200.py --output benchmarks/results/h200-<date>.json [--frames 600]

On the H200 this runs through tests/gpu/run_on_h200.sh (bench). Everything is measured
in one process, on one 1080p H.264 yuv420p video made from the person sample
(benchmarks/make_1080p.py); each loop is warmed up and run ``--repeats`` times, and the
medians are reported:

- naive_fps: OpenCV decode, CPU letterbox, session.run with numpy in and out on ONNX
  Runtime's CUDA provider, decode + NMS in numpy, one step after the other;
- pipeline_fps: FrameLens' GPU pipeline as a run of a video file on CUDA gets it
  (NVDEC into device memory, fused CUDA preprocessing, IOBinding on our stream, two
  streams alternating batches of GPU_FILE_BATCH frames, the display kernel's RGBA frame),
  decode to detections, no export (the H200 has no NVENC); by workers at batch 1 and by
  batch beside it;
- engine_only_fps: the same model on device buffers with nothing else;
- nvdec_fps: NVDEC decoding into device memory alone;
- preprocess_gbps / copy_gbps: the fused preprocessing kernel's bytes read plus written
  per second against a device-to-device copy of the same bytes;
- the live path alone (``--live``): batch 1 with 2 workers through the session and
  through the bare executor loop, alternated on the same warm pipelines, beside NVDEC
  alone in the same call (medians and every run; benchmarks/handoff.py is its CPU
  counterpart), with p50/p99 per frame (decode to result) and the whole call beside the
  steady rate (``setup_s``: engines built, NVDEC opened; ``first_run_s``: the first 60
  frames, cuDNN's search and the graphs' captures in them; each measured once; a
  run's ``whole_call_s`` adds its session's opening and frames);
- tracking (``--track [KIND]``): the product's path with and without a tracker on its
  results, alternated on the same warm pipelines, ``--track-repeats`` runs each
  (benchmarks/tracking_ab.py): medians, spread and their ratio (target >= 0.95).
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import math
import os
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from make_1080p import make_1080p  # noqa: E402
from naive_gpu_loop import naive_loop  # noqa: E402
from tracking_ab import alternate  # noqa: E402


def median_of(runs: list[dict[str, Any]], key: str) -> float:
    return round(statistics.median(r[key] for r in runs), 2)


def nvdec_fps(path: str, ctx: Any, frames: int) -> dict[str, Any]:
    import pycuda.driver as cuda
    from framelens.core.stages.sources.nvdec import open_gpu_source

    with ctx.active():
        stream = cuda.Stream()
    source = open_gpu_source(path, ctx, stream, pool_size=8)
    try:
        n = 0
        start = time.perf_counter()
        while n < frames:
            frame = source.read()
            if frame is None:
                break
            frame.release()
            n += 1
        with ctx.active():
            stream.synchronize()
        wall = time.perf_counter() - start
        return {"fps": n / wall, "frames": n, "decoder": source.decoder_name}
    finally:
        source.close()


def engine_only_fps(
    spec: Any, ctx: Any, iterations: int, graphs: bool = False, batch: int = 1
) -> dict[str, Any]:
    """The model alone on a device input (a real preprocessed frame, ``batch`` copies of
    it through the batch variant), outputs to host; ``graphs``: its runs replayed as CUDA
    graphs (core/stages/engines/onnxruntime_graphs.py)."""
    import numpy as np
    import pycuda.driver as cuda
    from framelens.core.stages.engines.onnxruntime_cuda import OnnxRuntimeCudaEngine
    from framelens.core.stages.preprocess.cpu import Preprocessor
    from framelens.core.stages.sources import open_source

    with open_source(str(HERE.parent / "resources/samples/one-by-one-person-detection.mp4")) as s:
        s.seek(300)
        frame = s.read()
    assert frame is not None
    tensor = Preprocessor(spec, frame.width, frame.height)(frame.image).copy()
    if batch > 1:
        from framelens.core.precision.batch import batch_variant

        spec = batch_variant(spec)
        tensor = np.repeat(tensor, batch, axis=0)
    with ctx.active():
        stream = cuda.Stream(flags=1)  # non-blocking, as the pipelines' (graphs need it)
        device_input = cuda.to_device(np.ascontiguousarray(tensor))
    engine = OnnxRuntimeCudaEngine(spec.path, ctx, stream, graphs=graphs)
    try:
        shape, dtype = tensor.shape, tensor.dtype
        for _ in range(50):
            engine.infer_device(int(device_input), shape, dtype)
        times = []
        start = time.perf_counter()
        for _ in range(iterations):
            t0 = time.perf_counter()
            engine.infer_device(int(device_input), shape, dtype)
            times.append((time.perf_counter() - t0) * 1000)
        wall = time.perf_counter() - start
        result = {"fps": iterations / wall, "ms_median": statistics.median(times)}
        if graphs:
            result["graphs_why_not"] = engine.graphs_why_not
        return result
    finally:
        engine.close()
        with ctx.active():
            device_input.free()


def latency_ms(stats: Any) -> tuple[float, float]:
    """p50 and p99 of the frames' end-to-end times (ms) in a RunStats, every frame counted."""
    e2e = [t.e2e for t in stats.times if not math.isnan(t.e2e)]
    if not e2e:
        return math.nan, math.nan
    p50, p99 = np.percentile(e2e, [50, 99])
    return round(float(p50), 2), round(float(p99), 2)


FIRST_RUN_FRAMES = 60  # a bench's first frames: its warm-up, the first calls' cost


class GpuPipelineBench:
    """The product's GPU run path (decode thread, N GPU pipelines, in-order delivery),
    built once and warmed up, then timed over the same frames as the other loops."""

    def __init__(
        self, path: str, spec: Any, workers: int, non_blocking: bool = True, batch: int = 1
    ) -> None:
        from framelens.core.pipeline import build, decoding
        from framelens.core.pipeline.settings import PipelineSettings

        start = time.perf_counter()
        settings = build.resolve(PipelineSettings(spec, device="cuda:0", batch=batch))
        self.path, self.settings = path, settings
        self.pipelines = build.gpu_pipelines(settings, workers, non_blocking=non_blocking)
        # NVDEC's buffers counted for these workers, as a run counts them (since cf43966;
        # before, this bench counted them for two workers whatever its own number)
        self.source, self.decoder = decoding.open_frames(path, self.pipelines[0], workers)
        self.workers = workers
        self.label = f"{workers} workers, batch {batch}" + ("" if non_blocking else ", blocking")
        # what a run of its own pays before its first frame: engines built, decoder opened
        self.setup_s = time.perf_counter() - start
        start = time.perf_counter()
        # warm-up: cuDNN algorithm search, graph captures, NVDEC session, kernel caches
        self.run(FIRST_RUN_FRAMES)
        self.first_run_s = time.perf_counter() - start  # its session's opening included

    def run(self, frames: int, driver: str = "session", tracker: Any = None) -> dict[str, Any]:
        """``frames`` through the product's driver: the session (core/sessions/session.py,
        what ``framelens run`` uses, its source opened untimed) or, for the before/after
        ratio, the bare executor loop the runs used before the session (PipelineRunner).
        ``tracker``: the session's results tracked (TrackerSettings), as ``run --track``."""
        from framelens.core.pipeline.stats import RunStats

        stats = RunStats()
        if driver == "session":
            from framelens.core.pipeline.build import Workers
            from framelens.core.sessions.session import Session, SessionOptions
            from framelens.core.sessions.tracks import with_tracking

            options = SessionOptions(draw="none", pixels=False, frames=frames)
            built = Workers(self.pipelines, "gpu pipeline")
            opened = time.perf_counter()
            session = Session([self.path], self.settings, options=options, built=built,
                              stages=with_tracking(None, tracker))  # fmt: skip
            session.open()
            try:
                start = time.perf_counter()
                for result in session.results():
                    stats(result)
                wall_s = time.perf_counter() - start
                open_s = start - opened
                done = stats.frames
            finally:
                session.release_workers()
                session.close()
        else:  # the loop runs had before the session: the executor over a source kept open
            from framelens.core.pipeline.execute import Executor, PipelineWorker

            self.source.seek(0)
            batch = self.pipelines[0].settings.batch
            executor = Executor.open(
                self.source, [PipelineWorker(p, "none", copy=False, pixels=False)
                              for p in self.pipelines],
                batch=batch, decode_depth=4, depth=4 * len(self.pipelines) * batch, limit=frames,
            )  # fmt: skip
            start = time.perf_counter()
            try:
                for item in executor.in_order(frames):
                    stats(item.value)
            finally:
                executor.close()
            wall_s = time.perf_counter() - start
            open_s = 0.0  # the source stays open between runs
            done = stats.frames
        fps = done / wall_s
        stage_ms = stats.medians(skip=10)
        p50, p99 = latency_ms(stats)
        line = (
            f"  {self.label} ({driver}): {done} frames, {fps:.1f} fps, "
            f"p50/p99 {p50}/{p99} ms, ms {stage_ms}"
        )
        print(line, file=sys.stderr, flush=True)
        return {
            "fps": fps, "frames": done, "stage_ms": stage_ms, "driver": driver,
            "p50_ms": p50, "p99_ms": p99, "open_s": open_s, "wall_s": wall_s,
        }  # fmt: skip

    def close(self) -> None:
        for p in self.pipelines:
            p.close()
        self.source.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--video", help="a 1080p video to use instead of making one")
    parser.add_argument("--output")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the default path, the naive loop and the stages only (no sweeps)",
    )
    parser.add_argument(
        "--track", nargs="?", const="bytetrack", default=None,
        choices=("bytetrack", "ocsort", "botsort"),
        help="also the default path with and without tracking, alternated (bare: bytetrack)",
    )  # fmt: skip
    parser.add_argument("--track-repeats", type=int, default=5, metavar="N")
    parser.add_argument(
        "--live-workers", default="2", metavar="N,...",
        help="with --live: batch 1 also with these numbers of inference workers (2,3)",
    )  # fmt: skip
    parser.add_argument(
        "--graphs-ab", action="store_true",
        help="with --live: the same path without CUDA graphs (FRAMELENS_CUDA_GRAPHS=0) in "
        "the same rounds, and the engine alone per call with and without",
    )  # fmt: skip
    parser.add_argument(
        "--live", action="store_true",
        help="only the live path: batch 1, 2 workers, session and bare executor alternated, "
        "NVDEC alone beside them (and other worker counts: --live-workers)",
    )  # fmt: skip
    args = parser.parse_args()
    # a run that stalls shows where: every thread's stack, every two minutes, on stderr
    faulthandler.dump_traceback_later(120, repeat=True, file=sys.stderr)

    from framelens.core.gpu.context import get_context
    from framelens.core.gpu.kernel_bench import measure_preprocess_bandwidth
    from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
    from framelens.core.pipeline.build import GPU_FILE_BATCH, GPU_WORKERS

    spec = resolve_model(DEFAULT_MODEL)
    ctx = get_context("cuda:0")
    video = args.video or str(Path(tempfile.gettempdir()) / "framelens-person-1080p.mp4")
    if not Path(video).is_file():
        make_1080p(video, frames=args.frames + 60)
    frames = args.frames

    if args.live:
        if args.graphs_ab:  # the session's side with graphs, whatever the default
            os.environ["FRAMELENS_CUDA_GRAPHS"] = "1"
        return _live(video, spec, ctx, args)
    # warm-up of every path (module loads, cuDNN autotuning, NVDEC sessions)
    naive_loop(video, spec, 30)
    nvdec_fps(video, ctx, 60)

    result: dict[str, Any] = {
        "device": ctx.properties.name,
        "command": "python3 benchmarks/h200.py " + " ".join(sys.argv[1:]),
        "video": "person sample scaled to 1920x1080, H.264 yuv420p, 30 fps (make_1080p.py)",
        "model": spec.name,
        "frames": frames,
        "repeats": args.repeats,
    }

    def save() -> None:  # after every section: a call cut short keeps what it measured
        if args.output:
            text = json.dumps(result, indent=2, default=str)
            Path(args.output).write_text(text + "\n")

    naive = [naive_loop(video, spec, frames) for _ in range(args.repeats)]
    naive_fps = median_of(naive, "fps")
    result["naive_fps"] = naive_fps
    # the product's path for a file on CUDA: two workers, GPU_FILE_BATCH frames per call
    bench = GpuPipelineBench(video, spec, GPU_WORKERS, batch=GPU_FILE_BATCH)
    decoder_path = bench.decoder
    runner_runs: list[dict[str, Any]] = []
    try:  # the session and the loop it replaced, alternating on the same warm pipelines
        pipes = []
        for _ in range(args.repeats):
            pipes.append(bench.run(frames, "session"))
            runner_runs.append(bench.run(frames, "runner"))
    finally:
        bench.close()
    if args.track:  # tracking's cost on the same warm pipelines (before they are closed)
        bench = GpuPipelineBench(video, spec, GPU_WORKERS, batch=GPU_FILE_BATCH)
        try:
            result["tracking"] = _tracking_ab(bench, frames, args.track, args.track_repeats)
        finally:
            bench.close()
        save()
    pipeline_fps = median_of(pipes, "fps")
    runner_fps = median_of(runner_runs, "fps")
    result["session_vs_runner"] = {
        "session_fps": [round(r["fps"], 1) for r in pipes],
        "runner_fps": [round(r["fps"], 1) for r in runner_runs],
        "ratio_of_medians": round(pipeline_fps / runner_fps, 3),
    }
    best = sorted(pipes, key=lambda s: s["fps"])[len(pipes) // 2]
    result.update(
        pipeline_fps=pipeline_fps,
        stage_ms=best["stage_ms"],
        pipeline_path=(
            f"gpu pipeline, {GPU_WORKERS} streams/workers, batch {GPU_FILE_BATCH} (the default "
            f"for a video file on CUDA), decoder {decoder_path}"
        ),
    )
    save()
    by_workers: dict[int, list[dict[str, Any]]] = {}
    for workers in () if args.quick else (1, 2, 3):  # batch 1
        bench = GpuPipelineBench(video, spec, workers)
        try:
            by_workers[workers] = [bench.run(frames) for _ in range(args.repeats)]
        finally:
            bench.close()
        result["pipeline_fps_by_workers"] = {w: median_of(r, "fps") for w, r in by_workers.items()}
        save()
    decodes = [nvdec_fps(video, ctx, frames) for _ in range(args.repeats)]
    engine = [engine_only_fps(spec, ctx, 1000) for _ in range(args.repeats)]
    h, w = spec.input_size
    bandwidth = measure_preprocess_bandwidth(
        ctx, 1920, 1080, repeats=200, source="nv12", input_size=(h, w), dtype="float32"
    )
    engine_fps = median_of(engine, "fps")
    decode_fps = median_of(decodes, "fps")
    slowest = min(engine_fps, decode_fps)
    result.update(
        engine_only_fps=engine_fps,
        nvdec_fps=decode_fps,
        preprocess_gbps=round(bandwidth["kernel_gbps"], 1),
        copy_gbps=round(bandwidth["copy_gbps"], 1),
        peak_copy_gbps=round(bandwidth["peak_copy_gbps"], 1),
        preprocess_bandwidth=bandwidth,
        decoder=decodes[0]["decoder"],
        engine_ms_median=round(statistics.median(e["ms_median"] for e in engine), 3),
        ratios={
            "pipeline_over_naive": round(pipeline_fps / naive_fps, 2),
            "pipeline_over_slowest_stage": round(pipeline_fps / slowest, 3),
            "preprocess_over_copy": round(bandwidth["kernel_gbps"] / bandwidth["copy_gbps"], 3),
        },
        targets={
            "pipeline_over_naive": 2.0,
            "pipeline_over_slowest_stage": 0.8,
            "preprocess_over_copy": 0.5,
            "nvdec_fps": 500,
        },
        runs={"naive": naive, "pipeline": by_workers, "nvdec": decodes, "engine": engine},
    )
    save()
    if args.quick:
        return _summary(result)
    bench = GpuPipelineBench(video, spec, GPU_WORKERS, non_blocking=False)
    try:
        blocking = [bench.run(frames) for _ in range(args.repeats)]
    finally:
        bench.close()
    result["pipeline_fps_blocking_streams"] = median_of(blocking, "fps")
    save()
    by_batch: dict[int, list[dict[str, Any]]] = {1: by_workers[GPU_WORKERS], GPU_FILE_BATCH: pipes}
    for batch in (8,):  # frames of the one stream batched into one engine call
        bench = GpuPipelineBench(video, spec, GPU_WORKERS, batch=batch)
        try:
            by_batch[batch] = [bench.run(frames) for _ in range(args.repeats)]
        finally:
            bench.close()
        result["pipeline_fps_by_batch"] = {b: median_of(r, "fps") for b, r in by_batch.items()}
        save()
    return _summary(result)


def _live(video: str, spec: Any, ctx: Any, args: argparse.Namespace) -> int:
    """One 1080p stream at batch 1 with 2 workers (the live path): the session and the
    bare executor loop alternated on the same warm pipelines, NVDEC alone between runs."""
    nvdec_fps(video, ctx, 60)  # warm-up of the NVDEC session
    bench = GpuPipelineBench(video, spec, 2, batch=1)
    # other worker counts at batch 1 (--live-workers 2,3): their sessions in the same rounds
    others = {n: GpuPipelineBench(video, spec, n, batch=1)
              for n in sorted({int(w) for w in args.live_workers.split(",")} - {2})}  # fmt: skip
    # the same path with its engines made without CUDA graphs (--graphs-ab)
    plain = (
        _without_graphs(lambda: GpuPipelineBench(video, spec, 2, batch=1))
        if args.graphs_ab
        else None
    )
    plain_runs: list[float] = []
    engine_ms: dict[str, list[float]] = {}
    session: list[dict[str, Any]] = []
    runner: list[dict[str, Any]] = []
    decodes: list[dict[str, Any]] = []
    other_runs: dict[int, list[float]] = {n: [] for n in others}
    try:
        for i in range(args.repeats):
            if plain is not None:
                plain_runs.append(plain.run(args.frames)["fps"])
                for size in (1, 8):  # the live path's batch, and a file's or a wall's
                    for kind in ("graphs", "plain"):
                        alone = engine_only_fps(spec, ctx, 300, graphs=kind == "graphs", batch=size)
                        engine_ms.setdefault(f"{kind}_batch{size}", []).append(alone["ms_median"])
                        if alone.get("graphs_why_not"):
                            print(f"  no graphs: {alone['graphs_why_not']}", file=sys.stderr)
            order = ("session", "runner") if i % 2 == 0 else ("runner", "session")
            for driver in order:
                run = _with_usage(partial(bench.run, args.frames, driver))
                (session if driver == "session" else runner).append(run)
            for n, other in others.items():
                other_runs[n].append(other.run(args.frames)["fps"])
            decodes.append(nvdec_fps(video, ctx, args.frames))
        # where each thread sits (the decode-ahead thread in NVDEC, in its queue's put, or
        # waiting for the GIL), and how late a thread gets the GIL back: one more run
        from stack_sampler import StackSampler

        with StackSampler() as sampler:
            bench.run(args.frames)
        profile = sampler.report(8)
    finally:
        bench.close()
        for other in others.values():
            other.close()
        if plain is not None:
            plain.close()
    fps = [r["fps"] for r in session]
    nvdec = statistics.median(d["fps"] for d in decodes)
    result = {
        "device": ctx.properties.name,
        "command": "python3 benchmarks/h200.py " + " ".join(sys.argv[1:]),
        "model": spec.name,
        "frames": args.frames,
        "repeats": args.repeats,
        "path": bench.label + ", " + bench.decoder,
        "batch1_2workers_fps": round(statistics.median(fps), 1),
        "batch1_2workers_fps_runs": [round(f, 1) for f in fps],
        "bare_executor_fps_runs": [round(r["fps"], 1) for r in runner],
        "nvdec_fps": round(nvdec, 1),
        "nvdec_fps_runs": [round(d["fps"], 1) for d in decodes],
        "of_nvdec": round(statistics.median(fps) / nvdec, 3),
        # batch 1 with other numbers of workers, through the session, in the same rounds
        "batch1_workers_fps": {
            str(n): {
                "fps": round(statistics.median(runs), 1),
                "fps_runs": [round(f, 1) for f in runs],
                "of_nvdec": round(statistics.median(runs) / nvdec, 3),
            }
            for n, runs in other_runs.items()
        },
        "target_fps": 520,
        "cuda_graphs": _graphs_planned(),
        "stage_ms": sorted(session, key=lambda r: r["fps"])[len(session) // 2]["stage_ms"],
        # per frame, from its decode to its result (every frame of each session run)
        "p50_ms": round(statistics.median(r["p50_ms"] for r in session), 2),
        "p99_ms": round(statistics.median(r["p99_ms"] for r in session), 2),
        "p50_ms_runs": [r["p50_ms"] for r in session],
        "p99_ms_runs": [r["p99_ms"] for r in session],
        # the whole call beside the steady rate: the set-up before the first frame
        # (engines built, NVDEC opened; the CUDA context was made before), the first
        # FIRST_RUN_FRAMES frames (cuDNN's search, the graphs' captures), then a run's
        # frames: a cold call of FIRST_RUN_FRAMES + --frames frames, with one session
        # opening more than such a call makes
        "setup_s": round(bench.setup_s, 2),
        "first_run_s": round(bench.first_run_s, 2),
        "first_run_frames": FIRST_RUN_FRAMES,
        "whole_call_s_runs": [round(_whole_call_s(bench, r), 2) for r in session],
        "whole_call_fps": round(
            statistics.median(
                (FIRST_RUN_FRAMES + r["frames"]) / _whole_call_s(bench, r) for r in session
            ),
            1,
        ),
        # as benchmarks/handoff.py reports them on the CPU: process CPU time and voluntary
        # context switches (a thread blocked on a lock, condition, queue or the GIL)
        "cpu_us_per_frame": {
            d: round(statistics.median(r["cpu_us_per_frame"] for r in runs), 1)
            for d, runs in (("session", session), ("runner", runner))
        },
        "switches_per_frame": {
            d: round(statistics.median(r["switches_per_frame"] for r in runs), 2)
            for d, runs in (("session", session), ("runner", runner))
        },
        "profile": profile,
    }
    if plain is not None:  # the same rounds without CUDA graphs
        result["batch1_2workers_no_graphs_fps"] = round(statistics.median(plain_runs), 1)
        result["batch1_2workers_no_graphs_fps_runs"] = [round(f, 1) for f in plain_runs]
        result["graphs_over_no_graphs"] = round(
            statistics.median(fps) / statistics.median(plain_runs), 3
        )
        result["engine_ms_per_call"] = {
            kind: {"median": round(statistics.median(ms), 3), "runs": [round(m, 3) for m in ms]}
            for kind, ms in engine_ms.items()
        }
    if args.output:
        Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))
    return 0


def _whole_call_s(bench: GpuPipelineBench, run: dict[str, Any]) -> float:
    """A cold call's time for ``run``: set-up, first frames, the run's opening and frames."""
    return float(bench.setup_s + bench.first_run_s + run["open_s"] + run["wall_s"])


def _graphs_planned() -> bool:
    """Whether the pipelines' engines are made with CUDA graphs (the plan's choice)."""
    from framelens.core.pipeline.engine_plan import cuda_options_for

    return cuda_options_for("fp32", device_engine=True).graphs


def _without_graphs(make: Any) -> Any:
    """``make()`` with FRAMELENS_CUDA_GRAPHS=0: its engines made without CUDA graphs."""
    before = os.environ.get("FRAMELENS_CUDA_GRAPHS")
    os.environ["FRAMELENS_CUDA_GRAPHS"] = "0"
    try:
        return make()
    finally:
        if before is None:
            del os.environ["FRAMELENS_CUDA_GRAPHS"]
        else:
            os.environ["FRAMELENS_CUDA_GRAPHS"] = before


def _with_usage(run: Any) -> dict[str, Any]:
    """``run()``'s result with the process's CPU time and voluntary context switches per
    frame over it."""
    import resource

    switches = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
    cpu = time.process_time()
    result: dict[str, Any] = run()
    frames = max(1, result["frames"])
    result["cpu_us_per_frame"] = (time.process_time() - cpu) / frames * 1e6
    switches = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - switches
    result["switches_per_frame"] = switches / frames
    return result


def _tracking_ab(bench: GpuPipelineBench, frames: int, kind: str, repeats: int) -> dict[str, Any]:
    """One 1080p stream through the session with and without ``kind``, alternated."""
    from framelens.core.stages.tracking.settings import TrackerSettings

    tracker = TrackerSettings.for_kind(kind)
    bench.run(frames, tracker=tracker)  # warm-up of the tracker's path

    def one(tracked: bool) -> float:
        return float(bench.run(frames, tracker=tracker if tracked else None)["fps"])

    return {"sources": 1, "path": bench.label, **alternate(one, repeats, kind)}


def _summary(result: dict[str, Any]) -> int:
    keys = ("naive_fps", "pipeline_fps", "engine_only_fps", "nvdec_fps", "ratios", "stage_ms")
    summary = {k: result[k] for k in keys}
    if "tracking" in result:
        summary["tracking"] = result["tracking"]
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
