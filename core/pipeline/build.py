"""The one place that turns settings into pipelines.

Everything that decides *how* a run computes lives here and nowhere else:
- the precision variant, resolved once before anything is constructed (``resolve``);
- the path: the GPU pipeline (NVDEC, CUDA kernels, device buffers), ONNX Runtime's CUDA
  provider with host preprocessing when the GPU pipeline cannot run, or the CPU;
- the engine: ONNX Runtime (CPU or CUDA) or TensorRT, on the pipeline's stream;
- the task of the model (core/stages/tasks);
- how many workers, and the source's decoder that suits them (core/pipeline/decoding.py);
- what a run goes on with after a GPU failure (``after_gpu_failure``).
The CLI run, the player, compare panes and the benchmark all build through it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from framelens.core.errors import ConfigError, EngineError, FrameLensError, GpuError, ModelError
from framelens.core.models.catalog import default_model
from framelens.core.models.spec import ModelSpec
from framelens.core.pipeline.cores import usable_cpus
from framelens.core.pipeline.decoding import decoder_choice, decodes_on_device
from framelens.core.pipeline.engine_plan import CudaOptions, cuda_options_for
from framelens.core.pipeline.frame_pipeline import FramePipeline
from framelens.core.pipeline.plan import Choice, Plan
from framelens.core.pipeline.processor import FrameProcessor
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.stages.engines import BACKENDS
from framelens.core.stages.engines.base import DeviceEngine, Engine
from framelens.core.stages.sources import Source
from framelens.core.stages.tasks import find_kind, task_for

log = logging.getLogger(__name__)

GPU_WORKERS = 2  # two streams, two threads: upload/preprocess of N+1 overlaps inference of N
MAX_CPU_WORKERS = 4
GPU_FILE_BATCH = 4
"""Frames per engine call for a video file on CUDA when no batch is asked for: on the
H200 batches of 4 ran at NVDEC's ceiling (531 fps against 465 at batch 1, two workers;
benchmarks/results/h200-2026-12-02.json), results equal to batch 1 frame by frame
(tests/gpu/test_batch_gpu.py). Live sources stay at 1: a frame is never held back."""

Notify = Callable[[str], None]


def resolve(settings: PipelineSettings) -> PipelineSettings:
    """Settings whose model is the graph of their precision (precision lives in the graph):
    fp16 loads the cached, or freshly converted, variant; int8 must have been prepared on
    a source (core.precision.prepare_variant) and its spec passed in, else ConfigError.
    For ``batch`` > 1, a graph fixed at batch 1 is rewritten to a dynamic batch (cached).
    Call before building; constructors never convert graphs."""
    if settings.precision != "fp32":
        from framelens.core.precision import model_for

        settings = replace(settings, model=model_for(settings.model, settings.precision))
    if settings.batch > 1:
        # a fixed batch-1 graph (YOLOX-Nano) gets its batch-N variant, cached; a graph
        # with a batch dimension (YuNet) comes back as it is
        from framelens.core.precision import batch_variant

        settings = replace(settings, model=batch_variant(settings.model))
    return settings


def default_batch(settings: PipelineSettings, spec: str) -> PipelineSettings:
    """``settings`` with the batch a run of ``spec`` gets when none is asked for:
    GPU_FILE_BATCH for a video file on CUDA whose graph takes (or can be given) a batch
    dimension, else 1."""
    if (
        not settings.device.startswith("cuda")
        or not decodes_on_device(spec)
        or not _batches_frames(settings)
    ):
        return replace(settings, batch=1)
    batched = replace(settings, batch=GPU_FILE_BATCH)
    try:
        from framelens.core.precision import batch_variant

        batch_variant(batched.model)  # cached: the run resolves the same graph
    except ModelError:
        return replace(settings, batch=1)  # a graph fixed at batch 1 runs as it is
    return batched


def _batches_frames(settings: PipelineSettings) -> bool:
    """Whether the model's task gains from several frames per engine call."""
    kind = find_kind(settings.model.task)
    return kind is None or kind.batches_frames


