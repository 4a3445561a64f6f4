"""TensorRT engines built before a run: what ``framelens engines build|list|clear`` does.

A model (catalogue name or ONNX path) at a precision: its precision graph first (FP16
converted, INT8 calibrated on a video), then the plan, cached where a run finds it
(core/stages/engines/tensorrt_plans.py). What it is built for: ``--target`` compute
capabilities, else this machine's GPU when the installed flavour runs it, else (no
GPU, TensorRT-RTX) every compute capability the flavour can target, ahead of time.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from framelens.core.errors import EngineError
from framelens.core.models.catalog import resolve_model
from framelens.core.precision import CalibrationSettings, prepare_variant
from framelens.core.stages.engines.tensorrt_flavour import Flavour, import_flavour, parse_targets
from framelens.core.stages.engines.tensorrt_plans import (
    BuildFor,
    PlanInfo,
    cached_plan,
    clear_plans,
    list_plans,
)

Progress = Callable[[str, float], None]


@dataclass(frozen=True)
class EngineBuild:
    """One ``engines build``: the plan's cache entry and how it came about."""

    model: str
    precision: str
    flavour: str
    built_for: str
    entry: Path
    size: int
    built: bool  # False: it was in the cache already
    seconds: float

    def line(self) -> str:
        how = f"built in {self.seconds:.1f} s" if self.built else "cached"
        return (
            f"{self.model} {self.precision}: {self.flavour} for {self.built_for}, "
            f"{self.size / 2**20:.1f} MiB, {how}"
        )


def build_for(flavour: Flavour, targets: str | None, device: str = "cuda:0") -> BuildFor:
    """What ``engines build`` builds for: the targets asked for, this GPU, or all targets."""
    if targets:
        return BuildFor(parse_targets(targets, flavour))
    from framelens.core.gpu.context import cuda_usable, get_context

    if cuda_usable(device) is None:
        gpu = get_context(device).properties
        reason = flavour.cannot_run(gpu.compute_capability)
        if reason is None:
            return BuildFor.this_gpu(gpu, flavour)
        if not flavour.ahead_of_time:
            raise EngineError(reason)
    if flavour.ahead_of_time:
        return BuildFor(flavour.targets)
    raise EngineError(
        f"{flavour.label} builds engines for the GPU it runs on, and there is none here "
        "(TensorRT-RTX builds ahead of time with --target)"
    )


def build_engine(
    model: str,
    precision: str,
    *,
    calibration: str,
    targets: str | None = None,
    max_batch: int = 1,
    on_progress: Progress | None = None,
    cancel: threading.Event | None = None,
    calibration_settings: CalibrationSettings | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> EngineBuild:
    """The plan of ``model`` at ``precision``, from the cache or built now (INT8 is
    calibrated on ``calibration`` first). ``on_progress(text, 0..1)`` covers both
    steps; ``cancel`` stops either and leaves nothing cached."""
    flavour = import_flavour()
    spec = resolve_model(model)
    target = build_for(flavour, targets)

    def stage(name: str, lo: float, hi: float) -> Progress:
        def report(text: str, fraction: float) -> None:
            if on_progress is not None:
                on_progress(f"{name}: {text}", lo + (hi - lo) * fraction)

        return report

    graph_share = 0.0 if precision == "fp32" else (0.7 if precision == "int8" else 0.2)
    variant = prepare_variant(
        spec,
        precision,
        source=calibration,
        settings=calibration_settings,
        on_progress=stage(f"{precision} graph", 0.0, graph_share),
        cancel=cancel,
        cache_dir=Path(cache_dir) if cache_dir is not None else None,
    )
    plan, _, built, entry = cached_plan(
        flavour,
        variant.path,
        target,
        precision,
        variant.spec,
        cache_dir=cache_dir,
        max_batch=max_batch,
        on_progress=stage("engine", graph_share, 1.0),
        cancel=cancel,
    )
    seconds = 0.0
    for info in list_plans(cache_dir):
        if info.entry == entry:
            seconds = info.seconds
    return EngineBuild(
        spec.name, precision, flavour.label, target.describe(), entry, len(plan), built, seconds
    )


def engines_list(cache_dir: str | os.PathLike[str] | None = None) -> list[PlanInfo]:
    return list_plans(cache_dir)


def engines_clear(cache_dir: str | os.PathLike[str] | None = None) -> int:
    """Remove every plan and timing cache: engines only. The precision graphs they were
    built from stay (the FP16 graph and the calibrated INT8 graph are what ONNX Runtime
    runs at those precisions too, and INT8's took a calibration). Returns the plans."""
    plans = len(list_plans(cache_dir))
    clear_plans(cache_dir)
    return plans
