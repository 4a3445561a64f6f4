"""Decoders and NMS, end to end: tiny ONNX models whose outputs encode known boxes
run through Preprocessor -> OnnxRuntimeEngine -> decoder, and the boxes must come
back exactly, in the pixels of a non-square source."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from framelens.core.errors import ModelError
from framelens.core.models.catalog import resolve_model
from framelens.core.models.spec import ModelSpec
from framelens.core.stages.engines.onnxruntime_cpu import OnnxRuntimeEngine
from framelens.core.stages.preprocess.cpu import Preprocessor
from framelens.core.stages.tasks.detect.decoders import make_decoder
from framelens.core.stages.tasks.detect.nms import MAX_DETECTIONS, nms
from framelens.core.types import Detections
from onnx_factory import constant_model, ultralytics_metadata, yolov5_repo_metadata

F32 = npt.NDArray[np.float32]
SRC_W, SRC_H = 640, 360  # 16:9 source into a 320x320 network input
NET = 320
ANCHORS = sum((NET // s) ** 2 for s in (8, 16, 32))  # 2100, as a YOLOv8 head at 320

# (x1, y1, x2, y2 in source pixels, class, score). B overlaps A (IoU 0.82, same
# class: suppressed); C is A's box with another class (kept); E is under conf.
A = ((100, 50, 300, 250), 0, 0.9)
B = ((110, 60, 310, 260), 0, 0.8)
C = ((100, 50, 300, 250), 1, 0.7)
E = ((20, 20, 60, 60), 0, 0.1)
CONF, IOU = 0.25, 0.45


def boxes_for(n_classes: int) -> list[tuple[tuple[int, int, int, int], int, float]]:
    d = ((400, 100, 600, 340), n_classes - 1, 0.6)  # last class id: catches off-by-ones
    return [A, B, C, d, E]


def to_network(box: tuple[int, ...], ratio: float, pad_x: float, pad_y: float) -> F32:
    x1, y1, x2, y2 = box
    return np.array(
        [x1 * ratio + pad_x, y1 * ratio + pad_y, x2 * ratio + pad_x, y2 * ratio + pad_y],
        dtype=np.float32,
    )


def cxcywh(b: F32) -> F32:
    return np.array([(b[0] + b[2]) / 2, (b[1] + b[3]) / 2, b[2] - b[0], b[3] - b[1]], np.float32)


def labels(n: int) -> list[str]:
    return [f"thing{i}" for i in range(n)]


def run(spec: ModelSpec, conf: float = CONF, classes: frozenset[int] | None = None) -> Detections:
    """Black source frame -> preprocess -> ORT -> decode."""
    image = np.zeros((SRC_H, SRC_W, 3), dtype=np.uint8)
    pre = Preprocessor(spec, SRC_W, SRC_H)
    with OnnxRuntimeEngine(spec.path, threads=1) as engine:
        outputs = engine.infer(pre(image))
        decode = make_decoder(spec, engine.output_names)
    return decode(outputs, [pre.geometry], conf, IOU, classes)[0]


def assert_found(dets: Detections, expected: list[tuple[tuple[int, ...], int, float]]) -> None:
    """Exactly these boxes, best score first."""
    assert dets.boxes.dtype == np.float32 and dets.class_ids.dtype == np.int32
    np.testing.assert_allclose(
        dets.boxes, np.array([e[0] for e in expected], np.float32), atol=1e-3
    )
    assert dets.class_ids.tolist() == [e[1] for e in expected]
    np.testing.assert_allclose(dets.scores, [e[2] for e in expected], rtol=1e-5)


# Ultralytics letterbox: 640x360 -> 320x180 centred in 320x320: ratio 0.5, pad_y 70.
CENTER = (0.5, 0.0, 70.0)


@pytest.fixture(params=[3, 80], ids=["C3", "C80"])
def n_classes(request: pytest.FixtureRequest) -> int:
    return int(request.param)


def test_ultralytics_geometry_is_centred(tmp_path: Path) -> None:
    out = np.zeros((1, 7, ANCHORS), np.float32)
    path = constant_model(
        tmp_path / "v8.onnx", {"output0": out}, metadata=ultralytics_metadata(labels(3))
    )
    pre = Preprocessor(resolve_model(str(path)), SRC_W, SRC_H)
    g = pre.geometry
    assert (g.ratio, g.pad_x, g.pad_y) == CENTER


def test_yolov8(tmp_path: Path, n_classes: int) -> None:
    out = np.zeros((1, 4 + n_classes, ANCHORS), np.float32)
    for i, (box, cls, score) in enumerate(boxes_for(n_classes)):
        col = 97 * i + 5  # spread over the anchors
        out[0, :4, col] = cxcywh(to_network(box, *CENTER))
        out[0, 4 + cls, col] = score
        out[0, 4 + (cls + 1) % n_classes, col] = score / 2  # a runner-up class
    meta = ultralytics_metadata(labels(n_classes), model="YOLO11n")
    spec = resolve_model(str(constant_model(tmp_path / "m.onnx", {"output0": out}, metadata=meta)))
    assert spec.layout == "yolov8"
    d = boxes_for(n_classes)[3]
    assert_found(run(spec), [A, C, d])
    assert_found(run(spec, classes=frozenset({1, n_classes - 1})), [C, d])
    assert_found(run(spec, classes=frozenset({0})), [A])
    assert len(run(spec, classes=frozenset())) == 0
    assert_found(run(spec, conf=0.75), [A])


def test_yolov5(tmp_path: Path, n_classes: int) -> None:
    out = np.zeros((1, 3 * ANCHORS, 5 + n_classes), np.float32)
    for i, (box, cls, score) in enumerate(boxes_for(n_classes)):
        row = 311 * i + 2
        out[0, row, :4] = cxcywh(to_network(box, *CENTER))
        obj = min(1.0, score / 0.8)  # score = objectness * class score
        out[0, row, 4] = obj
        out[0, row, 5 + cls] = score / obj
    # A row with high objectness but no class score must not appear.
    out[0, 7, :5] = [160, 160, 50, 50, 0.99]
    meta = yolov5_repo_metadata(labels(n_classes))
    spec = resolve_model(str(constant_model(tmp_path / "m.onnx", {"output0": out}, metadata=meta)))
    assert spec.layout == "yolov5"
    d = boxes_for(n_classes)[3]
    assert_found(run(spec), [A, C, d])
    assert_found(run(spec, classes=frozenset({n_classes - 1})), [d])


def test_end2end_keeps_what_the_graph_kept(tmp_path: Path) -> None:
    out = np.zeros((1, 300, 6), np.float32)
    for i, (box, cls, score) in enumerate(boxes_for(80)):
        out[0, i] = [*to_network(box, *CENTER), score, cls]
    meta = ultralytics_metadata(labels(80), model="YOLOv10n", end2end=True)
    spec = resolve_model(str(constant_model(tmp_path / "m.onnx", {"output0": out}, metadata=meta)))
    assert spec.layout == "end2end"
    d = boxes_for(80)[3]
    # No NMS on top of the graph's: B stays.
    assert_found(run(spec), [A, B, C, d])
    assert_found(run(spec, classes=frozenset({79})), [d])


def test_yolox_grid_decode(tmp_path: Path) -> None:
    """YOLOX rows are grid offsets; each box is placed in a cell of a chosen stride."""
    n_classes = 3
    out = np.zeros((1, ANCHORS, 5 + n_classes), np.float32)
    base = {8: 0, 16: (NET // 8) ** 2, 32: (NET // 8) ** 2 + (NET // 16) ** 2}
    strides = [8, 8, 16, 32, 16]
    for (box, cls, score), s in zip(boxes_for(n_classes), strides, strict=True):
        cx, cy, w, h = cxcywh(to_network(box, 0.5, 0.0, 0.0))  # YOLOX: top-left letterbox
        gx, gy = int(cx // s), int(cy // s)
        row = base[s] + gy * (NET // s) + gx
        out[0, row, :4] = [cx / s - gx, cy / s - gy, math.log(w / s), math.log(h / s)]
        out[0, row, 4] = 1.0
        out[0, row, 5 + cls] = score
    path = constant_model(tmp_path / "x.onnx", {"output": out})
    spec = resolve_model(str(path), layout="yolox")
    assert (spec.color_order, spec.letterbox) == ("bgr", "topleft")
    assert_found(run(spec), [A, C, boxes_for(n_classes)[3]])


def test_yolox_rejects_a_grid_that_does_not_fit(tmp_path: Path) -> None:
    path = constant_model(tmp_path / "x.onnx", {"output": np.zeros((1, 100, 8), np.float32)})
    with pytest.raises(ModelError, match="yolox expects 2100 rows"):
        resolve_model(str(path), layout="yolox")


Face = tuple[tuple[int, int, int, int], list[tuple[int, int]], float, int]
"""Source box, five source landmarks, score, and the stride whose grid holds it."""

YUNET_SRC = (1280, 720)  # -> 640x360, padded to 640x384, ratio 0.5, top-left
YUNET_IN = (384, 640)


def yunet_outputs(faces: list[Face]) -> dict[str, F32]:
    h, w = YUNET_IN
    outs: dict[str, F32] = {}
    for s in (8, 16, 32):
        n = (h // s) * (w // s)
        outs[f"cls_{s}"] = np.zeros((1, n, 1), np.float32)
        outs[f"obj_{s}"] = np.zeros((1, n, 1), np.float32)
        outs[f"bbox_{s}"] = np.zeros((1, n, 4), np.float32)
        outs[f"kps_{s}"] = np.zeros((1, n, 10), np.float32)
    for box, points, score, s in faces:
        cx, cy, bw, bh = cxcywh(to_network(box, 0.5, 0.0, 0.0))
        gx, gy = int(cx // s), int(cy // s)
        i = gy * (w // s) + gx
        outs[f"cls_{s}"][0, i, 0] = score * score  # score = sqrt(cls * obj)
        outs[f"obj_{s}"][0, i, 0] = 1.0
        outs[f"bbox_{s}"][0, i] = [cx / s - gx, cy / s - gy, math.log(bw / s), math.log(bh / s)]
        kps = [(px * 0.5 / s - gx, py * 0.5 / s - gy) for px, py in points]
        outs[f"kps_{s}"][0, i] = np.array(kps, np.float32).ravel()
    return outs


@pytest.fixture
def yunet_like(tmp_path: Path) -> tuple[ModelSpec, list[Face]]:
    eyes_nose_mouth = [(220, 140), (280, 140), (250, 170), (225, 200), (275, 200)]
    faces: list[Face] = [
        ((200, 100, 300, 240), eyes_nose_mouth, 0.9, 8),
        ((204, 104, 304, 244), eyes_nose_mouth, 0.6, 16),  # duplicate: suppressed
        (
            (800, 300, 1000, 560),
            [(850, 380), (950, 380), (900, 430), (860, 500), (940, 500)],
            0.8,
            32,
        ),
    ]
    outs = yunet_outputs(faces)
    # Declared like the real model (symbolic dims), stored in a scrambled order.
    order = sorted(outs, key=lambda k: (k[::-1], k))
    path = constant_model(
        tmp_path / "faces.onnx",
        {k: outs[k] for k in order},
        input_name="input",
        input_shape=("batch", 3, "height", "width"),
        output_dims={k: ("batch", "dim", outs[k].shape[2]) for k in order},
    )
    return resolve_model(str(path)), faces


def test_yunet_decode(yunet_like: tuple[ModelSpec, list[Face]]) -> None:
    spec, faces = yunet_like
    assert (spec.layout, spec.task, spec.labels, spec.dynamic_input) == (
        "yunet",
        "faces",
        ("face",),
        True,
    )
    image = np.zeros((YUNET_SRC[1], YUNET_SRC[0], 3), np.uint8)
    pre = Preprocessor(spec, *YUNET_SRC)
    assert (pre.input_h, pre.input_w) == YUNET_IN and pre.geometry.ratio == 0.5
    with OnnxRuntimeEngine(spec.path) as engine:
        outputs = engine.infer(pre(image))
    decode = make_decoder(spec)  # output names read from the file
    dets = decode(outputs, [pre.geometry], 0.5, 0.3, None)[0]
    kept = [faces[0], faces[2]]
    np.testing.assert_allclose(dets.boxes, [f[0] for f in kept], atol=1e-3)
    np.testing.assert_allclose(dets.scores, [f[2] for f in kept], rtol=1e-5)
    assert dets.landmarks is not None and dets.landmarks.shape == (2, 5, 2)
    np.testing.assert_allclose(dets.landmarks, [f[1] for f in kept], atol=1e-3)
    assert dets.class_ids.tolist() == [0, 0]
    none = decode(outputs, [pre.geometry], 0.5, 0.3, frozenset({1}))[0]
    assert none.landmarks is not None and none.landmarks.shape == (0, 5, 2)


def test_yunet_needs_its_outputs(tmp_path: Path) -> None:
    path = constant_model(tmp_path / "m.onnx", {"cls_8": np.zeros((1, 10, 1), np.float32)})
    spec = ModelSpec("m", path, "yunet", "faces", (640, 640), dynamic_input=True)
    with pytest.raises(ModelError, match="missing"):
        make_decoder(spec)


# ----------------------------------------------------------------------- NMS


def random_boxes(n: int, seed: int, clustered: bool) -> tuple[F32, F32, npt.NDArray[np.int32]]:
    rng = np.random.default_rng(seed)
    if clustered:
        centres = rng.uniform(0, 600, (8, 2))
        xy = centres[rng.integers(0, 8, n)] + rng.normal(0, 6, (n, 2))
        wh = rng.uniform(40, 60, (n, 2))
    else:
        xy, wh = rng.uniform(-20, 600, (n, 2)), rng.uniform(2, 150, (n, 2))
    boxes = np.concatenate([xy, xy + wh], axis=1).astype(np.float32)
    scores = rng.uniform(0.01, 1, n).astype(np.float32)
    return boxes, scores, rng.integers(0, 4, n).astype(np.int32)


@pytest.mark.parametrize("n", [1, 7, 200, 1500])
@pytest.mark.parametrize("clustered", [False, True])
def test_opencv_and_numpy_nms_agree(n: int, clustered: bool) -> None:
    boxes, scores, ids = random_boxes(n, n, clustered)
    for iou in (0.3, 0.45, 0.7):
        a = nms(boxes, scores, ids, iou, use_opencv=True)
        b = nms(boxes, scores, ids, iou, use_opencv=False)
        np.testing.assert_array_equal(a, b)


def test_nms_is_class_aware_and_capped() -> None:
    box = np.array([[10, 10, 50, 50]], np.float32)
    boxes = np.repeat(box, 3, axis=0)
    keep = nms(boxes, np.array([0.9, 0.8, 0.7], np.float32), np.array([0, 0, 1], np.int32), 0.45)
    assert keep.tolist() == [0, 2]
    # Many disjoint boxes: only the best MAX_DETECTIONS survive, best first.
    n = 1000
    xs = np.arange(n, dtype=np.float32)[:, None] * 20
    grid = np.concatenate([xs, np.zeros_like(xs), xs + 10, np.full_like(xs, 10)], axis=1)
    scores = np.linspace(0.1, 0.9, n, dtype=np.float32)
    keep = nms(grid, scores, np.zeros(n, np.int32), 0.45)
    assert len(keep) == MAX_DETECTIONS and keep[0] == n - 1
    assert np.all(np.diff(scores[keep]) <= 0)
