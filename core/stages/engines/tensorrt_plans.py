"""TensorRT itself for FrameLens: importing it, its logger, the input shape ranges an
engine is built for (the batch range included) and the plan cache.

A plan is cached under ``<cache root>/tensorrt/<key>/`` (core/cache.py: written whole or
not at all), keyed by the graph's SHA-256, the TensorRT version, the GPU and its compute
capability and the shape range; a timing cache per GPU and TensorRT version makes
rebuilds of other graphs faster. The engine that runs plans is core/stages/engines/tensorrt.py.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from framelens.core.cache import cache_root, digest, read_entry, staging
from framelens.core.errors import EngineError, ModelError
from framelens.core.gpu.context import DeviceProperties
from framelens.core.models.catalog import model_sha256
from framelens.core.models.spec import ModelSpec

log = logging.getLogger(__name__)

INSTALL_HINT = (
    "installer/gpu.sh installs it where NVIDIA's package index is reachable; "
    "--backend onnxruntime runs the same graphs"
)
PLAN_FILE = "engine.plan"
WORKSPACE_BYTES = 1 << 30
DYNAMIC_DEFAULT = (32, 640, 1920)  # min/opt/max side for dynamic inputs of unknown models


def import_tensorrt() -> Any:
    """The tensorrt module; EngineError (one line, with what to do) when it is missing."""
    try:
        import tensorrt as trt
    except ImportError as exc:
        raise EngineError(f"TensorRT is not installed ({exc}): {INSTALL_HINT}") from None
    except Exception as exc:  # installed, but its libraries do not load
        raise EngineError(f"TensorRT does not load ({exc}): {INSTALL_HINT}") from None
    return trt


def tensorrt_unavailable() -> str | None:
    """Why the TensorRT backend cannot run here, or None."""
    try:
        import_tensorrt()
    except EngineError as exc:
        return str(exc)
    return None


# ---- what the plan is built for ----------------------------------------------------------


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


def plan_key(graph_sha256: str, trt_version: str, gpu: DeviceProperties, shapes: ShapeRange) -> str:
    """The cache key of a plan: a plan only runs on the TensorRT version and GPU
    architecture it was built for, and only on the shapes of its profile (the batch
    range is their leading dimension, so a plan for another ``max_batch`` is another)."""
    return digest(
        "tensorrt-plan",
        graph_sha256,
        trt_version,
        gpu.name,
        list(gpu.compute_capability),
        [list(shapes.min), list(shapes.opt), list(shapes.max)],
    )


def plans_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    return cache_root(cache_dir) / "tensorrt"


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


def one_line(messages: Sequence[str], limit: int = 3) -> str:
    """TensorRT's (multi-line) messages as one line: the first ``limit``, then a count."""
    lines = [" ".join(str(m).split()) for m in messages if str(m).strip()]
    text = "; ".join(lines[:limit])
    if len(lines) > limit:
        text += f" (and {len(lines) - limit} more)"
    return text or "no message from TensorRT"


# ---- building ------------------------------------------------------------------------------


_LOGGER: Any = None


def _logger(trt: Any) -> Any:
    """The process's TensorRT logger: it keeps the errors (for one-line messages) and logs
    warnings. One for all engines: TensorRT uses the first logger it is given for the
    whole process, and it must outlive every builder, runtime and engine."""
    global _LOGGER
    if _LOGGER is None:
        _LOGGER = _make_logger(trt)
    return _LOGGER


def _make_logger(trt: Any) -> Any:

    class Log(trt.ILogger):  # type: ignore[misc]
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            self.errors: list[str] = []

        def log(self, severity: Any, msg: str) -> None:
            level = int(severity)  # INTERNAL_ERROR 0, ERROR 1, WARNING 2, INFO 3, VERBOSE 4
            if level <= int(trt.ILogger.Severity.ERROR):
                self.errors.append(msg)
                log.error("TensorRT: %s", msg)
            elif level <= int(trt.ILogger.Severity.WARNING):
                log.warning("TensorRT: %s", msg)

    return Log()


def build_plan(
    trt: Any,
    logger: Any,
    path: Path,
    shapes: ShapeRange,
    timing_cache: Path | None,
) -> bytes:
    """Parse the ONNX graph and build a serialized engine (seconds to minutes)."""
    strongly = getattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
    if strongly is None:
        raise EngineError(
            f"TensorRT {trt.__version__} is too old: FrameLens builds strongly typed "
            "engines, which need TensorRT 10 or later"
        )
    del logger.errors[:]
    builder = trt.Builder(logger)
    network = builder.create_network(1 << int(strongly))
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(path)):
        errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        raise ModelError(f"TensorRT cannot parse {path.name}: {one_line(errors)}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, WORKSPACE_BYTES)
    # no precision flags: the graph's types decide (FP16 graph, Q/DQ nodes for INT8)
    if not shapes.static or -1 in tuple(network.get_input(0).shape):
        # a dynamic dimension needs a profile, even one fixed to a single shape
        profile = builder.create_optimization_profile()
        profile.set_shape(network.get_input(0).name, shapes.min, shapes.opt, shapes.max)
        config.add_optimization_profile(profile)
    previous = b""
    if timing_cache is not None:
        with contextlib.suppress(OSError):
            previous = timing_cache.read_bytes()
    cache = config.create_timing_cache(previous)
    if cache is None or not config.set_timing_cache(cache, ignore_mismatch=True):
        # an unreadable timing cache (another version, a truncated file) starts afresh
        config.set_timing_cache(config.create_timing_cache(b""), ignore_mismatch=True)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise EngineError(f"TensorRT could not build {path.name}: {one_line(logger.errors)}")
    if timing_cache is not None:
        _write_whole(timing_cache, bytes(config.get_timing_cache().serialize()))
    return bytes(plan)


def _write_whole(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename (best effort)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("could not write %s: %s", path, exc)
        with contextlib.suppress(OSError):
            tmp.unlink()


def cached_plan(
    trt: Any,
    logger: Any,
    path: Path,
    gpu: DeviceProperties,
    precision: str,
    spec: ModelSpec | None,
    cache_dir: str | os.PathLike[str] | None = None,
    max_batch: int = 1,
) -> tuple[bytes, ShapeRange, bool]:
    """The plan for ``path`` on ``gpu`` for batches up to ``max_batch``: from the cache,
    else built and cached. Returns (plan, shape range, whether it was built now)."""
    _, shape = onnx_input_shape(path)
    shapes = shape_range(shape, spec, max_batch)
    key = plan_key(model_sha256(path), str(trt.__version__), gpu, shapes)
    entry = plans_dir(cache_dir) / key
    if read_entry(entry) is not None:
        with contextlib.suppress(OSError):
            return (entry / PLAN_FILE).read_bytes(), shapes, False
    timing = plans_dir(cache_dir) / f"timing-{digest(trt.__version__, gpu.name)[:16]}.cache"
    plan = build_plan(trt, logger, path, shapes, timing)
    with staging(entry) as stage:
        (stage.path / PLAN_FILE).write_bytes(plan)
        stage.commit(
            {
                "model": path.name,
                "precision": precision,
                "tensorrt": str(trt.__version__),
                "gpu": gpu.name,
                "compute_capability": list(gpu.compute_capability),
                "shapes": {"min": shapes.min, "opt": shapes.opt, "max": shapes.max},
                "max_batch": shapes.max[0],
            }
        )
    return plan, shapes, True


# ---- running -------------------------------------------------------------------------------
