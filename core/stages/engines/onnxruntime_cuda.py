"""ONNX Runtime's CUDA provider fed device buffers through IOBinding, on our stream.

``OnnxRuntimeCudaEngine(path, ctx, stream)`` is an ``OnnxRuntimeEngine`` on "cuda:N"
whose CUDA provider runs on ``stream`` (provider option ``user_compute_stream``; copies
stay on that stream too, ORT's default ``do_copy_in_default_stream=1``). Besides the
numpy ``infer()``, ``infer_device(ptr, shape, dtype)`` reads the input straight from a
device buffer, e.g. the GPU preprocessing's output, and returns every output both in
device memory and copied to page-locked host memory for the host-side decoders and NMS.

ONNX Runtime uses the CUDA runtime API, i.e. the device's primary context: the buffers
handed in must be allocated in it, which is what ``framelens.core.gpu.context`` gives
every GPU component. Every call here makes that context current.

A batch of N frames is one ``run_with_iobinding``: the input's shape[0] is N. Outputs
with a fully static shape are bound once to device buffers of our own; outputs whose
only dynamic dimension is the input's batch dimension (a batch variant's, see
core.precision.batch) are bound at each run to device buffers of our own that grow to
the largest batch seen; outputs with other dynamic dimensions are allocated by ONNX
Runtime on the device at each run. All are staged through page-locked buffers that grow
when needed. ``DeviceOutput.host`` and
``.ptr`` stay valid until the next ``infer_device`` call (like ``Preprocessor``'s tensor):
copy what you keep.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from framelens.core.errors import EngineError
from framelens.core.gpu.buffers import DevicePool, PinnedPool, cuda_driver
from framelens.core.gpu.context import GpuContext
from framelens.core.gpu.graphs import CAPTURE_GATE, library_run
from framelens.core.stages.engines.base import DeviceEngine, DeviceOutput, batch_error
from framelens.core.stages.engines.onnxruntime_cpu import OnnxRuntimeEngine, ort_message
from framelens.core.stages.engines.onnxruntime_graphs import (
    SESSION_CONFIG,
    GraphOutput,
    ShapeGraphs,
    graph_blockers,
)

__all__ = [
    "DeviceBinding",
    "DeviceOutput",
    "OnnxRuntimeCudaEngine",
    "OutputBuffers",
    "check_input_dtype",
    "ort_dtype",
]

# ONNX tensor type (as ORT names it) -> numpy dtype.
ORT_DTYPES: dict[str, type[np.generic]] = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}


def ort_dtype(type_name: str) -> np.dtype[Any]:
    """The numpy dtype of an ORT tensor type string; EngineError for others."""
    try:
        return np.dtype(ORT_DTYPES[type_name])
    except KeyError:
        raise EngineError(f"tensors of type {type_name} are not supported here") from None


def check_input_dtype(model: np.dtype[Any], given: npt.DTypeLike) -> None:
    """EngineError (one line) when a device input's dtype is not the model's."""
    if np.dtype(given) != model:
        raise EngineError(
            f"the model takes {model.name} input, the buffer holds {np.dtype(given).name}"
        )


class OutputBuffers:
    """One output's buffers: static ones (our device + host buffers, bound once),
    batch ones (only the leading batch dim is dynamic: our device buffer, grown to the
    batch and bound at each run) or dynamic ones (ORT allocates on the device;
    TensorRT: grown by ``device_ptr``)."""

    def __init__(
        self,
        name: str,
        shape: tuple[int | None, ...],
        dtype: np.dtype[Any],
        *,
        batched: bool = False,
    ) -> None:
        self.name = name
        self.dtype = dtype
        self.static_shape: tuple[int, ...] | None = (
            tuple(d for d in shape if d is not None) if None not in shape else None
        )
        # batched: dim 0 is the input's (dynamic) batch dim; per_item the dims after it,
        # when those are all static
        self.per_item: tuple[int, ...] | None = (
            tuple(d for d in shape[1:] if d is not None)
            if batched and len(shape) >= 1 and shape[0] is None and None not in shape[1:]
            else None
        )
        self.device: DevicePool | None = None
        self.pinned: PinnedPool | None = None  # one flat buffer, regrown for dynamic outputs

    def host_buffer(self, ctx: GpuContext, nbytes: int) -> npt.NDArray[np.uint8]:
        """A page-locked flat byte buffer of at least ``nbytes`` (grown on demand)."""
        if self.pinned is None or self.pinned.buffers[0].array.nbytes < nbytes:
            if self.pinned is not None:
                self.pinned.close()
            self.pinned = None
            self.pinned = PinnedPool(
                ctx, (max(nbytes, 1),), np.uint8, 1, kind=f"{self.name} output"
            )
        array: npt.NDArray[np.uint8] = self.pinned.buffers[0].array
        return array

    def device_ptr(self, ctx: GpuContext, nbytes: int) -> int:
        """A device buffer of at least ``nbytes`` (grown on demand)."""
        if self.device is None or self.device.buffers[0].nbytes < nbytes:
            if self.device is not None:
                self.device.close()
            self.device = None
            self.device = DevicePool.linear(ctx, max(nbytes, 1), 1, kind=f"{self.name} buffer")
        return int(self.device.buffers[0].ptr)

    def copy_to_host(
        self, ctx: GpuContext, stream: Any, ptr: int, shape: tuple[int, ...], *, copy: bool = True
    ) -> DeviceOutput:
        """Queue the device-to-host copy of the output at ``ptr`` on ``stream``; the
        result's ``host`` is valid once the stream is synchronised. Without ``copy``, the
        output as it is on the device only."""
        if not copy:
            return DeviceOutput(self.name, ptr, shape, self.dtype, None)
        nbytes = int(np.prod(shape)) * self.dtype.itemsize
        flat = self.host_buffer(ctx, nbytes)
        if nbytes:
            cuda_driver().memcpy_dtoh_async(flat[:nbytes], ptr, stream)
        host = flat[:nbytes].view(self.dtype).reshape(shape)
        return DeviceOutput(self.name, ptr, shape, self.dtype, host)

    def close(self) -> None:
        for pool in (self.pinned, self.device):
            if pool is not None:
                pool.close()
        self.pinned = self.device = None


class DeviceBinding:
    """One session's IOBinding to device pointers, with host copies of its outputs.

    ``device_type`` is the IOBinding device ("cuda"; tests on a CPU-only machine bind
    "cpu" buffers the same way). ``graphs``: runs replayed as CUDA graphs once each input
    shape was captured (core/stages/engines/onnxruntime_graphs.py), unless
    ``graphs_blocked`` says why the model cannot be (``graph_blockers``).
    """

    def __init__(
        self,
        session: Any,
        ctx: GpuContext,
        stream: Any,
        *,
        device_type: str = "cuda",
        device_id: int | None = None,
        graphs: bool = False,
        graphs_blocked: str | None = None,
    ) -> None:
        self._session = session
        self._graphs: ShapeGraphs | None = None
        self._ctx = ctx
        self._stream = stream
        self._device_type = device_type
        self._device_id = ctx.index if device_id is None else device_id
        inp = session.get_inputs()[0]
        self.input_name = str(inp.name)
        self.input_shape = tuple(d if isinstance(d, int) else None for d in inp.shape)
        self.input_dtype = ort_dtype(str(inp.type))
        self._outputs: list[OutputBuffers] = []
        self._values: list[Any] = []  # ORT's output values of the last run (keeps ptrs valid)
        self._io: Any = None
        cuda = cuda_driver()
        try:
            with ctx.active():
                self._io = session.io_binding()
                batch_symbol = inp.shape[0] if inp.shape and isinstance(inp.shape[0], str) else None
                for out in session.get_outputs():
                    shape = tuple(d if isinstance(d, int) else None for d in out.shape)
                    dtype = ort_dtype(str(out.type))
                    # the output's dim 0 is the batch when it is the input's batch symbol
                    batched = (
                        batch_symbol is not None
                        and bool(out.shape)
                        and (out.shape[0] == batch_symbol)
                    )
                    self._outputs.append(
                        OutputBuffers(str(out.name), shape, dtype, batched=batched)
                    )
                for output in self._outputs:
                    self._bind_output(output)
                if graphs and device_type == "cuda":
                    self._graphs = self._shape_graphs(graphs_blocked)
                self._event = cuda.Event(cuda.event_flags.DISABLE_TIMING)
                self._done = cuda.Event(cuda.event_flags.DISABLE_TIMING)
        except EngineError:
            self.close()
            raise
        except Exception as exc:
            self.close()
            raise EngineError(f"binding the model's outputs failed: {ort_message(exc)}") from exc

    def _shape_graphs(self, blocked: str | None) -> ShapeGraphs:
        graphs = ShapeGraphs(
            self._ctx,
            self._stream,
            [(o.static_shape, o.per_item, o.dtype) for o in self._outputs],
            enabled=True,
            blocked=blocked,
        )
        for index, output in enumerate(self._outputs):
            if output.static_shape is not None and output.device is not None:
                graphs.set_static(index, int(output.device.buffers[0].ptr))
        return graphs

    @property
    def graphs_why_not(self) -> str | None:
        """Why this binding's runs are not replayed as CUDA graphs (None: they are, once
        each input shape was captured)."""
        return "off" if self._graphs is None else self._graphs.why_not

    @property
    def graph_shapes(self) -> tuple[tuple[int, ...], ...]:
        """The input shapes whose runs are replayed as CUDA graphs."""
        return () if self._graphs is None else self._graphs.shapes

    def _bind_output(self, output: OutputBuffers) -> None:
        if output.static_shape is None:  # ORT allocates it on the device at each run
            self._io.bind_output(output.name, self._device_type, self._device_id)
            return
        nbytes = max(1, int(np.prod(output.static_shape)) * output.dtype.itemsize)
        output.device = DevicePool.linear(self._ctx, nbytes, 1, kind=f"{output.name} output")
        output.host_buffer(self._ctx, nbytes)
        self._io.bind_output(
            output.name,
            self._device_type,
            self._device_id,
            output.dtype.type,
            list(output.static_shape),
            output.device.buffers[0].ptr,
        )

    def run(
        self,
        input_ptr: int,
        input_shape: Sequence[int],
        input_dtype: npt.DTypeLike,
        stream: Any = None,
        *,
        to_host: bool = True,
    ) -> list[DeviceOutput]:
        """Run on the input at ``input_ptr``; see ``OnnxRuntimeCudaEngine.infer_device``."""
        if self._io is None:
            raise EngineError("the engine is closed")
        shape = self._check_input(input_shape, input_dtype)
        other = stream is not None and int(stream.handle) != int(self._stream.handle)
        try:
            with self._ctx.active():
                if other:  # the input is written on the caller's stream: wait for it there
                    self._event.record(stream)
                    self._stream.wait_for_event(self._event)
                replayed = self._graph_run(shape, int(input_ptr))
                if replayed is not None:
                    results = [
                        output.copy_to_host(self._ctx, self._stream, ptr, out_shape, copy=to_host)
                        for output, (out_shape, ptr) in zip(self._outputs, replayed, strict=True)
                    ]
                else:
                    self._bind_input(shape, int(input_ptr))
                    self._values = []
                    bound = self._bind_batch_outputs(shape[0])
                    # a plain run before its shape's capture (cuDNN's search, the arena's
                    # growth): never beside another engine's capture
                    before_capture = self._graphs is not None and self._graphs.on
                    with CAPTURE_GATE.shared() if before_capture else contextlib.nullcontext():
                        self._session_run()  # the whole batch: one run
                    results = self._copy_out(bound, to_host)
                self._done.record(self._stream)
                if other:  # device outputs read on the caller's stream come after the run
                    stream.wait_for_event(self._done)
                if to_host:
                    self._done.synchronize()
        except EngineError:
            raise
        except Exception as exc:
            raise EngineError(f"inference failed: {ort_message(exc)}") from exc
        return results

    def _session_run(self, options: Any = None) -> None:
        """One ONNX Runtime run of the binding (``options``: its RunOptions). It may capture
        a stream inside: no context-wide wait meanwhile (core/gpu/graphs.py)."""
        with library_run():
            if options is None:
                self._session.run_with_iobinding(self._io)
            else:
                self._session.run_with_iobinding(self._io, options)

    def _bind_input(self, shape: Sequence[int], ptr: int) -> None:
        self._io.bind_input(
            self.input_name,
            self._device_type,
            self._device_id,
            self.input_dtype.type,
            list(shape),
            ptr,
        )

    def _graph_run(self, shape: tuple[int, ...], input_ptr: int) -> tuple[GraphOutput, ...] | None:
        """The run replayed as ``shape``'s CUDA graph (captured now if this is the call for
        it), queued on our stream; None: a plain run it is."""
        graphs = self._graphs
        if graphs is None:
            return None
        graph = graphs.graph_for(shape)
        if graph is not None:
            try:
                return graphs.replay(graph, input_ptr)
            except EngineError as exc:  # a launch the driver refused: plain runs from now
                graphs.refuse(f"CUDA graphs: replaying failed ({exc})")
                return None
        if not graphs.wants_capture(shape):
            return None
        nbytes = int(np.prod(shape)) * self.input_dtype.itemsize

        def bind(graph_input: int, outputs: Mapping[int, GraphOutput]) -> None:
            self._bind_input(shape, graph_input)
            for index, (out_shape, ptr) in outputs.items():
                output = self._outputs[index]
                if output.static_shape is None:
                    self._io.bind_output(
                        output.name,
                        self._device_type,
                        self._device_id,
                        output.dtype.type,
                        list(out_shape),
                        ptr,
                    )

        def run(options: Any) -> None:
            self._values = []
            self._session_run(options)

        made = graphs.capture(shape, input_ptr, nbytes, bind, run)
        return None if made is None else made.outputs

    def _bind_batch_outputs(self, n: int) -> dict[int, tuple[tuple[int, ...], int]]:
        """Bind every output that is not static for this run: batch outputs to our device
        buffer grown to ``n`` items, the others to ORT's allocator. Returns the shape and
        pointer of each output bound to our buffers here, by output index."""
        bound: dict[int, tuple[tuple[int, ...], int]] = {}
        for i, output in enumerate(self._outputs):
            if output.static_shape is not None:
                continue
            if output.per_item is not None:
                shape = (n, *output.per_item)
                nbytes = int(np.prod(shape)) * output.dtype.itemsize
                ptr = output.device_ptr(self._ctx, nbytes)
                self._io.bind_output(
                    output.name,
                    self._device_type,
                    self._device_id,
                    output.dtype.type,
                    list(shape),
                    ptr,
                )
                bound[i] = (shape, ptr)
            else:
                # Unbound again each run: IOBinding would otherwise hand the last
                # run's value (and shape) back to ORT as a preallocated output.
                self._io.bind_output(output.name, self._device_type, self._device_id)
        return bound

    def _check_input(self, shape: Sequence[int], dtype: npt.DTypeLike) -> tuple[int, ...]:
        got = tuple(int(d) for d in shape)
        fixed = self.input_shape[0] if self.input_shape else None
        if got and fixed is not None and got[0] != fixed:
            raise batch_error(fixed, got[0])
        if got and got[0] < 1:
            raise EngineError(f"a batch holds at least one frame, got {got[0]}")
        if len(got) != len(self.input_shape) or any(
            want is not None and want != d for want, d in zip(self.input_shape, got, strict=True)
        ):
            want_text = tuple("?" if d is None else d for d in self.input_shape)
            raise EngineError(f"input shape {got} does not fit the model's {want_text}")
        check_input_dtype(self.input_dtype, dtype)
        return got

    def _copy_out(
        self, bound: Mapping[int, tuple[tuple[int, ...], int]], to_host: bool = True
    ) -> list[DeviceOutput]:
        """Queue device-to-host copies of every output on our stream (synchronised later).
        ``bound``: the outputs bound to our batch buffers this run (``_bind_batch_outputs``)."""
        values: list[Any] | None = None
        results = []
        for i, output in enumerate(self._outputs):
            if output.static_shape is not None and output.device is not None:
                shape, ptr = output.static_shape, output.device.buffers[0].ptr
            elif i in bound:
                shape, ptr = bound[i]
            else:
                if values is None:
                    values = self._values = list(self._io.get_outputs())
                value = values[i]
                shape, ptr = tuple(int(d) for d in value.shape()), int(value.data_ptr())
            results.append(output.copy_to_host(self._ctx, self._stream, ptr, shape, copy=to_host))
        return results

    def close(self) -> None:
        """Drop the binding and free the output buffers. Safe to call twice."""
        io, self._io = self._io, None
        self._values = []
        graphs, self._graphs = self._graphs, None
        with self._ctx.active():
            if graphs is not None:
                graphs.close()
            if io is not None:
                io.clear_binding_inputs()
                io.clear_binding_outputs()
            for output in self._outputs:
                output.close()
        self._outputs = []


class OnnxRuntimeCudaEngine(OnnxRuntimeEngine, DeviceEngine):
    """ONNX Runtime on CUDA device ``ctx.index``, running on ``stream``, fed device buffers.

    ``cuda_options``: more CUDA provider options (``cudnn_conv_algo_search``, ...).
    ``graphs``: each input shape's run replayed as a CUDA graph once captured
    (core/stages/engines/onnxruntime_graphs.py; the engine's stream must be non-blocking).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        ctx: GpuContext,
        stream: Any,
        *,
        threads: int | None = None,
        spinning: bool = True,
        cuda_options: Mapping[str, str] | None = None,
        graphs: bool = False,
    ) -> None:
        self._ctx = ctx
        self.stream = stream
        self._binding: DeviceBinding | None = None
        options = {**(cuda_options or {}), "user_compute_stream": str(int(stream.handle))}
        # a graph whose operators a replay gets wrong keeps its fusions: it gets no graphs
        blocked = graph_blockers(path) if graphs else None
        with ctx.active():
            super().__init__(
                path,
                device=f"cuda:{ctx.index}",
                threads=threads,
                spinning=spinning,
                cuda_options=options,
                session_config=SESSION_CONFIG if graphs and blocked is None else None,
            )
            try:
                self._binding = DeviceBinding(
                    self._session, ctx, stream, graphs=graphs, graphs_blocked=blocked
                )
            except EngineError:
                self.close()
                raise

    @property
    def graphs_why_not(self) -> str | None:
        """Why the runs are not replayed as CUDA graphs; None when they are."""
        if self._binding is None:
            raise EngineError("the engine is closed")
        return self._binding.graphs_why_not

    @property
    def graph_shapes(self) -> tuple[tuple[int, ...], ...]:
        """The input shapes replayed as CUDA graphs so far."""
        return () if self._binding is None else self._binding.graph_shapes

    @property
    def input_dtype(self) -> np.dtype[Any]:
        """What the model takes: float32, or float16 for a graph converted without
        ``keep_io_types``."""
        if self._binding is None:
            raise EngineError("the engine is closed")
        return self._binding.input_dtype

    def infer(self, tensor: npt.NDArray[np.float32]) -> list[npt.NDArray[Any]]:
        with self._ctx.active():
            return super().infer(tensor)

    def infer_device(
        self,
        input_ptr: int,
        input_shape: Sequence[int],
        input_dtype: npt.DTypeLike,
        stream: Any = None,
        *,
        to_host: bool = True,
    ) -> list[DeviceOutput]:
        """Run once on the (N, C, H, W) batch at device pointer ``input_ptr``; see
        ``DeviceEngine.infer_device``."""
        if self._binding is None:
            raise EngineError("the engine is closed")
        return self._binding.run(input_ptr, input_shape, input_dtype, stream, to_host=to_host)

    def close(self) -> None:
        with self._ctx.active():
            binding, self._binding = self._binding, None
            if binding is not None:
                binding.close()
            super().close()
