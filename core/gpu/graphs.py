"""CUDA graphs captured from one thread's stream, through the driver API (ctypes).

``capture(stream_handle, work)`` records what ``work()`` queues on the stream into a
graph, in the *thread-local* capture mode: only the capturing thread is kept from calls
that would break a capture, so the process's other threads (NVDEC decoders, the other
inference worker, the display) go on as they were. ONNX Runtime's own
``enable_cuda_graph`` captures in the global mode, which fails those threads' calls while
it records; that is why the pipelines never used it (core/pipeline/engine_plan.py).

A captured graph replays the device work as it was recorded: the same kernels on the
same addresses. It is refused (``GraphRefused``, with the reason) when it holds work a
replay would get wrong: host callbacks (a library freeing host memory after its run
would free it again at every replay), copies from host memory (the bytes at that
address belong to someone else by the next replay), or memory allocated inside the
graph. What stays is kernels, memsets and device-to-device copies.

A context-wide synchronisation (``cuCtxSynchronize``) from any thread while a capture is
under way fails that call or the capture, whatever the mode, and ONNX Runtime's CUDA
runs capture streams of their own (seen with graphs off: a library inside the run,
cuDNN most likely, in a session's first runs). Two gates keep them
apart in this process. ``SYNC_GATE``: the product's context-wide waits and pool
allocations (``quiet()``: core/gpu/buffers.py, core/gpu/context.py) run alone; ONNX
Runtime's runs and our captures run together otherwise.
``CAPTURE_GATE``: our captures run alone; the plain runs of engines with graphs (cuDNN's
search, the arena's growth) run together otherwise. A capture that fails anyway
(another library's sync) is retried a few times by its caller, then given up.

pycuda has no stream capture; libcuda (the driver every CUDA program loads) has.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from framelens.core.errors import EngineError

__all__ = [
    "CAPTURE_GATE",
    "SYNC_GATE",
    "CaptureGate",
    "CapturedGraph",
    "GraphRefused",
    "capture",
    "graphs_available",
    "library_run",
    "quiet",
    "stream_non_blocking",
]


class CaptureGate:
    """A gate of two kinds of work: ``exclusive()`` runs alone, one at a time;
    ``shared()`` runs together with other shared work otherwise. A waiting exclusive
    holder goes before new shared work, and the shared work that waited for an
    exclusive hold goes before the next one (neither kind starves the other). A thread
    already inside enters again freely (shared in shared, anything in its own exclusive
    hold)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0  # shared holders inside
        self._alone = False  # an exclusive holder inside
        self._waiting = 0  # exclusive holders waiting
        self._shared_waiting = 0
        self._admit = 0  # shared waiters let in before the next exclusive holder
        self._mine = threading.local()

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        depth = getattr(self._mine, "depth", 0)
        counted = depth == 0 and not getattr(self._mine, "alone", False)
        if counted:
            with self._cond:
                self._shared_waiting += 1
                try:
                    self._cond.wait_for(
                        lambda: not self._alone and (not self._waiting or self._admit > 0)
                    )
                finally:
                    self._shared_waiting -= 1
                    if self._admit > 0:  # one of those let in (or giving up its place)
                        self._admit -= 1
                        self._cond.notify_all()
                self._shared += 1
        self._mine.depth = depth + 1
        try:
            yield
        finally:
            self._mine.depth = depth
            if counted:
                with self._cond:
                    self._shared -= 1
                    self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        if getattr(self._mine, "alone", False):  # inside its own exclusive hold
            yield
            return
        if getattr(self._mine, "depth", 0):  # it would wait for itself forever
            raise RuntimeError("exclusive work from inside shared work of the same gate")
        with self._cond:
            self._waiting += 1
            try:
                self._cond.wait_for(
                    lambda: not self._alone and self._shared == 0 and self._admit == 0
                )
                self._alone = True
            finally:
                self._waiting -= 1
                self._cond.notify_all()  # shared work held back for this one
        try:
            self._mine.alone = True
            yield
        finally:
            self._mine.alone = False
            with self._cond:
                self._alone = False
                self._admit = self._shared_waiting  # they go before the next exclusive
                self._cond.notify_all()


