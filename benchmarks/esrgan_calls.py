"""ESRGAN-class super-resolution measured one engine call at a time, for benchmarks/superres.py.

- ``product_call``: the engine the product builds for a precision (on CUDA the GPU
  pipeline's, on device buffers and its own stream; on the CPU the host engine);
- ``plain_call``: plain ONNX Runtime on the same graph with the same CUDA options, on its
  own stream (IOBinding, input and output on the device), optionally with a CUDA graph
  (``enable_cuda_graph``: input and output bound once to fixed buffers, as ONNX Runtime
  requires) or a batch of frames;
- ``timed``: runs x calls of one of them after a warm-up, summarised as the median of the
  runs' medians, their spread, p50/p99 over every call;
- ``end_to_end``: ``framelens run`` (decode, SR, the upscaled frame) through the product;
- ``PEAK_TFLOPS`` and ``peak_for``: the GPU's dense peak by data type (NVIDIA's datasheets;
  their "with sparsity" figures halved).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

Call = Callable[[], None]

PEAK_TFLOPS: dict[str, dict[str, float]] = {
    # dense tensor-core peaks (TF32, FP16, INT8 in TOPS) and FP32 on CUDA cores
    "H200 NVL": {"fp32": 60.0, "tf32": 417.5, "fp16": 835.5, "int8": 1670.5},
    "H200": {"fp32": 67.0, "tf32": 494.5, "fp16": 989.5, "int8": 1979.0},
    "H100 NVL": {"fp32": 60.0, "tf32": 417.5, "fp16": 835.5, "int8": 1670.5},
    "H100 PCIe": {"fp32": 51.0, "tf32": 378.0, "fp16": 756.5, "int8": 1513.0},
    "H100": {"fp32": 67.0, "tf32": 494.5, "fp16": 989.5, "int8": 1979.0},  # SXM
}


def peak_for(gpu_name: str) -> tuple[str, dict[str, float]] | None:
    """The datasheet entry whose name ``gpu_name`` contains (the longest: "H200 NVL"
    before "H200"), or None."""
    found = [k for k in PEAK_TFLOPS if k.lower() in gpu_name.lower()]
    if not found:
        return None
    key = max(found, key=len)
    return key, PEAK_TFLOPS[key]


def math_of(precision: str, options: dict[str, str]) -> str:
    """Which peak a precision's convolutions run against on ONNX Runtime CUDA: FP16
    tensor cores for FP16; TF32 where allowed (INT8 Q/DQ graphs run float convolutions
    after DequantizeLinear), else FP32 on CUDA cores."""
    if precision == "fp16":
        return "fp16"
    return "tf32" if options.get("use_tf32") == "1" else "fp32"


def summary(per_run: list[list[float]]) -> dict[str, Any]:
    """ms per call: the median of the runs' medians, every run's median, their spread
    (max - min), p50 and p99 over every call."""
    medians = [statistics.median(run) for run in per_run]
    every = np.array([t for run in per_run for t in run])
    return {
        "median_ms": round(statistics.median(medians), 2),
        "runs_ms": [round(m, 2) for m in medians],
        "spread_ms": round(max(medians) - min(medians), 2),
        "p50_ms": round(float(np.percentile(every, 50)), 2),
        "p99_ms": round(float(np.percentile(every, 99)), 2),
        "calls": int(every.size),
    }


def timed(call: Call, runs: int, calls: int, warm_up: int = 3) -> dict[str, Any]:
    """``runs`` x ``calls`` timed calls after ``warm_up`` untimed ones (cuDNN's plans for
    this shape, the arena's growth; a CUDA graph's capture on the third). The first
    call's own time is ``first_call_ms``: cuDNN's search for its convolutions' plans,
    what a run's first frame waits for on each worker."""
    t0 = time.perf_counter()
    call()
    first = time.perf_counter() - t0
    for _ in range(warm_up - 1):
        call()
    per_run = []
    for _ in range(runs):
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            call()
            times.append((time.perf_counter() - t0) * 1000)
        per_run.append(times)
    return {**summary(per_run), "first_call_ms": round(first * 1000, 2)}


def product_call(
    settings: Any, shape: tuple[int, ...]
) -> tuple[Call, Callable[[], None], dict[str, str]]:
    """(call, close, CUDA options) of the engine the product builds for ``settings``
    (resolved), on a random input of ``shape``."""
    from framelens.core.pipeline import build

    x = np.random.default_rng(0).random(shape, dtype=np.float32)
    if not settings.device.startswith("cuda"):
        engine = build.create_engine(
            settings.model.path, device=settings.device, precision=settings.precision,
            spec=settings.model, threads=settings.threads,
        )  # fmt: skip

        def host_call() -> None:
            engine.infer(x)

        return host_call, engine.close, {}
    import pycuda.driver as cuda

    pipeline = build.gpu_pipelines(settings, 1, resolved=True)[0]
    engine = pipeline.engine  # type: ignore[attr-defined]
    ctx = pipeline.ctx  # type: ignore[attr-defined]
    with ctx.active():
        buf = cuda.mem_alloc(x.nbytes)
        cuda.memcpy_htod(buf, x)

    def call() -> None:
        engine.infer_device(int(buf), x.shape, np.float32, to_host=False)
        with ctx.active():
            engine.stream.synchronize()

    def close() -> None:
        with ctx.active():
            buf.free()
        pipeline.close()

    return call, close, dict(engine.cuda_provider_options)


