"""The bundled model catalogue (framelens/models/catalog.toml) and model lookup.

A model is named either by a catalogue name (or alias) or by the path of a user's
ONNX file, which framelens.core.models.inspect recognises.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tomllib
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

from framelens.core.errors import ModelError
from framelens.core.models.inspect import inspect_model
from framelens.core.models.labels import read_labels
from framelens.core.models.sidecar import entry_fields
from framelens.core.models.spec import TASK_OF_LAYOUT, ModelSpec

__all__ = [
    "DEFAULT_FACES_MODEL",
    "DEFAULT_MODEL",
    "DEFAULT_SUPERRES_MODEL",
    "default_model",
    "load_catalog",
    "model_sha256",
    "read_labels",
    "resolve_model",
]

DEFAULT_MODEL = "yolox-nano"
DEFAULT_SUPERRES_MODEL = "espcn-x2"
DEFAULT_FACES_MODEL = "yunet"  # what --task faces runs without --model
_DEFAULT_BY_TASK = {"superres": DEFAULT_SUPERRES_MODEL, "faces": DEFAULT_FACES_MODEL}


def default_model(task: str | None) -> str:
    """The catalogue model a task runs when none is given (--task without --model)."""
    return _DEFAULT_BY_TASK.get(task or "", DEFAULT_MODEL)


_PACKAGE = "framelens.models"
_REQUIRED = ("file", "layout", "input_size")
_REQUIRED_BY_TASK = {"detect": ("labels",), "faces": ("labels",), "superres": ("scale", "channels")}


def _models_dir() -> Path:
    # A regular package installed as files (wheel or editable): a real directory,
    # which ONNX Runtime needs; models are never loaded from inside a zip.
    return Path(str(resources.files(_PACKAGE)))


def _spec(name: str, entry: dict[str, Any], folder: Path) -> ModelSpec:
    where = f"catalog.toml [{name}]"
    task = TASK_OF_LAYOUT.get(str(entry.get("layout")), "")
    missing = [k for k in (*_REQUIRED, *_REQUIRED_BY_TASK.get(task, ())) if k not in entry]
    if missing:
        raise ModelError(f"{where}: missing {', '.join(missing)}")
    body = {k: v for k, v in entry.items() if k not in ("file", "aliases")}
    fields = entry_fields(body, where, folder)
    derived = TASK_OF_LAYOUT[fields["layout"]]
    if fields.setdefault("task", derived) != derived:
        raise ModelError(f"{where}: task {fields['task']!r} contradicts layout {fields['layout']}")
    return ModelSpec(name=name, path=folder / entry["file"], **fields)


@functools.cache
def _load() -> tuple[dict[str, ModelSpec], dict[str, str]]:
    """(specs by name, alias -> name), read once per process."""
    folder = _models_dir()
    try:
        data = tomllib.loads((folder / "catalog.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ModelError(f"the model catalogue cannot be read: {exc}") from exc
    specs = {name: _spec(name, entry, folder) for name, entry in data.get("models", {}).items()}
    aliases = {
        alias: name for name, entry in data["models"].items() for alias in entry.get("aliases", ())
    }
    return specs, aliases


def load_catalog() -> dict[str, ModelSpec]:
    """The bundled models by name, the default first."""
    specs = _load()[0]
    return dict(sorted(specs.items(), key=lambda kv: kv[0] != DEFAULT_MODEL))


def resolve_model(
    name_or_path: str,
    *,
    layout: str | None = None,
    labels_file: str | None = None,
    task: str | None = None,
) -> ModelSpec:
    """The ModelSpec for a catalogue name or alias, or for the path of an ONNX file.

    layout/labels_file/task are the CLI's --layout/--labels/--task; for a catalogue
    model they may only confirm it (and --labels may rename its classes).
    """
    specs, aliases = _load()
    key = aliases.get(name_or_path, name_or_path)
    if key not in specs:
        looks_like_path = (
            name_or_path.lower().endswith(".onnx")
            or os.sep in name_or_path
            or "/" in name_or_path
            or Path(name_or_path).exists()
        )
        if not looks_like_path:
            raise ModelError(
                f"unknown model {name_or_path!r}: not one of {', '.join(specs)} "
                "and not an .onnx file"
            )
        return inspect_model(
            Path(name_or_path).expanduser(), layout=layout, labels_file=labels_file, task=task
        )
    spec = specs[key]
    if layout is not None and layout != spec.layout:
        raise ModelError(f"{key} is a {spec.layout} model; --layout {layout} does not fit it")
    if task is not None and task != spec.task:
        raise ModelError(f"{key} is a '{spec.task}' model; task {task!r} does not fit it")
    if labels_file is not None:
        labels = read_labels(labels_file)
        if len(labels) != len(spec.labels):
            raise ModelError(
                f"{labels_file} has {len(labels)} labels; {key} has {len(spec.labels)} classes"
            )
        spec = replace(spec, labels=labels)
    return spec


@functools.lru_cache(maxsize=64)
def _sha256(path: str, mtime_ns: int, size: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def model_sha256(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a model file, computed once per path and modification time."""
    p = Path(path).resolve()
    try:
        st = p.stat()
    except OSError as exc:
        raise ModelError(f"model file {p} does not exist") from exc
    return _sha256(str(p), st.st_mtime_ns, st.st_size)