CAPTURE_GATE = CaptureGate()
"""Our captures (exclusive) against the work a capture must not run beside (shared): the
plain runs of engines with graphs (cuDNN's search, the arena's growth)."""

SYNC_GATE = CaptureGate()
"""Context-wide waits and allocations (exclusive, ``quiet()``) against ONNX Runtime's
runs and our captures (shared, ``library_run()``). With our graphs off, a
``cuCtxSynchronize`` from another thread during a session's first runs failed on an H200
with "operation not permitted when stream is capturing" or killed the process (a
segfault inside the call): something inside the run (cuDNN, most likely) captures a
stream (tests/gpu/test_graphs_gpu.py)."""

_THREAD_LOCAL = 1  # CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
# CUgraphNodeType
_KERNEL, _MEMCPY, _MEMSET, _HOST, _EMPTY = 0, 1, 2, 3, 5
_WAIT_EVENT, _EVENT_RECORD, _MEM_ALLOC, _MEM_FREE = 6, 7, 10, 11
_NODE_NAMES = {
    _KERNEL: "kernel",
    _MEMCPY: "copy",
    _MEMSET: "memset",
    _HOST: "host callback",
    4: "child graph",
    _EMPTY: "empty",
    _WAIT_EVENT: "event wait",
    _EVENT_RECORD: "event record",
    8: "semaphore signal",
    9: "semaphore wait",
    _MEM_ALLOC: "allocation",
    _MEM_FREE: "free",
    12: "memory operation",
    13: "conditional",
}
_SAFE = {_KERNEL, _MEMCPY, _MEMSET, _EMPTY, _WAIT_EVENT, _EVENT_RECORD}
# CUmemorytype
_HOST_MEMORY, _DEVICE_MEMORY, _ARRAY_MEMORY, _UNIFIED_MEMORY = 1, 2, 3, 4
_POINTER_MEMORY_TYPE = 2  # CU_POINTER_ATTRIBUTE_MEMORY_TYPE


class GraphRefused(EngineError):
    """The work could not be captured (``retry``: the capture itself failed, perhaps
    because of another thread, and may succeed later), or its graph would not replay it
    faithfully (``retry`` False)."""

    def __init__(self, message: str, *, retry: bool = False) -> None:
        super().__init__(message)
        self.retry = retry


def quiet() -> contextlib.AbstractContextManager[None]:
    """None of our captures and no ONNX Runtime run of this process's engines meanwhile
    (every run the product makes on the GPU holds ``library_run()``): for context-wide
    waits (``cuCtxSynchronize``), which a capture beside them breaks, and the pools' frees
    and allocations. Other allocations (sessions' arenas, the drawing and display
    buffers, CUDA IPC) and the libraries' own calls are not held back."""
    return SYNC_GATE.exclusive()


def library_run() -> contextlib.AbstractContextManager[None]:
    """Around an ONNX Runtime run on the GPU (it may capture a stream inside): no
    context-wide wait meanwhile; runs go together."""
    return SYNC_GATE.shared()


