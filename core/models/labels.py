"""Class names: labels files (one per line, JSON, or a Python dict literal) and the
list / {id: name} values that sidecars and model metadata give."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from framelens.core.errors import ModelError


def read_labels(path: str | Path) -> tuple[str, ...]:
    """Class names from a file: one per line, or a JSON list / {id: name} object.

    A Python dict literal such as Ultralytics' ``{0: 'person', ...}`` is accepted
    too. Blank lines and lines starting with '#' are skipped.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ModelError(f"cannot read labels file {p}: {exc.strerror or exc}") from exc
    stripped = text.strip()
    if stripped[:1] in ("[", "{"):
        try:
            value: object = json.loads(stripped)
        except json.JSONDecodeError:
            try:
                value = ast.literal_eval(stripped)
            except (ValueError, SyntaxError) as exc:
                raise ModelError(f"labels file {p} is neither JSON nor a list: {exc}") from exc
        labels = names_from_value(value, str(p))
    else:
        lines = (line.strip() for line in text.splitlines())
        labels = tuple(line for line in lines if line and not line.startswith("#"))
    if not labels:
        raise ModelError(f"labels file {p} has no labels")
    return labels


def names_from_value(value: object, where: str) -> tuple[str, ...]:
    """A list of names, or a {0: name, 1: name, ...} mapping with ids 0..n-1."""
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    if isinstance(value, dict):
        try:
            by_id = {int(k): str(v) for k, v in value.items()}
        except (TypeError, ValueError) as exc:
            raise ModelError(f"{where}: class ids must be integers") from exc
        if sorted(by_id) != list(range(len(by_id))):
            raise ModelError(f"{where}: class ids must run 0..{len(by_id) - 1} without gaps")
        return tuple(by_id[i] for i in range(len(by_id)))
    raise ModelError(f"{where}: labels must be a list or an {{id: name}} mapping")
