"""Batch N below the pipeline: one engine call per batch, and every frame of a batch gets
exactly what it gets alone.

Real frames of the bundled sample through the CPU Preprocessor, real ONNX Runtime: the
bundled YOLOX-Nano (batch 1, and its batch variant), the bundled YuNet (dynamic batch),
and synthetic YOLOv5 / YOLOv8 / end-to-end models (tests/unit/onnx_factory.py) whose
outputs move with each frame's mean, so that every frame of a batch has its own boxes.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
import pytest
from framelens.core.cache import META_FILE
from framelens.core.errors import EngineError, ModelError
from framelens.core.geometry import Letterbox
from framelens.core.models.catalog import resolve_model
from framelens.core.models.spec import ModelSpec
from framelens.core.precision import prepare_variant, variant_precision
from framelens.core.precision.batch import (
    batch_variant,
    graph_batch,
    make_batch_dynamic,
    prepare_batch_variant,
)
from framelens.core.stages.engines.onnxruntime_cpu import OnnxRuntimeEngine
from framelens.core.stages.preprocess.cpu import Preprocessor
from framelens.core.stages.tasks.detect.decoders import make_decoder
from framelens.core.types import Detections, Image
from media_factory import sample_frames
from onnx import TensorProto, helper, numpy_helper
from onnx_factory import batched_model, ultralytics_metadata, yolov5_repo_metadata

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
# empty street, the person walking in, across, facing the camera, leaving
FRAMES = (0, 240, 290, 300, 315, 330, 345, 420)
BATCHES = (1, 3, 8)
CONF, IOU = 0.25, 0.45
NET = 320
ANCHORS = sum((NET // s) ** 2 for s in (8, 16, 32))  # 2100

F32 = npt.NDArray[np.float32]


@pytest.fixture(scope="module")
def images() -> list[Image]:
    return sample_frames(SAMPLE, FRAMES)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("framelens-cache")


def prepared(spec: ModelSpec, images: list[Image]) -> tuple[list[F32], list[Letterbox]]:
    """Each frame's input tensor (1, 3, H, W), copied, and its letterbox."""
    h, w = images[0].shape[:2]
    pre = Preprocessor(spec, w, h)
    return [pre(image).copy() for image in images], [pre.geometry] * len(images)


