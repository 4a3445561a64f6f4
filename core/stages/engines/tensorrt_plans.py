"""The TensorRT plan cache, for both flavours (tensorrt_flavour.py).

A plan lives in ``<cache root>/tensorrt/<key>/`` (core/cache.py: written whole or not at
all), keyed by the graph's SHA-256, its precision, the shape range (the batch range
included), the flavour and its version, and what it is built for: a GPU (name and
compute capability) or, ahead of time (TensorRT-RTX), a set of compute capabilities. A
plan is loaded only when its recorded size and SHA-256 match the file (a truncated or
foreign plan is rebuilt, never handed to TensorRT); a plan of another version has another
key. One timing cache per flavour version and target speeds up later builds.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from framelens.core.cache import cache_root, digest, read_entry, staging
from framelens.core.errors import EngineError
from framelens.core.gpu.context import DeviceProperties
from framelens.core.models.catalog import model_sha256
from framelens.core.models.spec import ModelSpec
from framelens.core.stages.engines.tensorrt_build import (
    OPTIMIZATION_LEVEL,
    Progress,
    build_plan,
    one_line,
)
from framelens.core.stages.engines.tensorrt_flavour import (
    INSTALL_HINT,
    Flavour,
    import_flavour,
    target_of,
)
from framelens.core.stages.engines.tensorrt_shapes import (
    ShapeRange,
    onnx_input_shape,
    shape_range,
)

log = logging.getLogger(__name__)

PLAN_FILE = "engine.plan"
LAYERS_FILE = "layers.json"  # the engine inspector's layer list, where a GPU ran the plan
PLAN_KIND = "tensorrt-plan"

__all__ = [
    "INSTALL_HINT",
    "PLAN_FILE",
    "BuildFor",
    "PlanInfo",
    "cached_plan",
    "clear_plans",
    "import_tensorrt",
    "list_plans",
    "one_line",
    "plan_key",
    "plans_dir",
    "tensorrt_unavailable",
]


def import_tensorrt() -> Any:
    """The installed TensorRT module (either flavour); EngineError, one line, when none."""
    return import_flavour().module


def tensorrt_unavailable(gpu: DeviceProperties | None = None) -> str | None:
    """Why the TensorRT backend cannot run here (or on ``gpu``), or None."""
    try:
        flavour = import_flavour()
    except EngineError as exc:
        return str(exc)
    if gpu is None:
        return None
    return flavour.cannot_run(gpu.compute_capability)


@dataclass(frozen=True)
class BuildFor:
    """What a plan is built for: the GPU it will run on, or compute capabilities ahead
    of time (``gpu`` None: TensorRT-RTX builds on machines without a GPU)."""

    targets: tuple[str, ...] = ()
    gpu: DeviceProperties | None = None

    @classmethod
    def this_gpu(cls, gpu: DeviceProperties, flavour: Flavour) -> BuildFor:
        """A GPU's build: an ahead-of-time flavour builds for its one target."""
        targets = (target_of(gpu.compute_capability),) if flavour.ahead_of_time else ()
        return cls(targets, gpu)

    def key_parts(self) -> list[Any]:
        gpu = self.gpu
        return [
            list(self.targets),
            None if gpu is None else [gpu.name, list(gpu.compute_capability)],
        ]

    def describe(self) -> str:
        if self.gpu is not None:
            return f"{self.gpu.name} ({target_of(self.gpu.compute_capability)})"
        return ", ".join(self.targets)


def plan_key(
    graph_sha256: str, flavour: str, build_for: BuildFor, shapes: ShapeRange, precision: str
) -> str:
    """The cache key of a plan: a plan only runs on the flavour, version and GPU
    architecture it was built for, and only on the shapes of its profile (the batch
    range is their leading dimension, so a plan for another ``max_batch`` is another).
    ``flavour`` is its label with the full version ("tensorrt-rtx 1.7.1.116")."""
    return digest(
        PLAN_KIND,
        graph_sha256,
        precision,
        flavour,
        build_for.key_parts(),
        [list(shapes.min), list(shapes.opt), list(shapes.max)],
    )


def plans_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    return cache_root(cache_dir) / "tensorrt"


def _full(flavour: Flavour) -> str:
    return f"{flavour.name} {flavour.version}"


@dataclass(frozen=True)
class PlanInfo:
    """One cached plan, as ``framelens engines list`` shows it."""

    entry: Path
    model: str
    precision: str
    flavour: str
    built_for: str
    size: int
    seconds: float
    source: str  # the graph it was built from

    def line(self) -> str:
        return (
            f"{self.model}  {self.precision}  {self.flavour}  {self.built_for}  "
            f"{self.size / 2**20:.1f} MiB  built in {self.seconds:.1f} s"
        )


