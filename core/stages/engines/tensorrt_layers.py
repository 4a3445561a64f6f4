"""Which precision TensorRT ran each ONNX node in: read from the engine inspector's layer
list, stored beside a plan (``layers.json``) the first time a GPU runs it.

A strongly typed INT8 graph says where the Q/DQ pairs are; TensorRT still chooses per
layer whether the INT8 kernel wins (a small or odd-shaped convolution often runs faster
in FP16/FP32 and the Q/DQ pair is folded away). The INT8 sensitivity chart marks those
convolutions "TensorRT kept this layer in float".

The inspector's JSON (``ProfilingVerbosity.DETAILED``, which the builder sets) lists
``Layers``, each with its ``Name`` (fused layers joined by " + "), ``Inputs`` with a
``Format/Datatype`` such as "Int8 NC/32HW32" or "Half format NHWC8", and ``Metadata``
naming the ONNX nodes it came from ("[ONNX Layer: /backbone/conv1/Conv]", several
separated by U+001E). With only layer names (a plan built with less verbosity) no
precision can be read and the result is empty.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from framelens.core.cache import read_entry
from framelens.core.models.catalog import model_sha256
from framelens.core.stages.engines.tensorrt_plans import LAYERS_FILE, plans_dir

_ONNX_LAYER = re.compile(r"\[ONNX Layer: ([^\]]+)\]")

_DATATYPES = (("int8", "int8"), ("half", "fp16"), ("float", "fp32"), ("bf16", "bf16"))


def _precision(datatype: str) -> str | None:
    text = datatype.strip().lower()
    for prefix, name in _DATATYPES:
        if text.startswith(prefix):
            return name
    return None


def _onnx_nodes(layer: dict[str, Any]) -> list[str]:
    meta = str(layer.get("Metadata", ""))
    found = _ONNX_LAYER.findall(meta)
    if found:
        return [name.strip() for name in found]
    return [part.strip() for part in str(layer.get("Name", "")).split(" + ") if part.strip()]


def layer_precisions(text: str) -> dict[str, str]:
    """ONNX node name -> the precision its TensorRT layer computed in ("int8", "fp16",
    "fp32"), read from the first input of the layer it ended up in."""
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    layers = data.get("Layers", []) if isinstance(data, dict) else []
    out: dict[str, str] = {}
    for layer in layers:
        if not isinstance(layer, dict):  # names only: no precision to read
            continue
        inputs = layer.get("Inputs") or []
        first = inputs[0] if inputs and isinstance(inputs[0], dict) else {}
        precision = _precision(str(first.get("Format/Datatype", "")))
        if precision is None:
            continue
        for node in _onnx_nodes(layer):
            out.setdefault(node, precision)
    return out


def kept_in_float(precisions: dict[str, str], quantized: list[str]) -> set[str]:
    """The convolutions the graph quantized that TensorRT ran in floating point."""
    return {name for name in quantized if precisions.get(name) in ("fp16", "fp32", "bf16")}


def plan_layer_precisions(
    graph: str | Path, cache_dir: str | Path | None = None
) -> dict[str, str] | None:
    """The layer precisions of the newest cached plan built from ``graph`` (an ONNX
    file) that a GPU has run (its ``layers.json``); None when there is none."""
    root = plans_dir(cache_dir)
    try:
        sha = model_sha256(Path(graph))
        entries = [p for p in root.iterdir() if p.is_dir() and (p / LAYERS_FILE).is_file()]
    except OSError:
        return None
    best: tuple[float, dict[str, str]] | None = None
    for entry in entries:
        meta = read_entry(entry)
        if meta is None or meta.get("graph_sha256") != sha:
            continue
        layers = entry / LAYERS_FILE
        found = layer_precisions(layers.read_text(encoding="utf-8", errors="replace"))
        stamp = layers.stat().st_mtime
        if found and (best is None or stamp > best[0]):
            best = (stamp, found)
    return None if best is None else best[1]
