"""`framelens bench`: the product's driver (a session, core/sessions/session.py) against a
naive per-frame loop.

Both use the same model, ONNX Runtime threads, encoder and preset, on the same
frames of the same source, one after the other in one process. Each gets a warm-up
run first; reported numbers are from the measured run, stage times as medians.
"""

from __future__ import annotations

import os
import platform
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from framelens.core import __version__
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline import build
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.pipeline.stats import RunStats
from framelens.core.progress import Bar, Progress, make_bar
from framelens.core.sessions.session import Session, SessionOptions
from framelens.core.stages.sinks.video import VideoExporter
from framelens.core.stages.sources import open_source
from framelens.core.stages.timing import now_ms, stage
from framelens.core.types import FrameResult, SourceInfo, StageTimes

WARMUP_FRAMES = 20

Tick = Callable[[FrameResult], object]


@contextmanager
def _encoder(out: Path | None, info: SourceInfo) -> Iterator[Tick]:
    """The encode step of a measured loop; the video is discarded."""
    video = None
    if out is not None:
        video = VideoExporter(
            out, width=info.width, height=info.height, fps=info.fps, encoder="libx264"
        )

    def encode(result: FrameResult) -> None:
        if video is not None and result.annotated is not None:
            with stage(result.times, "encode"):
                video.write(result.annotated, result.frame.pts, result.frame.index)

    try:
        yield encode
    finally:
        if video is not None:
            video.abort()


def naive_loop(
    source_spec: str,
    settings: PipelineSettings,
    frames: int,
    out: Path | None,
    tick: Tick | None = None,
) -> RunStats:
    """Read, preprocess, infer, postprocess, draw, encode: one after the other."""
    stats = RunStats()
    pipeline = build.host_pipeline(settings)
    with open_source(source_spec) as source, _encoder(out, source.info) as encode:
        for _ in range(frames):
            t0 = now_ms()
            frame = source.read()
            if frame is None:
                break
            result = pipeline.process(frame, now_ms() - t0)
            encode(result)
            result.times.e2e = now_ms() - t0
            stats(result)
            if tick is not None:
                tick(result)
        stats.stop()
    pipeline.close()
    return stats


def pipeline_run(
    source_spec: str,
    settings: PipelineSettings,
    frames: int,
    out: Path | None,
    workers: int = 1,
    tick: Tick | None = None,
) -> RunStats:
    """The product's driver, a session: decode thread, ``workers`` inference threads,
    overlays drawn by the workers, encode on the caller."""
    stats = RunStats()
    built = build.Workers([build.host_pipeline(settings) for _ in range(workers)], "cpu pipeline")
    session = Session([source_spec], settings, options=SessionOptions(frames=frames), built=built)
    with session:
        source = session.sources[0].source
        assert source is not None
        with _encoder(out, source.info) as encode:
            for result in session.results():
                encode(result)
                stats(result)
                if tick is not None:
                    tick(result)
        stats.stop()
    return stats


def run_bench(
    source_spec: str,
    *,
    frames: int = 200,
    threads: int | None = None,
    export: bool = True,
    workers: int = 1,
    progress: Progress = False,
) -> dict[str, Any]:
    """The naive loop and the pipeline on the same frames; ``progress``: a bar per step
    on the terminal (stderr, shown only where it is a terminal)."""
    spec = resolve_model(DEFAULT_MODEL)
    settings = PipelineSettings(model=spec, threads=threads)

    def bar(what: str, total: int) -> closing[Bar]:
        return closing(make_bar(progress, total=total, desc=what, leave=False))

    with tempfile.TemporaryDirectory(prefix="framelens-bench-") as tmp:
        out = Path(tmp) / "bench.mp4" if export else None
        with bar("warm-up", WARMUP_FRAMES) as b:  # warm caches and the model
            naive_loop(source_spec, settings, WARMUP_FRAMES, out, lambda _: b.update())
        t = time.perf_counter()
        with bar("naive loop", frames) as b:
            naive = naive_loop(source_spec, settings, frames, out, lambda _: b.update())
        with bar(f"pipeline, {workers} workers", frames) as b:
            pipe = pipeline_run(source_spec, settings, frames, out, workers, lambda _: b.update())
        elapsed = time.perf_counter() - t
    return {
        "app_version": __version__,
        "command": "framelens bench",
        "source": os.path.basename(source_spec),
        "model": spec.name,
        "frames": pipe.frames,  # measured: a clip shorter than asked gives what it has
        "frames_asked": frames,
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
