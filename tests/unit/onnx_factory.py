"""Tiny ONNX graphs for tests: real ONNX files whose outputs are known constants.

Each output is Constant + 0 * mean(input). Using the input keeps ONNX Runtime
from folding the graph into bare initializers, so the models run like exported
detectors do, and the constants encode whatever boxes a test wants to decode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

Dims = Sequence[int | str]
OPSET = 17


def constant_model(
    path: Path,
    outputs: Mapping[str, npt.NDArray[np.float32]],
    *,
    input_name: str = "images",
    input_shape: Dims = (1, 3, 320, 320),
    output_dims: Mapping[str, Dims] | None = None,
    metadata: Mapping[str, str] | None = None,
) -> Path:
    """Write a model with one float input and constant outputs, in the given order.

    output_dims overrides the declared shape of an output (e.g. symbolic dims).
    """
    nodes = [
        # Reduce over every axis whatever the input's rank: a scalar, broadcast below.
        helper.make_node("ReduceMean", [input_name], ["mean"], keepdims=0),
        helper.make_node("Mul", ["mean", "zero"], ["nothing"]),
    ]
    inits = [numpy_helper.from_array(np.zeros((), dtype=np.float32), "zero")]
    graph_outputs = []
    for name, value in outputs.items():
        const = f"{name}_const"
        inits.append(numpy_helper.from_array(np.asarray(value, dtype=np.float32), const))
        nodes.append(helper.make_node("Add", [const, "nothing"], [name]))
        dims = (output_dims or {}).get(name, value.shape)
        graph_outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(dims)))
    graph = helper.make_graph(
        nodes,
        "framelens_test",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, list(input_shape))],
        graph_outputs,
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8  # readable by every ONNX Runtime FrameLens supports
    for key, text in (metadata or {}).items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, text
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def ultralytics_metadata(
    names: Sequence[str],
    *,
    model: str = "YOLOv8n",
    imgsz: tuple[int, int] = (320, 320),
    end2end: bool = False,
    nms: bool = False,
    task: str = "detect",
) -> dict[str, str]:
    """Metadata as the ultralytics exporter writes it: str() of Python values."""
    return {
        "description": f"Ultralytics {model} model trained on custom.yaml",
        "author": "Ultralytics",
        "version": "8.3.0",
        "license": "AGPL-3.0 License (https://ultralytics.com/license)",
        "stride": "32",
        "task": task,
        "batch": "1",
        "imgsz": str(list(imgsz)),
        "names": str(dict(enumerate(names))),
        "args": str({"batch": 1, "half": False, "nms": nms, "dynamic": False}),
        "end2end": str(end2end),
    }


def yolov5_repo_metadata(names: Sequence[str]) -> dict[str, str]:
    """The YOLOv5 repository's export.py writes only these two keys."""
    return {"stride": "32", "names": str(dict(enumerate(names)))}


