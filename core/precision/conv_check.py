"""What a graph's convolutions look like to the engines that run them: a structural check
of every Conv (its weight after DequantizeLinear against its input, the per-channel
axis, the bias) and the Convs that ONNX Runtime's CUDA provider misreads in NHWC.

The NHWC misreading (issue 29: INT8 ESRGAN failed at warm-up with "Input channels C is
not equal to kernel channels * group. C: 64 kernel channels: 3"): with ``prefer_nhwc``
the CUDA provider's NHWC Conv transposes a *constant* weight to OHWI when the session
pre-packs it, and marks the weight "already NHWC" when any other constant input is
pre-packed instead. A Q/DQ graph's weight is a DequantizeLinear output, not a constant,
so it is never pre-packed; since biases stay float (TensorRT takes no Int32
DequantizeLinear, qdq.py) the bias is the constant that is, and the OIHW weight
[32, 64, 3, 3] is then read as OHWI: 3 input channels. The graph is right (the checks
below hold on it); the layout is what must not be asked for (core/pipeline/engine_plan.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx
from onnx import numpy_helper

__all__ = ["ConvView", "conv_flops", "conv_problems", "conv_views", "nhwc_misread_convs"]


@dataclass(frozen=True)
class ConvView:
    """One Conv as the engines see it."""

    name: str
    weight_shape: tuple[int, ...]  # after DequantizeLinear, if any (same shape)
    weight_constant: bool  # an initializer itself (not a DequantizeLinear output)
    weight_axis: int | None  # the weight's DequantizeLinear axis (per-channel), else None
    weight_scales: int  # the number of weight scales (1: per tensor)
    bias_shape: tuple[int, ...] | None
    bias_constant: bool
    group: int
    input_channels: int | None  # from shape inference, where it is known


def _dims(value: onnx.ValueInfoProto) -> tuple[int | None, ...]:
    return tuple(
        d.dim_value if d.HasField("dim_value") else None for d in value.type.tensor_type.shape.dim
    )


def conv_views(model: onnx.ModelProto) -> list[ConvView]:
    """Every Conv of ``model`` with its weight (through a DequantizeLinear), bias and
    input channels (ONNX shape inference, the input's batch and size left symbolic)."""
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    known = {
        v.name: _dims(v)
        for v in [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]
    }
    views = []
    for node in graph.node:
        if node.op_type != "Conv":
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        weight_shape, constant, axis, scales = _weight(node.input[1], inits, producer)
        bias = node.input[2] if len(node.input) > 2 and node.input[2] else None
        bias_shape: tuple[int, ...] | None = None
        if bias is not None:
            if bias in inits:
                bias_shape = tuple(inits[bias].dims)
            else:
                bias_shape, _, _, _ = _weight(bias, inits, producer)
        x = known.get(node.input[0])
        views.append(
            ConvView(
                name=node.name or node.output[0],
                weight_shape=weight_shape,
                weight_constant=constant,
                weight_axis=axis,
                weight_scales=scales,
                bias_shape=bias_shape,
                bias_constant=bias is not None and bias in inits,
                group=int(attrs.get("group", 1)),
                input_channels=x[1] if x is not None and len(x) > 1 else None,
            )
        )
    return views


def _weight(
    name: str, inits: dict[str, onnx.TensorProto], producer: dict[str, onnx.NodeProto]
) -> tuple[tuple[int, ...], bool, int | None, int]:
    """(shape, is an initializer, DequantizeLinear axis or None, number of scales)."""
    if name in inits:
        return tuple(inits[name].dims), True, None, 1
    node = producer.get(name)
    if node is None or node.op_type != "DequantizeLinear" or node.input[0] not in inits:
        return (), False, None, 1  # computed at run time: nothing to say of its shape
    scale = inits.get(node.input[1])
    scales = int(numpy_helper.to_array(scale).size) if scale is not None else 1
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    axis = int(attrs.get("axis", 1)) if scales > 1 else None
    return tuple(inits[node.input[0]].dims), False, axis, scales


def conv_problems(model: onnx.ModelProto) -> list[str]:
    """What is structurally wrong with the graph's convolutions, one line each (none for a
    sound graph): a weight whose input channels times group are not the input's, a
    per-channel weight quantized along another axis than the output channels or with
    another number of scales, a bias that is not one value per output channel."""
    problems = []
    for conv in conv_views(model):
        w = conv.weight_shape
        if not w:
            continue
        if conv.input_channels is not None and w[1] * conv.group != conv.input_channels:
            problems.append(
                f"{conv.name}: input has {conv.input_channels} channels, weight {list(w)} "
                f"x group {conv.group} takes {w[1] * conv.group}"
            )
        if conv.weight_axis is not None and conv.weight_axis not in (0, -len(w)):
            problems.append(
                f"{conv.name}: weight quantized per channel along axis {conv.weight_axis}, not 0"
            )
        if conv.weight_scales not in (1, w[0]):
            problems.append(
                f"{conv.name}: {conv.weight_scales} weight scales for {w[0]} output channels"
            )
        if conv.bias_shape is not None and conv.bias_shape != (w[0],):
            problems.append(f"{conv.name}: bias {list(conv.bias_shape)} for {w[0]} output channels")
    return problems


def nhwc_misread_convs(model: onnx.ModelProto) -> list[str]:
    """The Convs that ONNX Runtime's CUDA provider would misread with ``prefer_nhwc``: a
    weight computed at run time (a DequantizeLinear output) beside a constant bias (see
    the module's docstring)."""
    return [c.name for c in conv_views(model) if not c.weight_constant and c.bias_constant]


def conv_flops(model: onnx.ModelProto, input_shape: tuple[int, ...]) -> int:
    """Floating-point operations of the graph's convolutions (a multiply-add counts two)
    on an input of ``input_shape``: 2 x output elements x input channels per group x
    kernel area, output sizes by ONNX shape inference. The rest of a convolutional
    network (ReLUs, adds, DepthToSpace) is memory traffic, not arithmetic worth counting."""
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    inits = {i.name for i in fixed.graph.initializer}
    first = next(i for i in fixed.graph.input if i.name not in inits)
    for dim, value in zip(first.type.tensor_type.shape.dim, input_shape, strict=True):
        dim.Clear()
        dim.dim_value = value
    inferred = onnx.shape_inference.infer_shapes(fixed, strict_mode=False)
    known = {v.name: _dims(v) for v in [*inferred.graph.value_info, *inferred.graph.output]}
    weights = {i.name: tuple(i.dims) for i in fixed.graph.initializer}
    producer = {out: node for node in fixed.graph.node for out in node.output}
    total = 0
    for node in fixed.graph.node:
        if node.op_type != "Conv":
            continue
        w = weights.get(node.input[1])
        dq = producer.get(node.input[1])
        if w is None and dq is not None and dq.op_type == "DequantizeLinear":
            w = weights.get(dq.input[0])
        y = known.get(node.output[0])
        if w is None or y is None or None in y:
            raise ValueError(f"{node.name}: the weight or output shape is not known")
        out_elements = 1
        for d in y:
            out_elements *= d or 0
        kernel = 1
        for d in w[1:]:
            kernel *= d
        total += 2 * out_elements * kernel
    return total
