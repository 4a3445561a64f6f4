"""The task registry: the one place the kinds of task FrameLens runs are listed.

A model's ``task`` (its spec's, from the catalogue, a sidecar or the ONNX metadata)
names an entry: its Task class, the type of its parameters and their defaults, and
what the rest of the program needs to know of it without a type test (a label, whether
its output is an image, whether it writes per-frame outputs). Pipelines, settings, the
CLI and the GUI read entries; nothing outside core/stages/tasks/ compares task names
or tests task types. The built-in tasks are registered by core/stages/tasks/__init__.py;
another task registers itself with ``register`` (tests/unit/test_task_seam.py adds a
classifier that way).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Any

from framelens.core.errors import ModelError
from framelens.core.models.spec import ModelSpec
from framelens.core.stages.tasks.base import Task

AnyTask = Task[Any, Any, Any, Any]

TaskParams = Any
"""The parameters of a model's task: an instance of its registry entry's ``params``
type (detection's conf/iou/classes, super-resolution's tile/region, ...)."""


@dataclass(frozen=True)
class TaskKind:
    """One registered task: ``name`` is the value of ``ModelSpec.task`` it serves (one
    Task class may serve several: detection serves "detect" and "faces")."""

    name: str
    task: type[AnyTask]
    label: str

    @property
    def params(self) -> type[Any]:
        """The type of the task's parameters (a frozen dataclass)."""
        return type(self.task.default_params())

    def default_params(self) -> TaskParams:
        """What a new pipeline of this task starts with."""
        return self.task.default_params()

    @property
    def produces_image(self) -> bool:
        """The output is an image (super-resolution): views show it, compare measures
        it by PSNR/SSIM, export writes it as the video."""
        return self.task.produces_image

    @property
    def writes_outputs(self) -> bool:
        """A run writes per-frame outputs beside its video (detections' .json/.csv)."""
        return self.task.writes_outputs

    @property
    def batches_frames(self) -> bool:
        """Several frames per engine call pay off (False: an image per frame, whose
        engine call is already large)."""
        return self.task.batches_frames

    @property
    def has_thresholds(self) -> bool:
        """The user tunes score thresholds and classes (detection's panel)."""
        return self.task.has_thresholds

    @property
    def finds_objects(self) -> bool:
        """Its outputs are boxes of objects (Detections), which a tracker can follow."""
        return self.task.finds_objects


_lock = threading.Lock()
_kinds: dict[str, TaskKind] = {}


def register(name: str, task: type[AnyTask], label: str | None = None) -> TaskKind:
    """Make ``task`` the task of models whose spec says ``task = name``; returns the
    entry. Registering a name again replaces its entry."""
    kind = TaskKind(name, task, label or name)
    with _lock:
        _kinds[name] = kind
    return kind


def unregister(name: str) -> None:
    """Forget the task registered as ``name`` (a test's own task)."""
    with _lock:
        _kinds.pop(name, None)


@contextmanager
def registered(name: str, task: type[AnyTask], label: str | None = None) -> Iterator[TaskKind]:
    """``task`` registered as ``name`` for the duration of a with block."""
    kind = register(name, task, label)
    try:
        yield kind
    finally:
        unregister(name)


def task_kinds() -> tuple[TaskKind, ...]:
    """Every registered task, in registration order."""
    with _lock:
        return tuple(_kinds.values())


def task_names() -> tuple[str, ...]:
    """The values ``ModelSpec.task`` may take (the CLI's --task choices)."""
    return tuple(k.name for k in task_kinds())


def find_kind(name: str) -> TaskKind | None:
    """The entry registered as ``name``, or None."""
    with _lock:
        return _kinds.get(name)


def task_kind(name: str) -> TaskKind:
    """The entry registered as ``name``; ModelError for a task FrameLens does not have."""
    kind = find_kind(name)
    if kind is None:
        known = ", ".join(task_names())
        raise ModelError(f"FrameLens has no {name!r} task (known: {known})")
    return kind


def kind_of(spec: ModelSpec) -> TaskKind:
    """The entry of ``spec``'s task; ModelError for one not registered."""
    kind = find_kind(spec.task)
    if kind is None:
        raise ModelError(f"{spec.name}: FrameLens has no {spec.task!r} task")
    return kind


def produces_image(spec: ModelSpec) -> bool:
    """``spec``'s task outputs an image (super-resolution); False for tasks not known."""
    kind = find_kind(spec.task)
    return kind is not None and kind.produces_image


def task_for(spec: ModelSpec, output_names: Sequence[str] | None = None) -> AnyTask:
    """The task of a model (its spec's ``task``); ModelError for a task not registered."""
    return kind_of(spec).task.for_model(spec, output_names)


def params_for(spec: ModelSpec, params: TaskParams | None) -> TaskParams:
    """``params`` when they are of ``spec``'s task, else that task's defaults (a model
    of another task given the previous model's parameters). ``params`` unchanged for a
    task not registered (building its pipeline says so)."""
    kind = find_kind(spec.task)
    if kind is None:
        return params
    if params is not None and isinstance(params, kind.params):
        return params
    return kind.default_params()


def param_fields() -> frozenset[str]:
    """The names of every registered task's parameters (what ``update`` may change)."""
    return frozenset(f.name for k in task_kinds() for f in fields(k.params))
