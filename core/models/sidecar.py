"""Catalogue entries and sidecar files: the keys that describe a model, validated.

A sidecar sits next to the model, named after it plus ``.toml`` (``best.onnx`` ->
``best.onnx.toml``). Format (TOML, the keys of a models/catalog.toml entry, all
optional)::

    layout = "yolox"             # yolox | yolov5 | yolov8 | end2end | yunet | superres
    labels = ["cat", "dog"]      # or labels_file = "classes.txt" (next to the sidecar)
    color_order = "bgr"          # bgr | rgb: channel order the network expects
    input_scale = 1.0            # 0..255 pixel values are multiplied by this (1/255: 0.0039215686)
    letterbox = "topleft"        # topleft | center: where the resized image sits
    pad_value = 114              # grey level of the letterbox padding
    input_size = [640, 640]      # height, width; only for models with a dynamic input
    dynamic_input = false        # true: feed the frame's own aspect, padded to stride_multiple
    stride_multiple = 32
    task = "detect"              # detect | faces | superres (must agree with the layout)
    scale = 2                    # superres: output = scale x input
    channels = 3                 # superres: 1 = Y channel of OpenCV YCrCb, 3 = colour
    description = "..."
    licence = "..."
    origin = "..."
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from framelens.core.errors import ModelError
from framelens.core.models.labels import read_labels
from framelens.core.models.spec import LAYOUTS, TASK_OF_LAYOUT

PREP_KEYS = ("color_order", "input_scale", "letterbox", "pad_value", "stride_multiple")
"""ModelSpec fields about feeding the network that a sidecar may set."""

_CHOICES = {
    "layout": LAYOUTS,
    "task": tuple(sorted(set(TASK_OF_LAYOUT.values()))),
    "color_order": ("bgr", "rgb"),
    "letterbox": ("topleft", "center"),
}
_STRINGS = ("description", "licence", "origin")
ENTRY_KEYS = (
    *_CHOICES,
    "labels",
    "labels_file",
    "input_scale",
    "pad_value",
    "input_size",
    "dynamic_input",
    "stride_multiple",
    "scale",
    "channels",
    *_STRINGS,
)


def entry_fields(entry: Mapping[str, Any], where: str, base_dir: Path) -> dict[str, Any]:
    """Validate a catalogue entry or sidecar; returns the ModelSpec fields it sets.

    labels_file is read relative to base_dir and returned as ``labels``.
    """
    unknown = sorted(set(entry) - set(ENTRY_KEYS))
    if unknown:
        raise ModelError(f"{where}: unknown keys {unknown}; known: {', '.join(ENTRY_KEYS)}")
    out: dict[str, Any] = {}

    def bad(key: str, want: str) -> ModelError:
        return ModelError(f"{where}: {key} must be {want}, got {entry[key]!r}")

    for key, choices in _CHOICES.items():
        if key in entry:
            if entry[key] not in choices:
                raise bad(key, " or ".join(repr(c) for c in choices))
            out[key] = entry[key]
    for key in _STRINGS:
        if key in entry:
            if not isinstance(entry[key], str):
                raise bad(key, "a string")
            out[key] = entry[key]
    if "labels" in entry and "labels_file" in entry:
        raise ModelError(f"{where}: give labels or labels_file, not both")
    if "labels" in entry:
        labels = entry["labels"]
        if (
            not isinstance(labels, list)
            or not labels
            or not all(isinstance(x, str) for x in labels)
        ):
            raise bad("labels", "a non-empty list of strings")
        out["labels"] = tuple(labels)
    if "labels_file" in entry:
        if not isinstance(entry["labels_file"], str):
            raise bad("labels_file", "a file name")
        out["labels"] = read_labels(base_dir / entry["labels_file"])
    if "input_scale" in entry:
        scale = entry["input_scale"]
        if isinstance(scale, bool) or not isinstance(scale, int | float) or scale <= 0:
            raise bad("input_scale", "a positive number")
        out["input_scale"] = float(scale)
    if "pad_value" in entry:
        pad = entry["pad_value"]
        if isinstance(pad, bool) or not isinstance(pad, int) or not 0 <= pad <= 255:
            raise bad("pad_value", "an integer 0..255")
        out["pad_value"] = pad
    if "stride_multiple" in entry:
        m = entry["stride_multiple"]
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise bad("stride_multiple", "a positive integer")
        out["stride_multiple"] = m
    if "scale" in entry:
        k = entry["scale"]
        if isinstance(k, bool) or not isinstance(k, int) or not 2 <= k <= 8:
            raise bad("scale", "an integer 2..8")
        out["scale"] = k
    if "channels" in entry:
        if entry["channels"] not in (1, 3) or isinstance(entry["channels"], bool):
            raise bad("channels", "1 (Y of YCrCb) or 3 (colour)")
        out["channels"] = entry["channels"]
    if "dynamic_input" in entry:
        if not isinstance(entry["dynamic_input"], bool):
            raise bad("dynamic_input", "true or false")
        out["dynamic_input"] = entry["dynamic_input"]
    if "input_size" in entry:
        size = entry["input_size"]
        ok = isinstance(size, list) and len(size) == 2
        if not ok or not all(
            isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in size
        ):
            raise bad("input_size", "[height, width] in pixels")
        out["input_size"] = (size[0], size[1])
    return out


def sidecar_path(model: Path) -> Path:
    return model.with_name(model.name + ".toml")


def read_sidecar(model: Path) -> dict[str, Any]:
    """The fields a ``<model>.onnx.toml`` sets, or {} when there is none."""
    path = sidecar_path(model)
    if not path.is_file():
        return {}
    try:
        with path.open("rb") as f:
            entry = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ModelError(f"cannot read {path.name}: {exc}") from exc
    return entry_fields(entry, path.name, path.parent)