def batched_model(
    path: Path,
    outputs: Mapping[str, npt.NDArray[np.float32]],
    deltas: Mapping[str, npt.NDArray[np.float32]],
    *,
    input_name: str = "images",
    input_shape: Dims = ("batch", 3, 320, 320),
    metadata: Mapping[str, str] | None = None,
) -> Path:
    """A model whose outputs depend on each image of the batch: for image i,
    ``output[i] = value[0] + mean(image i) * delta[0]``.

    ``outputs`` and ``deltas`` hold (1, ...) arrays of one shape per output; outputs are
    declared ("batch", ...). Different frames thus give different (but known) boxes and
    scores, and a batch must give each frame what it gives alone.
    """
    nodes = [
        # One mean per image: (N, 1, 1, 1), then flat (N,) to reshape per output rank.
        helper.make_node("ReduceMean", [input_name], ["image_mean"], axes=[1, 2, 3], keepdims=1),
        helper.make_node("Reshape", ["image_mean", "flat_shape"], ["mean_flat"]),
    ]
    inits = [numpy_helper.from_array(np.array([-1], np.int64), "flat_shape")]
    graph_outputs = []
    for name, value in outputs.items():
        value = np.asarray(value, dtype=np.float32)
        delta = np.asarray(deltas[name], dtype=np.float32)
        if value.shape != delta.shape or value.shape[0] != 1:
            raise ValueError(f"{name}: value and delta must both be (1, ...), one shape")
        rank = value.ndim
        inits += [
            numpy_helper.from_array(value, f"{name}_value"),
            numpy_helper.from_array(delta, f"{name}_delta"),
            numpy_helper.from_array(np.array([-1] + [1] * (rank - 1), np.int64), f"{name}_rs"),
        ]
        nodes += [
            helper.make_node("Reshape", ["mean_flat", f"{name}_rs"], [f"{name}_mean"]),
            helper.make_node("Mul", [f"{name}_mean", f"{name}_delta"], [f"{name}_shift"]),
            helper.make_node("Add", [f"{name}_value", f"{name}_shift"], [name]),
        ]
        dims = ["batch", *value.shape[1:]]
        graph_outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, dims))
    graph = helper.make_graph(
        nodes,
        "framelens_batch_test",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, list(input_shape))],
        graph_outputs,
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    for key, text in (metadata or {}).items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, text
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def upscaling_model(path: Path, scale: int, *, channels: int = 3, dynamic: bool = True) -> Path:
    """A super-resolution graph whose output is known: nearest-neighbour upscaling by
    ``scale`` (ONNX Resize), so output pixel (y, x) is input pixel (y // s, x // s).
    Input [N, C, H, W] (symbolic H, W and N when ``dynamic``), output [N, C, sH, sW]."""
    dims: Dims = ("N", channels, "H", "W") if dynamic else (1, channels, 24, 32)
    out_dims: Dims = (
        ("N", channels, "sH", "sW") if dynamic else (1, channels, 24 * scale, 32 * scale)
    )
    scales = numpy_helper.from_array(np.array([1, 1, scale, scale], np.float32), "scales")
    node = helper.make_node(
        "Resize",
        ["input", "", "scales"],
        ["upscaled"],
        mode="nearest",
        nearest_mode="floor",
        coordinate_transformation_mode="asymmetric",
    )
    graph = helper.make_graph(
        [node],
        "upscale",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(dims))],
        [helper.make_tensor_value_info("upscaled", TensorProto.FLOAT, list(out_dims))],
        [scales],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


# --- broken models (the fuzz corpus, tests/unit/test_fuzz_inputs.py) ---------------------

TINY_NAMES = ("person", "car")


def tiny_detector(path: Path, *, boxes: int = 1, input_shape: Dims = (1, 3, 64, 64)) -> Path:
    """A real YOLOv8-layout detector (Ultralytics metadata, 2 classes, 64x64 input) that
    finds ``boxes`` fixed boxes in every frame: quick to run, detections to write."""
    anchors = max(84, boxes)
    out = np.zeros((1, 4 + len(TINY_NAMES), anchors), np.float32)
    for i in range(boxes):
        out[0, :4, i] = (20 + i % 5, 20 + i % 7, 16, 12)  # cx, cy, w, h in input pixels
        out[0, 4 + i % 2, i] = 0.9
    meta = ultralytics_metadata(TINY_NAMES, imgsz=(64, 64))
    return constant_model(path, {"output0": out}, input_shape=input_shape, metadata=meta)


def missing_output_model(path: Path) -> Path:
    """The tiny detector whose declared output ("ghost") no node computes (a broken
    export; onnx.checker would refuse it, so it is saved unchecked)."""
    model = onnx.load(str(tiny_detector(path)))
    model.graph.output[0].name = "ghost"
    onnx.save(model, str(path))
    return path


