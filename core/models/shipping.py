"""A model sent to processes that cannot see its file (the workers of a Ray cluster
whose nodes share no file system with the driver).

``pack_model`` reads, in the driver, everything the model is made of: its ONNX file,
the external-data files its weights are in, its sidecar (``<model>.toml``) and the
labels file the sidecar names, and, for a cached precision variant, the entry's
metadata (its precision: a worker's engine recognises the variant by it instead of
converting the graph again). ``materialise`` writes that, on the worker's machine, into
its own cache: ``<cache root>/shipped/<model>-<key>/``, keyed by the SHA-256 of the
contents, written in a staging directory and renamed (core/cache.py) so that workers
starting together on one node share one complete copy, and reused when present. The
spec it returns is the caller's, pointing at the local copy.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from framelens.core.cache import (
    META_FILE,
    MODEL_FILE,
    cache_root,
    digest,
    inside,
    read_entry,
    staging,
)
from framelens.core.errors import ModelError
from framelens.core.models.inspect import check_external_data
from framelens.core.models.sidecar import sidecar_path
from framelens.core.models.spec import ModelSpec

SHIPPED_DIR = "shipped"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class PackedModel:
    """A model's files as bytes: ``files`` maps paths relative to the model's folder
    (POSIX) to their contents, the ONNX file first; ``meta`` is the variant metadata of a
    cached variant ({} for any other model); ``key`` the hash of the files (names and
    contents) and the variant's precision."""

    name: str
    files: tuple[tuple[str, bytes], ...]
    meta: dict[str, Any] = field(default_factory=dict)
    key: str = ""


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ModelError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


def _labels_file(sidecar: Path, folder: Path) -> str | None:
    """The labels file a sidecar names, relative to the model's folder (when inside it)."""
    try:
        with sidecar.open("rb") as f:
            entry = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError):
        return None  # the driver read the sidecar already: its labels are in the spec
    name = entry.get("labels_file")
    if not isinstance(name, str) or not name:
        return None
    file = (folder / name).resolve()
    if not file.is_file() or not file.is_relative_to(folder.resolve()):
        return None
    return file.relative_to(folder.resolve()).as_posix()


def pack_model(spec: ModelSpec) -> PackedModel:
    """Everything ``spec``'s model is made of, read into memory (see the module doc);
    ModelError when a file cannot be read."""
    import onnx

    path = Path(spec.path)
    folder = path.parent
    try:
        graph = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # OSError, protobuf's DecodeError, onnx's own errors
        raise ModelError(f"{path.name} is not a readable ONNX model: {exc}") from None
    names = [path.name, *check_external_data(graph, path)]
    sidecar = sidecar_path(path)
    if sidecar.is_file():
        names.append(sidecar.name)
        labels = _labels_file(sidecar, folder)
        if labels is not None and labels not in names:
            names.append(labels)
    files = tuple(
        (PurePosixPath(name).as_posix(), _read(folder / name, f"{spec.name}'s file"))
        for name in names
    )
    meta: dict[str, Any] = {}
    if path.name == MODEL_FILE:  # a cached variant: its precision travels with it
        found = read_entry(folder)
        if found is not None:
            meta = {k: v for k, v in found.items() if k != "files"}
    flat = [part for name, data in files for part in (name, data)]
    key = digest("shipped-model", FORMAT_VERSION, meta.get("precision"), *flat)
    return PackedModel(path.name, files, meta, key)


def _stem(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:40] or "model"


def _target(root: Path, name: str) -> Path:
    """``root``/``name`` for a relative path that stays inside ``root``, else ModelError."""
    target = inside(root, name)
    if target is None or name == META_FILE:
        raise ModelError(f"a shipped model holds a file named {name!r}: refused")
    return target


def materialise(
    packed: PackedModel,
    spec: ModelSpec,
    cache_dir: str | os.PathLike[str] | None = None,
) -> ModelSpec:
    """``spec`` pointing at a local copy of ``packed``: the cache entry of its key
    (``cache_dir``, else $FRAMELENS_CACHE_DIR, else the user cache), written now unless
    a complete one is there already. ConfigError when the cache cannot be written."""
    entry = cache_root(cache_dir) / SHIPPED_DIR / f"{_stem(spec.name)}-{packed.key[:16]}"
    if read_entry(entry) is None:
        with staging(entry) as stage:
            for name, data in packed.files:
                target = _target(stage.path, name)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            entry = stage.commit(
                {**packed.meta, "shipped_key": packed.key, "shipped_from": str(spec.path)}
            )
    return replace(spec, path=entry / packed.name)