def tensorrt_reason(device: str) -> str | None:
    """Why TensorRT cannot run on ``device`` (not installed, or its flavour does not run
    this GPU: TensorRT-RTX on the H200), or None."""
    from framelens.core.gpu.context import cuda_usable, get_context
    from framelens.core.stages.engines.tensorrt_plans import tensorrt_unavailable

    if cuda_usable(device) is not None:
        return tensorrt_unavailable()
    return tensorrt_unavailable(get_context(device).properties)


def usable_backend(settings: PipelineSettings, notify: Notify | None = None) -> PipelineSettings:
    """``settings`` with ONNX Runtime instead of TensorRT on a GPU where TensorRT cannot
    run, and a one-line note saying why (the same graph runs either way)."""
    if settings.backend != "tensorrt" or not settings.device.startswith("cuda"):
        return settings
    reason = tensorrt_reason(settings.device)
    if reason is None:
        return settings
    if notify is not None:
        notify(f"TensorRT not used ({reason}); running ONNX Runtime CUDA")
    return replace(settings, backend="onnxruntime")


def after_gpu_failure(settings: PipelineSettings) -> PipelineSettings:
    """What a run or playback goes on with after a GPU failure: the CPU, with ONNX
    Runtime (TensorRT runs on GPUs only)."""
    return replace(settings, device="cpu", backend="onnxruntime")


def _per_core_why(cores: int) -> str:
    """Why ``cpu_workers`` gave as many workers as it did."""
    why = f"one single-threaded worker per core, {'1 core' if cores == 1 else f'{cores} cores'}"
    return why if cores <= MAX_CPU_WORKERS else f"{why}, at most {MAX_CPU_WORKERS}"


def cpu_workers(settings: PipelineSettings) -> tuple[PipelineSettings, int]:
    """On the CPU, one single-threaded inference worker per core beats one multi-threaded
    session (measured: 1.9x a naive loop on 2 cores, against 1.2x); an explicit
    --threads keeps one worker. The cores are those this process may run on (taskset, a
    container's CPU set), not the machine's."""
    if settings.device != "cpu" or settings.threads is not None:
        return settings, 1
    return replace(settings, threads=1), max(1, min(MAX_CPU_WORKERS, usable_cpus()))


def close_quietly(things: Sequence[FrameProcessor | Source]) -> None:
    """Close each, whatever the others do; failures are logged (a broken GPU, say)."""
    for thing in things:
        try:
            thing.close()
        except Exception as exc:
            log.warning("closing %r failed: %s", thing, exc)


# ---- engines: the one place a backend is chosen ------------------------------------------


def create_engine(
    model_path: str | os.PathLike[str],
    backend: str = "onnxruntime",
    device: str = "cpu",
    threads: int | None = None,
    *,
    spinning: bool = True,
    precision: str = "fp32",
    spec: ModelSpec | None = None,
    max_batch: int = 1,
) -> Engine:
    """An Engine for an ONNX file; raises ModelError or EngineError with one line.

    ``precision`` (the graph's) and ``spec`` (shape ranges of dynamic models) matter to
    TensorRT, which builds an engine from the graph (core/stages/engines/tensorrt.py), and
    to ONNX Runtime's CUDA options (engine_cuda_options); ``max_batch``, the largest batch
    TensorRT builds a batch-dynamic graph for, to TensorRT only (ONNX Runtime runs any
    batch such a graph takes).
    """
    if backend == "onnxruntime":
        from framelens.core.stages.engines.onnxruntime_cpu import OnnxRuntimeEngine

        cuda_options = None
        if device.strip().lower() != "cpu":  # the plan's options (engine_plan.py)
            planned = (
                engine_cuda_options(spec, precision, device_engine=False)
                if spec
                else cuda_options_for(precision)
            )
            cuda_options = planned.as_dict()
        return OnnxRuntimeEngine(
            model_path,
            device=device,
            threads=threads,
            spinning=spinning,
            cuda_options=cuda_options,
        )
    if backend == "tensorrt":
        if not device.startswith("cuda"):
            raise EngineError(
                f"TensorRT runs on NVIDIA GPUs, not on {device}: use --device cuda "
                "or --backend onnxruntime"
            )
        from framelens.core.stages.engines.tensorrt import TensorRtEngine, import_tensorrt

        import_tensorrt()  # its message before any CUDA setup
        from framelens.core.gpu.context import get_context

        ctx = get_context(device)
        return TensorRtEngine(model_path, ctx, precision=precision, spec=spec, max_batch=max_batch)
    raise EngineError(f"unknown backend {backend!r} (known: {', '.join(BACKENDS)})")


