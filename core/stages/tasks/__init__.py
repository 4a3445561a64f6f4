"""Tasks: what is task-specific (input geometry, output decoding, parameters, overlay,
agreement, export): detection (and faces) and super-resolution. ``task_for`` picks a
model's task."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from framelens.core.errors import ModelError
from framelens.core.models.spec import ModelSpec
from framelens.core.stages.tasks.base import OutputWriter, Task
from framelens.core.stages.tasks.detect.task import MATCH_IOU, DetectionTask, DetectParams
from framelens.core.stages.tasks.superres.task import SuperResParams, SuperResTask, Upscaled

__all__ = [
    "MATCH_IOU",
    "AnyTask",
    "DetectParams",
    "DetectionTask",
    "OutputWriter",
    "SuperResParams",
    "SuperResTask",
    "Task",
    "Upscaled",
    "task_for",
]

AnyTask = Task[Any, Any, Any, Any]

TASK_KINDS = ("detect", "faces")


def task_for(spec: ModelSpec, output_names: Sequence[str] | None = None) -> AnyTask:
    """The task of a model (its spec's ``task``); ModelError for a task not built yet."""
    if spec.task in TASK_KINDS:
        return DetectionTask(spec, output_names)
    if spec.task == "superres":
        return SuperResTask(spec)
    raise ModelError(f"{spec.name}: FrameLens has no {spec.task!r} task")
