"""One complete run: source -> pipeline -> annotated video and detections file."""

from __future__ import annotations

import logging
import shutil
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from framelens.core import __version__
from framelens.core.errors import GpuError
from framelens.core.models.catalog import model_sha256
from framelens.core.pipeline import build
from framelens.core.pipeline.build import Workers
from framelens.core.pipeline.runner import PipelineRunner, RunRange
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.pipeline.stats import RunStats
from framelens.core.stages.sinks.lossless import FrameExporter, open_exporter
from framelens.core.stages.sinks.video import provenance_metadata
from framelens.core.stages.sources import Source
from framelens.core.stages.tasks import DetectParams, OutputWriter
from framelens.core.stages.timing import stage
from framelens.core.types import FrameResult, SourceInfo
from tqdm import tqdm

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from framelens.core.precision import CalibrationSettings, VariantInfo

WriterFactory = Callable[[dict[str, Any]], OutputWriter[Any]]
"""An extra output of a run, opened with the run's provenance (``run_meta``) once the
source is open, and committed with the others (a batch's Parquet rows)."""


def open_pipelines(
    source_spec: str, settings: PipelineSettings, notes: list[str]
) -> tuple[Source, Workers]:
    """The source, decoded where the workers want it, and the workers (core/pipeline/build)."""
    built = build.workers(settings, notify=notes.append)
    source, built, path = open_with(source_spec, built, settings, notes)
    built.path = path
    return source, built


def open_with(
    source_spec: str, built: Workers, settings: PipelineSettings, notes: list[str]
) -> tuple[Source, Workers, str]:
    """The source for workers already built (a batch keeps them across files), the
    workers that take it (host ones when no NVDEC source could be set up: ``built`` is
    closed then) and the run's path in words, its decoder included. Closes ``built`` on
    any other failure."""
    try:
        source, _ = build.open_frames(source_spec, built.pipelines[0])
    except GpuError as exc:  # no NVDEC source could be set up: the host pipelines, then
        built.close()
        notes.append(f"GPU pipeline not used ({exc}); ONNX Runtime CUDA with host preprocessing")
        built = build.workers(settings, gpu_pipeline=False)
        source, _ = build.open_frames(source_spec, None)
    except BaseException:
        built.close()
        raise
    path = f"{built.path}, decoder {_decoder_name(source)}" if built.on_device else built.path
    return source, built, path


def _decoder_name(source: Source) -> str:
    name = getattr(source, "decoder_name", "cpu")
    reason = getattr(source, "fallback_reason", None)
    return f"{name} ({reason})" if reason else str(name)


def _commit_all(writers: list[FrameExporter | OutputWriter[Any]]) -> list[str]:
    """Close (commit) every output, or leave none: when one cannot be finished (a full
    disk), those already moved into place are removed before the error goes on."""
    done: list[Path] = []
    try:
        for w in writers:
            done.append(Path(str(w.close())))
    except BaseException:
        for path in done:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        raise
    return [str(path) for path in done]


def run_meta(source: str, settings: PipelineSettings, info: SourceInfo) -> dict[str, Any]:
    """The provenance written into detections files and video metadata."""
    params = settings.params
    task: dict[str, Any] = (
        {"conf": params.conf, "iou": params.iou}
        if isinstance(params, DetectParams)
        else {"task": "superres", "scale": settings.model.scale}
    )
    return {
        "app_version": __version__,
        "model": settings.model.name,
        "model_sha256": model_sha256(settings.model.path),
        "precision": settings.precision,
        "backend": settings.backend,
        "device": settings.device,
        **task,
        "source": source,
        "source_fps": info.fps,
        "width": info.width,
        "height": info.height,
    }