# ---- single pipelines ---------------------------------------------------------------------


def host_pipeline(
    settings: PipelineSettings, *, spinning: bool = True, resolved: bool = False
) -> FramePipeline:
    """A pipeline for host frames: ONNX Runtime on the CPU or on CUDA, or TensorRT, fed
    host tensors. ``resolved``: the settings come from ``resolve`` already (which hashes
    and reads the graph, so a set of workers does it once)."""
    if not resolved:
        settings = resolve(settings)
    engine = create_engine(
        settings.model.path,
        backend=settings.backend,
        device=settings.device,
        threads=settings.threads,
        spinning=spinning,
        precision=settings.precision,
        spec=settings.model,
        max_batch=settings.batch,
    )
    try:
        task = task_for(settings.model, engine.output_names)
        engine = task.host_engine(engine, settings.device, settings.params)
        return FramePipeline(settings, engine, task)
    except BaseException:
        engine.close()
        raise


def gpu_pipelines(
    settings: PipelineSettings,
    count: int = GPU_WORKERS,
    *,
    spinning: bool = True,
    non_blocking: bool = True,
    resolved: bool = False,
) -> list[FrameProcessor]:
    """``count`` GPU pipelines on their own streams, warmed up (a heavy super-resolution
    model's not: its first frame builds its kernels, core/stages/tasks/superres/device.py);
    GpuError when the GPU path is unusable (no context, kernels, provider or memory); an
    engine that fails only when it runs fails at its first frame instead, where the
    session's failover moves it as any GPU failure. ``resolved``: as for
    ``host_pipeline``."""
    from framelens.core.gpu.context import get_context

    if not resolved:
        settings = resolve(settings)
    ctx = get_context(settings.device if settings.device != "auto" else "cuda:0")
    built: list[FrameProcessor] = []
    try:
        for _ in range(count):
            pipeline = _gpu_pipeline(settings, ctx, spinning, non_blocking)
            built.append(pipeline)
            pipeline.warm_up()  # cuDNN's first-run cost while the model loads
    except BaseException:
        close_quietly(built)
        raise
    return built


def _gpu_pipeline(settings: PipelineSettings, ctx: Any, spinning: bool, non_blocking: bool) -> Any:
    from framelens.core.gpu.buffers import cuda_driver, cuda_message
    from framelens.core.pipeline.gpu_pipeline import GpuFramePipeline

    engine: Any = None
    try:
        with ctx.active():
            # Non-blocking: work others queue on the legacy NULL stream (a decoder, a
            # library's copies) does not stall this stream; frames arrive through events
            # (DeviceNV12Frame.ready), so nothing relies on implicit ordering.
            stream = cuda_driver().Stream(flags=1 if non_blocking else 0)
        engine = _device_engine(settings, ctx, stream, spinning)
        task = task_for(settings.model, engine.output_names)
        return GpuFramePipeline(settings, ctx, stream, engine, task)
    except BaseException as exc:
        if engine is not None:
            engine.close()
        if isinstance(exc, GpuError) or not isinstance(exc, Exception):
            raise
        if isinstance(exc, EngineError):
            raise GpuError(str(exc)) from exc
        if isinstance(exc, FrameLensError):
            raise
        raise GpuError(f"GPU pipeline: {cuda_message(exc)}") from exc


