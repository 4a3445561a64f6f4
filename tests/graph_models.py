"""ONNX graphs made for the CUDA graph tests (tests/unit/test_shape_graphs.py and
tests/gpu/test_graphs_gpu.py): real files of the operators they are about."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def gemm_model(path: Path) -> Path:
    """y = x @ ones(4, 2) + 0 for x of shape (n, 4): one Gemm with a broadcast bias."""
    w = numpy_helper.from_array(np.ones((4, 2), np.float32), "w")
    b = numpy_helper.from_array(np.zeros(2, np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"])],
        "gemm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 2])],
        [w, b],
    )
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path
    )
    return path
