"""Super-resolution speed on a GPU: ESRGAN-thick x2 at 960x540 per engine call and end to
end through the product (issue 29), the bundled ESPCN at 1080p on request.

    python3 benchmarks/superres.py --device cuda:0 --output h200-superres-<date>.json
    python3 benchmarks/superres.py --device cpu --esrgan M.onnx --size 64x36 --calls 2
        (the same measurements, small: tests/unit/test_superres_bench.py)

Each measurement prints a progress line and the JSON is rewritten after it (a temporary
file renamed over the output), so a run that is cut keeps what it measured. In order,
FP16 first (the targets are FP16's), then FP32, then INT8 (calibrated on the video first):

- esrgan_x2_540p_ms {fp32, fp16, int8}: the median ms of one call of the engine the
  product builds (on CUDA the GPU pipeline's, on device buffers; its CUDA options are
  the plan's, core/pipeline/engine_plan.py), ``--runs`` runs of ``--calls`` calls after
  a warm-up; esrgan_calls[p]: every run's median, the spread, p50/p99 over every call;
- esrgan_plain_ort[p]: plain ONNX Runtime on the same graph with the same options (its
  own stream), and esrgan_product_over_plain[p] the ratio;
- esrgan_x2_540p_to_1080p_fps {fp16, int8}: ``framelens run`` over the video (NVDEC
  decode, SR, the upscaled frame; no export), the median of ``--runs`` runs, each
  building its engines; esrgan_end_to_end[p]: every run, the whole call, p50/p99;
- esrgan_fp16_options: plain ORT FP16 with a CUDA graph, at batch 2 (ms per frame),
  without ``fuse_conv_bias`` (the plan fuses the bias), in NCHW, with cuDNN's heuristic
  plan choice instead of its exhaustive search: what the options the plan does not take
  would give, and what the one it takes gains; every measurement's ``first_call_ms`` is
  its first call alone (the plan search a run's first frame waits for);
- esrgan_tflops[p] from the FLOPs of the graph's convolutions (counted from their
  shapes, core/precision/conv_check.py) over the median, against the GPU's dense peak
  for the math the convolutions run in (esrgan_fraction_of_peak);
- esrgan_profile[p]: every GPU kernel of 5 calls (CUPTI through torch's profiler,
  benchmarks/esrgan_profile.py kernel_profile): ms per call by kind (convolution,
  concat, elementwise, transpose, quantize), the busiest kernels, and the fraction of the
  wall time the GPU was busy; FP16 and INT8 with the product's options.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import cv2
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import esrgan_calls  # noqa: E402
from make_1080p import make_1080p  # noqa: E402

ESRGAN = next(
    (
        p
        for p in (
            HERE.parent / ".device" / "models" / "esrgan_thick_x2.onnx",  # carried to the H200
            HERE.parent.parent / "shared" / "models" / "esrgan_thick_x2.onnx",
        )
        if p.is_file()
    ),
    HERE.parent / ".device" / "models" / "esrgan_thick_x2.onnx",
)
TARGETS = {"esrgan_x2_540p_to_1080p_fps_fp16": 30, "esrgan_x2_540p_ms_fp16": 28}


def run_fps(video: str, settings: Any, frames: int) -> float:
    from framelens.core.sessions.runs import run_to_outputs

    summary = run_to_outputs(video, settings, frames=frames, progress=False)
    return float(summary.fps)


def naive_fps(video: str, spec: Any, device: str, frames: int) -> float:
    """Decode, split, run, merge: each frame through the host, one step at a time."""
    import onnxruntime as ort
    from framelens.core.stages.tasks.superres.color import SrInput, merge_output

    providers = ["CUDAExecutionProvider"] if device.startswith("cuda") else []
    session = ort.InferenceSession(str(spec.path), providers=[*providers, "CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    cap = cv2.VideoCapture(video)
    n, start = 0, time.perf_counter()
    while n < frames:
        ok, image = cap.read()
        if not ok:
            break
        ycrcb = cv2.cvtColor(image, cv2.COLOR_BGR2YCrCb)
        y = (ycrcb[..., 0].astype(np.float32) / np.float32(255.0))[None, None]
        out = session.run(None, {name: y})[0]
        chroma = np.ascontiguousarray(ycrcb[..., 1:].transpose(2, 0, 1))
        merge_output(spec, out[0], SrInput(image.shape[1], image.shape[0], chroma))
        n += 1
    cap.release()
    return n / (time.perf_counter() - start)


class Bench:
    """The result being written: ``measure`` runs one step, prints a line, keeps its
    error, and saves the JSON after it (atomically)."""

    def __init__(self, output: str | None, result: dict[str, Any]) -> None:
        self.output = output
        self.result = result
        self.started = time.perf_counter()

    def say(self, text: str) -> None:
        print(f"[{time.perf_counter() - self.started:6.1f} s] {text}", flush=True)

    def save(self) -> None:
        self.result["whole_call_s"] = round(time.perf_counter() - self.started, 1)
        if not self.output:
            return
        out = Path(self.output)
        tmp = out.with_name(f".{out.name}.partial")
        tmp.write_text(json.dumps(self.result, indent=2) + "\n")
        os.replace(tmp, out)

    def measure(self, what: str, step: Callable[[], Any]) -> Any:
        self.say(f"{what} ...")
        t0 = time.perf_counter()
        try:
            value = step()
        except Exception as exc:  # one step failing keeps the others' numbers
            self.result.setdefault("errors", {})[what] = f"{type(exc).__name__}: {exc}"
            self.say(f"{what}: FAILED {type(exc).__name__}: {exc}")
            traceback.print_exc(limit=3)
            value = None
        else:
            self.say(f"{what}: {_short(value)} ({time.perf_counter() - t0:.1f} s)")
        self.save()
        return value


def _short(value: Any) -> str:
    if isinstance(value, dict):
        keys = ("median_ms", "fps", "p99_ms", "spread_ms", "fps_spread", "setup_s")
        return ", ".join(f"{k} {value[k]}" for k in keys if k in value) or "done"
    return str(value)


def timed_engine(make: Callable[[], tuple[Any, ...]], runs: int, calls: int) -> dict[str, Any]:
    """Build (timed as setup_s), time, close."""
    t0 = time.perf_counter()
    made = make()
    call, close = made[0], made[1]
    try:
        setup = time.perf_counter() - t0
        out = esrgan_calls.timed(call, runs, calls)
    finally:
        close()
    out["setup_s"] = round(setup, 2)
    if len(made) > 2:
        out["options"] = made[2]
    return out


def esrgan(args: argparse.Namespace, bench: Bench, video: str) -> None:
    import onnx
    from framelens.core.models.catalog import resolve_model
    from framelens.core.pipeline import build
    from framelens.core.pipeline.settings import PipelineSettings
    from framelens.core.precision.conv_check import conv_flops

    r = bench.result
    spec = resolve_model(args.esrgan)
    width, height = args.size
    shape = (1, 3, height, width)
    out_shape = (1, 3, height * spec.scale, width * spec.scale)
    flops = conv_flops(onnx.load(str(spec.path)), shape)
    r["esrgan"] = {"model": spec.path.name, "input": list(shape), "output": list(out_shape),
                   "flops_per_call": flops, "tflop_per_call": round(flops / 1e12, 3)}  # fmt: skip
    on_cuda = args.device.startswith("cuda")
    peak = None
    if on_cuda:
        from framelens.core.gpu.context import get_context

        name = get_context(args.device).properties.name
        peak = esrgan_calls.peak_for(name)
        r["gpu"] = name
        r["gpu_peak_tflops"] = {"entry": peak[0], **peak[1]} if peak else None
    for key in ("esrgan_x2_540p_ms", "esrgan_calls", "esrgan_plain_ort",
                "esrgan_product_over_plain", "esrgan_tflops", "esrgan_fraction_of_peak",
                "esrgan_x2_540p_to_1080p_fps", "esrgan_end_to_end", "esrgan_profile",
                "esrgan_setup_s"):  # fmt: skip
        r.setdefault(key, {})
    precisions = [p for p in ("fp16", "fp32", "int8") if p in args.precisions.split(",")]
    prepared: dict[str, PipelineSettings] = {}
    profiles: list[tuple[str, Path, dict[str, str]]] = []

    def prepare(asked: PipelineSettings) -> float:
        """The precision's graph: FP16 converted (cached), INT8 calibrated on the video."""
        t0 = time.perf_counter()
        if asked.precision == "int8":
            from framelens.core.precision import CalibrationSettings, prepare_variant

            # ESRGAN has ~150 convolutions, each scored alone: small patches keep this short
            calibration = CalibrationSettings(
                frames=8, sensitivity_frames=2, max_search_steps=8, patch=64
            )
            variant = prepare_variant(asked.model, "int8", source=video, settings=calibration)
            asked = replace(asked, model=variant.spec)
        build.resolve(asked)
        prepared[asked.precision] = asked
        return round(time.perf_counter() - t0, 1)

    for precision in precisions:
        asked = PipelineSettings(spec, device=args.device, precision=precision)
        setup = bench.measure(f"{precision}: prepare the graph", lambda a=asked: prepare(a))
        if setup is None:
            continue
        r["esrgan_setup_s"][precision] = setup
        settings = build.resolve(prepared[precision])
        options = build.engine_cuda_options(settings.model, precision, device_engine=True).as_dict()
        product = bench.measure(
            f"{precision}: the product's engine, one call",
            lambda s=settings: timed_engine(
                lambda: esrgan_calls.product_call(s, shape), args.runs, args.calls
            ),
        )
        if product is not None:
            r["esrgan_x2_540p_ms"][precision] = product["median_ms"]
            r["esrgan_calls"][precision] = product
            tflops = flops / (product["median_ms"] / 1000) / 1e12
            r["esrgan_tflops"][precision] = round(tflops, 1)
            if peak is not None:
                math = esrgan_calls.math_of(precision, options)
                r["esrgan_fraction_of_peak"][precision] = {
                    "math": math, "peak_tflops": peak[1][math],
                    "fraction": round(tflops / peak[1][math], 3),
                }  # fmt: skip
        plain = bench.measure(
            f"{precision}: plain ONNX Runtime, same options",
            lambda s=settings, o=options: timed_engine(
                lambda: esrgan_calls.plain_call(s.model.path, o, shape, args.device),
                args.runs, args.calls,
            ),
        )  # fmt: skip
        if plain is not None:
            plain["options"] = options
            r["esrgan_plain_ort"][precision] = plain
            if product is not None:
                ratio = product["median_ms"] / plain["median_ms"]
                r["esrgan_product_over_plain"][precision] = round(ratio, 3)
        if precision == "fp16" and on_cuda:
            fp16_options(args, bench, settings.model.path, options, shape, out_shape)
        if precision in args.end_to_end.split(","):
            frames = args.e2e_frames if precision == "fp16" else args.e2e_frames_slow
            e2e = bench.measure(
                f"{precision}: framelens run, {frames} frames x {args.runs}",
                lambda p=prepared[precision], n=frames: esrgan_calls.end_to_end(
                    video, p, n, args.runs, bench.say
                ),
            )
            if e2e is not None:
                r["esrgan_x2_540p_to_1080p_fps"][precision] = e2e["fps"]
                r["esrgan_end_to_end"][precision] = e2e
                if product is not None:
                    e2e["over_engine_bound"] = round(e2e["fps"] * product["median_ms"] / 1000, 3)
        if on_cuda and precision in ("fp16", "int8") and not args.no_profile:
            profiles.append((precision, settings.model.path, options))
    for precision, path, options in profiles:  # last: the figures first
        r["esrgan_profile"][precision] = bench.measure(
            f"{precision}: GPU kernels of plain ONNX Runtime, same options",
            lambda p=path, o=options: gpu_profile(p, o, args),
        )


