"""Tasks: what is task-specific (input geometry, output decoding, parameters, overlay,
agreement, export, the device half): detection (and faces) and super-resolution,
registered here in the task registry (registry.py), which ``task_for`` reads to pick a
model's task."""

from __future__ import annotations

from dataclasses import replace

from framelens.core.stages.tasks.base import OutputWriter, Task
from framelens.core.stages.tasks.detect.task import MATCH_IOU, DetectionTask, DetectParams
from framelens.core.stages.tasks.registry import (
    AnyTask,
    TaskKind,
    TaskParams,
    find_kind,
    kind_of,
    param_fields,
    params_for,
    produces_image,
    register,
    registered,
    task_for,
    task_kind,
    task_kinds,
    task_names,
    unregister,
)
from framelens.core.stages.tasks.superres.output import SuperResParams, Upscaled
from framelens.core.stages.tasks.superres.task import SuperResTask

__all__ = [
    "MATCH_IOU",
    "AnyTask",
    "DetectParams",
    "DetectionTask",
    "OutputWriter",
    "SuperResParams",
    "SuperResTask",
    "Task",
    "TaskKind",
    "TaskParams",
    "Upscaled",
    "find_kind",
    "kind_of",
    "param_fields",
    "params_for",
    "produces_image",
    "register",
    "registered",
    "task_for",
    "task_kind",
    "task_kinds",
    "task_names",
    "unregister",
    "without_classes",
]

register("detect", DetectionTask, "object detection")
register("faces", DetectionTask, "face detection")
register("superres", SuperResTask, "super-resolution")


def without_classes(params: TaskParams) -> TaskParams:
    """``params`` for another model: a detector's class filter dropped (class ids are
    the model's own)."""
    return replace(params, classes=None) if isinstance(params, DetectParams) else params