def _plan_bytes(entry: Path, meta: dict[str, Any]) -> bytes | None:
    """The plan of a complete entry, or None when it is truncated or not what was
    written (size and SHA-256 recorded at build time)."""
    try:
        data = (entry / PLAN_FILE).read_bytes()
    except OSError:
        return None
    if len(data) != meta.get("plan_bytes") or hashlib.sha256(data).hexdigest() != meta.get(
        "plan_sha256"
    ):
        log.warning("the cached plan %s is damaged or foreign: building it again", entry.name)
        return None
    return data


def cached_plan(
    flavour: Flavour,
    path: Path,
    build_for: BuildFor,
    precision: str,
    spec: ModelSpec | None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    max_batch: int = 1,
    on_progress: Progress | None = None,
    cancel: threading.Event | None = None,
    optimization_level: int = OPTIMIZATION_LEVEL,
) -> tuple[bytes, ShapeRange, bool, Path]:
    """The plan for ``path`` built for ``build_for`` and batches up to ``max_batch``: from
    the cache, else built and cached. On a GPU, a plan built ahead of time for targets
    that include the GPU's is used too. Returns (plan, shape range, built now, entry)."""
    _, shape = onnx_input_shape(path)
    shapes = shape_range(shape, spec, max_batch)
    graph = model_sha256(path)
    root = plans_dir(cache_dir)
    candidates = [build_for]
    if build_for.gpu is not None and flavour.ahead_of_time:
        candidates.append(BuildFor(flavour.targets))  # `framelens engines build` without --target
    for candidate in candidates:
        entry = root / plan_key(graph, _full(flavour), candidate, shapes, precision)
        meta = read_entry(entry)
        if meta is not None:
            data = _plan_bytes(entry, meta)
            if data is not None:
                return data, shapes, False, entry
            shutil.rmtree(entry, ignore_errors=True)
    entry = root / plan_key(graph, _full(flavour), build_for, shapes, precision)
    target_key = build_for.describe() if build_for.gpu is None else build_for.gpu.name
    timing = root / f"timing-{digest(_full(flavour), target_key)[:16]}.cache"
    built = build_plan(
        flavour,
        path,
        shapes,
        targets=build_for.targets,
        timing_cache=timing,
        optimization_level=optimization_level,
        on_progress=on_progress,
        cancel=cancel,
    )
    with staging(entry) as stage:
        (stage.path / PLAN_FILE).write_bytes(built.plan)
        stage.commit(
            {
                "kind": PLAN_KIND,
                "model": spec.name if spec is not None else path.stem,
                "source": str(path),
                "graph_sha256": graph,  # which graph's layers layers.json describes
                "precision": precision,
                "flavour": flavour.label,
                "version": flavour.version,
                "built_for": build_for.describe(),
                "targets": list(build_for.targets),
                "gpu": None if build_for.gpu is None else build_for.gpu.name,
                "shapes": {"min": shapes.min, "opt": shapes.opt, "max": shapes.max},
                "max_batch": shapes.max[0],
                "optimization_level": optimization_level,
                "plan_bytes": len(built.plan),
                "plan_sha256": hashlib.sha256(built.plan).hexdigest(),
                "build_seconds": round(built.seconds, 2),
            }
        )
    return built.plan, shapes, True, entry


def list_plans(cache_dir: str | os.PathLike[str] | None = None) -> list[PlanInfo]:
    """Every complete plan in the cache, by model then precision."""
    plans = []
    root = plans_dir(cache_dir)
    with contextlib.suppress(OSError):
        for entry in sorted(p for p in root.iterdir() if p.is_dir()):
            meta = read_entry(entry)
            if meta is None or meta.get("kind") != PLAN_KIND:
                continue
            plans.append(
                PlanInfo(
                    entry,
                    str(meta.get("model", "?")),
                    str(meta.get("precision", "?")),
                    str(meta.get("flavour", "?")),
                    str(meta.get("built_for", "?")),
                    int(meta.get("plan_bytes", 0)),
                    float(meta.get("build_seconds", 0.0)),
                    str(meta.get("source", "")),
                )
            )
    return sorted(plans, key=lambda p: (p.model, p.precision, p.flavour, p.built_for))


def clear_plans(cache_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """Remove every plan and timing cache; returns the plans' source graphs (which stay:
    the precision graphs among them are ONNX Runtime's too)."""
    root = plans_dir(cache_dir)
    sources = [Path(p.source) for p in list_plans(cache_dir) if p.source]
    shutil.rmtree(root, ignore_errors=True)
    return sources