def gpu_profile(path: Path, options: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    """Where a call's time goes on the GPU: every kernel of 5 calls through CUPTI (torch's
    profiler, in a process of its own: benchmarks/esrgan_profile.py --kernels), by kind;
    where that cannot run, ONNX Runtime's profiler here (host times by operator)."""
    import esrgan_profile

    width, height = args.size
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "kernels.json"
        command = [sys.executable, str(HERE / "esrgan_profile.py"), "--kernels",
                   "--model", str(path), "--options", json.dumps(options), "--repeats", "5",
                   "--size", f"{width}x{height}", "--output", str(out)]  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=180)
            if done.returncode == 0 and out.is_file():
                return {"kernels": json.loads(out.read_text())}
            why = f"exit {done.returncode}: {(done.stderr or done.stdout).strip()[-300:]}"
        except subprocess.TimeoutExpired:
            why = "timed out after 180 s"
    fallback = esrgan_profile.measure(Path(path), options, 5, size=args.size)
    return {"kernels": f"not measured ({why})", "onnxruntime_ops_host_ms": fallback}


def fp16_options(
    args: argparse.Namespace,
    bench: Bench,
    path: Path,
    options: dict[str, str],
    shape: tuple[int, ...],
    out_shape: tuple[int, ...],
) -> None:
    """What FP16 would gain from the options the plan does not take: a CUDA graph, a
    batch of two frames, the bias fused into the convolution, and (for comparison) NCHW."""
    found: dict[str, Any] = bench.result.setdefault("esrgan_fp16_options", {})
    plain = bench.result["esrgan_plain_ort"].get("fp16", {}).get("median_ms")

    def run(name: str, make: Callable[[], tuple[Any, ...]], per: int = 1) -> None:
        out = bench.measure(f"fp16: plain ONNX Runtime, {name}", lambda: timed_engine(
            make, args.runs, args.calls))  # fmt: skip
        if out is None:
            return
        out["ms_per_frame"] = round(out["median_ms"] / per, 2)
        if plain:
            out["per_frame_over_plain"] = round(out["ms_per_frame"] / plain, 3)
        found[name] = out

    dev = args.device
    run("cuda graph", lambda: esrgan_calls.plain_call(
        path, options, shape, dev, cuda_graph=True, output_shape=out_shape))  # fmt: skip
    two = (2, *shape[1:])
    run("batch 2", lambda: esrgan_calls.plain_call(path, options, two, dev), per=2)
    if options.get("fuse_conv_bias") == "1":  # the plan takes it: what it gains
        unfused = {k: v for k, v in options.items() if k != "fuse_conv_bias"}
        run("bias not fused", lambda: esrgan_calls.plain_call(path, unfused, shape, dev))
    else:
        fused = {**options, "fuse_conv_bias": "1"}  # cuDNN's frontend adds the bias in the conv
        run("fuse_conv_bias", lambda: esrgan_calls.plain_call(path, fused, shape, dev))
    nchw = {k: v for k, v in options.items() if k != "prefer_nhwc"}
    run("nchw", lambda: esrgan_calls.plain_call(path, nchw, shape, dev))
    # the first call's search against the calls after: cuDNN's heuristics alone (no
    # exhaustive timing of every plan) for the same options
    quick = {**options, "cudnn_conv_algo_search": "HEURISTIC"}
    run("heuristic search", lambda: esrgan_calls.plain_call(path, quick, shape, dev))