class _Memcpy3D(ctypes.Structure):
    """CUDA_MEMCPY3D."""

    _fields_ = [
        ("srcXInBytes", ctypes.c_size_t),
        ("srcY", ctypes.c_size_t),
        ("srcZ", ctypes.c_size_t),
        ("srcLOD", ctypes.c_size_t),
        ("srcMemoryType", ctypes.c_int),
        ("srcHost", ctypes.c_void_p),
        ("srcDevice", ctypes.c_uint64),
        ("srcArray", ctypes.c_void_p),
        ("reserved0", ctypes.c_void_p),
        ("srcPitch", ctypes.c_size_t),
        ("srcHeight", ctypes.c_size_t),
        ("dstXInBytes", ctypes.c_size_t),
        ("dstY", ctypes.c_size_t),
        ("dstZ", ctypes.c_size_t),
        ("dstLOD", ctypes.c_size_t),
        ("dstMemoryType", ctypes.c_int),
        ("dstHost", ctypes.c_void_p),
        ("dstDevice", ctypes.c_uint64),
        ("dstArray", ctypes.c_void_p),
        ("reserved1", ctypes.c_void_p),
        ("dstPitch", ctypes.c_size_t),
        ("dstHeight", ctypes.c_size_t),
        ("WidthInBytes", ctypes.c_size_t),
        ("Height", ctypes.c_size_t),
        ("Depth", ctypes.c_size_t),
    ]


