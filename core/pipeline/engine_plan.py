"""ONNX Runtime's CUDA provider options for a run's graph, each decided once with its
reason: the plan shows them (build.plan, "engine options") and every CUDA engine of the
run is made with them (build.create_engine, build._device_engine), so what a user reads
is what ran.

- TF32 (``use_tf32``): an FP32 graph keeps FP32; FP16 and INT8 graphs allow TF32.
- Layout (``prefer_nhwc``): NHWC for the models whose task asks for it (ESRGAN-class
  super-resolution), except graphs with convolutions ONNX Runtime's NHWC Conv misreads
  (core/precision/conv_check.py: a Q/DQ weight beside a float bias, issue 29).
- Bias fused into the convolution (``fuse_conv_bias``): for FP16 graphs whose task asks
  for it (the same heavy super-resolution models), measured faster.
- cuDNN's algorithm search (``cudnn_conv_algo_search``): ONNX Runtime's exhaustive search
  (every candidate timed, on each engine's first call at each input shape) for every
  graph; ``FRAMELENS_CUDNN_SEARCH`` (exhaustive, heuristic, default) sets another, for
  the benchmarks' A/B (heuristic plans ran ESRGAN's FP16 graph as fast a call and
  started a 40-frame run no sooner: benchmarks/sr_startup.py).
- CUDA graphs: each batch size's engine call captured once by the engine itself
  (core/gpu/graphs.py, thread-local capture) and replayed from then on: on unless the
  task declines them (``cuda_graphs=0`` among its options: super-resolution) or
  ``FRAMELENS_CUDA_GRAPHS`` says otherwise (``1`` on, ``0`` off, for every task); never
  ONNX Runtime's ``enable_cuda_graph``, for the reason in CUDA_GRAPH_WHY.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from framelens.core.models.spec import ModelSpec

__all__ = [
    "CUDA_GRAPH_WHY",
    "GRAPHS_DEFAULT",
    "GRAPHS_ENV",
    "SEARCH_ENV",
    "CudaOptions",
    "cuda_options_for",
    "nhwc_misread_count",
]

TF32_OFF_WHY = "use_tf32=0: an FP32 graph keeps FP32 (TF32 moved scores by ~1e-3 on the H200)"
TF32_ON_WHY = (
    "use_tf32=1: the {precision} graph has given FP32 up already, and without TF32 cuDNN "
    "found no fast plan for ESRGAN's FP16 convolutions (211 against 54 ms per 540p call)"
)
NHWC_WHY = (
    "prefer_nhwc=1: a heavy super-resolution model, whose convolutions ran faster in NHWC "
    "on the H200 (ESRGAN x2 at 540p: FP16 77 -> 54 ms, FP32 125 -> 90 ms)"
)
NHWC_REFUSED_WHY = (
    "NCHW, not NHWC: {count} of its convolutions have a Q/DQ weight beside a float bias, "
    "which ONNX Runtime's NHWC Conv reads as already transposed (issue 29)"
)
FUSE_WHY = (
    "fuse_conv_bias=1: cuDNN adds the bias inside the convolution of this FP16 heavy "
    "super-resolution graph (ESRGAN x2 at 540p on an H100: 61.4 -> 52.7 ms a call, "
    "benchmarks/results/h100-superres-2026-12-05.json)"
)
SEARCH_ENV = "FRAMELENS_CUDNN_SEARCH"
SEARCHES = {"exhaustive": "EXHAUSTIVE", "heuristic": "HEURISTIC", "default": "DEFAULT"}
SEARCH_ENV_WHY = "cudnn_conv_algo_search={value}: {env}={asked}"
CUDA_GRAPH_WHY = (
    "CUDA graphs: each batch size's call recorded once from the worker's own thread and "
    "replayed (one launch instead of one per node: YOLOX-Nano's call 2.06 -> 1.15 ms, 16 "
    "sources 1.09x, on an H100); not ONNX Runtime's enable_cuda_graph, which records in "
    "global mode, while NVDEC and the other worker make CUDA calls that would break it"
)
NO_CUDA_GRAPH_WHY = "no CUDA graphs: FRAMELENS_CUDA_GRAPHS=0"
TASK_NO_CUDA_GRAPH_WHY = (
    "no CUDA graphs: the {task} task declines them (its calls are long: a graph gave "
    "ESRGAN x2 at 540p 52.0 against 52.7 ms on an H100; FRAMELENS_CUDA_GRAPHS=1 asks anyway)"
)
HOST_ENGINE_NO_CUDA_GRAPH_WHY = (
    "no CUDA graphs: the engine runs on host arrays (only the GPU pipeline's engine, on "
    "device buffers, records them)"
)
GRAPHS_ENV = "FRAMELENS_CUDA_GRAPHS"
GRAPHS_DEFAULT = "1"  # unless the task declines them (tests/gpu/test_graphs_gpu.py, H100)


@dataclass(frozen=True)
class CudaOptions:
    """CUDA provider options and why each is what it is."""

    options: tuple[tuple[str, str], ...]
    why: tuple[str, ...]
    graphs: bool = False  # each batch size's call captured and replayed as a CUDA graph

    def as_dict(self) -> dict[str, str]:
        """The provider options (the graphs are the engine's, not ONNX Runtime's)."""
        return dict(self.options)

    @property
    def value(self) -> str:
        """As the plan shows it: ``use_tf32=1, prefer_nhwc=1, CUDA graphs``."""
        shown = [f"{k}={v}" for k, v in self.options] + (["CUDA graphs"] if self.graphs else [])
        return ", ".join(shown) or "ONNX Runtime's defaults"


def cuda_options_for(
    precision: str,
    spec: ModelSpec | None = None,
    task_options: Mapping[str, str] | None = None,
    *,
    device_engine: bool = False,
) -> CudaOptions:
    """The CUDA provider options for ``spec``'s graph of ``precision`` (``spec``: the
    resolved graph, None where only the precision is known), given the options its task
    asks for (``task_options``: the task's ``cuda_options``). ``device_engine``: the
    engine runs on device buffers (the GPU pipeline's), the only engine that captures
    CUDA graphs; a host pipeline's CUDA engine never does, and its plan says so."""
    options: dict[str, str] = {}
    why: list[str] = []
    if precision == "fp32":
        options["use_tf32"] = "0"
        why.append(TF32_OFF_WHY)
    else:
        options["use_tf32"] = "1"
        why.append(TF32_ON_WHY.format(precision=precision.upper()))
    asked = dict(task_options or {})
    if asked.pop("prefer_nhwc", "0") == "1":
        count = nhwc_misread_count(spec.path) if spec is not None else 0
        if count:
            why.append(NHWC_REFUSED_WHY.format(count=count))
        else:
            options["prefer_nhwc"] = "1"
            why.append(NHWC_WHY)
    if asked.pop("fuse_conv_bias", "0") == "1" and precision == "fp16":
        # measured for FP16 only; FP32 keeps cuDNN's plain convolution, INT8 its Q/DQ nodes
        options["fuse_conv_bias"] = "1"
        why.append(FUSE_WHY)
    task_search = asked.pop("cudnn_conv_algo_search", None)  # no task asks for one today
    env = os.environ.get(SEARCH_ENV, "").strip().lower()
    if env in SEARCHES:
        options["cudnn_conv_algo_search"] = SEARCHES[env]
        why.append(SEARCH_ENV_WHY.format(value=SEARCHES[env], env=SEARCH_ENV, asked=env))
    else:
        if env:
            why.append(f"{SEARCH_ENV}={env} ignored: it takes {', '.join(SEARCHES)}")
        if task_search is not None:
            options["cudnn_conv_algo_search"] = task_search
            why.append(f"cudnn_conv_algo_search={task_search}: the task asks for it")
    task_graphs = asked.pop("cuda_graphs", None)
    options.update(asked)
    graphs, graphs_why = _graphs_choice(spec, task_graphs, device_engine)
    why.append(graphs_why)
    return CudaOptions(tuple(options.items()), tuple(why), graphs)


def _graphs_choice(
    spec: ModelSpec | None, task_graphs: str | None, device_engine: bool
) -> tuple[bool, str]:
    """Whether the engine captures CUDA graphs, and why (or why not)."""
    if not device_engine:
        return False, HOST_ENGINE_NO_CUDA_GRAPH_WHY
    env = os.environ.get(GRAPHS_ENV) or None
    asked = env if env in ("0", "1") else None
    if asked == "0":
        return False, NO_CUDA_GRAPH_WHY
    if asked is None and (task_graphs or GRAPHS_DEFAULT) != "1":
        task = spec.task if spec is not None else "model's"
        return False, TASK_NO_CUDA_GRAPH_WHY.format(task=task)
    if spec is not None:
        from framelens.core.stages.engines.onnxruntime_graphs import graph_blockers

        blocked = graph_blockers(spec.path)
        if blocked is not None:
            return False, f"no CUDA graphs: {blocked}"
    why = CUDA_GRAPH_WHY
    if env is not None and asked is None:
        why += f" ({GRAPHS_ENV}={env} ignored: it takes 0 or 1)"
    return True, why


def nhwc_misread_count(path: Path) -> int:
    """How many convolutions of the graph at ``path`` ONNX Runtime's NHWC Conv misreads
    (cached by file, size and time: a plan and its engines ask in turn)."""
    try:
        stat = os.stat(path)
    except OSError:
        return 0
    return _misread(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _misread(path: str, size: int, mtime: int) -> int:
    del size, mtime  # the cache key only
    import onnx  # only graphs that might take NHWC pay for it
    from framelens.core.precision.conv_check import nhwc_misread_convs

    try:
        return len(nhwc_misread_convs(onnx.load(path, load_external_data=False)))
    except Exception:  # a graph ONNX cannot read fails where the engine loads it, with why
        return 0