def espcn(args: argparse.Namespace, bench: Bench) -> None:
    """The bundled ESPCN x2 at 1080p: the run path, a naive loop, the CPU."""
    from framelens.core.models.catalog import resolve_model
    from framelens.core.pipeline.settings import PipelineSettings

    spec = resolve_model("espcn-x2")
    video = str(Path(tempfile.gettempdir()) / "framelens-person-1080p.mp4")
    if not Path(video).is_file():
        make_1080p(video, frames=args.espcn_frames + 30)
    on_device = PipelineSettings(spec, device=args.device)
    r = bench.result

    def run_path() -> float:
        run_fps(video, on_device, 10)  # warm-up
        runs = [run_fps(video, on_device, args.espcn_frames) for _ in range(args.runs)]
        return round(statistics.median(runs), 2)

    r["espcn_x2_1080p_to_4k_fps"] = bench.measure("espcn x2 1080p: framelens run", run_path)
    r["naive_fps"] = bench.measure(
        "espcn x2 1080p: naive loop",
        lambda: round(naive_fps(video, spec, args.device, args.espcn_frames), 2),
    )
    cpu = replace(on_device, device="cpu")
    r["cpu_fps"] = bench.measure("espcn x2 1080p: cpu", lambda: round(run_fps(video, cpu, 5), 2))


