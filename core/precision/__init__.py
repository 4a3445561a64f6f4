"""Precision variants of a model: FP16 conversion and INT8 Q/DQ calibration, cached.

Precision lives in the ONNX graph, so every variant is an ordinary ONNX file that
ONNX Runtime runs on the CPU (and TensorRT builds as a strongly typed network):

* fp32: the model as it is.
* fp16: converted with ONNX Runtime's float16 converter, float32 inputs/outputs kept.
* int8: a Q/DQ graph calibrated on frames of the user's own source, with a per-layer
  sensitivity analysis and mixed precision (see int8.py and report.py).

Besides precision, ``batch_variant`` (batch.py) rewrites a batch-1 graph, of any
precision, to take a batch of N frames in one call; cached the same way.

``prepare_variant`` returns a cached variant or builds one; entries live under the
user cache directory (or $FRAMELENS_CACHE_DIR), keyed by the model's hash, the
calibration frames and the settings, and appear complete or not at all. A video file
calibrated before finds its INT8 entry again without reading its frames (int8_sources.py).
"""

from __future__ import annotations

import re
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from framelens.core.cache import MODEL_FILE, digest, read_entry, staging, variants_dir
from framelens.core.errors import Cancelled, ConfigError
from framelens.core.models.catalog import model_sha256
from framelens.core.models.spec import ModelSpec
from framelens.core.precision.batch import BatchVariant, batch_variant, prepare_batch_variant
from framelens.core.precision.calibration import (
    CalibrationFrames,
    read_calibration_frames,
    spread_indices,
)
from framelens.core.precision.int8_settings import CalibrationSettings, StageProgress
from framelens.core.precision.int8_sources import link_for, read_link, write_link
from framelens.core.precision.report import LayerSensitivity, SearchStep, SensitivityReport

# FP16 and INT8 (fp16.py, int8.py and what they use) need onnx, whose import takes
# ~0.5 s (ml_dtypes): they are imported when a variant is made or looked up, so that
# an FP32 run or the window does not pay for them.

__all__ = [
    "PRECISIONS",
    "BatchVariant",
    "CalibrationFrames",
    "CalibrationSettings",
    "Cancelled",
    "LayerSensitivity",
    "SearchStep",
    "SensitivityReport",
    "VariantInfo",
    "batch_variant",
    "cached_variant",
    "model_for",
    "prepare_batch_variant",
    "prepare_variant",
    "read_calibration_frames",
    "spread_indices",
    "variant_precision",
]

PRECISIONS = ("fp32", "fp16", "int8")
FORMAT_VERSION = 2  # bump when a change makes old cache entries wrong (2: float biases)
REPORT_FILE = "sensitivity.json"


@dataclass(frozen=True)
class VariantInfo:
    """A model at one precision, ready to load.

    path: the ONNX file to load; spec: the caller's ModelSpec pointing at it (same
    name, labels and layout). cache_key: the entry's key (the model hash for fp32).
    report: the INT8 sensitivity report (None for fp32/fp16).
    """

    precision: str
    path: Path
    spec: ModelSpec
    cache_key: str
    from_cache: bool
    report: SensitivityReport | None = None

    @classmethod
    def in_entry(
        cls,
        precision: str,
        spec: ModelSpec,
        entry: Path,
        key: str,
        from_cache: bool,
        report: SensitivityReport | None = None,
    ) -> VariantInfo:
        """The variant whose graph is the model file of cache ``entry``."""
        path = entry / MODEL_FILE
        return cls(precision, path, replace(spec, path=path), key, from_cache, report)

    def summary(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "precision": self.precision,
            "path": str(self.path),
            "from_cache": self.from_cache,
        }
        if self.report is not None:
            data.update(self.report.summary())
        return data


def _stem(spec: ModelSpec) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", spec.name)[:40] or "model"


def _check_cancel(cancel: threading.Event | None, what: str) -> None:
    if cancel is not None and cancel.is_set():
        raise Cancelled(f"{what} cancelled")


def _start(spec: ModelSpec, precision: str) -> tuple[str, str, VariantInfo | None]:
    """(normalised precision, model hash, the fp32 'variant' when fp32 was asked)."""
    precision = precision.strip().lower()
    if precision not in PRECISIONS:
        raise ConfigError(f"unknown precision {precision!r} (known: {', '.join(PRECISIONS)})")
    model_hash = model_sha256(spec.path)
    fp32 = None
    if precision == "fp32":
        fp32 = VariantInfo("fp32", spec.path, spec, model_hash, from_cache=False)
    return precision, model_hash, fp32