def wrong_dtype_model(path: Path, where: str) -> Path:
    """The tiny detector fed uint8 (``where="input"``) or answering int32 boxes and scores
    (``where="output"``, a real Cast): valid ONNX, types FrameLens does not feed or read."""
    model = onnx.load(str(tiny_detector(path)))
    if where == "input":
        model.graph.input[0].type.tensor_type.elem_type = TensorProto.UINT8
        model.graph.node.insert(0, helper.make_node("Cast", ["images_u8"], ["images_f"], to=1))
        model.graph.input[0].name = "images_u8"
        model.graph.node[1].input[0] = "images_f"  # ReduceMean reads the cast input
    else:
        model.graph.node[-1].output[0] = "output0_f"
        model.graph.node.append(
            helper.make_node("Cast", ["output0_f"], ["output0"], to=TensorProto.INT32)
        )
        model.graph.output[0].type.tensor_type.elem_type = TensorProto.INT32
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def dynamic_model(path: Path) -> Path:
    """The tiny detector with every dimension symbolic: input [N, C, H, W], output
    [a, b, c], so its shapes say nothing about how to decode it."""
    out = np.zeros((1, 4 + len(TINY_NAMES), 84), np.float32)
    return constant_model(
        path,
        {"output0": out},
        input_shape=("N", "C", "H", "W"),
        output_dims={"output0": ("a", "b", "c")},
        metadata=ultralytics_metadata(TINY_NAMES, imgsz=(64, 64)),
    )


def external_data_model(path: Path, location: str) -> Path:
    """The tiny detector whose boxes are stored as external data at ``location`` (as
    written in the file: relative to the model's folder, or absolute). Nothing is
    written there; the model only names it."""
    model = onnx.load(str(tiny_detector(path)))
    weights = next(i for i in model.graph.initializer if i.name == "output0_const")
    length = len(weights.raw_data) or 4 * len(weights.float_data)
    weights.ClearField("raw_data")
    weights.ClearField("float_data")
    weights.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(length))):
        entry = weights.external_data.add()
        entry.key, entry.value = key, value
    onnx.save(model, str(path))
    return path


def tiny_detector_with_external_data(path: Path) -> Path:
    """The tiny detector with its weights in ``<name>.data`` beside it (a legitimate
    external-data model, as large exports are saved)."""
    model = onnx.load(str(tiny_detector(path)))
    onnx.save(
        model,
        str(path),
        save_as_external_data=True,
        location=f"{path.stem}.data",
        size_threshold=0,
    )
    return path


def heavy_superres_model(path: Path, *, width: int = 512, seed: int = 0) -> Path:
    """An ESRGAN-like x2 colour model, heavy enough to be run as ESRGAN is (NHWC on CUDA,
    tiles: more than 4 MB of weights, its INT8 graph too at the default width): 3x3
    convolutions with biases and ReLUs, 3 -> ``width`` -> ``width`` -> ``width`` -> 12
    channels, DepthToSpace, plus the input upscaled by nearest neighbour (so the output
    is an image near the input, values about 0..1).
    Random weights, seeded. Input [N, 3, H, W] (symbolic), output [N, 3, 2H, 2W]."""
    rng = np.random.default_rng(seed)
    shapes = [(width, 3), (width, width), (width, width), (12, width)]
    inits, nodes, x = [], [], "input"
    for i, (out_c, in_c) in enumerate(shapes):
        gain = np.sqrt(2.0 / (in_c * 9)) * (0.05 if i == len(shapes) - 1 else 1.0)
        w = (rng.standard_normal((out_c, in_c, 3, 3)) * gain).astype(np.float32)
        b = (rng.standard_normal(out_c) * 0.01).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        y = f"conv{i}"
        nodes.append(helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [y], name=y, pads=[1] * 4))
        if i < len(shapes) - 1:
            nodes.append(helper.make_node("Relu", [y], [f"relu{i}"]))
            y = f"relu{i}"
        x = y
    inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"))
    nodes += [
        helper.make_node("DepthToSpace", [x], ["detail"], blocksize=2, mode="DCR"),
        helper.make_node("Resize", ["input", "", "scales"], ["base"], mode="nearest"),
        helper.make_node("Add", ["base", "detail"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes,
        "heavy_sr",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, "H", "W"])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 3, "H2", "W2"])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path