def prepare_precision(
    source_spec: str,
    settings: PipelineSettings,
    *,
    progress: bool = True,
    on_prepare: Callable[[str, float], None] | None = None,
    cancel: threading.Event | None = None,
    calibration: CalibrationSettings | None = None,
) -> tuple[PipelineSettings, VariantInfo | None]:
    """Settings whose model is the FP16/INT8 variant (cached, or built now: INT8 is
    calibrated on ``source_spec``), and the variant; fp32 settings come back as they are.

    ``progress`` draws a terminal bar while calibrating; ``on_prepare(text, 0..1)``
    reports the stages; ``cancel`` stops with Cancelled and leaves nothing cached;
    ``calibration`` overrides the default INT8 CalibrationSettings (whose agreement
    is measured at the run's confidence threshold).
    """
    from framelens.core.precision import CalibrationSettings, prepare_variant, variant_precision

    if settings.precision == "fp32" or variant_precision(settings.model.path) == settings.precision:
        return settings, None
    bar = tqdm(total=100, unit="%", disable=not progress or None, file=sys.stderr, leave=False)

    def report(text: str, fraction: float) -> None:
        bar.set_description_str(f"{settings.precision}: {text}", refresh=False)
        bar.update(round(100 * fraction) - bar.n)
        if on_prepare is not None:
            on_prepare(text, fraction)

    try:
        model, precision = settings.model, settings.precision
        conf = getattr(settings.params, "conf", CalibrationSettings().conf)
        calibration = calibration or CalibrationSettings(conf=conf)
        variant = prepare_variant(
            model,
            precision,
            source=source_spec,
            settings=calibration,
            on_progress=report,
            cancel=cancel,
        )
    finally:
        bar.close()
    return replace(settings, model=variant.spec), variant


LIVE_KINDS = ("stream", "camera")
"""Sources without an end: a run of one stops on Ctrl+C and keeps its outputs."""


def run_to_outputs(
    source_spec: str,
    settings: PipelineSettings,
    *,
    export: str | None = None,
    detections: str | None = None,
    lossless: bool = False,
    start: int = 0,
    frames: int | None = None,
    progress: bool = True,
    on_progress: Callable[[int, int], None] | None = None,
    on_message: Callable[[str], None] | None = None,
    on_prepare: Callable[[str, float], None] | None = None,
    cancel: threading.Event | None = None,
) -> dict[str, Any]:
    """Process a range of a source; outputs appear only when complete. Returns a summary.

    ``progress`` draws a terminal bar; ``on_progress(done, total)`` (total 0 when
    unknown) is called at most ten times a second and at the end; setting
    ``cancel`` stops the run with Cancelled and removes the partial outputs; Ctrl+C does
    the same to a file run, but ends a camera's or stream's recording and keeps it.
    ``export``: a video file, ``DIR/`` for one PNG per frame, or with ``lossless`` an
    ``.mkv`` in FFV1 (both lossless: decoding gives back the exact pixels).
    ``on_message`` receives one-line notes (a GPU failure and the switch to the CPU).
    If the GPU fails mid-run, the run goes on from the same frame on the CPU.
    For fp16/int8 the variant is prepared first (see prepare_precision; INT8
    calibrates on this source), reported through ``on_prepare(text, 0..1)``.
    """
    settings, variant = prepare_precision(
        source_spec, settings, progress=progress, on_prepare=on_prepare, cancel=cancel
    )
    notes: list[str] = []
    source, built = open_pipelines(source_spec, settings, notes)
    for text in notes:
        if on_message is not None:
            on_message(text)
    opened = Opened(source, built, built.path, notes)
    try:
        summary = process(
            opened,
            source_spec,
            settings,
            RunOutputs(export, [detections] if detections else [], lossless),
            RunRange(start, frames),
            reopen=lambda s: open_pipelines(source_spec, s, notes),
            progress=progress,
            on_progress=on_progress,
            on_message=on_message,
            cancel=cancel,
        )
    finally:
        opened.built.close()
        opened.source.close()
    summary["variant"] = None if variant is None else variant.summary()
    return summary


@dataclass
class Opened:
    """A run's source and workers, replaced by ``process`` after a GPU failure (the
    caller closes whichever are here at the end), the path in words and the notes."""

    source: Source
    built: Workers
    path: str
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RunOutputs:
    """What a run writes: the annotated video (or PNG folder), the task's detections
    files (.json, .csv) and extra writers (``WriterFactory``); all or none appear."""

    export: str | None = None
    detections: Sequence[str] = ()
    lossless: bool = False
    extra: Sequence[WriterFactory] = ()
    label: str | None = None  # the source's name in the outputs (default: its spec)