def _device_engine(
    settings: PipelineSettings, ctx: Any, stream: Any, spinning: bool
) -> DeviceEngine:
    """The engine that runs on device buffers and ``stream``: TensorRT or ONNX Runtime."""
    if settings.backend == "tensorrt":
        from framelens.core.stages.engines.tensorrt import TensorRtEngine

        return TensorRtEngine(
            settings.model.path,
            ctx,
            stream,
            precision=settings.precision,
            spec=settings.model,
            max_batch=settings.batch,
        )
    from framelens.core.stages.engines.onnxruntime_cuda import OnnxRuntimeCudaEngine

    planned = engine_cuda_options(settings.model, settings.precision, device_engine=True)
    return OnnxRuntimeCudaEngine(
        settings.model.path,
        ctx,
        stream,
        threads=settings.threads,
        spinning=spinning,
        cuda_options=planned.as_dict(),
        graphs=planned.graphs,
    )


def engine_cuda_options(spec: ModelSpec, precision: str, *, device_engine: bool) -> CudaOptions:
    """ONNX Runtime's CUDA options for the graph ``spec`` (resolved: the precision's
    variant) and why (core/pipeline/engine_plan.py): what the plan shows and every CUDA
    engine of the run is made with. ``device_engine``: the GPU pipeline's engine (on
    device buffers, CUDA graphs possible), not a host pipeline's."""
    kind = find_kind(spec.task)
    task_options = kind.task.cuda_options(spec) if kind is not None else {}
    return cuda_options_for(precision, spec, task_options, device_engine=device_engine)


def gpu_unavailable(settings: PipelineSettings) -> str | None:
    """Why the GPU pipeline cannot run for these settings, or None."""
    if not settings.device.startswith("cuda"):
        return f"device is {settings.device}"
    kind = find_kind(settings.model.task)
    reason = kind.task.device_unavailable(settings.params) if kind is not None else None
    if reason is not None:
        return reason
    try:
        from framelens.core.gpu.context import get_context
        from framelens.core.gpu.shared_kernels import kernels_for

        kernels_for(get_context(settings.device))
    except FrameLensError as exc:
        return str(exc)
    return None


def pane_pipeline(settings: PipelineSettings) -> FrameProcessor:
    """One compare pane's pipeline: the path playback would take (the GPU pipeline on a
    GPU, fed the host frames every pane shares), without spinning threads (panes take
    turns on the same cores)."""
    settings = usable_backend(resolve(settings))
    if settings.device.startswith("cuda") and gpu_unavailable(settings) is None:
        try:
            return gpu_pipelines(settings, 1, spinning=False, resolved=True)[0]
        except GpuError as exc:
            log.warning("compare pane on %s without the GPU pipeline: %s", settings.device, exc)
    return host_pipeline(settings, spinning=False, resolved=True)


# ---- worker sets: the run path and playback --------------------------------------------


@dataclass
class Workers:
    """Pipelines for the executor's workers, how they run (for the user and reports) and
    the plan they were built from (None: built by hand, a benchmark's)."""

    pipelines: list[FrameProcessor]
    path: str  # "gpu pipeline", "host pipeline, cuda inference", "cpu pipeline"
    plan: Plan | None = None

    @property
    def on_device(self) -> bool:
        return bool(self.pipelines) and self.pipelines[0].takes_device_frames

    def close(self) -> None:
        close_quietly(self.pipelines)
        self.pipelines = []


