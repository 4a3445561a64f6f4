"""Where ESRGAN-thick x2's time goes on a GPU, by ONNX Runtime's own profiler.

    python3 benchmarks/esrgan_profile.py --model esrgan_thick_x2.onnx --output profile.json

One 960x540 frame on device buffers (IOBinding: input and output on the GPU), per
precision graph (FP32 and the product's FP16 variant) and per CUDA provider layout
(NCHW, ONNX Runtime's default, and ``prefer_nhwc``, which lets cuDNN use tensor-core
friendly layouts): the median latency of ``--repeats`` calls after a warm-up, then one
profiled call whose kernel time is summed by operator type. Written as JSON.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

TFLOP_PER_FRAME = 7.5  # ESRGAN-thick x2, 960x540 -> 1920x1080 (as stated in the issue)


def session(path: Path, options: dict[str, str], profile_dir: str | None) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    if profile_dir:
        so.enable_profiling = True
        so.profile_file_prefix = str(Path(profile_dir) / "ort")
    return ort.InferenceSession(
        str(path), so, providers=[("CUDAExecutionProvider", options), "CPUExecutionProvider"]
    )


def measure(
    path: Path, options: dict[str, str], repeats: int, size: tuple[int, int] = (960, 540)
) -> dict[str, Any]:
    """Median ms of ``repeats`` calls on a ``size`` (width, height) frame, and the kernel
    time of every call by operator (ONNX Runtime's profiler)."""
    import onnxruntime as ort

    x = np.random.default_rng(0).random((1, 3, size[1], size[0]), dtype=np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        sess = session(path, options, tmp)
        io = sess.io_binding()
        value = ort.OrtValue.ortvalue_from_numpy(x, "cuda", 0)
        io.bind_ortvalue_input(sess.get_inputs()[0].name, value)
        io.bind_output(sess.get_outputs()[0].name, "cuda", 0)
        sess.run_with_iobinding(io)  # warm-up: cuDNN's algorithm search
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            sess.run_with_iobinding(io)
            times.append((time.perf_counter() - t0) * 1000)
        profile = sess.end_profiling()
        events = json.loads(Path(profile).read_text())
    by_op: collections.Counter[str] = collections.Counter()
    last_run = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    runs = repeats + 1
    for e in last_run:
        by_op[e.get("args", {}).get("op_name", "?")] += e["dur"] / 1000 / runs
    ms = statistics.median(times)
    return {
        "median_ms": round(ms, 2),
        "tflops": round(TFLOP_PER_FRAME / (ms / 1000), 1),
        "kernel_ms_by_op": {k: round(v, 2) for k, v in by_op.most_common(8)},
        "kernel_ms_total": round(sum(by_op.values()), 2),
    }


KERNEL_KINDS = (  # by kernel name, first match wins (the top kernels keep the names)
    ("quantize", ("quantize", "Quantize")),
    ("transpose", ("ranspose", "nchwToNhwc", "nhwcToNchw")),
    ("concat", ("oncat",)),
    ("convolution", ("conv", "Conv", "xmma", "gemm", "implicit", "fprop", "cutlass")),
    (
        "elementwise",
        ("lementWise", "lementwise", "ddTensor", "ointwise", "Relu", "Add", "Mul", "Cast", "Clip"),
    ),
    ("copy", ("emcpy", "emset", "opy")),
)


def kernel_kind(name: str) -> str:
    return next((kind for kind, marks in KERNEL_KINDS if any(m in name for m in marks)), "other")


def summarise_kernels(events: list[dict[str, Any]], calls: int, wall_ms: float) -> dict[str, Any]:
    """GPU time per call from a Chrome trace's kernel events (``cat`` "kernel", ``dur`` in
    microseconds): by kind, the busiest kernels, and how much of the wall time the GPU
    was busy (a launch-bound model leaves it idle between kernels)."""
    kernels = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    by_kind: collections.Counter[str] = collections.Counter()
    by_name: collections.Counter[str] = collections.Counter()
    count: collections.Counter[str] = collections.Counter()
    for e in kernels:
        name = str(e.get("name", "?"))
        by_kind[kernel_kind(name)] += e["dur"] / 1000 / calls
        by_name[name[:120]] += e["dur"] / 1000 / calls
        count[name[:120]] += 1
    busy = sum(by_kind.values())
    return {
        "gpu_busy_ms_per_call": round(busy, 2),
        "wall_ms_per_call": round(wall_ms, 2),
        "gpu_busy_fraction": round(busy / wall_ms, 3) if wall_ms else None,
        "kernels_per_call": round(len(kernels) / calls, 1),
        "ms_per_call_by_kind": {k: round(v, 2) for k, v in by_kind.most_common()},
        "top_kernels": [
            {"name": n, "ms_per_call": round(v, 2), "per_call": round(count[n] / calls, 1)}
            for n, v in by_name.most_common(10)
        ],
    }


def kernel_profile(call: Any, calls: int = 5) -> dict[str, Any]:
    """Every GPU kernel of ``calls`` calls, whoever launched it (CUPTI through torch's
    profiler: ONNX Runtime's own profiler times the host's launches, not the GPU)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.init()
    call()  # warm: plans built, arena grown
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
        wall = (time.perf_counter() - t0) * 1000 / calls
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(trace))
        events = json.loads(trace.read_text()).get("traceEvents", [])
    return summarise_kernels(events, calls, wall)


def kernels_main(args: argparse.Namespace) -> int:
    """``--kernels``: the GPU kernels of plain ONNX Runtime on ``--model`` with the CUDA
    ``--options`` (JSON) at ``--size``, written to ``--output`` (a process of its own:
    torch's CUDA libraries never share the benchmark's)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import esrgan_calls

    width, height = (int(v) for v in args.size.lower().split("x"))
    call, close = esrgan_calls.plain_call(
        Path(args.model), json.loads(args.options), (1, 3, height, width), "cuda:0"
    )
    try:
        found = kernel_profile(call, args.repeats)
    finally:
        close()
    text = json.dumps(found, indent=2) + "\n"
    if args.output:
        Path(args.output).write_text(text)
    else:
        print(text)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--kernels", action="store_true", help="GPU kernels (kernel_profile)")
    parser.add_argument("--options", default="{}", help="CUDA options as JSON, with --kernels")
    parser.add_argument("--size", default="960x540", help="WxH, with --kernels")
    parser.add_argument(
        "--product-options",
        action="store_true",
        help="the CUDA options FrameLens' engine sets, one at a time",
    )
    parser.add_argument("--output")
    args = parser.parse_args()
    if args.kernels:
        return kernels_main(args)

    from framelens.core.models.catalog import resolve_model
    from framelens.core.precision import model_for

    spec = resolve_model(args.model)
    graphs = {"fp32": spec.path, "fp16": model_for(spec, "fp16").path}
    layouts: dict[str, dict[str, str]] = {"nchw": {}, "nhwc": {"prefer_nhwc": "1"}}
    if args.product_options:
        # what FrameLens' engine adds: full-FP32 math (no TF32) and its own CUDA stream
        import pycuda.driver as cuda
        from framelens.core.gpu.context import get_context

        ctx = get_context("cuda:0")
        with ctx.active():
            stream = cuda.Stream()
        handle = str(int(stream.handle))
        layouts = {
            "nhwc_no_tf32": {"prefer_nhwc": "1", "use_tf32": "0"},
            "nhwc_stream": {"prefer_nhwc": "1", "user_compute_stream": handle},
            "nhwc_no_tf32_stream": {
                "prefer_nhwc": "1",
                "use_tf32": "0",
                "user_compute_stream": handle,
            },
        }
    result: dict[str, Any] = {
        "command": "python3 benchmarks/esrgan_profile.py " + " ".join(sys.argv[1:]),
        "input": [1, 3, 540, 960],
    }
    for precision, path in graphs.items():
        for layout, options in layouts.items():
            key = f"{precision}_{layout}"
            try:
                result[key] = measure(Path(path), options, args.repeats)
            except Exception as exc:
                result[key] = {"error": f"{type(exc).__name__}: {exc}"}
            print(key, result[key], flush=True)
            if args.output:
                Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
