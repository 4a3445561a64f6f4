"""What decides, without a GPU, whether an engine's runs are replayed as CUDA graphs
(core/stages/engines/onnxruntime_graphs.py): the check a captured graph's replay must
pass against a plain run before it is used, and the reasons an engine takes no graphs.
The captures themselves run on the GPU (tests/gpu/test_graphs_gpu.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from framelens.core.gpu.graphs import GraphRefused, graphs_available
from framelens.core.models.catalog import resolve_model
from framelens.core.stages.engines.onnxruntime_graphs import (
    SESSION_CONFIG,
    ShapeGraphs,
    graph_blockers,
)
from graph_models import gemm_model

F32 = np.dtype(np.float32)


def agree(want: list[Any], got: list[Any]) -> None:
    ShapeGraphs._agree([np.asarray(w) for w in want], [np.asarray(g) for g in got])


def test_a_replay_equal_to_the_plain_run_passes() -> None:
    boxes = np.random.default_rng(1).normal(size=(3549, 85)).astype(np.float32)
    agree([boxes, np.arange(5)], [boxes.copy(), np.arange(5)])
    with_nan = np.array([1.0, np.nan, 3.0], np.float32)
    agree([with_nan], [with_nan.copy()])  # NaN where the plain run has NaN


def test_a_replay_off_by_reduction_order_passes_and_one_off_by_more_is_refused() -> None:
    want = np.random.default_rng(2).normal(size=1000).astype(np.float32) * 100
    agree([want], [want * np.float32(1 + 1e-5)])  # each value within its own 1e-3
    with pytest.raises(GraphRefused, match=r"differ from a plain run's by 0\.5"):
        agree([want], [want + np.float32(0.5)])
    # a score beside large coordinates gets its own tolerance, not theirs
    mixed = np.array([400.0, 0.02], np.float32)
    with pytest.raises(GraphRefused):
        agree([mixed], [mixed + np.array([0.0, 0.01], np.float32)])
    nan_too = np.array([1.0, np.nan, 3.0], np.float32)
    agree([nan_too], [nan_too * np.float32(1 + 1e-5)])  # NaN kept, the rest within


@pytest.mark.parametrize(
    ("want", "got"),
    [
        (np.array([1.0, 2.0], np.float32), np.array([1.0, np.nan], np.float32)),
        (np.array([1.0, np.inf], np.float32), np.array([1.0, 5.0], np.float32)),
        (np.array([3, 4]), np.array([3, 5])),  # integers: exact or nothing
        # what the garbage fill leaves where a graph wrote nothing
        (np.zeros(4, np.float32), np.full(4, np.frombuffer(b"\xff" * 4, np.float32)[0])),
    ],
)
def test_a_replay_that_is_not_the_plain_runs_is_refused(want: Any, got: Any) -> None:
    with pytest.raises(GraphRefused) as refused:
        agree([want], [got])
    assert not refused.value.retry  # a wrong graph is given up, not tried again


def test_graphs_with_operators_a_replay_gets_wrong_take_none(tmp_path: Path) -> None:
    """Gemm regrows a buffer of ones for a larger batch (a graph of a smaller one would
    read it freed); a detector of convolutions has no such operator."""
    path = gemm_model(tmp_path / "gemm.onnx")
    why = graph_blockers(path)
    assert why is not None and "Gemm" in why
    assert graph_blockers(resolve_model("yolox-nano").path) is None
    graphs = ShapeGraphs(None, None, [((1, 2), None, F32)], enabled=True, blocked=why)
    assert graphs.why_not == why


def test_engines_with_graphs_are_made_without_the_conv_activation_fusion(tmp_path: Path) -> None:
    """The fused Conv+Relu reallocates a buffer when its input shape changes: the session
    configuration engines with graphs get keeps the two nodes apart (ONNX Runtime's own
    optimised graph, written out by the CPU provider, shows it)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.ones((8, 3, 3, 3), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"])],
        "conv_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 14, 14])],
        [weight],
    )
    path = tmp_path / "conv_relu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)

    def optimised(config: dict[str, str]) -> list[str]:
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        out = tmp_path / f"opt{len(config)}.onnx"
        opts.optimized_model_filepath = str(out)
        for key, value in config.items():
            opts.add_session_config_entry(key, value)
        ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        return [node.op_type for node in onnx.load(str(out)).graph.node]

    assert optimised({}) == ["FusedConv"]  # what the fusion does without the configuration
    assert optimised(SESSION_CONFIG) == ["Conv", "Relu"]


def test_an_engine_whose_output_shapes_onnx_runtime_chooses_takes_no_graphs() -> None:
    """YuNet's outputs have dynamic dimensions besides the batch: ONNX Runtime allocates
    them per run, at addresses a graph could not know."""
    graphs = ShapeGraphs(None, None, [((1, 85), None, F32), (None, None, F32)], enabled=True)
    assert graphs.why_not == "an output's shape is ONNX Runtime's to choose at each run"
    assert not graphs.on and not graphs.wants_capture((1, 3, 416, 416))
    assert graphs.graph_for((1, 3, 416, 416)) is None


def test_without_the_cuda_driver_an_engine_takes_no_graphs_and_says_why() -> None:
    why = graphs_available()
    if why is None:
        pytest.skip("libcuda is loadable here: the GPU tests cover this machine")
    graphs = ShapeGraphs(None, None, [((1, 85), None, F32), (None, (85,), F32)], enabled=True)
    assert graphs.why_not == why
    assert "libcuda cannot be loaded" in why
    disabled = ShapeGraphs(None, None, [((1, 85), None, F32)], enabled=False)
    assert disabled.why_not == "off"