def plan(
    settings: PipelineSettings,
    sources: Sequence[str] = (),
    *,
    count: int | None = None,
    gpu_pipeline: bool = True,
    batch_why: str | None = None,
    run_frames: Callable[[], int | None] | None = None,
) -> Plan:
    """Every choice a run of ``settings`` over ``sources`` makes, once, with its reason
    (core/pipeline/plan.py): the graph of its precision (resolved here: an FP16 graph is
    converted and cached, a batch-N rewrite made), the backend, the path, the workers,
    the batch and each source's decoder. ``count``: inference workers asked for;
    ``gpu_pipeline=False``: not the GPU pipeline (its source failed); ``batch_why``: why
    the batch is what it is, where the caller chose it; ``run_frames``: how to learn the
    frames the workers process before they are closed (a one-source run: probing its
    file), handed to the task's Task.gpu_workers on a GPU when none were asked for, which
    calls it only where the count depends on it; None for workers kept beyond the run."""
    if count is not None and count < 1:
        raise ConfigError(f"inference workers must be at least 1, not {count}")
    resolved = resolve(settings)  # an INT8 not prepared is one error, whatever the device
    runs = usable_backend(resolved)
    backend = _backend_choice(settings, runs)
    on_cuda = runs.device.startswith("cuda")
    worker_settings = runs
    if on_cuda:
        reason = gpu_unavailable(runs) if gpu_pipeline else "its source failed"
        if reason is None:
            path = Choice("gpu pipeline", "NVDEC, CUDA preprocessing and the engine on device "
                          "buffers, no host round trip")  # fmt: skip
        else:
            path = Choice("host pipeline, cuda inference", f"GPU pipeline not used ({reason})")
        if count is not None:
            n, workers_why = count, "asked for"
        else:
            kind = find_kind(runs.model.task)
            frames = run_frames or (lambda: None)
            best = kind.task.gpu_workers(runs.model, frames) if kind is not None else None
            n, workers_why = best or (
                GPU_WORKERS,
                "two CUDA streams: one batch's upload and preprocessing overlap the other's "
                "inference",
            )
    else:
        path = Choice("cpu pipeline", f"device is {runs.device}")
        worker_settings, per_core = cpu_workers(runs)
        n = per_core if count is None else count
        workers_why = (
            "asked for" if count is not None
            else f"--threads {runs.threads}: one worker" if runs.threads is not None
            else _per_core_why(usable_cpus())
        )  # fmt: skip
    on_gpu = path.value == "gpu pipeline"
    engine = None
    if on_cuda and runs.backend == "onnxruntime":
        options = engine_cuda_options(runs.model, runs.precision, device_engine=on_gpu)
        engine = Choice(options.value, "; ".join(options.why))
    return Plan(
        asked=settings,
        settings=runs,
        graph=_graph_choice(settings, resolved),
        backend=backend,
        path=path,
        workers=Choice(str(n), workers_why),
        batch=Choice(str(runs.batch), batch_why or _batch_why(runs)),
        decoders=tuple((spec, decoder_choice(spec, on_gpu)) for spec in sources),
        worker_count=n,
        worker_settings=worker_settings,
        engine=engine,
    )


def _graph_choice(asked: PipelineSettings, resolved: PipelineSettings) -> Choice:
    precision = asked.precision
    default = asked.model.name == default_model(asked.model.task)  # no model was named
    why = {
        "fp32": "the model as given" if not default else "its graph as stored",
        "fp16": "its FP16 graph, inputs and outputs kept FP32 (converted once, cached)",
        "int8": "its INT8 Q/DQ graph, calibrated on frames of your video (cached)",
    }.get(precision, precision)
    if resolved.batch > 1 and resolved.model.path != asked.model.path and precision == "fp32":
        why += f", rewritten to take batches of {resolved.batch}"
    elif resolved.batch > 1 and precision != "fp32":
        why += f", for batches of {resolved.batch}"
    if default:
        why = f"the {asked.model.task} task's default model, {why}"
    return Choice(f"{asked.model.name} {precision}", why)


def _backend_choice(asked: PipelineSettings, runs: PipelineSettings) -> Choice:
    if asked.backend == "tensorrt" and runs.backend != "tensorrt":
        return Choice(runs.backend, f"TensorRT not used ({tensorrt_reason(runs.device)})")
    if runs.backend == "tensorrt":
        return Choice("tensorrt", "an engine built from the graph, cached by its hash")
    where = "CUDA" if runs.device.startswith("cuda") else "CPU"
    return Choice("onnxruntime", f"ONNX Runtime's {where} provider runs the graph")