def prepare_variant(
    spec: ModelSpec,
    precision: str,
    *,
    source: str | None = None,
    settings: CalibrationSettings | None = None,
    on_progress: Callable[[str, float], None] | None = None,
    cancel: threading.Event | None = None,
    cache_dir: Path | None = None,
) -> VariantInfo:
    """The ``precision`` variant of ``spec``, from the cache or built now.

    int8 needs ``source`` (a file, folder, camera or stream to calibrate on) and
    takes ``settings`` (default CalibrationSettings()). ``on_progress(text, 0..1)``
    reports the stages; setting ``cancel`` stops the work with Cancelled and leaves
    no cache entry. ``cache_dir`` is the cache root (variants go in its variants/
    folder); default $FRAMELENS_CACHE_DIR, else the platform's user cache directory.
    Runs in the caller's thread: the GUI calls it from a worker.
    """
    precision, model_hash, fp32 = _start(spec, precision)
    if fp32 is not None:
        return fp32
    root = variants_dir(cache_dir)
    if precision == "fp16":
        return _fp16(spec, model_hash, root, on_progress, cancel)
    if not source:
        raise ConfigError(
            "INT8 is calibrated on frames of your own video: give a source to calibrate on"
        )
    settings = settings or CalibrationSettings()
    settings.validate()
    return _int8(spec, model_hash, source, settings, root, StageProgress(on_progress, cancel))


def _fp16(
    spec: ModelSpec,
    model_hash: str,
    root: Path,
    on_progress: Callable[[str, float], None] | None,
    cancel: threading.Event | None,
) -> VariantInfo:
    key, entry = _fp16_entry(spec, model_hash, root)
    cached = _cached_fp16(spec, key, entry)
    if cached is not None:
        return cached
    _check_cancel(cancel, "FP16 conversion")
    if on_progress is not None:
        on_progress("converting to FP16", 0.0)
    from framelens.core.precision.fp16 import convert_fp16

    with staging(entry) as stage:
        facts = convert_fp16(spec.path, stage.path / MODEL_FILE)
        _check_cancel(cancel, "FP16 conversion")
        entry = stage.commit(
            {
                "precision": "fp16",
                "key": key,
                "model_sha256": model_hash,
                "source_model": str(spec.path),
                **facts,
            }
        )
    if on_progress is not None:
        on_progress("converting to FP16", 1.0)
    return VariantInfo.in_entry("fp16", spec, entry, key, from_cache=False)


def _int8(
    spec: ModelSpec,
    model_hash: str,
    source: str,
    settings: CalibrationSettings,
    root: Path,
    progress: StageProgress,
) -> VariantInfo:
    from framelens.core.precision.int8 import (
        Analysis,
        analyse,
        onnxruntime_version,
        prepare_float,
        search_and_write,
    )

    cached, link = _linked_int8(spec, model_hash, source, settings, root)
    if cached is not None:  # this file calibrated before: no frame read
        return cached
    frames = read_calibration_frames(
        spec,
        source,
        settings.frames,
        on_progress=lambda done, n: progress("frames", done / n, f"{done} of {n}"),
        cancel=progress.cancel,
        patch=settings.patch,
    )
    base, key, entry = _int8_entry(spec, model_hash, frames, settings, root)
    cached = _cached_int8(spec, key, entry)
    if cached is not None:
        if link is not None:
            write_link(link, entry, key)
        return cached

    analysis_key = digest(*base, settings.analysis_key())
    analysis_entry = root / f"{_stem(spec)}-int8-analysis-{analysis_key[:16]}"
    prep = prepare_float(spec, frames)
    meta = {
        "model_sha256": model_hash,
        "source_model": str(spec.path),
        "calibration_source": source,
        "calibration_frames": frames.indices,
        "frames_sha256": frames.digest,
        "onnxruntime": onnxruntime_version(),
    }
    with staging(entry) as stage:
        work = stage.path / "work"
        work.mkdir()
        if read_entry(analysis_entry) is not None:
            analysis = Analysis.load(analysis_entry)
            shutil.copyfile(analysis_entry / "ranges.json", work / "ranges.json")
        else:
            with staging(analysis_entry) as astage:
                analysis = analyse(prep, spec, frames, settings, work, progress)
                analysis.save(astage.path)
                shutil.copyfile(work / "ranges.json", astage.path / "ranges.json")
                astage.commit(
                    {
                        "kind": "int8-analysis",
                        "key": analysis_key,
                        "settings": settings.analysis_key(),
                        **meta,
                    }
                )
        report = search_and_write(
            prep, spec, frames, settings, analysis, work, stage.path / MODEL_FILE, progress
        )
        (stage.path / REPORT_FILE).write_text(report.to_json(), encoding="utf-8")
        shutil.rmtree(work)
        progress.check()  # a cancel now still leaves nothing behind
        entry = stage.commit(
            {"precision": "int8", "key": key, "settings": settings.variant_key(), **meta}
        )
    if link is not None:
        write_link(link, entry, key)
    return VariantInfo.in_entry("int8", spec, entry, key, False, report)


