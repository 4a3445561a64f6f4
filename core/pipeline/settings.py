"""What a pipeline is built for (engine fields) and what may change while it runs."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from framelens.core.models.spec import ModelSpec
from framelens.core.stages.draw.style import OverlayStyle
from framelens.core.stages.tasks import DetectParams, SuperResParams

TaskParams = DetectParams | SuperResParams
"""The parameters of the tasks FrameLens has (detection's conf/iou/classes,
super-resolution's tile)."""


@dataclass(frozen=True)
class PipelineSettings:
    """Everything that decides what a run computes.

    The engine fields (model, backend, device, precision, threads, batch) need a new
    pipeline; the task's ``params`` and the ``overlay`` may change mid-run.
    """

    model: ModelSpec
    params: TaskParams = field(default_factory=DetectParams)
    backend: str = "onnxruntime"
    device: str = "cpu"
    precision: str = "fp32"
    threads: int | None = None
    batch: int = 1  # frames per engine call
    overlay: OverlayStyle = field(default_factory=OverlayStyle)

    def __post_init__(self) -> None:
        # the parameters follow the model's task: a super-resolution model given the
        # default (detection's) parameters gets its own defaults
        superres = self.model.task == "superres"
        if superres != isinstance(self.params, SuperResParams):
            object.__setattr__(self, "params", SuperResParams() if superres else DetectParams())


ENGINE_FIELDS = ("model", "backend", "device", "precision", "threads", "batch")
"""Settings a pipeline is built for; changing one needs a new pipeline."""

PARAM_FIELDS = tuple(f.name for p in (DetectParams, SuperResParams) for f in fields(p))


def with_changes(settings: PipelineSettings, changes: dict[str, object]) -> PipelineSettings:
    """``settings`` with task parameter (conf, iou, classes), ``params`` or ``overlay``
    changes; ValueError for engine fields or names that are neither."""
    fixed = set(ENGINE_FIELDS) & changes.keys()
    if fixed:
        raise ValueError(f"{sorted(fixed)} need a new pipeline")
    params = changes.get("params", settings.params)
    own = {f.name for f in fields(params)}  # type: ignore[arg-type]
    param_changes = {k: v for k, v in changes.items() if k in own}
    rest: dict[str, Any] = {k: v for k, v in changes.items() if k not in PARAM_FIELDS}
    unknown = set(rest) - {"params", "overlay"}
    if unknown:
        raise ValueError(f"unknown settings {sorted(unknown)}")
    if param_changes:
        rest["params"] = replace(rest.get("params", settings.params), **param_changes)
    return replace(settings, **rest)


def without_classes(params: TaskParams) -> TaskParams:
    """``params`` for another model: a detector's class filter dropped (class ids are
    the model's own)."""
    return replace(params, classes=None) if isinstance(params, DetectParams) else params


def same_engine(a: PipelineSettings, b: PipelineSettings) -> bool:
    """True when a pipeline built for ``a`` serves ``b`` by update() alone."""
    return all(getattr(a, k) == getattr(b, k) for k in ENGINE_FIELDS)


def live_changes(settings: PipelineSettings) -> dict[str, object]:
    """The fields of ``settings`` that a running pipeline takes by update()."""
    return {"params": settings.params, "overlay": settings.overlay}
