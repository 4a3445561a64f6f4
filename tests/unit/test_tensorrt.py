"""The TensorRT backend up to TensorRT itself, which no machine here has.

What is tested: the shape ranges an engine is built for (every frame size the
preprocessing can produce must fit), the plan cache key, reading the graph's input, the
one-line messages, and what a user sees asking for TensorRT where it is missing. What is
not: parsing, building and running an engine (core/engines/tensorrt_engine.py says so).
"""

from __future__ import annotations

import random
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from framelens.core.errors import EngineError, ModelError
from framelens.core.gpu.context import DeviceProperties
from framelens.core.models.catalog import resolve_model
from framelens.core.models.spec import input_size_for
from framelens.core.pipeline.build import create_engine
from framelens.core.stages.engines.tensorrt import (
    ShapeRange,
    one_line,
    onnx_input_shape,
    plan_key,
    shape_range,
)
from framelens.core.stages.engines.tensorrt_plans import BuildFor

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
H200 = DeviceProperties(0, "NVIDIA H200", (9, 0), 141 << 30, 132)


def test_static_models_are_built_for_their_one_shape() -> None:
    spec = resolve_model("yolox-nano")
    name, shape = onnx_input_shape(spec.path)
    assert shape == (1, 3, 416, 416) and name
    shapes = shape_range(shape, spec)
    assert shapes.static and shapes.opt == (1, 3, 416, 416)
    assert shapes.accepts((1, 3, 416, 416)) and not shapes.accepts((1, 3, 416, 448))


def test_dynamic_models_accept_every_input_size_the_preprocessing_makes() -> None:
    spec = resolve_model("yunet")
    _, shape = onnx_input_shape(spec.path)
    assert shape[2] is None and shape[3] is None  # height and width follow the source
    shapes = shape_range(shape, spec)
    assert not shapes.static
    assert shapes.opt == (1, 3, *spec.input_size)
    rng = random.Random(11)
    sizes = [(1920, 1080), (1080, 1920), (640, 480), (33, 17), (7680, 4320), (4000, 250)]
    sizes += [(rng.randint(16, 8000), rng.randint(16, 8000)) for _ in range(300)]
    for w, h in sizes:
        ih, iw = input_size_for(spec, w, h)
        assert shapes.accepts((1, 3, ih, iw)), (w, h, ih, iw, shapes)


def test_unsupported_inputs_are_one_line_model_errors() -> None:
    with pytest.raises(ModelError, match="batch 4"):
        shape_range((4, 3, 416, 416))
    with pytest.raises(ModelError, match="NCHW"):
        shape_range((1, 416, 416))
    assert shape_range((None, 3, 416, 416)).opt == (1, 3, 416, 416)  # dynamic batch: 1
    unknown = shape_range((1, 3, None, None))  # a dynamic model without a spec
    assert unknown.accepts((1, 3, 1080, 1920)) and unknown.accepts((1, 3, 32, 32))


def test_a_dynamic_batch_is_built_for_1_to_max_batch_optimised_for_max_batch(
    tmp_path: Path,
) -> None:
    from framelens.core.precision.batch import batch_variant

    spec = batch_variant(resolve_model("yolox-nano"), cache_dir=tmp_path)
    _, shape = onnx_input_shape(spec.path)
    assert shape == (None, 3, 416, 416)
    for max_batch in (1, 3, 8):
        shapes = shape_range(shape, spec, max_batch)
        assert shapes.min == (1, 3, 416, 416)
        assert shapes.opt == shapes.max == (max_batch, 3, 416, 416)
        assert shapes.batches == (1, max_batch)
        assert shapes.static == (max_batch == 1)
        assert all(shapes.accepts((n, 3, 416, 416)) for n in range(1, max_batch + 1))
        assert not shapes.accepts((max_batch + 1, 3, 416, 416))
        assert not shapes.accepts((0, 3, 416, 416))
        assert not shapes.accepts((max_batch, 3, 416, 448))  # the size stays fixed
    assert shape_range(shape, spec).max == (1, 3, 416, 416)  # default: batch 1


def test_dynamic_batch_and_size_together() -> None:
    spec = resolve_model("yunet")
    _, shape = onnx_input_shape(spec.path)
    assert shape[0] is None  # YuNet's batch is dynamic too
    shapes = shape_range(shape, spec, max_batch=4)
    assert shapes.min[:2] == (1, 3) and shapes.opt == (4, 3, *spec.input_size)
    assert shapes.max[0] == 4 and shapes.batches == (1, 4)
    for w, h in [(1920, 1080), (640, 480), (33, 17)]:
        ih, iw = input_size_for(spec, w, h)
        assert all(shapes.accepts((n, 3, ih, iw)) for n in (1, 2, 4))
        assert not shapes.accepts((5, 3, ih, iw))