@functools.cache
def _driver() -> Any:
    """libcuda with the signatures used here; EngineError when it cannot be loaded."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise EngineError(f"CUDA graphs: libcuda cannot be loaded ({exc})") from None
    vp, u64, sz = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t
    signatures: dict[str, list[Any]] = {
        "cuStreamBeginCapture_v2": [vp, ctypes.c_int],
        "cuStreamEndCapture": [vp, ctypes.POINTER(vp)],
        "cuStreamIsCapturing": [vp, ctypes.POINTER(ctypes.c_int)],
        "cuGraphInstantiateWithFlags": [ctypes.POINTER(vp), vp, ctypes.c_ulonglong],
        "cuGraphLaunch": [vp, vp],
        "cuGraphDestroy": [vp],
        "cuGraphExecDestroy": [vp],
        "cuGraphGetNodes": [vp, ctypes.POINTER(vp), ctypes.POINTER(sz)],
        "cuGraphNodeGetType": [vp, ctypes.POINTER(ctypes.c_int)],
        "cuGraphMemcpyNodeGetParams": [vp, ctypes.POINTER(_Memcpy3D)],
        "cuPointerGetAttribute": [ctypes.POINTER(ctypes.c_int), ctypes.c_int, u64],
        "cuGetErrorName": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
        "cuStreamGetFlags": [vp, ctypes.POINTER(ctypes.c_uint)],
    }
    for name, args in signatures.items():
        try:
            function = getattr(lib, name)
        except AttributeError:
            raise EngineError(f"CUDA graphs: this CUDA driver has no {name}") from None
        function.argtypes = args
        function.restype = ctypes.c_int
    return lib


def graphs_available() -> str | None:
    """None when graphs can be captured here, else why not (one line)."""
    try:
        _driver()
    except EngineError as exc:
        return str(exc)
    return None


def stream_non_blocking(stream_handle: int) -> bool:
    """Whether the stream was made non-blocking: work other threads queue on the legacy
    NULL stream does not wait for it, so its capture does not fail theirs."""
    flags = ctypes.c_uint(0)
    _check(_driver().cuStreamGetFlags(stream_handle, ctypes.byref(flags)), "reading the stream")
    return bool(flags.value & 1)  # CU_STREAM_NON_BLOCKING


def _check(result: int, what: str, *, retry: bool = False) -> None:
    if result != 0:
        name = ctypes.c_char_p()
        _driver().cuGetErrorName(result, ctypes.byref(name))
        code = name.value.decode() if name.value else str(result)
        raise GraphRefused(f"CUDA graphs: {what} failed ({code})", retry=retry)


class CapturedGraph:
    """A captured, instantiated graph: ``launch(stream_handle)`` replays it on a stream
    (asynchronously, as the work it recorded was queued); ``nodes`` counts what it holds
    by kind. ``close()`` frees it (twice is safe)."""

    def __init__(self, exec_handle: int, nodes: Counter[str]) -> None:
        self._exec: int | None = exec_handle
        self.nodes = nodes
        self._lock = threading.Lock()

    def launch(self, stream_handle: int) -> None:
        with self._lock:
            if self._exec is None:
                raise EngineError("the CUDA graph is closed")
            _check(_driver().cuGraphLaunch(self._exec, stream_handle), "replaying the graph")

    def close(self) -> None:
        with self._lock:
            handle, self._exec = self._exec, None
        if handle is not None:
            _driver().cuGraphExecDestroy(handle)


def capture(stream_handle: int, work: Callable[[], object]) -> CapturedGraph:
    """The graph of what ``work()`` queues on ``stream_handle`` from this thread, in the
    context current here. ``GraphRefused`` (the stream usable again) when the capture
    fails or its graph would replay wrongly (module docstring); what ``work`` raises
    otherwise, after the capture was ended."""
    lib = _driver()
    graph = ctypes.c_void_p()
    with CAPTURE_GATE.exclusive(), SYNC_GATE.shared():
        _check(
            lib.cuStreamBeginCapture_v2(stream_handle, _THREAD_LOCAL),
            "beginning the capture",
            retry=True,
        )
        try:
            work()
        except BaseException as exc:
            lib.cuStreamEndCapture(stream_handle, ctypes.byref(graph))  # ends it, whatever it says
            if graph.value:
                lib.cuGraphDestroy(graph)
            if not isinstance(exc, Exception):  # an interrupt stays one
                raise
            raise GraphRefused(
                f"CUDA graphs: the work could not be captured ({exc})", retry=True
            ) from exc
        _check(
            lib.cuStreamEndCapture(stream_handle, ctypes.byref(graph)),
            "ending the capture",
            retry=True,
        )
    if not graph.value:
        raise GraphRefused("CUDA graphs: the capture recorded no graph")
    try:
        nodes = _vetted_nodes(graph)
        exec_handle = ctypes.c_void_p()
        _check(
            lib.cuGraphInstantiateWithFlags(ctypes.byref(exec_handle), graph, 0),
            "instantiating the graph",
        )
    finally:
        lib.cuGraphDestroy(graph)
    return CapturedGraph(int(exec_handle.value or 0), nodes)


def _vetted_nodes(graph: ctypes.c_void_p) -> Counter[str]:
    """The graph's nodes by kind; GraphRefused for one a replay would get wrong."""
    lib = _driver()
    count = ctypes.c_size_t(0)
    _check(lib.cuGraphGetNodes(graph, None, ctypes.byref(count)), "listing the graph")
    handles = (ctypes.c_void_p * max(count.value, 1))()
    _check(lib.cuGraphGetNodes(graph, handles, ctypes.byref(count)), "listing the graph")
    kinds: Counter[str] = Counter()
    for index in range(count.value):
        kind = ctypes.c_int(-1)
        _check(lib.cuGraphNodeGetType(handles[index], ctypes.byref(kind)), "reading a node")
        name = _NODE_NAMES.get(kind.value, f"node type {kind.value}")
        kinds[name] += 1
        if kind.value not in _SAFE:
            raise GraphRefused(f"CUDA graphs: the work holds a {name}, which a replay repeats")
        if kind.value == _MEMCPY and not _device_to_device(handles[index]):
            raise GraphRefused(
                "CUDA graphs: the work copies to or from host memory, whose bytes belong to "
                "someone else by the next replay"
            )
    return kinds


def _device_to_device(node: Any) -> bool:
    """Whether the copy node ``node`` reads and writes device memory (arrays count)."""
    lib = _driver()
    params = _Memcpy3D()
    _check(lib.cuGraphMemcpyNodeGetParams(node, ctypes.byref(params)), "reading a copy")
    ends = ((params.srcMemoryType, params.srcDevice), (params.dstMemoryType, params.dstDevice))
    for kind, pointer in ends:
        if kind == _UNIFIED_MEMORY:
            found = ctypes.c_int(0)
            if lib.cuPointerGetAttribute(ctypes.byref(found), _POINTER_MEMORY_TYPE, pointer):
                return False
            kind = found.value
        if kind not in (_DEVICE_MEMORY, _ARRAY_MEMORY):
            return False
    return True
