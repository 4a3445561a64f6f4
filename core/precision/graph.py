"""ONNX graph work for the precision variants: opset, conv inventory, equalisation, gating.

Everything here is plain ``onnx`` protobuf editing; nothing runs a model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from framelens.core.errors import ModelError
from onnx import TensorProto, helper, numpy_helper, shape_inference, version_converter

QDQ_MIN_OPSET = 13
"""Per-channel QuantizeLinear/DequantizeLinear (the ``axis`` attribute) needs opset 13."""

ACT_GATES = "fl_act_gates"
CONV_GATES = "fl_conv_gates"


def default_opset(model: onnx.ModelProto) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 0


def upgrade_opset(model: onnx.ModelProto, opset: int = QDQ_MIN_OPSET) -> onnx.ModelProto:
    """The model at ``opset`` or later (onnx.version_converter); unchanged when already there."""
    if default_opset(model) >= opset:
        return model
    try:
        return version_converter.convert_version(model, opset)
    except Exception as exc:  # the converter raises plain RuntimeError/ValueError
        raise ModelError(f"cannot convert the model to ONNX opset {opset}: {exc}") from exc


@dataclass(frozen=True)
class ConvInfo:
    """One Conv node: its name, multiply-accumulates per inference, and whether depthwise."""

    name: str
    macs: int
    depthwise: bool
    input: str


def _attr(node: onnx.NodeProto, name: str, default: Any) -> Any:
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _initializers(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    return {i.name: i for i in model.graph.initializer}


def conv_inventory(model: onnx.ModelProto, input_shape: Sequence[int]) -> list[ConvInfo]:
    """The Conv nodes in graph order with their MACs for an input of ``input_shape``.

    Nodes without a name get one (``Conv_<i>``), since the quantizer's include and
    exclude lists and the sensitivity report refer to nodes by name.
    """
    name_unnamed_nodes(model)
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    inp = fixed.graph.input[0]
    dims = inp.type.tensor_type.shape.dim
    for d, v in zip(dims, input_shape, strict=False):
        d.ClearField("dim_param")
        d.dim_value = int(v)
    try:
        inferred = shape_inference.infer_shapes(fixed)
    except Exception as exc:
        raise ModelError(f"shape inference failed on the model: {exc}") from exc
    shapes: dict[str, list[int]] = {}
    for vi in [*inferred.graph.value_info, *inferred.graph.output]:
        shapes[vi.name] = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    inits = _initializers(model)
    convs = []
    for node in model.graph.node:
        if node.op_type != "Conv":
            continue
        weight = inits.get(node.input[1])
        out = shapes.get(node.output[0], [])
        if weight is None or len(out) < 3 or any(v <= 0 for v in out):
            raise ModelError(f"cannot size convolution {node.name}: weights are not constant")
        w = list(weight.dims)
        spatial = int(np.prod(out[2:]))
        macs = int(out[1]) * spatial * int(np.prod(w[1:]))
        group = int(_attr(node, "group", 1))
        depthwise = group > 1 and w[1] == 1
        convs.append(ConvInfo(node.name, macs, depthwise, node.input[0]))
    if not convs:
        raise ModelError("the model has no convolutions to quantize")
    return convs


def name_unnamed_nodes(model: onnx.ModelProto) -> None:
    taken = {n.name for n in model.graph.node if n.name}
    for i, node in enumerate(model.graph.node):
        if not node.name:
            name = f"{node.op_type}_{i}"
            while name in taken:
                name += "_"
            node.name = name
            taken.add(name)


def with_outputs(model: onnx.ModelProto, tensors: Sequence[str]) -> onnx.ModelProto:
    """A copy of ``model`` that also outputs ``tensors`` (after its own outputs)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    have = {o.name for o in out.graph.output}
    for t in tensors:
        if t not in have:
            out.graph.output.append(helper.make_empty_tensor_value_info(t))
            have.add(t)
    return out


