"""Super-resolution quality: models (and precisions) against bicubic on frames whose
original is known.

For every frame of the range and every variant (a model at a precision): the frame is
cropped to a multiple of the model's scale and shrunk by it with bicubic (OpenCV
INTER_CUBIC); the model upscales the small frame, and so does bicubic; both are measured
against the original by PSNR (dB, the BGR uint8 image, whole frame) and SSIM
(core/stages/tasks/superres/metrics.py). A model whose output is narrower than the
original (a second crop to its scale) is measured on the part both cover.

The report directory (staged, renamed into place when complete, like the precision
compare's) holds:

- summary.json: ``variants.<name>`` with ``psnr_db``, ``ssim`` (means of the per-frame
  values), ``latency_ms_median`` (preprocess + inference + merge), ``scale``, ``model``
  and ``precision``; ``bicubic`` with ``psnr_db`` and ``ssim`` at the first model's
  scale (``bicubic_by_scale`` for each scale when they differ); ``frames``, ``source``;
- frames.csv: one row per frame, every variant's and bicubic's PSNR and SSIM;
- index.html: the table, saying plainly where bicubic wins (smooth footage).
"""

from __future__ import annotations

import csv
import html
import json
import math
import statistics
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from framelens.core import __version__
from framelens.core.errors import Cancelled, ConfigError, SourceError
from framelens.core.pipeline import build
from framelens.core.pipeline.processor import FrameProcessor
from framelens.core.pipeline.ranges import RunRange, seek_to_start
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.progress import Progress, make_bar
from framelens.core.stages.sinks.atomic import StrPath
from framelens.core.stages.sinks.atomic_dir import AtomicDir
from framelens.core.stages.sources import open_source
from framelens.core.stages.tasks import produces_image
from framelens.core.stages.tasks.superres.color import (
    bicubic_downscale,
    bicubic_upscale,
    cropped_size,
)
from framelens.core.stages.tasks.superres.metrics import psnr, ssim
from framelens.core.types import Frame, Image, StageTimes

__all__ = ["SrVariant", "superres_quality_report", "superres_variants"]

SUMMARY, CSV_FILE, HTML_FILE = "summary.json", "frames.csv", "index.html"
REPORT_FILES = frozenset({SUMMARY, CSV_FILE, HTML_FILE})


@dataclass
class SrVariant:
    """One model at one precision, named as the user named it (``<model>@<precision>``
    when several precisions are compared)."""

    name: str
    settings: PipelineSettings
    psnr: list[float] = field(default_factory=list)
    ssim: list[float] = field(default_factory=list)
    latency_ms: list[float] = field(default_factory=list)

    @property
    def scale(self) -> int:
        return self.settings.model.scale


def superres_variants(
    models: Sequence[PipelineSettings], names: Sequence[str], precisions: Sequence[str]
) -> list[SrVariant]:
    """Every model at every precision: ``names[i]`` names ``models[i]`` (as given on
    the command line; a file's stem), ``<name>@<precision>`` when there are several
    precisions. ConfigError for a repeated name."""
    if len(set(names)) != len(names):
        raise ConfigError(f"a model is listed more than once: {', '.join(names)}")
    several = len(precisions) > 1
    return [
        SrVariant(f"{name}@{p}" if several else name, replace(settings, precision=p))
        for settings, name in zip(models, names, strict=True)
        for p in precisions
    ]


def _measure(reference: Image, test: Image) -> tuple[float, float]:
    h = min(reference.shape[0], test.shape[0])
    w = min(reference.shape[1], test.shape[1])
    a, b = reference[:h, :w], test[:h, :w]
    return psnr(a, b), ssim(a, b)


def _mean(values: Sequence[float]) -> float | None:
    return round(statistics.fmean(values), 4) if values else None


class _Bicubic:
    """Bicubic's numbers at one scale."""

    def __init__(self) -> None:
        self.psnr: list[float] = []
        self.ssim: list[float] = []