def _batch_why(settings: PipelineSettings) -> str:
    if settings.batch == 1 and not _batches_frames(settings):
        return (
            f"one frame per engine call: the {settings.model.task} task makes one image of "
            "each frame, a call each"
        )
    if settings.batch == 1:
        return "one frame per engine call: none is held back for another"
    if settings.device.startswith("cuda") and settings.batch == GPU_FILE_BATCH:
        return (
            f"{GPU_FILE_BATCH} frames per engine call for a video file on CUDA (at NVDEC's "
            "ceiling on the H200), or as asked"
        )
    return f"{settings.batch} frames per engine call, as asked"


def replan_sources(planned: Plan, sources: Sequence[str]) -> Plan:
    """``planned`` for other sources (workers kept from file to file): their decoders."""
    on_gpu = planned.on_gpu_pipeline
    return replace(planned, decoders=tuple((s, decoder_choice(s, on_gpu)) for s in sources))


def replan_move(
    planned: Plan,
    target: PipelineSettings,
    sources: Sequence[str],
    why: str,
    *,
    count: int | None = None,
) -> Plan:
    """The plan of ``sources`` moved off a failed device onto ``target`` (the session's
    failover, core/sessions/failover.py): planned again for that device (its backend,
    path, workers and decoders), the batch kept, and the move said after any earlier
    one: where they went and ``why``."""
    moved = plan(target, sources, count=count, batch_why=f"{planned.batch.why}; kept after a move")
    return with_move(moved, target.device, why, planned.moves)


def with_move(planned: Plan, device: str, why: str, before: Sequence[Choice] = ()) -> Plan:
    """``planned`` (made for ``device``) saying that its sources moved there and ``why``,
    after the moves ``before``."""
    where = "the CPU" if device == "cpu" else device
    return replace(planned, moves=(*before, Choice(where, why)))


def workers(
    settings: PipelineSettings,
    *,
    extra: int = 0,
    spinning: bool = True,
    notify: Notify | None = None,
    gpu_pipeline: bool = True,
    count: int | None = None,
    planned: Plan | None = None,
) -> Workers:
    """The executor's pipelines for ``settings``: ``workers_for`` its plan (``planned``,
    made by ``plan`` from the same settings, or made here)."""
    if planned is None:
        planned = plan(settings, count=count, gpu_pipeline=gpu_pipeline)
    return workers_for(
        planned, extra=extra, spinning=spinning, notify=notify, gpu_pipeline=gpu_pipeline
    )


def workers_for(
    planned: Plan,
    *,
    extra: int = 0,
    spinning: bool = True,
    notify: Notify | None = None,
    gpu_pipeline: bool = True,
) -> Workers:
    """The pipelines ``planned``, plus ``extra`` more of the same kind (the player's own,
    for seeks and refreshes). ``notify`` is told what departs from what was asked (the
    backend, the GPU pipeline) and a GPU pipeline that fails to build, after which the
    workers are ONNX Runtime CUDA with host preprocessing, as the path says."""
    settings = planned.settings
    if notify is not None and planned.backend.value != planned.asked.backend:
        notify(f"{planned.backend.why}; running ONNX Runtime CUDA")
    on_gpu = planned.worker_count
    if settings.device.startswith("cuda"):
        why = None if planned.on_gpu_pipeline else planned.path.why
        if why is None:
            try:
                pipes = gpu_pipelines(settings, on_gpu + extra, spinning=spinning, resolved=True)
                return Workers(pipes, "gpu pipeline", planned)
            except GpuError as exc:  # what only building could tell: said, then host CUDA
                why = f"GPU pipeline not used ({exc})"
        if gpu_pipeline and notify is not None:
            notify(f"{why}; ONNX Runtime CUDA with host preprocessing")
        each = [settings] * (on_gpu + extra)
        path = "host pipeline, cuda inference"
    else:
        worker_settings = planned.worker_settings or settings
        each = [settings] * extra + [worker_settings] * planned.worker_count
        path = "cpu pipeline"
    built: list[FrameProcessor] = []
    try:
        for s in each:
            built.append(host_pipeline(s, spinning=spinning, resolved=True))
    except BaseException:
        close_quietly(built)
        raise
    return Workers(built, path, planned)