def process(
    opened: Opened,
    source_spec: str,
    settings: PipelineSettings,
    outputs: RunOutputs,
    rng: RunRange,
    *,
    reopen: Callable[[PipelineSettings], tuple[Source, Workers]],
    progress: bool = True,
    on_progress: Callable[[int, int], None] | None = None,
    on_message: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
) -> dict[str, Any]:
    """The range ``rng`` of the open source through the open workers into ``outputs``:
    the body of ``run_to_outputs``, shared with a batch's workers (which keep their
    engines across files). After a GPU failure ``reopen(settings)`` gives the source
    and workers to go on with, kept in ``opened``. Returns the run's summary."""
    notes = opened.notes
    start, frames = rng.start, rng.count

    def note(text: str) -> None:
        notes.append(text)
        if on_message is not None:
            on_message(text)

    source, built = opened.source, opened.built
    video: FrameExporter | None = None
    writers: list[OutputWriter[Any]] = []
    # what runs: TensorRT where its flavour cannot run the GPU became ONNX Runtime
    settings = replace(settings, backend=built.pipelines[0].settings.backend)
    try:
        info = source.info
        meta = run_meta(outputs.label or source_spec, settings, info)
        fps = info.fps if info.fps > 0 else 30.0
        task = built.pipelines[0].task
        for path in outputs.detections:
            writers.append(task.open_writer(path, meta))
        for make in outputs.extra:
            writers.append(make(meta))
        if outputs.export:
            out_w, out_h = task.output_size(info.width, info.height)
            video = open_exporter(
                outputs.export,
                lossless=outputs.lossless,
                width=out_w,
                height=out_h,
                fps=fps,
                meta=meta,
                tags=provenance_metadata(meta),
                audio_source=source_spec if info.has_audio else None,
                audio_start_s=start / fps,
                audio_end_s=None if frames is None else (start + frames) / fps,
            )
        workers = len(built.pipelines)
        stats = RunStats()
        total = frames
        if total is None and info.frame_count:
            total = max(0, info.frame_count - start)
        bar = tqdm(total=total, unit="frame", disable=not progress or None, file=sys.stderr)

        def sink(result: FrameResult) -> None:
            if video is not None and result.annotated is not None:
                with stage(result.times, "encode"):
                    video.write(result.annotated, result.frame.pts, result.frame.index)
            for writer in writers:
                writer.add(result.frame.index, result.frame.pts, result.output)

        last_report = 0.0
        runner: PipelineRunner | None = None

        def report(_: FrameResult) -> None:
            nonlocal last_report
            bar.update()
            if cancel is not None and cancel.is_set() and runner is not None:
                runner.cancel()
            if on_progress is not None and time.monotonic() - last_report >= 0.1:
                last_report = time.monotonic()
                on_progress(stats.frames, total or 0)

        done = 0
        try:
            while True:
                runner = PipelineRunner(
                    source,
                    built.pipelines[0],
                    [sink],
                    observers=[stats, report],
                    draw=video is not None,
                    extra_pipelines=built.pipelines[1:],
                )
                if cancel is not None and cancel.is_set():
                    runner.cancel()
                left = None if frames is None else frames - done
                try:
                    done += runner.run(RunRange(start + done, left))
                    break
                except KeyboardInterrupt:
                    if info.kind not in LIVE_KINDS:
                        raise  # a file run stopped half way: nothing is kept
                    # a camera or stream has no end: Ctrl+C is how a recording stops,
                    # and what was recorded is kept, complete
                    done += runner.frames_done
                    note(f"stopped by Ctrl+C after {done} frames of the live source")
                    break
                except GpuError as exc:
                    done += runner.frames_done
                    note(f"GPU failed ({exc}); continuing on the CPU from frame {start + done}")
                    # a broken CUDA context fails its own teardown: that must not stop
                    # the run from going on on the CPU
                    built.close()
                    build.close_quietly([source])
                    settings = build.after_gpu_failure(settings)
                    source, built = reopen(settings)
                    opened.source, opened.built, opened.path = source, built, built.path
        finally:
            bar.close()
        if on_progress is not None:
            on_progress(done, max(done, total or 0))
        stats.stop()
        written = _commit_all([w for w in (video, *writers) if w is not None])
        damage = getattr(source, "damage_note", None)
        if callable(damage) and (text := damage()):  # a damaged file: what the outputs hold
            note(f"{text}; the outputs hold the {done} frames processed")
        return {
            "source": source_spec,
            "frames": done,
            "fps": round(stats.fps, 2),
            "stage_ms": stats.medians(),
            "outputs": written,
            "encoder": video.encoder_name if video is not None else None,
            "inference_workers": workers,
            "path": opened.path,
            "notes": notes,
            "variant": None,
            **{k: meta[k] for k in ("model", "precision", "backend", "device")},
        }
    except BaseException:
        for w in (video, *writers):
            if w is not None:
                w.abort()
        raise