def equalize_depthwise(
    model: onnx.ModelProto, absmax: Mapping[str, npt.NDArray[np.float32]], convs: Sequence[str]
) -> onnx.ModelProto:
    """Per-channel range equalisation in front of depthwise convolutions.

    A per-tensor activation scale is shared by all channels, and the channels that
    feed a depthwise convolution can differ in range by orders of magnitude (the
    first layers see 0-255 pixels): the small channels are then quantized to a few
    levels. For each listed depthwise conv, this inserts ``x * (1/s)`` on its input
    (s = the channel's absolute maximum on the calibration frames) and multiplies
    its weights by s. In float the result is the same function; each weight
    channel is quantized with its own scale, so the weights lose nothing, while
    every input channel now spans [-1, 1]. The Mul is an ordinary float op in
    front of the QuantizeLinear, which TensorRT's explicit quantization accepts.

    ``absmax`` maps a conv's input tensor to its per-channel absolute maximum.
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    inits = _initializers(out)
    wanted = set(convs)
    inserts: dict[str, onnx.NodeProto] = {}
    for node in out.graph.node:
        if node.name not in wanted:
            continue
        weight = numpy_helper.to_array(inits[node.input[1]]).astype(np.float32)
        amax = np.asarray(absmax[node.input[0]], dtype=np.float32)
        scale = np.where(amax > 1e-12, amax, np.float32(1.0)).astype(np.float32)
        multiplier = weight.shape[0] // scale.shape[0]  # depthwise multiplier
        w_scaled = weight * np.repeat(scale, multiplier)[:, None, None, None]
        w_name = f"{node.input[1]}/fl_equalized/{node.name}"
        s_name = f"{node.name}/fl_equalize_scale"
        x_name = f"{node.input[0]}/fl_equalized/{node.name}"
        out.graph.initializer.append(numpy_helper.from_array(w_scaled.astype(np.float32), w_name))
        inv = (np.float32(1.0) / scale).reshape(1, -1, 1, 1).astype(np.float32)
        out.graph.initializer.append(numpy_helper.from_array(inv, s_name))
        inserts[node.name] = helper.make_node(
            "Mul", [node.input[0], s_name], [x_name], name=f"{node.name}/fl_equalize"
        )
        node.input[0] = x_name
        node.input[1] = w_name
    order: list[onnx.NodeProto] = []
    for node in out.graph.node:
        if node.name in inserts:
            order.append(inserts[node.name])
        order.append(node)
    del out.graph.node[:]
    out.graph.node.extend(order)
    drop_unused_initializers(out)
    return out


def drop_unused_initializers(model: onnx.ModelProto) -> None:
    used = {i for n in model.graph.node for i in n.input}
    used |= {o.name for o in model.graph.output}
    for node in model.graph.node:  # subgraphs reach outer-scope initializers by name
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                used |= {i for n in a.g.node for i in n.input}
    keep = [i for i in model.graph.initializer if i.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(keep)


def _dequantize(
    dq: onnx.NodeProto, inits: Mapping[str, onnx.TensorProto]
) -> npt.NDArray[np.float32]:
    """The float values a DequantizeLinear of constant inputs produces (same float32 math)."""
    q = numpy_helper.to_array(inits[dq.input[0]])
    scale = numpy_helper.to_array(inits[dq.input[1]]).astype(np.float32)
    zp = (
        numpy_helper.to_array(inits[dq.input[2]])
        if len(dq.input) > 2 and dq.input[2]
        else np.zeros(scale.shape, dtype=q.dtype)
    )
    if scale.ndim == 1 and scale.size > 1:
        axis = int(_attr(dq, "axis", 1)) % q.ndim
        shape = [1] * q.ndim
        shape[axis] = -1
        scale, zp = scale.reshape(shape), zp.reshape(shape)
    return ((q.astype(np.int64) - zp.astype(np.int64)).astype(np.float32) * scale).astype(
        np.float32
    )


@dataclass(frozen=True)
class GatedModel:
    """A Q/DQ model whose quantization can be switched on per Conv at run time.

    Feed ``gates(int8_convs)`` along with the image. ``convs`` are the quantized
    Conv names in graph order; ``act_of_conv[i]`` is the activation gate that
    conv i's input needs (None when its input is not quantized).
    """

    model: onnx.ModelProto
    convs: tuple[str, ...]
    n_acts: int
    act_of_conv: tuple[int | None, ...]

    def gates(self, int8: set[str] | frozenset[str]) -> dict[str, npt.NDArray[np.bool_]]:
        conv = np.array([name in int8 for name in self.convs], dtype=bool)
        act = np.zeros(self.n_acts, dtype=bool)
        for i, a in enumerate(self.act_of_conv):
            if conv[i] and a is not None:
                # A quantized tensor is quantized for all its readers, as in the real graph.
                act[a] = True
        return {ACT_GATES: act, CONV_GATES: conv}


def gated_model(float_model: onnx.ModelProto, qdq_model: onnx.ModelProto) -> GatedModel:
    """One model for all single-layer and mixed-precision trials (see GatedModel).

    Built from the all-Conv Q/DQ model: each activation QuantizeLinear ->
    DequantizeLinear pair becomes ``If(gate, QDQ(x), x)`` and each quantized Conv
    becomes ``If(gate, Conv(dequantized weights), Conv(float weights))``. The
    dequantized weights are computed once here with the same float32 arithmetic as
    DequantizeLinear, so with a gate set the output equals that of the Q/DQ graph
    with exactly those convolutions quantized, and ONNX Runtime can still prepack
    constant weights in both branches.
    """
    float_nodes = {n.name: n for n in float_model.graph.node}
    float_inits = _initializers(float_model)
    q_inits = _initializers(qdq_model)
    producer = {o: n for n in qdq_model.graph.node for o in n.output}
    acts: list[str] = []
    act_index: dict[str, int] = {}
    convs: list[str] = []
    conv_inputs: list[str] = []
    new_inits: list[onnx.TensorProto] = []
    order: list[onnx.NodeProto] = []

    def gate(source: str, index: int, out: str) -> onnx.NodeProto:
        return helper.make_node("Slice", [source, f"fl_i{index}", f"fl_i{index + 1}"], [out])

    for node in qdq_model.graph.node:
        if node.op_type == "QuantizeLinear":
            continue  # re-created inside the activation If below
        if node.op_type == "DequantizeLinear":
            src = producer.get(node.input[0])
            if src is None or src.op_type != "QuantizeLinear":
                continue  # a constant weight/bias: folded into the conv branches
            j = len(acts)
            acts.append(node.output[0])
            act_index[node.output[0]] = j
            then = helper.make_graph(
                [
                    helper.make_node(
                        "QuantizeLinear", list(src.input), [f"fl_q{j}"], **_attrs(src)
                    ),
                    helper.make_node(
                        "DequantizeLinear",
                        [f"fl_q{j}", *node.input[1:]],
                        [f"fl_dq{j}"],
                        **_attrs(node),
                    ),
                ],
                f"fl_act{j}_int8",
                [],
                [helper.make_empty_tensor_value_info(f"fl_dq{j}")],
            )
            other = helper.make_graph(
                [helper.make_node("Identity", [src.input[0]], [f"fl_id{j}"])],
                f"fl_act{j}_float",
                [],
                [helper.make_empty_tensor_value_info(f"fl_id{j}")],
            )
            order.append(gate(ACT_GATES, j, f"fl_ag{j}"))
            order.append(
                helper.make_node(
                    "If", [f"fl_ag{j}"], [node.output[0]], then_branch=then, else_branch=other
                )
            )
            continue
        wdq = producer.get(node.input[1]) if node.op_type == "Conv" else None
        if wdq is None or wdq.op_type != "DequantizeLinear":
            order.append(node)
            continue
        i = len(convs)
        convs.append(node.name)
        conv_inputs.append(node.input[0])
        original = float_nodes[node.name]
        q_in, f_in = [node.input[0]], [node.input[0]]
        for k in range(1, len(node.input)):
            dq = producer.get(node.input[k])
            f_val = numpy_helper.to_array(float_inits[original.input[k]])
            q_val = _dequantize(dq, q_inits) if dq is not None else f_val
            new_inits.append(numpy_helper.from_array(q_val, f"fl_qw{i}_{k}"))
            new_inits.append(numpy_helper.from_array(f_val, f"fl_fw{i}_{k}"))
            q_in.append(f"fl_qw{i}_{k}")
            f_in.append(f"fl_fw{i}_{k}")

        def branch(inputs: list[str], tag: str, node: onnx.NodeProto = node, i: int = i) -> Any:
            return helper.make_graph(
                [helper.make_node("Conv", inputs, [f"fl_{tag}{i}"], **_attrs(node))],
                f"fl_conv{i}_{tag}",
                [],
                [helper.make_empty_tensor_value_info(f"fl_{tag}{i}")],
            )

        order.append(gate(CONV_GATES, i, f"fl_cg{i}"))
        order.append(
            helper.make_node(
                "If",
                [f"fl_cg{i}"],
                [node.output[0]],
                name=node.name,
                then_branch=branch(q_in, "int8"),
                else_branch=branch(f_in, "float"),
            )
        )
    count = max(len(acts), len(convs)) + 1
    indices = [numpy_helper.from_array(np.array([j], np.int64), f"fl_i{j}") for j in range(count)]
    graph = helper.make_graph(
        order,
        "framelens_gated",
        [
            *qdq_model.graph.input,
            helper.make_tensor_value_info(ACT_GATES, TensorProto.BOOL, [len(acts)]),
            helper.make_tensor_value_info(CONV_GATES, TensorProto.BOOL, [len(convs)]),
        ],
        list(qdq_model.graph.output),
        [*qdq_model.graph.initializer, *new_inits, *indices],
    )
    model = helper.make_model(graph, opset_imports=list(qdq_model.opset_import))
    model.ir_version = qdq_model.ir_version
    drop_unused_initializers(model)
    return GatedModel(model, tuple(convs), len(acts), tuple(act_index.get(c) for c in conv_inputs))


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}