def _size(text: str) -> tuple[int, int]:
    w, h = text.lower().split("x")
    return int(w), int(h)


def _commit() -> str:
    try:
        done = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10)  # fmt: skip
        return done.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--esrgan", default=str(ESRGAN), help="ESRGAN-thick x2 (not bundled)")
    parser.add_argument("--size", type=_size, default=(960, 540), help="the input, WxH")
    parser.add_argument("--precisions", default="fp16,fp32,int8")
    parser.add_argument("--end-to-end", default="fp16,int8", help="precisions run end to end")
    parser.add_argument("--runs", type=int, default=5, help="runs of each measurement")
    parser.add_argument("--calls", type=int, default=5, help="engine calls in each run")
    parser.add_argument("--e2e-frames", type=int, default=40, help="frames per FP16 run")
    parser.add_argument("--e2e-frames-slow", type=int, default=16, help="per FP32/INT8 run")
    parser.add_argument("--video", help="a video at --size to use instead of making one")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--with-espcn", action="store_true", help="also ESPCN x2 at 1080p")
    parser.add_argument("--espcn-frames", type=int, default=300)
    parser.add_argument("--output")
    args = parser.parse_args()

    import onnxruntime

    width, height = args.size
    result: dict[str, Any] = {
        "command": "python3 benchmarks/superres.py " + " ".join(sys.argv[1:]),
        "code": _commit(),
        "device": args.device,
        "onnxruntime": onnxruntime.__version__,
        "video": f"person sample scaled to {width}x{height}, H.264 yuv420p (make_1080p.py)",
        "runs": args.runs,
        "calls_per_run": args.calls,
        "targets": TARGETS,
    }
    bench = Bench(args.output, result)
    bench.save()
    if not Path(args.esrgan).is_file():
        bench.say(f"no ESRGAN at {args.esrgan}: pass --esrgan")
        result.setdefault("errors", {})["esrgan"] = f"no model at {args.esrgan}"
    else:
        video = args.video or str(Path(tempfile.gettempdir()) / f"framelens-person-{height}p.mp4")
        if not Path(video).is_file():
            frames = max(args.e2e_frames, args.e2e_frames_slow) + 30
            bench.measure(f"make a {width}x{height} video", lambda: str(make_1080p(
                video, frames=frames, size=(width, height))))  # fmt: skip
        esrgan(args, bench, video)
    if args.with_espcn:
        espcn(args, bench)
    bench.save()
    bench.say(f"written {args.output}" if args.output else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