def _fp16_entry(spec: ModelSpec, model_hash: str, root: Path) -> tuple[str, Path]:
    from framelens.core.precision.fp16 import converter_version

    key = digest(FORMAT_VERSION, "fp16", model_hash, converter_version())
    return key, root / f"{_stem(spec)}-fp16-{key[:16]}"


def _cached_fp16(spec: ModelSpec, key: str, entry: Path) -> VariantInfo | None:
    if read_entry(entry) is None:
        return None
    return VariantInfo.in_entry("fp16", spec, entry, key, from_cache=True)


def _int8_entry(
    spec: ModelSpec,
    model_hash: str,
    frames: CalibrationFrames,
    settings: CalibrationSettings,
    root: Path,
) -> tuple[tuple[Any, ...], str, Path]:
    """(the key parts shared with the analysis entry, the variant's key, its entry)."""
    from framelens.core.precision.qdq import onnxruntime_version

    base = (FORMAT_VERSION, "int8", model_hash, frames.digest, onnxruntime_version())
    key = digest(*base, settings.variant_key())
    return base, key, root / f"{_stem(spec)}-int8-{key[:16]}"


def _linked_int8(
    spec: ModelSpec,
    model_hash: str,
    source: str,
    settings: CalibrationSettings,
    root: Path,
) -> tuple[VariantInfo | None, Path | None]:
    """(the INT8 variant a file calibrated into before, found by its link without
    reading a frame, or None; the link's path, None when ``source`` is not a file)."""
    from framelens.core.precision.qdq import onnxruntime_version

    base = (FORMAT_VERSION, "int8", model_hash, onnxruntime_version())
    link = link_for(root, base, spec, source, settings)
    named = read_link(link) if link is not None else None
    if named is None:
        return None, link
    name, key = named
    meta = read_entry(root / name)
    if meta is None or meta.get("key") != key:  # the entry went (cache cleared)
        return None, link
    return _cached_int8(spec, key, root / name), link


def _cached_int8(spec: ModelSpec, key: str, entry: Path) -> VariantInfo | None:
    if read_entry(entry) is None:
        return None
    report = SensitivityReport.from_json((entry / REPORT_FILE).read_text(encoding="utf-8"))
    return VariantInfo.in_entry("int8", spec, entry, key, True, report)


def cached_variant(
    spec: ModelSpec,
    precision: str,
    *,
    source: str | None = None,
    settings: CalibrationSettings | None = None,
    cancel: threading.Event | None = None,
    cache_dir: Path | None = None,
) -> VariantInfo | None:
    """The ``precision`` variant of ``spec`` if the cache holds it, else None; builds nothing.

    For int8 the cache key depends on the calibration frames, so ``source`` is read
    (a second or so: the frames prepare_variant would take) unless it is a file that
    was calibrated before (int8_sources.py: then no frame is read); without a source,
    None.
    A GUI restoring the precision of the last session asks this before offering to
    calibrate again.
    """
    precision, model_hash, fp32 = _start(spec, precision)
    if fp32 is not None:
        return fp32
    root = variants_dir(cache_dir)
    if precision == "fp16":
        return _cached_fp16(spec, *_fp16_entry(spec, model_hash, root))
    if not source:
        return None
    settings = settings or CalibrationSettings()
    settings.validate()
    cached, link = _linked_int8(spec, model_hash, source, settings, root)
    if cached is not None:
        return cached
    frames = read_calibration_frames(
        spec, source, settings.frames, cancel=cancel, patch=settings.patch
    )
    _, key, entry = _int8_entry(spec, model_hash, frames, settings, root)
    cached = _cached_int8(spec, key, entry)
    if cached is not None and link is not None:
        write_link(link, entry, key)
    return cached


def variant_precision(path: Path) -> str | None:
    """The precision of a cached variant file (``VariantInfo.path``), None for any other file."""
    if path.name != MODEL_FILE:
        return None
    meta = read_entry(path.parent)
    if meta is None:
        return None
    precision = meta.get("precision")
    return precision if precision in PRECISIONS else None


def model_for(spec: ModelSpec, precision: str) -> ModelSpec:
    """The ModelSpec to load for ``precision`` when no source is at hand (FramePipeline).

    fp32: ``spec``. A spec that already points at a variant of that precision (the
    ``spec`` of a VariantInfo): itself. fp16: the cached or freshly converted variant.
    int8 needs calibration on a source first: ConfigError, unless already prepared.
    """
    precision = precision.strip().lower()
    if precision == "fp32" or variant_precision(spec.path) == precision:
        return spec
    if precision == "int8":
        raise ConfigError(
            "INT8 is calibrated on frames of your own video: prepare it with "
            "prepare_variant(spec, 'int8', source=...) and pass its spec"
        )
    return prepare_variant(spec, precision).spec


def fp32_variant(spec: ModelSpec) -> VariantInfo:
    """The model as it is, as a variant: switching back to FP32 needs no preparation."""
    return VariantInfo("fp32", spec.path, spec, "", False)