def superres_quality_report(
    source_spec: str,
    variants: Sequence[SrVariant],
    report: StrPath,
    *,
    start: int = 0,
    frames: int | None = None,
    progress: Progress = False,
    on_progress: Callable[[int, int], None] | None = None,
    cancel: threading.Event | None = None,
) -> dict[str, Any]:
    """Measure ``variants`` and bicubic on a range of a source; write the report."""
    if not variants:
        raise ConfigError("give at least one super-resolution model to compare")
    not_sr = [v.name for v in variants if not produces_image(v.settings.model)]
    if not_sr:
        raise ConfigError(f"{', '.join(not_sr)}: not super-resolution models")
    from framelens.core.pipeline.variant import prepare_precision

    # FP16 and INT8 variants first (INT8 calibrates on this source), cached
    variants = [
        replace(
            v,
            settings=prepare_precision(source_spec, v.settings, progress=progress, cancel=cancel)[
                0
            ],
        )
        for v in variants
    ]
    with AtomicDir(report, REPORT_FILES) as staging:
        summary, rows = _measure_range(
            source_spec, variants, RunRange(start, frames), progress, on_progress, cancel
        )
        _write(staging.tmp, summary, rows, variants)
        path = staging.commit()
    return {**summary, "report": str(path)}


def _measure_range(
    source_spec: str,
    variants: Sequence[SrVariant],
    rng: RunRange,
    progress: Progress,
    on_progress: Callable[[int, int], None] | None,
    cancel: threading.Event | None,
) -> tuple[dict[str, Any], list[list[Any]]]:
    scales = sorted({v.scale for v in variants}, key=[v.scale for v in variants].index)
    bicubic = {s: _Bicubic() for s in scales}
    rows: list[list[Any]] = []
    pipelines: list[FrameProcessor] = []
    try:
        pipelines = [build.host_pipeline(v.settings) for v in variants]
        with open_source(source_spec) as source:
            seek_to_start(source, rng)
            count = source.info.frame_count
            total = rng.count if rng.count is not None else max(0, (count or 0) - rng.start)
            bar = make_bar(progress, total=total or None)
            try:
                while rng.count is None or len(rows) < rng.count:
                    if cancel is not None and cancel.is_set():
                        raise Cancelled("cancelled")
                    frame = source.read()
                    if frame is None:
                        break
                    rows.append(_frame_row(frame, variants, pipelines, bicubic))
                    bar.update()
                    if on_progress is not None:
                        on_progress(len(rows), total)
            finally:
                bar.close()
    finally:
        build.close_quietly(pipelines)
    if not rows:
        raise SourceError(f"{source_spec} has no frames to compare from frame {rng.start}")
    first = bicubic[scales[0]]
    summary: dict[str, Any] = {
        "task": variants[0].settings.model.task,
        "source": source_spec,
        "start": rng.start,
        "frames": len(rows),
        "app_version": __version__,
        "method": (
            "frame cropped to a multiple of the scale, shrunk by it (INTER_CUBIC), upscaled "
            "by each model and by bicubic; PSNR (dB, BGR uint8, whole frame) and SSIM "
            "against the original, means over the frames"
        ),
        "variants": {
            v.name: {
                "model": v.settings.model.name,
                "precision": v.settings.precision,
                "scale": v.scale,
                "psnr_db": _mean(v.psnr),
                "ssim": _mean(v.ssim),
                "latency_ms_median": round(statistics.median(v.latency_ms), 3),
                "psnr_gain_over_bicubic_db": _gain(v.psnr, bicubic[v.scale].psnr),
            }
            for v in variants
        },
        "bicubic": {"scale": scales[0], "psnr_db": _mean(first.psnr), "ssim": _mean(first.ssim)},
    }
    if len(scales) > 1:
        summary["bicubic_by_scale"] = {
            str(s): {"psnr_db": _mean(b.psnr), "ssim": _mean(b.ssim)} for s, b in bicubic.items()
        }
    return summary, rows