class Counted:
    """Counts the session runs of an engine (and the batch of each) by wrapping the bound
    method: an observation, the run itself is ONNX Runtime's."""

    def __init__(self, engine: OnnxRuntimeEngine) -> None:
        session = engine._session
        real = session.run
        self.batches: list[int] = []

        def run(names: Any, feeds: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            self.batches.append(int(next(iter(feeds.values())).shape[0]))
            return real(names, feeds, *args, **kwargs)

        session.run = run


def one_by_one(
    spec: ModelSpec, tensors: list[F32], geometries: list[Letterbox]
) -> list[Detections]:
    """The reference: batch 1, frame by frame."""
    with OnnxRuntimeEngine(spec.path, threads=2) as engine:
        decode = make_decoder(spec, engine.output_names)
        return [
            decode(engine.infer(t), [g], CONF, IOU, None)[0]
            for t, g in zip(tensors, geometries, strict=True)
        ]


def batched(
    spec: ModelSpec, tensors: list[F32], geometries: list[Letterbox], n: int
) -> tuple[list[Detections], list[int]]:
    """Batches of ``n`` (the last one shorter): detections, and the batch of each run."""
    with OnnxRuntimeEngine(spec.path, threads=2) as engine:
        assert engine.batch is None and engine.accepts_batch(n)
        counted = Counted(engine)
        decode = make_decoder(spec, engine.output_names)
        dets: list[Detections] = []
        for start in range(0, len(tensors), n):
            chunk = np.concatenate(tensors[start : start + n])
            outputs = engine.infer(chunk)
            assert all(o.shape[0] == len(chunk) for o in outputs)
            got = decode(outputs, geometries[start : start + n], CONF, IOU, None)
            assert len(got) == len(chunk)
            dets.extend(got)
    return dets, counted.batches


def assert_same(got: list[Detections], want: list[Detections], what: str) -> None:
    assert len(got) == len(want), what
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        where = f"{what}, frame {FRAMES[i]}"
        assert len(g) == len(w), f"{where}: {len(g)} detections, alone {len(w)}"
        assert g.class_ids.tolist() == w.class_ids.tolist(), where
        np.testing.assert_allclose(g.boxes, w.boxes, rtol=0, atol=1e-3, err_msg=where)
        np.testing.assert_allclose(g.scores, w.scores, rtol=0, atol=1e-5, err_msg=where)
        assert (g.landmarks is None) == (w.landmarks is None), where
        if g.landmarks is not None and w.landmarks is not None:
            np.testing.assert_allclose(g.landmarks, w.landmarks, rtol=0, atol=1e-3, err_msg=where)


def check_batches(
    spec: ModelSpec, ref_spec: ModelSpec, images: list[Image], what: str
) -> list[Detections]:
    """``spec`` in batches of 1, 3 and 8 against ``ref_spec`` frame by frame."""
    tensors, geometries = prepared(spec, images)
    want = one_by_one(ref_spec, tensors, geometries)
    assert sum(len(d) for d in want) > 0, f"{what}: nothing detected, a vacuous comparison"
    for n in BATCHES:
        got, runs = batched(spec, tensors, geometries, n)
        expected = [min(n, len(tensors) - s) for s in range(0, len(tensors), n)]
        assert runs == expected, f"{what}: one run per batch of {n}, got {runs}"
        assert_same(got, want, f"{what}, batch {n}")
    return want


# ---- the bundled models ------------------------------------------------------------------


def test_yolox_batch_variant_equals_batch_1(images: list[Image], cache: Path) -> None:
    spec = resolve_model("yolox-nano")
    assert graph_batch(spec.path) == 1
    variant = batch_variant(spec, cache_dir=cache)
    assert variant.path != spec.path and graph_batch(variant.path) is None
    want = check_batches(variant, spec, images, "yolox batch variant")
    people = sum(int((d.class_ids == 0).sum()) for d in want)
    assert people >= 4  # the person is found in most of the frames


def test_yunet_dynamic_batch(images: list[Image], cache: Path) -> None:
    spec = resolve_model("yunet")
    assert graph_batch(spec.path) is None
    assert batch_variant(spec, cache_dir=cache) == spec  # already dynamic: unchanged
    assert not any(cache.glob("variants/yunet*"))
    want = check_batches(spec, spec, images, "yunet")
    assert all(d.landmarks is not None for d in want)


def test_a_fixed_batch_graph_refuses_another_batch_in_one_line() -> None:
    spec = resolve_model("yolox-nano")
    with OnnxRuntimeEngine(spec.path, threads=1) as engine:
        assert engine.batch == 1 and engine.accepts_batch(1) and not engine.accepts_batch(3)
        for n in (2, 3, 8):
            with pytest.raises(EngineError, match=f"fixed batch of 1 .* batch of {n}") as err:
                engine.infer(np.zeros((n, 3, 416, 416), np.float32))
            assert "\n" not in str(err.value)
        assert engine.infer(np.zeros((1, 3, 416, 416), np.float32))[0].shape == (1, 3549, 85)


def test_decoders_refuse_a_batch_that_does_not_match_the_letterboxes(images: list[Image]) -> None:
    spec = resolve_model("yolox-nano")
    tensors, geometries = prepared(spec, images[:1])
    with OnnxRuntimeEngine(spec.path, threads=1) as engine:
        outputs = engine.infer(tensors[0])
    decode = make_decoder(spec)
    with pytest.raises(ModelError, match=r"but the batch has 2 frame\(s\)"):
        decode(outputs, geometries * 2, CONF, IOU, None)
    with pytest.raises(ModelError, match="at least one"):
        decode(outputs, [], CONF, IOU, None)


# ---- synthetic layouts -------------------------------------------------------------------


def cxcywh(x1: float, y1: float, x2: float, y2: float) -> list[float]:
    return [(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1]


# network-pixel boxes (320x320 input), class, score; the delta per unit of frame mean
# (the input is scaled to 0..1) moves boxes by tens of pixels and scores by up to 0.6,
# so frames differ, some boxes overlap (NMS) and some cross the threshold.
BOXES = [
    ((40, 100, 140, 200), 0, 0.9),
    ((46, 104, 146, 206), 0, 0.7),
    ((40, 100, 140, 200), 1, 0.6),
    ((200, 80, 300, 260), 2, 0.5),
    ((10, 10, 40, 40), 1, 0.1),
]
ULTRALYTICS_NAMES = [f"thing{i}" for i in range(3)]


def yolov8_model(path: Path) -> Path:
    value = np.zeros((1, 4 + 3, ANCHORS), np.float32)
    delta = np.zeros_like(value)
    for i, (box, cls, score) in enumerate(BOXES):
        col = 131 * i + 7
        value[0, :4, col] = cxcywh(*box)
        delta[0, :4, col] = [30.0, -20.0, 10.0, 5.0]
        value[0, 4 + cls, col] = score
        delta[0, 4 + cls, col] = 0.6 * (-1) ** i
        value[0, 4 + (cls + 1) % 3, col] = score / 2
    meta = ultralytics_metadata(ULTRALYTICS_NAMES, model="YOLO11n")
    return batched_model(path, {"output0": value}, {"output0": delta}, metadata=meta)


def yolov5_model(path: Path) -> Path:
    value = np.zeros((1, 3 * ANCHORS, 5 + 3), np.float32)
    delta = np.zeros_like(value)
    for i, (box, cls, score) in enumerate(BOXES):
        row = 311 * i + 2
        value[0, row, :4] = cxcywh(*box)
        delta[0, row, :4] = [-25.0, 15.0, 8.0, -6.0]
        value[0, row, 4] = 0.95
        value[0, row, 5 + cls] = score / 0.95
        delta[0, row, 5 + cls] = 0.5 * (-1) ** (i + 1)
    meta = yolov5_repo_metadata(ULTRALYTICS_NAMES)
    return batched_model(path, {"output0": value}, {"output0": delta}, metadata=meta)


def end2end_model(path: Path) -> Path:
    value = np.zeros((1, 300, 6), np.float32)
    delta = np.zeros_like(value)
    for i, (box, cls, score) in enumerate(BOXES):
        value[0, i] = [*box, score, cls]
        delta[0, i, :5] = [20.0, 10.0, 20.0, 10.0, 0.6 * (-1) ** i]
    meta = ultralytics_metadata(ULTRALYTICS_NAMES, model="YOLOv10n", end2end=True)
    return batched_model(path, {"output0": value}, {"output0": delta}, metadata=meta)


SYNTHETIC: dict[str, Callable[[Path], Path]] = {
    "yolov8": yolov8_model,
    "yolov5": yolov5_model,
    "end2end": end2end_model,
}


@pytest.mark.parametrize("layout", sorted(SYNTHETIC))
def test_synthetic_layouts_batch_like_batch_1(
    layout: str, images: list[Image], tmp_path: Path
) -> None:
    spec = resolve_model(str(SYNTHETIC[layout](tmp_path / f"{layout}.onnx")))
    assert spec.layout == layout and graph_batch(spec.path) is None
    want = check_batches(spec, spec, images, layout)
    # the frames differ, so a batch that mixed them up would show
    assert len({tuple(np.round(d.boxes.ravel(), 2)) for d in want}) > 1


# ---- the batch variant: cache, composition, refusals ----------------------------------------


def test_the_batch_variant_is_cached_and_a_broken_entry_is_not_used(tmp_path: Path) -> None:
    spec = resolve_model("yolox-nano")
    first = prepare_batch_variant(spec, cache_dir=tmp_path)
    assert not first.from_cache and len(first.rewritten) == 3
    again = prepare_batch_variant(spec, cache_dir=tmp_path)
    assert again.from_cache and again.spec.path == first.spec.path
    assert again.rewritten == first.rewritten
    entry = first.spec.path.parent
    good = first.spec.path.read_bytes()

    # corrupted: the model file cut short (the metadata still there)
    first.spec.path.write_bytes(good[: len(good) // 2])
    rebuilt = prepare_batch_variant(spec, cache_dir=tmp_path)
    assert not rebuilt.from_cache and rebuilt.spec.path.read_bytes() == good

    # partial: no metadata (an entry is complete only once its metadata is written)
    (entry / META_FILE).unlink()
    rebuilt = prepare_batch_variant(spec, cache_dir=tmp_path)
    assert not rebuilt.from_cache and (entry / META_FILE).is_file()
    assert prepare_batch_variant(spec, cache_dir=tmp_path).from_cache

    # a leftover staging directory of a killed build is never an entry
    assert not [p for p in entry.parent.iterdir() if p.name.startswith(".staging-")]
    shutil.copytree(entry, entry.parent / f".staging-{entry.name}-dead")
    shutil.rmtree(entry)
    assert not prepare_batch_variant(spec, cache_dir=tmp_path).from_cache


def test_the_rewrite_only_touches_the_batch_of_the_reshapes() -> None:
    model = onnx.load(str(resolve_model("yolox-nano").path))
    out, rewritten = make_batch_dynamic(model, "yolox-nano")
    assert rewritten == ("Reshape_405", "Reshape_413", "Reshape_421")
    inits = {i.name: numpy_helper.to_array(i) for i in out.graph.initializer}
    nodes = {n.name: n for n in out.graph.node}
    for name in rewritten:
        assert inits[nodes[name].input[1]].tolist() == [0, 85, -1]
    assert out.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert out.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    with pytest.raises(ModelError, match="only graphs fixed to batch 1"):
        make_batch_dynamic(out, "yolox-batch")  # already dynamic


def test_precision_variants_get_the_same_rewrite(images: list[Image], cache: Path) -> None:
    spec = resolve_model("yolox-nano")
    fp16 = prepare_variant(spec, "fp16", cache_dir=cache)
    variant = prepare_batch_variant(fp16.spec, cache_dir=cache)
    assert variant.rewritten == ("Reshape_405", "Reshape_413", "Reshape_421")
    assert variant_precision(variant.spec.path) == "fp16"  # still the FP16 variant
    tensors, _ = prepared(fp16.spec, images[:3])
    with (
        OnnxRuntimeEngine(fp16.spec.path, threads=2) as alone,
        OnnxRuntimeEngine(variant.spec.path, threads=2) as batch,
    ):
        (together,) = batch.infer(np.concatenate(tensors))
        for i, t in enumerate(tensors):
            (want,) = alone.infer(t)
            scale = float(np.abs(want).max())
            assert float(np.abs(together[i] - want[0]).max()) <= 1e-4 * scale


@pytest.mark.slow
def test_an_int8_graph_gets_the_same_rewrite(images: list[Image], tmp_path: Path) -> None:
    quantization = pytest.importorskip("onnxruntime.quantization")
    spec = resolve_model("yolox-nano")
    tensors, _ = prepared(spec, images[:2])

    class Frames(quantization.CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.left = iter([{"images": t} for t in tensors])

        def get_next(self) -> dict[str, F32] | None:
            return next(self.left, None)

    qdq = tmp_path / "yolox_int8.onnx"
    quantization.quantize_static(
        str(spec.path), str(qdq), Frames(), quant_format=quantization.QuantFormat.QDQ
    )
    int8 = resolve_model(str(qdq), layout="yolox")
    variant = prepare_batch_variant(int8, cache_dir=tmp_path / "cache")
    assert variant.rewritten and graph_batch(variant.spec.path) is None
    with (
        OnnxRuntimeEngine(qdq, threads=2) as alone,
        OnnxRuntimeEngine(variant.spec.path, threads=2) as batch,
    ):
        (together,) = batch.infer(np.concatenate(tensors))
        for i, t in enumerate(tensors):
            (want,) = alone.infer(t)
            assert float(np.abs(together[i] - want[0]).max()) <= 1e-4 * float(np.abs(want).max())


def _graph(nodes: list[Any], out_shape: list[int], inits: list[Any]) -> Any:
    graph = helper.make_graph(
        nodes,
        "unbatchable",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, out_shape)],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def save_spec(path: Path, model: Any) -> ModelSpec:
    """A hand-made graph saved at ``path`` with a spec to feed it (8x8 input)."""
    onnx.save(model, str(path))
    return ModelSpec(name=path.stem, path=path, layout="end2end", task="detect", input_size=(8, 8))


def _folded_graph() -> Any:
    """Flattened over the batch, then reshaped to [1, 192]: the batch is folded away."""
    flat = numpy_helper.from_array(np.array([-1], np.int64), "flat")
    one = numpy_helper.from_array(np.array([1, 192], np.int64), "one")
    return _graph(
        [
            helper.make_node("Reshape", ["images", "flat"], ["f"]),
            helper.make_node("Reshape", ["f", "one"], ["out"]),
        ],
        [1, 192],
        [flat, one],
    )


def test_graphs_that_cannot_be_batched_safely_are_refused_in_one_line(tmp_path: Path) -> None:
    folded = _folded_graph()
    # softmax across the batch: the shapes are all right, the values mix the frames
    mixing = _graph([helper.make_node("Softmax", ["images"], ["out"], axis=0)], [1, 3, 8, 8], [])
    for name, model, message in [
        ("folded", folded, "stays batch 1"),
        ("mixing", mixing, "differs from the frames run alone"),
    ]:
        spec = save_spec(tmp_path / f"{name}.onnx", model)
        with pytest.raises(ModelError, match=message) as err:
            batch_variant(spec, cache_dir=tmp_path / "cache")
        assert "\n" not in str(err.value)
    # nothing half-made is left in the cache
    assert not list((tmp_path / "cache" / "variants").iterdir())


def test_a_video_file_on_cuda_runs_in_batches_a_live_source_never(tmp_path: Path) -> None:
    from dataclasses import replace

    from framelens.core.pipeline.build import GPU_FILE_BATCH, default_batch
    from framelens.core.pipeline.settings import PipelineSettings

    on_gpu = PipelineSettings(resolve_model("yolox-nano"), device="cuda:0")
    assert default_batch(on_gpu, str(SAMPLE)).batch == GPU_FILE_BATCH
    # a camera, a stream, a folder of images: a frame is never held back to fill a batch
    for live in ("0", "rtsp://127.0.0.1:8554/cam", str(SAMPLE.parent)):
        assert default_batch(on_gpu, live).batch == 1
    assert default_batch(replace(on_gpu, device="cpu"), str(SAMPLE)).batch == 1
    # a graph that cannot take a batch runs at 1 instead of failing the run
    spec = save_spec(tmp_path / "folded.onnx", _folded_graph())
    assert default_batch(replace(on_gpu, model=spec), str(SAMPLE)).batch == 1
