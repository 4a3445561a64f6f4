"""What a pipeline is built for (engine fields) and what may change while it runs."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from framelens.core.models.spec import ModelSpec
from framelens.core.stages.draw.style import OverlayStyle
from framelens.core.stages.tasks import TaskParams, param_fields, params_for, without_classes

__all__ = [
    "ENGINE_FIELDS",
    "PipelineSettings",
    "TaskParams",
    "live_changes",
    "same_engine",
    "with_changes",
    "without_classes",
]


@dataclass(frozen=True)
class PipelineSettings:
    """Everything that decides what a run computes.

    The engine fields (model, backend, device, precision, threads, batch) need a new
    pipeline; the task's ``params`` and the ``overlay`` may change mid-run.
    """

    model: ModelSpec
    params: TaskParams = None  # None: the defaults of the model's task (its registry entry)
    backend: str = "onnxruntime"
    device: str = "cpu"
    precision: str = "fp32"
    threads: int | None = None
    batch: int = 1  # frames per engine call
    overlay: OverlayStyle = field(default_factory=OverlayStyle)

    def __post_init__(self) -> None:
        # the parameters follow the model's task: a model given none, or another task's,
        # gets its own task's defaults
        params = params_for(self.model, self.params)
        if params is not self.params:
            object.__setattr__(self, "params", params)


ENGINE_FIELDS = ("model", "backend", "device", "precision", "threads", "batch")
"""Settings a pipeline is built for; changing one needs a new pipeline."""


def with_changes(settings: PipelineSettings, changes: dict[str, object]) -> PipelineSettings:
    """``settings`` with task parameter (conf, iou, classes), ``params`` or ``overlay``
    changes; ValueError for engine fields or names that are neither."""
    fixed = set(ENGINE_FIELDS) & changes.keys()
    if fixed:
        raise ValueError(f"{sorted(fixed)} need a new pipeline")
    params: Any = changes.get("params", settings.params)
    own = {f.name for f in fields(params)}
    param_changes = {k: v for k, v in changes.items() if k in own}
    every_param = param_fields()
    rest: dict[str, Any] = {k: v for k, v in changes.items() if k not in every_param}
    unknown = set(rest) - {"params", "overlay"}
    if unknown:
        raise ValueError(f"unknown settings {sorted(unknown)}")
    if param_changes:
        rest["params"] = replace(params, **param_changes)
    return replace(settings, **rest)


def same_engine(a: PipelineSettings, b: PipelineSettings) -> bool:
    """True when a pipeline built for ``a`` serves ``b`` by update() alone."""
    return all(getattr(a, k) == getattr(b, k) for k in ENGINE_FIELDS)


def live_changes(settings: PipelineSettings) -> dict[str, object]:
    """The fields of ``settings`` that a running pipeline takes by update()."""
    return {"params": settings.params, "overlay": settings.overlay}