def test_a_fixed_batch_is_built_only_for_that_batch() -> None:
    shapes = shape_range((4, 3, 416, 416), max_batch=4)  # a graph exported at batch 4
    assert shapes.static and shapes.batches == (4, 4)
    assert not shapes.accepts((1, 3, 416, 416))
    spec = resolve_model("yolox-nano")
    _, shape = onnx_input_shape(spec.path)
    with pytest.raises(ModelError, match="fixed batch 1, the pipeline runs batch 8") as err:
        shape_range(shape, spec, max_batch=8)
    assert "\n" not in str(err.value) and "core.precision.batch" in str(err.value)
    with pytest.raises(ModelError, match="at least 1"):
        shape_range((None, 3, 416, 416), max_batch=0)


def test_plans_for_other_batch_ranges_are_other_plans() -> None:
    shape = (None, 3, 416, 416)
    on_h200 = BuildFor(gpu=H200)
    keys = {
        plan_key("a" * 64, "tensorrt 10.13.0", on_h200, shape_range(shape, None, b), "fp32")
        for b in (1, 2, 8)
    }
    assert len(keys) == 3
    again = plan_key("a" * 64, "tensorrt 10.13.0", on_h200, shape_range(shape, None, 8), "fp32")
    assert again in keys


def test_a_plan_is_reused_only_for_the_same_graph_flavour_target_and_shapes() -> None:
    shapes = ShapeRange((1, 3, 416, 416), (1, 3, 416, 416), (1, 3, 416, 416))
    gpu = BuildFor(gpu=H200)
    key = plan_key("a" * 64, "tensorrt 10.13.0", gpu, shapes, "fp32")
    assert key == plan_key("a" * 64, "tensorrt 10.13.0", gpu, shapes, "fp32")
    others = {
        plan_key("b" * 64, "tensorrt 10.13.0", gpu, shapes, "fp32"),  # another graph
        plan_key("a" * 64, "tensorrt 11.4.1", gpu, shapes, "fp32"),  # another version
        plan_key("a" * 64, "tensorrt-rtx 1.7.1.116", gpu, shapes, "fp32"),  # another flavour
        plan_key("a" * 64, "tensorrt 10.13.0", gpu, shapes, "fp16"),  # another precision
        plan_key(
            "a" * 64,
            "tensorrt 10.13.0",
            BuildFor(gpu=replace(H200, compute_capability=(8, 9))),
            shapes,
            "fp32",
        ),
        plan_key("a" * 64, "tensorrt 10.13.0", gpu, replace(shapes, max=(1, 3, 640, 640)), "fp32"),
        # ahead of time: the targets are the key, not a GPU
        plan_key("a" * 64, "tensorrt-rtx 1.7.1.116", BuildFor(("sm_86",)), shapes, "fp32"),
        plan_key("a" * 64, "tensorrt-rtx 1.7.1.116", BuildFor(("sm_86", "sm_89")), shapes, "fp32"),
    }
    assert key not in others and len(others) == 8


def test_tensorrt_messages_become_one_line() -> None:
    text = one_line(["In node 3 (Conv):\n  INVALID_NODE: bad  weights", "b", "c", "d", "e"])
    assert "\n" not in text
    assert text.startswith("In node 3 (Conv): INVALID_NODE: bad weights; b; c")
    assert text.endswith("(and 2 more)")
    assert one_line([]) == "no message from TensorRT"


def test_asking_for_tensorrt_without_it_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    from framelens.core.stages.engines import tensorrt_flavour

    monkeypatch.setattr(tensorrt_flavour, "installed_flavours", lambda: ())  # neither flavour
    spec = resolve_model("yolox-nano")
    with pytest.raises(EngineError) as missing:
        create_engine(spec.path, backend="tensorrt", device="cuda:0")
    message = str(missing.value)
    assert "TensorRT is not installed" in message and "installer/gpu.sh" in message
    assert "\n" not in message
    with pytest.raises(EngineError, match="TensorRT runs on NVIDIA GPUs, not on cpu"):
        create_engine(spec.path, backend="tensorrt", device="cpu")


def test_cli_run_with_tensorrt_fails_with_one_line_and_no_output(tmp_path: Path) -> None:
    out = tmp_path / "dets.json"
    proc = subprocess.run(
        [sys.executable, "-m", "framelens.cli", "run", str(SAMPLE), "--backend", "tensorrt",
         "--device", "cpu", "--frames", "5", "--detections", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "TensorRT runs on NVIDIA GPUs" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()