def _gain(model: Sequence[float], bicubic: Sequence[float]) -> float | None:
    finite = [(m, b) for m, b in zip(model, bicubic, strict=True) if math.isfinite(m + b)]
    return round(statistics.fmean(m - b for m, b in finite), 3) if finite else None


def _frame_row(
    frame: Frame,
    variants: Sequence[SrVariant],
    pipelines: Sequence[FrameProcessor],
    bicubic: dict[int, _Bicubic],
) -> list[Any]:
    image = frame.image
    row: list[Any] = [frame.index, round(frame.pts, 3)]
    lows: dict[int, Image] = {}
    for scale, numbers in bicubic.items():
        w, h = cropped_size(image.shape[1], image.shape[0], scale)
        if w < scale * 8 or h < scale * 8:
            raise SourceError(f"frame {frame.index} is too small to shrink by {scale}")
        low = lows[scale] = bicubic_downscale(image, scale)
        p, s = _measure(image[:h, :w], bicubic_upscale(low, scale))
        numbers.psnr.append(p)
        numbers.ssim.append(s)
    for v, pipeline in zip(variants, pipelines, strict=True):
        times = StageTimes()
        result = pipeline.infer(Frame(lows[v.scale], frame.index, frame.pts), times)
        up = pipeline.task.output_image(result.output)
        if up is None:
            raise SourceError(f"frame {frame.index}: {v.name} returned no image")
        p, s = _measure(image, up)
        v.psnr.append(p)
        v.ssim.append(s)
        v.latency_ms.append(times.preprocess + times.inference + times.postprocess)
        row += [p, s]
    for numbers in bicubic.values():
        row += [numbers.psnr[-1], numbers.ssim[-1]]
    return row


def _write(
    folder: Path, summary: dict[str, Any], rows: list[list[Any]], variants: Sequence[SrVariant]
) -> None:
    (folder / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    scales = list(summary.get("bicubic_by_scale", {str(summary["bicubic"]["scale"]): 0}))
    header = ["index", "pts"]
    header += [f"{v.name}_{k}" for v in variants for k in ("psnr_db", "ssim")]
    header += [f"bicubic_x{s}_{k}" for s in scales for k in ("psnr_db", "ssim")]
    with (folder / CSV_FILE).open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(header)
        for row in rows:
            out.writerow([f"{c:.4f}" if isinstance(c, float) else c for c in row])
    (folder / HTML_FILE).write_text(_html(summary), encoding="utf-8")


def _html(summary: dict[str, Any]) -> str:
    def cell(value: object) -> str:
        return "-" if value is None else html.escape(str(value))

    lines = []
    for name, v in summary["variants"].items():
        gain = v["psnr_gain_over_bicubic_db"]
        verdict = "" if gain is None or gain > 0 else " (bicubic is better on these frames)"
        lines.append(
            f"<tr><td>{cell(name)}</td><td>x{v['scale']}</td><td>{cell(v['psnr_db'])}</td>"
            f"<td>{cell(v['ssim'])}</td><td>{cell(gain)}{verdict}</td>"
            f"<td>{cell(v['latency_ms_median'])}</td></tr>"
        )
    b = summary["bicubic"]
    lines.append(
        f"<tr><td>bicubic</td><td>x{b['scale']}</td><td>{cell(b['psnr_db'])}</td>"
        f"<td>{cell(b['ssim'])}</td><td></td><td></td></tr>"
    )
    return (
        "<!doctype html><meta charset=utf-8><title>FrameLens super-resolution quality</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{padding:4px 12px;"
        "border-bottom:1px solid #ccc}</style>"
        f"<h1>Super-resolution quality</h1><p>{cell(summary['source'])}, "
        f"{summary['frames']} frames. {cell(summary['method'])}.</p>"
        "<table><tr><th>variant</th><th>scale</th><th>PSNR dB</th><th>SSIM</th>"
        "<th>gain over bicubic dB</th><th>latency ms (median)</th></tr>"
        + "".join(lines)
        + "</table>"
    )
