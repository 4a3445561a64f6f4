"""Many streams on one device: aggregate detection throughput against its ceilings.

    python3 benchmarks/streams.py --sources 1,4,8,16 --output h200-streams-<date>.json
    python3 benchmarks/streams.py --device cpu --sources 1,2 --frames 20     # the same, small

For each number of sources N, in one process (or spread over several: --processes), on
the 1080p H.264 video made from the person sample (make_1080p.py), each measurement
warmed up first:

- aggregate_fps: ``framelens run`` with N copies of the video (run_many: N decoders,
  batches across sources, one engine call per batch, detections written per source;
  no video export), total frames over the time they were processed (wall_s: the whole
  run, engines built and decoders opened included); p50_ms / p99_ms: end-to-end latency
  per frame (median of the sources' p50, worst of their p99); mean_batch: frames per
  engine call the load gave;
- nvdec_only_fps: N bare PyNvVideoCodec decoders in threads (its own demuxer, frames
  left in device memory), no inference: the ceiling ``of_nvdec_ceiling`` is against;
  product_source_fps: N of the product's own decoding sources (PyAV demuxing, NVDEC,
  the copy into its buffer pool; on the CPU PyAV), no inference;
- engine_only_fps: the batched engine alone at the run's batch size (device buffers
  on CUDA), images per second;
- tracking (``--track [KIND]``): the same run with and without a tracker per source,
  alternated, ``--track-repeats`` runs each (benchmarks/tracking_ab.py): medians,
  spread and their ratio (target >= 0.95).
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

from make_1080p import make_1080p  # noqa: E402
from stack_sampler import StackSampler  # noqa: E402
from tracking_ab import alternate  # noqa: E402


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


def bare_nvdec_fps(video: str, n: int, frames: int, device: str) -> float | None:
    """N bare PyNvVideoCodec decoders (its own demuxer, device memory) in threads, no copies
    and no inference: the issue's NVDEC-only ceiling. None where PyNvVideoCodec cannot run
    (the caller falls back to the product's own NVDEC source, and says so)."""
    if not device.startswith("cuda"):
        return None
    try:
        import PyNvVideoCodec as nvc
        from framelens.core.gpu.context import get_context

        ctx = get_context(device)
    except Exception as exc:
        print(f"bare PyNvVideoCodec decoders not run: {exc}", file=sys.stderr)
        return None
    errors: list[str] = []

    def reader(out: list[int]) -> None:
        try:
            with ctx.active():
                demuxer = nvc.CreateDemuxer(filename=video)
                decoder = nvc.CreateDecoder(
                    gpuid=ctx.index,
                    codec=demuxer.GetNvCodecId(),
                    cudacontext=ctx.handle,
                    cudastream=0,
                    usedevicememory=True,
                )
                count = 0
                for packet in demuxer:
                    count += len(decoder.Decode(packet))
                    if count >= frames:
                        break
            out.append(min(count, frames))
        except Exception as exc:  # reported, and the ceiling falls back
            errors.append(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)

    fps = threads_fps(reader, n)
    if errors:
        print(f"bare PyNvVideoCodec decoders failed: {errors[0]}", file=sys.stderr)
        return None
    return fps


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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--sources", default="1,4,8,16")
    parser.add_argument("--frames", type=int, default=300, help="frames of each source")
    parser.add_argument("--video", help="a 1080p video to use instead of making one")
    parser.add_argument(
        "--workers", default="2", help="inference workers per run, a list sweeps: 2,3,4"
    )
    parser.add_argument(
        "--processes", default="1",
        help="processes the sources are spread over (device slots of --device, each in a "
        "process of its own: run --processes N), a list sweeps: 1,2,4",
    )  # fmt: skip
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
        help="sys.setswitchinterval for the runs (Python's default 0.005): how long a "
        "thread may hold the GIL while others wait for it",
    )  # fmt: skip
    parser.add_argument(
        "--track", nargs="?", const="bytetrack", default=None,
        choices=("bytetrack", "ocsort", "botsort"),
        help="each row also with and without tracking, alternated (bare: bytetrack)",
    )  # fmt: skip
    parser.add_argument("--track-repeats", type=int, default=5, metavar="N")
    parser.add_argument("--output")
    args = parser.parse_args()
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)

    from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
    from framelens.core.pipeline.settings import PipelineSettings
    from framelens.core.sessions.runs import run_many
    from framelens.core.stages.tasks.detect.device import HOST_CANDIDATES_ENV

    video = args.video or str(Path(tempfile.gettempdir()) / "framelens-person-1080p.mp4")
    if not Path(video).is_file():
        make_1080p(video, frames=args.frames + 30)
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), device=args.device)
    result: dict[str, Any] = {
        "command": "python3 benchmarks/streams.py " + " ".join(sys.argv[1:]),
        "device": args.device,
        "video": "person sample scaled to 1920x1080, H.264 yuv420p (make_1080p.py)",
        "frames_per_source": args.frames,
        "switch_interval_s": sys.getswitchinterval(),
        "streams": [],
    }

    def save() -> None:
        if args.output:
            Path(args.output).write_text(json.dumps(result, indent=2) + "\n")

    ceilings: dict[int, dict[str, Any]] = {}  # by number of sources
    engines: dict[int, float] = {}  # engine alone, by batch size

    def ceiling(n: int) -> dict[str, Any]:
        if n not in ceilings:
            sampler = StackSampler() if args.profile and n == max(sources) else None
            with sampler or contextlib.nullcontext():
                product = round(decode_only_fps(video, n, args.frames, args.device), 1)
            if sampler is not None:  # where the product's own sources spend their time
                result.setdefault("profiles", []).append(
                    {"sources": n, "what": "product sources alone", **sampler.report()}
                )
            bare = bare_nvdec_fps(video, n, args.frames, args.device)
            # the ceiling: bare PyNvVideoCodec decoders; the product's source where they fail
            ceilings[n] = {
                "nvdec_only_fps": round(bare, 1) if bare else product,
                "nvdec_only_kind": "bare PyNvVideoCodec" if bare else "product source",
                "product_source_fps": product,
            }
        return ceilings[n]

    sources = [int(n) for n in args.sources.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        run_many([video], settings, tmp, videos=False, frames=10, progress=False)  # warm-up
        runs = [
            (n, int(w), int(k))
            for n in sources
            for w in args.workers.split(",")
            for k in args.processes.split(",")
            if int(k) <= n
        ]
        for n, workers, procs in runs:
            sampler = StackSampler() if args.profile and n == max(sources) else None
            spread: dict[str, Any] = (
                {"devices": [args.device] * procs, "processes": True} if procs > 1 else {}
            )
            with sampler or contextlib.nullcontext():
                summary = run_many(
                    [video] * n, settings, str(Path(tmp) / f"n{n}w{workers}p{procs}"),
                    videos=False, frames=args.frames, progress=False, workers=workers, **spread,
                )  # fmt: skip
            per = summary.sources
            batch = int(summary.batch)
            if batch not in engines:
                engines[batch] = round(engine_only_fps(replace(settings, batch=batch)), 1)
            row = {
                "sources": n,
                "aggregate_fps": summary.fps,
                "wall_s": summary.wall_s,
                **ceiling(n),
                "engine_only_fps": engines[batch],
                "p50_ms": round(statistics.median(s.p50_ms for s in per), 2),
                "p99_ms": round(max(s.p99_ms for s in per), 2),
                "mean_batch": summary.mean_batch,
                "batch": batch,
                "workers": summary.inference_workers,
                "processes": procs,
                "path": summary.path,
                "frames": summary.frames,
                "stage_ms": summary.stage_ms,  # medians per stage: where the time goes
            }
            row["of_nvdec_ceiling"] = round(row["aggregate_fps"] / row["nvdec_only_fps"], 3)
            if args.ab_host_candidates:  # the same run, whole outputs copied to the host
                os.environ[HOST_CANDIDATES_ENV] = "1"
                try:
                    other = run_many(
                        [video] * n, settings, str(Path(tmp) / f"n{n}w{workers}p{procs}h"),
                        videos=False, frames=args.frames, progress=False, workers=workers,
                        **spread,
                    )  # fmt: skip
                finally:
                    os.environ.pop(HOST_CANDIDATES_ENV, None)
                row["host_candidates_fps"] = other.fps
                row["device_vs_host_candidates"] = round(summary.fps / other.fps, 3)
            if args.track:  # tracking's cost: the same run with and without, alternated
                from framelens.core.stages.tracking.settings import TrackerSettings

                tracker = TrackerSettings.for_kind(args.track)
                where = str(Path(tmp) / f"n{n}w{workers}p{procs}t")

                def one(
                    tracked: bool, n: int = n, workers: int = workers, where: str = where,
                    tracker: Any = tracker, spread: dict[str, Any] = spread,
                ) -> float:  # fmt: skip
                    summary = run_many(
                        [video] * n, settings, where, videos=False, frames=args.frames,
                        progress=False, workers=workers, tracker=tracker if tracked else None,
                        **spread,
                    )  # fmt: skip
                    return float(summary.fps)

                one(True)  # warm-up of the tracked path
                row["tracking"] = alternate(one, args.track_repeats, args.track)
            result["streams"].append(row)
            print(json.dumps(row), flush=True)
            if sampler is not None:
                result.setdefault("profiles", []).append(
                    {"sources": n, "workers": workers, **sampler.report()}
                )
            save()
    result["targets"] = {"aggregate_fps_16": 2400, "of_nvdec_ceiling_16": 0.8}
    save()
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
