"""`framelens bench`: the threaded pipeline against a naive per-frame loop.

Both use the same model, ONNX Runtime threads, encoder and preset, on the same
frames of the same source, one after the other in one process. Each gets a warm-up
run first; reported numbers are from the measured run, stage times as medians.
"""

from __future__ import annotations

import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from framelens.core import __version__
from framelens.core.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.export.video import VideoExporter
from framelens.core.pipeline import FramePipeline, PipelineSettings
from framelens.core.runner import PipelineRunner, RunRange
from framelens.core.sources import open_source
from framelens.core.stats import RunStats
from framelens.core.timing import now_ms, stage
from framelens.core.types import FrameResult, StageTimes

WARMUP_FRAMES = 20


def _exporter(path: Path | None, width: int, height: int, fps: float) -> VideoExporter | None:
    if path is None:
        return None
    return VideoExporter(path, width=width, height=height, fps=fps, encoder="libx264")


def naive_loop(
    source_spec: str, settings: PipelineSettings, frames: int, out: Path | None
) -> RunStats:
    """Read, preprocess, infer, postprocess, draw, encode: one after the other."""
    source = open_source(source_spec)
    pipeline = FramePipeline(settings)
    info = source.info
    video = _exporter(out, info.width, info.height, info.fps)
    stats = RunStats()
    try:
        for _ in range(frames):
            t0 = now_ms()
            frame = source.read()
            if frame is None:
                break
            result = pipeline.process(frame, now_ms() - t0)
            if video is not None and result.annotated is not None:
                with stage(result.times, "encode"):
                    video.write(result.annotated, frame.pts)
            result.times.e2e = now_ms() - t0
            stats(result)
        stats.stop()
    finally:
        if video is not None:
            video.abort()
        pipeline.close()
        source.close()
    return stats


def pipeline_run(
    source_spec: str,
    settings: PipelineSettings,
    frames: int,
    out: Path | None,
    workers: int = 1,
) -> RunStats:
    source = open_source(source_spec)
    pipeline = FramePipeline(settings)
    extra = [FramePipeline(settings) for _ in range(workers - 1)]
    info = source.info
    video = _exporter(out, info.width, info.height, info.fps)
    stats = RunStats()

    def encode(result: FrameResult) -> None:
        if video is not None and result.annotated is not None:
            with stage(result.times, "encode"):
                video.write(result.annotated, result.frame.pts)

    try:
        runner = PipelineRunner(
            source, pipeline, [encode], observers=[stats], extra_pipelines=extra
        )
        runner.run(RunRange(0, frames))
        stats.stop()
    finally:
        if video is not None:
            video.abort()
        for p in (pipeline, *extra):
            p.close()
        source.close()
    return stats


def run_bench(
    source_spec: str,
    *,
    frames: int = 200,
    threads: int | None = None,
    export: bool = True,
    workers: int = 1,
) -> dict[str, Any]:
    spec = resolve_model(DEFAULT_MODEL)
    settings = PipelineSettings(model=spec, threads=threads)
    with tempfile.TemporaryDirectory(prefix="framelens-bench-") as tmp:
        out = Path(tmp) / "bench.mp4" if export else None
        naive_loop(source_spec, settings, WARMUP_FRAMES, out)  # warm caches and the model
        t = time.perf_counter()
        naive = naive_loop(source_spec, settings, frames, out)
        pipe = pipeline_run(source_spec, settings, frames, out, workers)
        elapsed = time.perf_counter() - t
    return {
        "app_version": __version__,
        "command": "framelens bench",
        "source": os.path.basename(source_spec),
        "model": spec.name,
        "frames": frames,
        "export": export,
        "encoder": "libx264 veryfast crf 23" if export else None,
        "onnxruntime_threads": threads,
        "inference_workers": workers,
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform()},
        "naive_fps": round(naive.fps, 2),
        "pipeline_fps": round(pipe.fps, 2),
        "speedup": round(pipe.fps / naive.fps, 3) if naive.fps else None,
        "naive_stage_ms": naive.medians(),
        "pipeline_stage_ms": pipe.medians(),
        "wall_s": round(elapsed, 1),
    }


__all__ = ["StageTimes", "naive_loop", "pipeline_run", "run_bench"]
