"""FP16: the graph's weights and arithmetic in float16, inputs and outputs kept float32."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import onnx
from framelens.core.errors import EngineError, ModelError

CONVERTER = "onnxruntime.transformers.float16"


def converter_version() -> str:
    try:
        import onnxruntime
    except ImportError:
        return "missing"
    return f"{CONVERTER} (onnxruntime {onnxruntime.__version__})"


def convert_fp16(src: Path, dst: Path) -> dict[str, Any]:
    """Write the float16 version of ``src`` to ``dst``; returns facts for the cache entry.

    Uses ONNX Runtime's maintained converter with keep_io_types=True, so the model
    is fed and read exactly like the FP32 one (Cast nodes at the boundary).
    """
    try:
        from onnxruntime.transformers.float16 import convert_float_to_float16
    except ImportError as exc:
        raise EngineError(
            "FP16 conversion needs ONNX Runtime (pip install onnxruntime or onnxruntime-gpu)"
        ) from exc
    try:
        model = onnx.load(str(src))
    except Exception as exc:
        raise ModelError(f"{src} is not a valid ONNX model: {exc}") from exc
    try:
        converted = convert_float_to_float16(model, keep_io_types=True)
    except Exception as exc:
        raise ModelError(f"cannot convert {src.name} to float16: {exc}") from exc
    onnx.save(converted, str(dst))
    fp16_initializers = sum(
        1 for i in converted.graph.initializer if i.data_type == onnx.TensorProto.FLOAT16
    )
    return {"converter": converter_version(), "fp16_initializers": fp16_initializers}
