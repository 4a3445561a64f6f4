"""A user's super-resolution ONNX file (Real-ESRGAN, EDSR, SwinIR exports): recognised
from its shapes or described by its sidecar.

Recognised from the shapes: one [N, C, H, W] input with C = 1 or 3, a first output of
rank 4 with the same C, and an output that is ``scale`` times the input on both sides,
scale 2..8. Where the graph's spatial dims are symbolic (most exports), the model is run
once on the CPU on a small blank input to read the scale. A sidecar with
``task = "superres"`` (or ``layout = "superres"``) may give ``scale`` and ``channels``
instead, and the feeding keys: ``color_order`` (default rgb for colour models: PyTorch
exports are RGB), ``input_scale`` (default 1/255: 0..1 input) and ``input_size`` (the
largest tile; default from the model's size).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from framelens.core.errors import ModelError
from framelens.core.models.spec import ModelSpec

PROBE_SIDE = 24
"""The side of the blank input a model with symbolic dims is run on to read its scale."""
UNTILED_INPUT = (2160, 3840)  # small models: up to 4K frames in one piece
HEAVY_INPUT = (512, 512)  # deep ones (activations bound the tile)
HEAVY_BYTES = 4 << 20


def looks_like_superres(inputs: list[Any], outputs: list[Any]) -> bool:
    """One image input and an image output of the same channel count (rank 4 each)."""
    if len(inputs) != 1 or not outputs:
        return False
    i, o = inputs[0].dims, outputs[0].dims
    return len(i) == 4 and len(o) == 4 and i[1] in (1, 3) and o[1] == i[1]


def _static_scale(in_dims: list[Any], out_dims: list[Any]) -> int | None:
    sides = list(zip(in_dims[2:], out_dims[2:], strict=True))
    if not all(isinstance(a, int) and isinstance(b, int) and a > 0 for a, b in sides):
        return None
    ratios = {b / a for a, b in sides}
    if len(ratios) != 1:
        return 0
    r = ratios.pop()
    return int(r) if r == int(r) else 0


def probe_scale(path: Path, channels: int, in_dims: list[Any]) -> int:
    """Run the model once on a blank input (CPU) and read the output's scale."""
    import onnxruntime as ort

    h = in_dims[2] if isinstance(in_dims[2], int) and in_dims[2] > 0 else PROBE_SIDE
    w = in_dims[3] if isinstance(in_dims[3], int) and in_dims[3] > 0 else PROBE_SIDE
    options = ort.SessionOptions()
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        name = session.get_inputs()[0].name
        out = session.run(None, {name: np.zeros((1, channels, h, w), np.float32)})[0]
    except Exception as exc:
        raise ModelError(f"{path.name}: running it once to read its scale failed: {exc}") from None
    scale = _static_scale([1, channels, h, w], list(out.shape)) if out.ndim == 4 else 0
    if not scale:
        raise ModelError(
            f"{path.name}: a {w}x{h} input gave a {list(out.shape)} output, not an image "
            "upscaled by a whole factor"
        )
    return scale


def superres_spec(
    path: Path, inputs: list[Any], outputs: list[Any], sidecar: dict[str, Any]
) -> ModelSpec | None:
    """The spec of a super-resolution model, or None when it is not one (neither its
    sidecar nor its shapes say so)."""
    declared = sidecar.get("task") == "superres" or sidecar.get("layout") == "superres"
    if not declared and not looks_like_superres(inputs, outputs):
        return None
    name = path.name
    if len(inputs) != 1:
        raise ModelError(f"{name}: a super-resolution model has one input, not {len(inputs)}")
    in_dims = list(inputs[0].dims)
    channels = sidecar.get("channels") or (in_dims[1] if len(in_dims) == 4 else None)
    if channels not in (1, 3):
        raise ModelError(
            f"{name}: cannot tell the channels of its input {in_dims}; "
            f"add channels = 1 or 3 to {name}.toml"
        )
    scale = sidecar.get("scale")
    if scale is None:
        static = _static_scale(in_dims, list(outputs[0].dims)) if outputs else None
        scale = static or probe_scale(path, channels, in_dims)
    if not 2 <= scale <= 8:
        raise ModelError(f"{name}: an upscaling factor of {scale}; FrameLens takes 2 to 8")
    heavy = path.stat().st_size > HEAVY_BYTES
    static_size = tuple(in_dims[2:]) if all(isinstance(d, int) for d in in_dims[2:]) else None
    default_size = HEAVY_INPUT if heavy else UNTILED_INPUT
    input_size = sidecar.get("input_size") or static_size or default_size
    return ModelSpec(
        name=path.stem,
        path=path.resolve(),
        layout="superres",
        task="superres",
        input_size=(int(input_size[0]), int(input_size[1])),
        color_order=sidecar.get("color_order", "rgb"),
        input_scale=sidecar.get("input_scale", 1.0 / 255.0),
        scale=int(scale),
        channels=int(channels),
        licence=sidecar.get("licence", ""),
        origin=sidecar.get("origin", str(path)),
        description=sidecar.get("description")
        or f"user super-resolution model (x{scale}, {'Y' if channels == 1 else 'colour'})",
    )
