"""The baseline the GPU pipeline is measured against: a tutorial-style per-frame loop.

OpenCV decodes on the CPU, the letterbox is done on the CPU with fresh arrays each
frame, ONNX Runtime's CUDA provider runs the model with numpy in and out, and the
boxes are decoded and suppressed in Python/numpy. One step after the other, as in a
typical "YOLO with ONNX Runtime on the GPU" example.
"""

from __future__ import annotations

import time
from typing import Any

import cv2
import numpy as np
from framelens.core.geometry import Letterbox, letterbox_geometry
from framelens.core.models.spec import ModelSpec
from framelens.core.stages.tasks.detect.decoders import make_decoder


def letterbox(image: np.ndarray, spec: ModelSpec) -> tuple[np.ndarray, Letterbox]:
    h, w = spec.input_size
    ratio, nw, nh, px, py = letterbox_geometry(image.shape[1], image.shape[0], w, h, spec.letterbox)
    canvas = np.full((h, w, 3), spec.pad_value, dtype=np.uint8)
    canvas[py : py + nh, px : px + nw] = cv2.resize(image, (nw, nh))
    if spec.color_order == "rgb":
        canvas = canvas[..., ::-1]
    tensor = canvas.transpose(2, 0, 1)[None].astype(np.float32) * np.float32(spec.input_scale)
    geometry = Letterbox(ratio, float(px), float(py), image.shape[1], image.shape[0])
    return np.ascontiguousarray(tensor), geometry


def naive_loop(
    path: str,
    spec: ModelSpec,
    frames: int,
    *,
    conf: float = 0.25,
    iou: float = 0.45,
    provider: str = "CUDAExecutionProvider",
) -> dict[str, Any]:
    """Frames per second of decode -> letterbox -> session.run -> decode+NMS, serially."""
    import onnxruntime as ort

    session = ort.InferenceSession(
        str(spec.path), providers=list(dict.fromkeys([provider, "CPUExecutionProvider"]))
    )
    if session.get_providers()[0] != provider:
        raise RuntimeError(f"naive loop: ONNX Runtime did not take {provider}")
    name = session.get_inputs()[0].name
    decode = make_decoder(spec)
    cap = cv2.VideoCapture(path)
    warmup = 10
    detections = 0
    done = 0
    start = 0.0
    while done < frames + warmup:
        ok, image = cap.read()
        if not ok:
            break
        if done == warmup:
            start = time.perf_counter()
        tensor, geometry = letterbox(image, spec)
        outputs = session.run(None, {name: tensor})
        detections += len(decode(outputs, [geometry], conf, iou, None)[0])
        done += 1
    wall = time.perf_counter() - start
    cap.release()
    measured = done - warmup
    return {"fps": measured / wall, "frames": measured, "detections": detections}
