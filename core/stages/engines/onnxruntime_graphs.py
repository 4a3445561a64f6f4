"""An ONNX Runtime CUDA binding's runs replayed as CUDA graphs, one per input shape.

At batch 1 a YOLOX-Nano call is ~360 small kernels, each launched by ONNX Runtime's
executor from Python's calling thread: the launches, not the GPU, set the call's time.
``ShapeGraphs`` records a shape's call once (core/gpu/graphs.py: thread-local capture on
the engine's own stream) and from then on replays it: the input copied into the graph's
own input buffer, one launch, the outputs in the graph's own buffers.

A shape is captured on its ``WARM_RUNS + 1``-th call, after plain runs have let cuDNN
pick its algorithms and ONNX Runtime's arena grow to the call's size (a capture may not
allocate). The capture is checked before it is used: a plain run on a zero input
leaves every buffer of the session holding other values, the graph's outputs are filled
with garbage, and the replay on the call's input must then agree with the plain run on
it (work the capture missed would show). A
capture the driver stops (another thread's context-wide sync, say) is tried again after
more plain runs, up to ``TRIES`` times; anything else refused (a graph that would replay
wrongly, a replay that disagrees) turns the graphs off for the engine, every graph of it
dropped, with the reason in ``why_not`` and the log, and the engine runs as before.

ONNX Runtime's fused Conv+activation frees and reallocates a buffer when its input shape
changes, which a graph of the earlier shape would still read: engines with graphs are
made without that fusion (``SESSION_CONFIG``). Gemm keeps such a buffer too (its ones
for a broadcast bias, regrown for a larger batch), and control flow syncs with the host:
graphs with those operators get no graphs (``graph_blockers``). At most ``MAX_SHAPES``
shapes are captured an engine; others run plain.
"""

from __future__ import annotations

import functools
import logging
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from framelens.core.errors import EngineError
from framelens.core.gpu.buffers import DevicePool, cuda_driver
from framelens.core.gpu.context import GpuContext
from framelens.core.gpu.graphs import (
    CAPTURE_GATE,
    CapturedGraph,
    GraphRefused,
    capture,
    graphs_available,
    stream_non_blocking,
)

__all__ = [
    "BLOCKING_OPS",
    "MAX_SHAPES",
    "SESSION_CONFIG",
    "TRIES",
    "WARM_RUNS",
    "GraphOutput",
    "ShapeGraph",
    "ShapeGraphs",
    "graph_blockers",
]

log = logging.getLogger(__name__)

WARM_RUNS = 2  # plain runs of a shape before it is captured
TRIES = 3  # captures the driver stopped before the graphs are given up
MAX_SHAPES = 16  # graphs an engine keeps (a batch size each, in practice)
SESSION_CONFIG = {"optimization.disable_specified_optimizers": "ConvActivationFusion"}
# operators whose kernels keep per-shape device state, or sync with the host
BLOCKING_OPS = frozenset({"Gemm", "If", "Loop", "Scan"})
_GARBAGE_FLOAT, _GARBAGE_OTHER = 0xFF, 0xA5  # NaN in every float width; a rare pattern


def graph_blockers(path: str | os.PathLike[str]) -> str | None:
    """Why the ONNX graph at ``path`` cannot be replayed as CUDA graphs (its operators),
    or None (cached by file, size and time, as engine_plan's NHWC check: every worker's
    engine asks)."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return _blockers(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _blockers(path: str, size: int, mtime: int) -> str | None:
    del size, mtime  # the cache key only
    try:
        import onnx

        model = onnx.load(path, load_external_data=False)
    except Exception:  # what ONNX cannot read, ONNX Runtime reports where it loads it
        return None
    found = sorted({node.op_type for node in model.graph.node} & BLOCKING_OPS)
    if found:
        return f"the graph has {', '.join(found)}, whose kernels a replay would get wrong"
    return None


_SYNC_OFF = "disable_synchronize_execution_providers"  # ORT's run option: no stream sync

GraphOutput = tuple[tuple[int, ...], int]  # an output's shape and device pointer


@dataclass(eq=False)
class ShapeGraph:
    """One input shape's graph with the buffers it reads and writes."""

    graph: CapturedGraph
    input_ptr: int
    nbytes: int
    outputs: tuple[GraphOutput, ...]
    pools: list[DevicePool] = field(default_factory=list)

    def close(self) -> None:
        self.graph.close()
        for pool in self.pools:
            pool.close()
        self.pools = []


