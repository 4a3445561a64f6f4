"""TensorRT engines: built once per graph and GPU, cached, run on device buffers on our stream.

Precision lives in the graph (core.precision: the FP16 variant is converted, the INT8 one
carries Q/DQ nodes), so the engine is built as a *strongly typed* network from the graph
of the chosen precision: what TensorRT 11 requires (it removed the FP16/INT8 builder
flags) and every TensorRT 10 offers (``NetworkDefinitionCreationFlag.STRONGLY_TYPED``).
TensorRT before 10 is refused with a message.

Plans are built and cached by core/stages/engines/tensorrt_plans.py (keyed by the graph,
the TensorRT version, the GPU and the shape range, the batch range included). The first
build of a model takes tens of seconds; every later start deserializes the plan.

Batches: a graph with a dynamic batch dimension (core.precision.batch makes one of a
batch-1 graph) is built for batches 1..``max_batch``, optimised for ``max_batch`` (what the
pipeline asks for); a fixed-batch graph is built for its one batch.

Like ``OnnxRuntimeCudaEngine``, ``infer_device(ptr, shape, dtype)`` reads the input from
a device buffer in the primary context (core.gpu.context) and returns each output on the
device and copied to page-locked host memory, valid until the next call.

Written against the TensorRT 10/11 Python API (named I/O tensors, ``execute_async_v3``).
TensorRT could not be installed on the machines this was developed on; what runs without
it (the key, the shape ranges, the messages) is tested, the build and the run are not.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from framelens.core.errors import EngineError, ModelError
from framelens.core.gpu.buffers import cuda_driver, cuda_message
from framelens.core.gpu.context import GpuContext
from framelens.core.models.spec import ModelSpec
from framelens.core.stages.engines.base import DeviceEngine, DeviceOutput, batch_error
from framelens.core.stages.engines.onnxruntime_cuda import OutputBuffers, check_input_dtype
from framelens.core.stages.engines.tensorrt_build import logger_for, one_line
from framelens.core.stages.engines.tensorrt_flavour import import_flavour
from framelens.core.stages.engines.tensorrt_plans import (
    LAYERS_FILE,
    BuildFor,
    cached_plan,
    import_tensorrt,
    plan_key,
    tensorrt_unavailable,
)
from framelens.core.stages.engines.tensorrt_shapes import (
    ShapeRange,
    onnx_input_shape,
    shape_range,
)

__all__ = [
    "ShapeRange",
    "TensorRtEngine",
    "import_tensorrt",
    "one_line",
    "onnx_input_shape",
    "plan_key",
    "shape_range",
    "tensorrt_unavailable",
]

if TYPE_CHECKING:  # TensorRT 10's published stubs, the API both flavours share
    import tensorrt as trt_api

log = logging.getLogger(__name__)


class TensorRtEngine(DeviceEngine):
    """A TensorRT engine for an ONNX graph on CUDA device ``ctx.index``, run on ``stream``.

    ``precision`` is the graph's ("fp32", "fp16", "int8"), recorded with the cached plan
    (the graph's own types decide). ``spec`` gives dynamic models their shape range.
    ``max_batch``: the largest batch one call runs (a graph with a dynamic batch is built
    for 1..max_batch; a fixed-batch graph must have that batch).
    """

    backend = "tensorrt"

    def __init__(
        self,
        path: str | os.PathLike[str],
        ctx: GpuContext,
        stream: Any = None,
        *,
        precision: str = "fp32",
        spec: ModelSpec | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        max_batch: int = 1,
    ) -> None:
        flavour = import_flavour()
        refused = flavour.cannot_run(ctx.properties.compute_capability)
        if refused is not None:  # before building anything: the plan would not load
            raise EngineError(refused)
        trt = flavour.module
        self._trt = trt
        self._ctx = ctx
        self.path = Path(path)
        self.device = f"cuda:{ctx.index}"
        self.providers = ["TensorRT"]
        self._runtime: trt_api.Runtime | None = None
        self._engine: trt_api.ICudaEngine | None = None
        self._context: trt_api.IExecutionContext | None = None
        self.cuda_graphs = False  # the engine replays as one CUDA graph (static shapes, RTX)
        self._outputs: list[OutputBuffers] = []
        self._input = OutputBuffers("input", (), np.dtype(np.uint8))  # the host path's staging
        cuda = cuda_driver()
        self._log = logger_for(trt)
        try:
            with ctx.active():
                self.stream = stream if stream is not None else cuda.Stream()
                plan, self.shapes, self.built, entry = cached_plan(
                    flavour, self.path, BuildFor.this_gpu(ctx.properties, flavour), precision,
                    spec, cache_dir=cache_dir, max_batch=max_batch,
                )  # fmt: skip
                del self._log.errors[:]
                self._runtime = runtime = trt.Runtime(self._log)
                self._engine = engine = runtime.deserialize_cuda_engine(plan)
                if engine is None:
                    raise EngineError(
                        f"{flavour.label} could not load the plan of {self.path.name}: "
                        f"{one_line(self._log.errors)}"
                    )
                _save_layers(trt, engine, entry / LAYERS_FILE)
                self._context, self.cuda_graphs = _execution_context(trt, engine, self.shapes)
                if self._context is None:
                    raise EngineError(
                        f"TensorRT could not create an execution context for "
                        f"{self.path.name} (device memory?): {one_line(self._log.errors)}"
                    )
                self._bind_names(trt)
                self._event = cuda.Event(cuda.event_flags.DISABLE_TIMING)
                self._done = cuda.Event(cuda.event_flags.DISABLE_TIMING)
        except (EngineError, ModelError):
            self.close()
            raise
        except Exception as exc:
            self.close()
            raise EngineError(f"TensorRT: {cuda_message(exc)}") from exc

    def _bind_names(self, trt: Any) -> None:
        engine = self._engine
        assert engine is not None, "names are bound after deserialization"
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        inputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        outputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.OUTPUT]
        if len(inputs) != 1:
            raise ModelError(f"{self.path.name}: the TensorRT backend takes models with one input")
        self.input_name = str(inputs[0])
        self.input_shape = tuple(
            None if d < 0 else int(d) for d in _dims(engine.get_tensor_shape(self.input_name))
        )
        self._input_dtype: np.dtype[Any] = np.dtype(
            trt.nptype(engine.get_tensor_dtype(self.input_name))
        )
        self.output_names = [str(n) for n in outputs]
        self._outputs = [
            OutputBuffers(
                str(n),
                tuple(None if d < 0 else int(d) for d in _dims(engine.get_tensor_shape(n))),
                np.dtype(trt.nptype(engine.get_tensor_dtype(n))),
            )
            for n in outputs
        ]

    @property
    def input_dtype(self) -> np.dtype[Any]:
        return self._input_dtype

    @property
    def batch(self) -> int | None:
        """The one batch the plan runs, or None when it runs a range (``shapes.batches``)."""
        lo, hi = self.shapes.batches
        return lo if lo == hi else None

    def accepts_batch(self, n: int) -> bool:
        lo, hi = self.shapes.batches
        return lo <= n <= hi

    def check_batch(self, n: int) -> None:
        if self.accepts_batch(n):
            return
        lo, hi = self.shapes.batches
        if lo == hi and self.input_shape[0] is not None:
            raise batch_error(lo, n)
        raise EngineError(
            f"the engine was built for batches {lo}..{hi} and cannot run a batch of {n} "
            "(create it with a larger max_batch)"
        )

    def infer_device(
        self,
        input_ptr: int,
        input_shape: Sequence[int],
        input_dtype: npt.DTypeLike,
        stream: Any = None,
        *,
        to_host: bool = True,
    ) -> list[DeviceOutput]:
        """Run once on the (N, C, H, W) batch at ``input_ptr``; see
        ``DeviceEngine.infer_device``."""
        if self._context is None:
            raise EngineError("the engine is closed")
        shape = tuple(int(d) for d in input_shape)
        if shape:
            self.check_batch(shape[0])
        if not self.shapes.accepts(shape):
            raise EngineError(
                f"input shape {shape} is outside the engine's range "
                f"{self.shapes.min}..{self.shapes.max}"
            )
        check_input_dtype(self.input_dtype, input_dtype)
        other = stream is not None and int(stream.handle) != int(self.stream.handle)
        ctx, context = self._ctx, self._context
        try:
            with ctx.active():
                if other:  # the input is written on the caller's stream: wait for it there
                    self._event.record(stream)
                    self.stream.wait_for_event(self._event)
                if not context.set_input_shape(self.input_name, shape):
                    raise EngineError(f"TensorRT refused input shape {shape}")
                context.set_tensor_address(self.input_name, int(input_ptr))
                staged = []
                for output in self._outputs:
                    out_shape = tuple(_dims(context.get_tensor_shape(output.name)))
                    if any(d < 0 for d in out_shape):
                        raise EngineError(
                            f"output {output.name} has a data-dependent shape, not supported"
                        )
                    nbytes = int(np.prod(out_shape)) * output.dtype.itemsize
                    ptr = output.device_ptr(ctx, nbytes)
                    context.set_tensor_address(output.name, ptr)
                    staged.append((output, out_shape, ptr))
                del self._log.errors[:]
                if not context.execute_async_v3(int(self.stream.handle)):
                    raise EngineError(f"TensorRT inference failed: {one_line(self._log.errors)}")
                results = [
                    output.copy_to_host(ctx, self.stream, ptr, out_shape, copy=to_host)
                    for output, out_shape, ptr in staged
                ]
                self._done.record(self.stream)
                if other:
                    stream.wait_for_event(self._done)
                if to_host:
                    self._done.synchronize()
        except EngineError:
            raise
        except Exception as exc:
            raise EngineError(f"TensorRT inference failed: {cuda_message(exc)}") from exc
        return results

    def infer(self, tensor: npt.NDArray[np.float32]) -> list[npt.NDArray[Any]]:
        """The host-array path (FramePipeline): upload, run once, copies of the outputs."""
        if self._context is None:
            raise EngineError("the engine is closed")
        if tensor.ndim >= 1:
            self.check_batch(int(tensor.shape[0]))
        data = np.ascontiguousarray(tensor, dtype=self.input_dtype)
        cuda = cuda_driver()
        try:
            with self._ctx.active():
                staging_host = self._input.host_buffer(self._ctx, data.nbytes)
                staging_host[: data.nbytes] = data.reshape(-1).view(np.uint8)
                ptr = self._input.device_ptr(self._ctx, data.nbytes)
                cuda.memcpy_htod_async(ptr, staging_host[: data.nbytes], self.stream)
        except Exception as exc:
            raise EngineError(f"TensorRT input upload failed: {cuda_message(exc)}") from exc
        return [o.host.copy() for o in self.infer_device(ptr, data.shape, data.dtype)]

    def close(self) -> None:
        """Release the execution context, the engine and the buffers. Safe to call twice."""
        context, engine, runtime = self._context, self._engine, self._runtime
        self._context = self._engine = self._runtime = None
        try:
            with self._ctx.active():
                for buffers in [*self._outputs, self._input]:
                    buffers.close()
                del context, engine, runtime  # in this order, in the context
        except Exception as exc:  # a broken device: its memory goes with it
            log.warning("closing the TensorRT engine failed: %s", cuda_message(exc))
        self._outputs = []


def _execution_context(trt: Any, engine: Any, shapes: ShapeRange) -> tuple[Any, bool]:
    """An execution context; with static shapes, one that replays the whole engine as a
    CUDA graph where the flavour offers it (TensorRT-RTX's runtime configuration,
    ``CudaGraphStrategy.WHOLE_GRAPH_CAPTURE``: one launch per call instead of one per
    kernel). TensorRT 10/11 have no such option; their contexts launch kernel by kernel.
    Returns the context and whether graphs are on. Feature-detected, never by version."""
    static = shapes.min == shapes.max
    strategy = getattr(getattr(trt, "CudaGraphStrategy", None), "WHOLE_GRAPH_CAPTURE", None)
    if static and strategy is not None and hasattr(engine, "create_runtime_config"):
        config = engine.create_runtime_config()
        config.cuda_graph_strategy = strategy
        return engine.create_execution_context(config), True
    return engine.create_execution_context(), False


def _dims(dims: trt_api.Dims) -> list[int]:
    """A TensorRT Dims as ints (it iterates at run time; the stubs only index it)."""
    return [int(dims[i]) for i in range(len(dims))]


def _save_layers(trt: Any, engine: Any, path: Path) -> None:
    """The engine inspector's layer list (which layers run in which precision) beside the
    plan, once: what the INT8 sensitivity chart shows as "TensorRT kept this layer in
    float". Best effort: a plan without it still runs."""
    if path.exists():
        return
    try:
        inspector = engine.create_engine_inspector()
        text = inspector.get_engine_information(trt.LayerInformationFormat.JSON)
        from framelens.core.stages.sinks.atomic import write_bytes_atomic

        write_bytes_atomic(path, str(text).encode("utf-8"))
    except Exception as exc:
        log.info("no layer list for %s: %s", path.parent.name, exc)
