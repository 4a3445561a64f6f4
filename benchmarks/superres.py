"""Super-resolution speed: the product's run path against a naive per-frame loop and the
CPU, and ESRGAN's engine latency by precision.

    python3 benchmarks/superres.py --device cuda:0 --output h200-superres-<date>.json
    python3 benchmarks/superres.py --device cpu --frames 5    # the same measurements, small

Everything runs in one process on one 1080p H.264 video made from the person sample
(make_1080p.py); each measurement is warmed up first and run ``--repeats`` times, and
the medians are reported:

- espcn_x2_1080p_to_4k_fps: ``framelens run --task superres --model espcn-x2`` without
  export (decode -> SR -> the upscaled frame), on ``--device``;
- naive_fps: OpenCV decode, the Y split in numpy, ``session.run`` with numpy in and out
  on the same provider, the merge, one step after the other (a host round trip a frame);
- cpu_fps: the run path on the CPU (``--cpu-frames`` frames: it is slow at 1080p);
- esrgan_x2_540p_ms: ESRGAN-thick x2 on a 960x540 frame, one engine call, median ms
  per precision (on CUDA on device buffers, as the GPU pipeline calls it; INT8
  calibrated on the video first, untimed); ``esrgan_tflops`` from the stated ~7.5 TFLOP
  per call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import cv2
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from make_1080p import make_1080p  # noqa: E402

ESRGAN = next(
    (
        p
        for p in (
            HERE.parent.parent / "shared" / "models" / "esrgan_thick_x2.onnx",
            HERE.parent / ".device" / "models" / "esrgan_thick_x2.onnx",  # carried to the H200
        )
        if p.is_file()
    ),
    HERE.parent.parent / "shared" / "models" / "esrgan_thick_x2.onnx",
)
ESRGAN_TFLOP = 7.5  # per 960x540 -> 1920x1080 call, as stated in the issue


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


def esrgan_ms(path: Path, device: str, precision: str, repeats: int, source: str) -> float:
    """Median ms of one engine call on a 960x540 frame: on CUDA the GPU pipeline's engine
    on device buffers (input and output stay on the device, as in the pipeline), else
    ONNX Runtime on host arrays. INT8 calibrates on ``source`` first (not timed)."""
    from framelens.core.models.catalog import resolve_model
    from framelens.core.pipeline import build
    from framelens.core.pipeline.settings import PipelineSettings

    settings = PipelineSettings(resolve_model(str(path)), device=device, precision=precision)
    if precision == "int8":
        from framelens.core.precision import CalibrationSettings, prepare_variant

        # ESRGAN has ~350 convolutions, each scored alone: small patches keep this minutes
        calibration = CalibrationSettings(
            frames=8, sensitivity_frames=2, max_search_steps=8, patch=64
        )
        variant = prepare_variant(settings.model, "int8", source=source, settings=calibration)
        settings = replace(settings, model=variant.spec)
    settings = build.resolve(settings)
    x = np.random.default_rng(0).random((1, 3, 540, 960), dtype=np.float32)
    if not device.startswith("cuda"):
        engine = build.create_engine(settings.model.path, device=device)
        try:
            return _median_ms(lambda: engine.infer(x), repeats)
        finally:
            engine.close()
    import pycuda.driver as cuda

    pipeline = build.gpu_pipelines(settings, 1)[0]
    engine = pipeline.engine  # type: ignore[attr-defined]
    ctx = pipeline.ctx  # type: ignore[attr-defined]
    with ctx.active():
        buf = cuda.mem_alloc(x.nbytes)
        cuda.memcpy_htod(buf, x)

    def call() -> None:
        engine.infer_device(int(buf), x.shape, np.float32, to_host=False)
        with ctx.active():
            engine.stream.synchronize()

    try:
        return _median_ms(call, repeats)
    finally:
        pipeline.close()


def _median_ms(call: Any, repeats: int) -> float:
    call()  # warm-up: cuDNN's algorithm search for this shape, arena growth
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        times.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(times), 2)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--cpu-frames", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--esrgan", default=str(ESRGAN), help="ESRGAN-thick x2 (not bundled)")
    parser.add_argument("--skip-esrgan", action="store_true")
    parser.add_argument("--esrgan-precisions", default="fp32,fp16,int8")
    parser.add_argument("--video", help="a 1080p video to use instead of making one")
    parser.add_argument("--output")
    args = parser.parse_args()

    from framelens.core.models.catalog import resolve_model
    from framelens.core.pipeline.settings import PipelineSettings

    spec = resolve_model("espcn-x2")
    video = args.video or str(Path(tempfile.gettempdir()) / "framelens-person-1080p.mp4")
    if not Path(video).is_file():
        make_1080p(video, frames=max(args.frames, args.cpu_frames) + 30)
    on_device = PipelineSettings(spec, device=args.device)
    result: dict[str, Any] = {
        "command": "python3 benchmarks/superres.py " + " ".join(sys.argv[1:]),
        "device": args.device,
        "video": "person sample scaled to 1920x1080, H.264 yuv420p (make_1080p.py)",
        "frames": args.frames,
        "repeats": args.repeats,
    }

    def save() -> None:
        if args.output:
            Path(args.output).write_text(json.dumps(result, indent=2) + "\n")

    run_fps(video, on_device, min(10, args.frames))  # warm-up
    runs = [run_fps(video, on_device, args.frames) for _ in range(args.repeats)]
    result["espcn_x2_1080p_to_4k_fps"] = round(statistics.median(runs), 2)
    naive_fps(video, spec, args.device, 5)
    naive = [naive_fps(video, spec, args.device, args.frames) for _ in range(args.repeats)]
    result["naive_fps"] = round(statistics.median(naive), 2)
    cpu = replace(on_device, device="cpu")
    result["cpu_fps"] = round(run_fps(video, cpu, args.cpu_frames), 2)
    result["ratios"] = {
        "run_over_naive": round(result["espcn_x2_1080p_to_4k_fps"] / result["naive_fps"], 2),
        "run_over_cpu": round(result["espcn_x2_1080p_to_4k_fps"] / result["cpu_fps"], 2),
    }
    result["targets"] = {"espcn_x2_1080p_to_4k_fps": 120, "esrgan_x2_540p_ms_fp16": 28}
    save()
    if not args.skip_esrgan and Path(args.esrgan).is_file():
        latency: dict[str, float | None] = {}
        errors: dict[str, str] = {}
        result["esrgan_x2_540p_ms"] = latency
        for precision in args.esrgan_precisions.split(","):
            try:
                latency[precision] = esrgan_ms(
                    Path(args.esrgan), args.device, precision, args.repeats * 5, video
                )
            except Exception as exc:  # one precision failing keeps the others' numbers
                latency[precision] = None
                errors[precision] = f"{type(exc).__name__}: {exc}"
                result["esrgan_errors"] = errors
            result["esrgan_tflops"] = {
                p: round(ESRGAN_TFLOP / (ms / 1000), 1) for p, ms in latency.items() if ms
            }
            save()
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
