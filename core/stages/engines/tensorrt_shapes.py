"""The input shapes a TensorRT plan is built for: the graph's input, and the range of its
dynamic dimensions (the batch range of "One pipeline" included)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from framelens.core.errors import ModelError
from framelens.core.models.spec import ModelSpec

DYNAMIC_DEFAULT = (32, 640, 1920)  # min/opt/max side for dynamic inputs of unknown models


@dataclass(frozen=True, slots=True)
class ShapeRange:
    """The input shapes an engine accepts: one shape for static models, a range for
    models with a dynamic batch, height or width (an optimization profile)."""

    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]

    @property
    def static(self) -> bool:
        return self.min == self.opt == self.max

    @property
    def batches(self) -> tuple[int, int]:
        """The smallest and largest batch the engine runs."""
        return self.min[0], self.max[0]

    def accepts(self, shape: Sequence[int]) -> bool:
        return len(shape) == len(self.min) and all(
            lo <= d <= hi for lo, d, hi in zip(self.min, shape, self.max, strict=True)
        )


def shape_range(
    onnx_shape: Sequence[int | None], spec: ModelSpec | None = None, max_batch: int = 1
) -> ShapeRange:
    """The shape range to build for an NCHW input whose dynamic dims are None.

    A dynamic batch ranges from 1 to ``max_batch``, optimised for ``max_batch`` (the batch
    the pipeline runs); a fixed batch must be ``max_batch``. Dynamic height/width (YuNet
    keeps the source's aspect, see core.preprocess.input_size_for) range from one stride
    to the longest side the preprocessing can ask for, optimised for the model's nominal
    input size.
    """
    if len(onnx_shape) != 4:
        raise ModelError(f"TensorRT backend: the input must be NCHW, the model's is {onnx_shape}")
    n, c, h, w = onnx_shape
    if c is None:
        raise ModelError("TensorRT backend: the input's channel count must be fixed")
    if max_batch < 1:
        raise ModelError(f"TensorRT backend: the batch must be at least 1, not {max_batch}")
    if n is not None and n != max_batch:
        raise ModelError(
            f"TensorRT backend: the graph has a fixed batch {n}, the pipeline runs batch "
            f"{max_batch} (core.precision.batch makes a batch variant of a batch-1 graph)"
        )
    lo_n, hi_n = (n, n) if n is not None else (1, max_batch)
    if h is not None and w is not None:
        return ShapeRange((lo_n, c, h, w), (hi_n, c, h, w), (hi_n, c, h, w))
    if spec is not None:
        stride = max(1, spec.stride_multiple)
        opt_h, opt_w = spec.input_size
        side = -(-max(opt_h, opt_w) // stride) * stride
        low = stride
    else:
        low, opt, side = DYNAMIC_DEFAULT
        opt_h = opt_w = opt
    return ShapeRange(
        (lo_n, c, h or low, w or low),
        (hi_n, c, h or opt_h, w or opt_w),
        (hi_n, c, h or side, w or side),
    )


def onnx_input_shape(path: Path) -> tuple[str, tuple[int | None, ...]]:
    """The ONNX graph's one input: its name and shape (None for dynamic dims)."""
    import onnx

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:
        raise ModelError(f"cannot read {path.name}: {exc}") from None
    initializers = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    if len(inputs) != 1:
        raise ModelError(f"{path.name}: the TensorRT backend takes models with one input")
    dims = inputs[0].type.tensor_type.shape.dim
    return inputs[0].name, tuple(d.dim_value if d.HasField("dim_value") else None for d in dims)