def plain_call(
    path: Path,
    options: dict[str, str],
    shape: tuple[int, ...],
    device: str,
    *,
    cuda_graph: bool = False,
    output_shape: tuple[int, ...] | None = None,
) -> tuple[Call, Callable[[], None]]:
    """Plain ONNX Runtime on ``path`` with ``options`` (CUDA) on a random input of
    ``shape``. ``cuda_graph``: ``enable_cuda_graph`` with the input and the output (of
    ``output_shape``) bound once to fixed device buffers."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    x = np.random.default_rng(0).random(shape, dtype=np.float32)
    if not device.startswith("cuda"):
        sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name

        def cpu_call() -> None:
            sess.run(None, {name: x})

        return cpu_call, (lambda: None)
    opts = {**options, **({"enable_cuda_graph": "1"} if cuda_graph else {})}
    sess = ort.InferenceSession(str(path), so, providers=[("CUDAExecutionProvider", opts)])
    io = sess.io_binding()
    value = ort.OrtValue.ortvalue_from_numpy(x, "cuda", 0)
    io.bind_ortvalue_input(sess.get_inputs()[0].name, value)
    out_name = sess.get_outputs()[0].name
    out: Any = None
    if cuda_graph:
        assert output_shape is not None
        out = ort.OrtValue.ortvalue_from_shape_and_type(list(output_shape), np.float32, "cuda", 0)
        io.bind_ortvalue_output(out_name, out)
    else:
        io.bind_output(out_name, "cuda", 0)

    def call() -> None:
        sess.run_with_iobinding(io)  # ORT synchronises its stream at the end of a run

    def close() -> None:
        nonlocal value, out  # the bound buffers live as long as the binding
        io.clear_binding_inputs()
        io.clear_binding_outputs()
        value = out = None

    return call, close


def end_to_end(
    video: str, settings: Any, frames: int, runs: int, say: Callable[[str], None]
) -> dict[str, Any]:
    """``runs`` runs of ``framelens run`` over ``frames`` frames of ``video`` (no export:
    decode, SR, the upscaled frame), each building its engines: fps over the frames (the
    product's figure), the steady rate after the first quarter of the frames, the whole
    call, p50/p99 per frame end to end."""
    from framelens.core.sessions.runs import run_to_outputs

    rows = []
    plan: Any = None
    for r in range(runs):
        seen: list[tuple[float, int]] = []
        t0 = time.perf_counter()
        summary_ = run_to_outputs(
            video, settings, frames=frames, progress=False,
            on_progress=lambda done, _total, seen=seen: seen.append((time.perf_counter(), done)),
        )  # fmt: skip
        wall = time.perf_counter() - t0
        source = summary_.sources[0]
        plan = summary_.plan
        rows.append(
            {
                "fps": summary_.fps,
                "steady_fps": _steady(seen, frames),
                "wall_s": round(wall, 2),
                "frames": summary_.frames,
                "p50_ms": source.p50_ms,
                "p99_ms": source.p99_ms,
                "path": summary_.path,
            }
        )
        say(f"  run {r + 1}/{runs}: {summary_.fps:.2f} fps, {wall:.1f} s whole call")
    fps = [row["fps"] for row in rows]
    return {
        "fps": round(statistics.median(fps), 2),
        "fps_runs": fps,
        "fps_spread": round(max(fps) - min(fps), 2),
        "steady_fps": _median_of(rows, "steady_fps"),
        "wall_s_runs": [row["wall_s"] for row in rows],
        "p50_ms": _median_of(rows, "p50_ms"),
        "p99_ms": _median_of(rows, "p99_ms"),
        "frames": frames,
        "path": rows[-1]["path"],
        "plan": plan,
    }


def _steady(seen: list[tuple[float, int]], frames: int) -> float | None:
    """Frames per second between the first progress report past a quarter of the frames
    and the last one."""
    later = [(t, n) for t, n in seen if n >= frames // 4]
    if len(later) < 2 or later[-1][1] <= later[0][1]:
        return None
    return round((later[-1][1] - later[0][1]) / (later[-1][0] - later[0][0]), 2)


def _median_of(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [row[key] for row in rows if row[key] is not None]
    return round(statistics.median(values), 2) if values else None
