"""Building a TensorRT plan from an ONNX graph, with either flavour (tensorrt_flavour.py).

A strongly typed network (precision lives in the graph: the FP16 graph, the INT8 Q/DQ
graph), an optimisation profile for dynamic inputs (the batch range included), the
timing cache, the builder optimisation level and, for TensorRT-RTX, the compute
capabilities to build for ahead of time (its timing cache is a deprecated no-op, so it
gets none). ``IProgressMonitor`` drives the caller's
progress callback and stops the build when its cancel event is set. Parse errors are
reported node by node.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from framelens.core.errors import Cancelled, EngineError, FrameLensError, ModelError
from framelens.core.stages.engines.tensorrt_flavour import Flavour
from framelens.core.stages.engines.tensorrt_shapes import ShapeRange

if TYPE_CHECKING:
    # TensorRT 10's published stubs (tensorrt-stubs, installed for mypy in CI): both
    # flavours share this API; what only TensorRT-RTX has (ahead-of-time compute
    # capabilities) is called through ``rtx_config`` below, typed Any on purpose
    import tensorrt as trt_api

log = logging.getLogger(__name__)

WORKSPACE_BYTES = 1 << 30
OPTIMIZATION_LEVEL = 3  # TensorRT's default: 0 builds fastest, 5 searches longest

Progress = Callable[[str, float], None]


def one_line(messages: Sequence[str], limit: int = 3) -> str:
    """TensorRT's (multi-line) messages as one line: the first ``limit``, then a count."""
    lines = [" ".join(str(m).split()) for m in messages if str(m).strip()]
    text = "; ".join(lines[:limit])
    if len(lines) > limit:
        text += f" (and {len(lines) - limit} more)"
    return text or "no message from TensorRT"


# ---- the logger: one per process and flavour ------------------------------------------------

_LOGGERS: dict[str, Any] = {}


def logger_for(trt: Any) -> Any:
    """The process's logger for this TensorRT module: it keeps the errors (for one-line
    messages) and logs warnings. TensorRT uses the first logger it is given for the
    whole process, and it must outlive every builder, runtime and engine."""
    key = trt.__name__
    if key not in _LOGGERS:
        _LOGGERS[key] = _make_logger(trt)
    return _LOGGERS[key]


def _make_logger(trt: Any) -> Any:
    class Log(trt.ILogger):  # type: ignore[misc]
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            self.errors: list[str] = []

        def log(self, severity: Any, msg: str) -> None:
            level = int(severity)  # INTERNAL_ERROR 0, ERROR 1, WARNING 2, INFO 3, VERBOSE 4
            if level <= int(trt.ILogger.Severity.ERROR):
                self.errors.append(msg)
                # building ahead of time on a machine without a GPU (TensorRT-RTX), the
                # builder's probe of the CUDA runtime fails as expected
                expected = "CUDA driver version is insufficient" in msg
                log.log(logging.INFO if expected else logging.ERROR, "TensorRT: %s", msg)
            elif level <= int(trt.ILogger.Severity.WARNING):
                log.debug("TensorRT: %s", msg)

    return Log()


# ---- progress -------------------------------------------------------------------------------


def _progress_monitor(
    trt: Any, on_progress: Progress | None, cancel: threading.Event | None
) -> Any:
    """An IProgressMonitor: the top phase's steps as 0..1 with the innermost phase's name
    as the text; returning False from step_complete is how TensorRT is told to stop."""

    class Monitor(trt.IProgressMonitor):  # type: ignore[misc]
        def __init__(self) -> None:
            trt.IProgressMonitor.__init__(self)
            self.top: str | None = None
            self.top_steps = 1
            self.top_done = 0
            self.cancelled = False

        def phase_start(self, phase_name: str, parent_phase: str | None, num_steps: int) -> None:
            if parent_phase is None and self.top is None:
                self.top, self.top_steps = phase_name, max(1, int(num_steps))
            self._report(phase_name)

        def step_complete(self, phase_name: str, step: int) -> bool:
            if phase_name == self.top:
                self.top_done = int(step) + 1
            if cancel is not None and cancel.is_set():
                self.cancelled = True
                return False
            return True

        def phase_finish(self, phase_name: str) -> None:
            if phase_name == self.top:
                self.top_done = self.top_steps
            self._report(phase_name)

        def _report(self, phase: str) -> None:
            if on_progress is not None:
                with contextlib.suppress(Exception):  # a callback must not break the build
                    on_progress(phase, min(1.0, self.top_done / self.top_steps))

    return Monitor()


# ---- the build ------------------------------------------------------------------------------


@dataclass(frozen=True)
class BuiltPlan:
    plan: bytes
    seconds: float
    targets: tuple[str, ...]  # compute capabilities built for ahead of time; () = this GPU