class ShapeGraphs:
    """The captured graphs of one binding, by input shape.

    ``outputs``: per output, its static shape, or its shape after the batch dimension
    (``per_item``) for outputs whose only dynamic dimension is the batch; a binding with
    any other dynamic output gets no graphs (ONNX Runtime would allocate it anew per run).
    """

    def __init__(
        self,
        ctx: GpuContext,
        stream: Any,
        outputs: Sequence[tuple[tuple[int, ...] | None, tuple[int, ...] | None, np.dtype[Any]]],
        *,
        enabled: bool,
        blocked: str | None = None,
    ) -> None:
        self._ctx, self._stream = ctx, stream
        self._outputs = list(outputs)
        self._seen: Counter[tuple[int, ...]] = Counter()
        self._graphs: dict[tuple[int, ...], ShapeGraph] = {}
        self._static: dict[int, int] = {}  # output index -> its bound static buffer
        self._failed = 0  # captures the driver stopped
        self.why_not: str | None = None if enabled else "off"
        if self.why_not is None:
            self.why_not = blocked or self._why_not()

    def _why_not(self) -> str | None:
        if any(static is None and per_item is None for static, per_item, _ in self._outputs):
            return "an output's shape is ONNX Runtime's to choose at each run"
        unavailable = graphs_available()
        if unavailable is not None:
            return unavailable
        try:
            if not stream_non_blocking(int(self._stream.handle)):
                return "the engine's stream waits for the NULL stream other threads use"
        except EngineError as exc:
            return str(exc)
        return None

    @property
    def shapes(self) -> tuple[tuple[int, ...], ...]:
        """The input shapes replayed as graphs."""
        return tuple(self._graphs)

    def set_static(self, index: int, ptr: int) -> None:
        """Output ``index`` is static and bound once to ``ptr``: every graph writes there."""
        self._static[index] = ptr

    @property
    def on(self) -> bool:
        """Whether graphs are (still) made and replayed."""
        return self.why_not is None

    def graph_for(self, shape: tuple[int, ...]) -> ShapeGraph | None:
        """The graph of ``shape`` when captured (and graphs are still on)."""
        return self._graphs.get(shape) if self.why_not is None else None

    def wants_capture(self, shape: tuple[int, ...]) -> bool:
        """Whether this call of ``shape`` should be captured (counted as a call)."""
        if self.why_not is not None or len(self._graphs) >= MAX_SHAPES:
            return False
        self._seen[shape] += 1
        return self._seen[shape] > WARM_RUNS

    def replay(self, graph: ShapeGraph, input_ptr: int) -> tuple[GraphOutput, ...]:
        """Queue ``graph`` on the engine's stream for the input at ``input_ptr`` (already
        ordered after its writer); its outputs' shapes and pointers."""
        cuda_driver().memcpy_dtod_async(graph.input_ptr, input_ptr, graph.nbytes, self._stream)
        graph.graph.launch(int(self._stream.handle))
        return graph.outputs

    def capture(
        self,
        shape: tuple[int, ...],
        input_ptr: int,
        nbytes: int,
        bind: Callable[[int, Mapping[int, GraphOutput]], None],
        run: Callable[[Any], None],
    ) -> ShapeGraph | None:
        """Capture ``shape``'s call: the input at ``input_ptr`` (``nbytes``) copied into a
        buffer of the graph's, ``bind(input, outputs)`` binding the session to that buffer
        and to the graph's outputs, ``run(run_options)`` one run. The graph, replayed once
        and checked against a plain run; None when refused (graphs off from then on)."""
        made: ShapeGraph | None = None
        pools: list[DevicePool] = []
        cuda = cuda_driver()
        try:
            buffer = DevicePool.linear(self._ctx, max(nbytes, 1), 1, kind="graph input")
            pools.append(buffer)
            graph_input = int(buffer.buffers[0].ptr)
            outputs: dict[int, GraphOutput] = {}
            for index, (static, per_item, dtype) in enumerate(self._outputs):
                if static is not None:
                    outputs[index] = (static, self._static[index])
                    continue
                assert per_item is not None  # _why_not() ruled the others out
                out_shape = (shape[0], *per_item)
                size = max(int(np.prod(out_shape)) * dtype.itemsize, 1)
                pool = DevicePool.linear(self._ctx, size, 1, kind="graph output")
                pools.append(pool)
                outputs[index] = (out_shape, int(pool.buffers[0].ptr))
            cuda.memcpy_dtod_async(graph_input, input_ptr, nbytes, self._stream)
            bind(graph_input, outputs)
            with CAPTURE_GATE.shared():
                run(None)  # plain, on the graph's buffers: its reference
            reference = self._read(outputs)
            import onnxruntime as ort

            options = ort.RunOptions()
            options.add_run_config_entry(_SYNC_OFF, "1")
            graph = capture(int(self._stream.handle), lambda: run(options))
            made = ShapeGraph(graph, graph_input, nbytes, tuple(outputs.values()), pools)
            pools = []
            # every buffer of the session made to hold another input's values, the
            # outputs garbage: a replay that missed any work cannot agree by chance
            cuda.memset_d8_async(graph_input, 0, max(nbytes, 1), self._stream)
            with CAPTURE_GATE.shared():
                run(None)
            for index, (out_shape, ptr) in outputs.items():
                dtype = self._outputs[index][2]
                fill = _GARBAGE_FLOAT if np.issubdtype(dtype, np.floating) else _GARBAGE_OTHER
                size = int(np.prod(out_shape)) * dtype.itemsize
                cuda.memset_d8_async(ptr, fill, max(size, 1), self._stream)
            self.replay(made, input_ptr)
            self._agree(reference, self._read(outputs))
        except GraphRefused as exc:
            if exc.retry and self._failed + 1 < TRIES:
                self._failed += 1
                self._seen[shape] = 0  # more plain runs, then again
                log.info("%s; tried again later (%d of %d)", exc, self._failed, TRIES)
                self._drop(made, pools)
                return None
            self._refuse(str(exc), made, pools)
            return None
        except Exception as exc:  # a buffer, a copy or ONNX Runtime's run: graphs off
            self._refuse(f"CUDA graphs: {type(exc).__name__}: {exc}", made, pools)
            return None
        self._graphs[shape] = made
        log.info("CUDA graph of input %s: %s", shape, dict(made.graph.nodes))
        return made

    def _read(self, outputs: Mapping[int, GraphOutput]) -> list[np.ndarray[Any, Any]]:
        cuda = cuda_driver()
        self._stream.synchronize()
        arrays = []
        for index, (shape, ptr) in outputs.items():
            array = np.empty(shape, self._outputs[index][2])
            cuda.memcpy_dtoh(array, ptr)
            arrays.append(array)
        return arrays

    @staticmethod
    def _agree(reference: list[np.ndarray[Any, Any]], replayed: list[np.ndarray[Any, Any]]) -> None:
        """GraphRefused unless every replayed output is the plain run's: integers exactly,
        floats each within 1e-4 + 1e-3 of its own size (kernels that reduce in another
        order), NaN and infinities where the plain run has them."""
        for want, got in zip(reference, replayed, strict=True):
            floating = np.issubdtype(want.dtype, np.floating)
            if np.array_equal(want, got, equal_nan=floating):
                continue
            if not floating:
                raise GraphRefused("CUDA graphs: the replay's outputs are not a plain run's")
            a, b = want.astype(np.float64), got.astype(np.float64)
            finite = np.isfinite(a)
            if not np.array_equal(finite, np.isfinite(b)) or not np.array_equal(
                a[~finite], b[~finite], equal_nan=True
            ):
                raise GraphRefused("CUDA graphs: the replay's outputs are not a plain run's")
            off = np.abs(a[finite] - b[finite])
            if np.any(off > 1e-4 + 1e-3 * np.abs(a[finite])):
                raise GraphRefused(
                    f"CUDA graphs: the replay's outputs differ from a plain run's by "
                    f"{float(off.max()):.3g}"
                )

    @staticmethod
    def _drop(made: ShapeGraph | None, pools: list[DevicePool]) -> None:
        if made is not None:
            made.close()
        for pool in pools:
            pool.close()

    def refuse(self, why: str) -> None:
        """Graphs off for good, every graph dropped (``why`` said once, and kept)."""
        self._refuse(why, None, [])

    def _refuse(self, why: str, made: ShapeGraph | None, pools: list[DevicePool]) -> None:
        """Graphs off for good: this capture's and every earlier graph dropped, once the
        stream has run what was queued."""
        self.why_not = why
        log.warning("%s; the engine runs without CUDA graphs", why)
        try:
            self._stream.synchronize()
        finally:
            self._drop(made, pools)
            self.close()

    def close(self) -> None:
        graphs, self._graphs = list(self._graphs.values()), {}
        for graph in graphs:
            graph.close()
