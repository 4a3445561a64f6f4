"""What decides, without a GPU, whether an engine's runs are replayed as CUDA graphs
(core/stages/engines/onnxruntime_graphs.py): the check a captured graph's replay must
pass against a plain run before it is used, and the reasons an engine takes no graphs.
The captures themselves run on the GPU (tests/gpu/test_graphs_gpu.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from framelens.core.gpu.graphs import GraphRefused, graphs_available
from framelens.core.stages.engines.onnxruntime_graphs import ShapeGraphs

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
    agree([want], [want + np.float32(1e-3)])  # 1e-5 of the output's scale
    with pytest.raises(GraphRefused, match=r"differ from a plain run's by 0\.5"):
        agree([want], [want + np.float32(0.5)])


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