def parse_errors(parser: trt_api.OnnxParser) -> list[str]:
    """The parser's errors, one per node: "node 12 (Conv_7, Conv): message"."""
    out = []
    for i in range(parser.num_errors):
        error = parser.get_error(i)
        where = []
        with contextlib.suppress(Exception):
            if int(error.node()) >= 0:
                where.append(f"node {int(error.node())}")
        with contextlib.suppress(Exception):
            name, op = str(error.node_name()), str(error.node_operator())
            if name or op:
                where.append(f"({', '.join(p for p in (name, op) if p)})")
        desc = str(error.desc()) if hasattr(error, "desc") else str(error)
        out.append(f"{' '.join(where)}: {desc}" if where else desc)
    return out


def build_plan(
    flavour: Flavour,
    path: Path,
    shapes: ShapeRange,
    *,
    targets: Sequence[str] = (),
    timing_cache: Path | None = None,
    optimization_level: int = OPTIMIZATION_LEVEL,
    on_progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> BuiltPlan:
    """Parse the ONNX graph and build a serialized engine (seconds to minutes).

    ``targets``: compute capabilities to build for ahead of time (TensorRT-RTX; needs no
    GPU); empty: the GPU this process runs on. ModelError when the graph does not parse
    (node by node), Cancelled when ``cancel`` was set, EngineError otherwise."""
    trt, logger = flavour.module, logger_for(flavour.module)
    strongly = getattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
    if strongly is None:
        raise EngineError(
            f"{flavour.label} is too old: FrameLens builds strongly typed engines, which "
            "need TensorRT 10 or later"
        )
    if targets and not flavour.ahead_of_time:
        raise EngineError(f"{flavour.label} builds for the GPU it runs on, not for targets")
    start = time.perf_counter()
    del logger.errors[:]
    builder: trt_api.Builder = trt.Builder(logger)
    network: trt_api.INetworkDefinition = builder.create_network(1 << int(strongly))
    parser: trt_api.OnnxParser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(path)):
        raise ModelError(
            f"{flavour.label} cannot parse {path.name}: {one_line(parse_errors(parser))}"
        )
    config: trt_api.IBuilderConfig = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, WORKSPACE_BYTES)
    config.builder_optimization_level = optimization_level
    if hasattr(trt, "ProfilingVerbosity"):  # the inspector's layer list then has formats
        config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    if targets:
        # TensorRT-RTX only (not in TensorRT 10/11's API, hence not in its stubs)
        rtx_config: Any = config
        rtx_config.num_compute_capabilities = len(targets)
        for i, target in enumerate(targets):
            if not rtx_config.set_compute_capability(flavour.target_enum(target), i):
                raise EngineError(f"{flavour.label} refused the target {target}")
    # no precision flags: the graph's types decide (FP16 graph, Q/DQ nodes for INT8)
    graph_input = network.get_input(0)
    dims = [graph_input.shape[i] for i in range(len(graph_input.shape))]
    if not shapes.static or -1 in dims:
        # a dynamic dimension needs a profile, even one fixed to a single shape
        profile: trt_api.IOptimizationProfile = builder.create_optimization_profile()
        profile.set_shape(
            graph_input.name, trt.Dims(shapes.min), trt.Dims(shapes.opt), trt.Dims(shapes.max)
        )
        config.add_optimization_profile(profile)
    # TensorRT-RTX deprecated timing caches (no-ops there: it tunes at run time with its
    # runtime cache), so only the flavour that builds for its own GPU keeps one
    if flavour.ahead_of_time:
        timing_cache = None
    else:
        _use_timing_cache(config, timing_cache)
    monitor = _progress_monitor(trt, on_progress, cancel)
    config.progress_monitor = monitor
    if cancel is not None and cancel.is_set():
        raise Cancelled("engine build cancelled")
    plan = builder.build_serialized_network(network, config)
    if monitor.cancelled or (cancel is not None and cancel.is_set()):
        raise Cancelled("engine build cancelled")
    if plan is None:
        raise EngineError(f"{flavour.label} could not build {path.name}: {one_line(logger.errors)}")
    if timing_cache is not None:
        _save_timing_cache(config, timing_cache)
    return BuiltPlan(bytes(plan), time.perf_counter() - start, tuple(targets))


def _use_timing_cache(config: trt_api.IBuilderConfig, path: Path | None) -> None:
    previous = b""
    if path is not None:
        with contextlib.suppress(OSError):
            previous = path.read_bytes()
    cache = config.create_timing_cache(previous)
    if cache is None or not config.set_timing_cache(cache, ignore_mismatch=True):
        # an unreadable timing cache (another version, a truncated file) starts afresh
        config.set_timing_cache(config.create_timing_cache(b""), ignore_mismatch=True)


def _save_timing_cache(config: trt_api.IBuilderConfig, path: Path) -> None:
    from framelens.core.stages.sinks.atomic import write_bytes_atomic

    cache = config.get_timing_cache()
    if cache is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, bytes(cache.serialize()))
    except (OSError, FrameLensError) as exc:  # a faster next build is all it would give
        log.warning("could not write the timing cache %s: %s", path, exc)
