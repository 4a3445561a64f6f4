"""The whole GPU pipeline on the H200: same detections as the CPU, fallback, no leaks."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from framelens.core.gpu.context import GpuContext
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline import build
from framelens.core.pipeline.gpu_pipeline import FAULT_ENV, GpuFramePipeline
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.runs import run_to_outputs
from framelens.core.stages.sinks.detections import frame_detections
from framelens.core.stages.sources import open_source
from framelens.core.stages.sources.nvdec import open_gpu_source
from framelens.core.stages.tasks import DetectParams
from framelens.core.stages.tasks.detect.agreement import AgreementTotals
from framelens.core.types import Detections, StageTimes

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4")
FRAMES = 240
MiB = 1 << 20


def detections_by_frame(
    device: str, frames: int, start: int = 0, backend: str = "onnxruntime"
) -> dict[int, Detections]:
    """Every frame's detections from the product's run path on ``device``."""
    from framelens.core.sessions.session import Session, SessionOptions

    got: dict[int, Detections] = {}
    settings = PipelineSettings(
        resolve_model(DEFAULT_MODEL), device=device, params=DetectParams(conf=0.3), backend=backend
    )
    options = SessionOptions(draw="none", pixels=False, start=start, frames=frames)
    with Session([SAMPLE], settings, options=options) as session:
        for result in session.results():
            got[result.frame.index] = result.output
        path = session.path
    if device.startswith("cuda"):
        assert path.startswith("gpu pipeline"), path
    return got


def test_gpu_pipeline_detects_what_the_cpu_pipeline_detects(gpu_ctx: GpuContext) -> None:
    cpu = detections_by_frame("cpu", FRAMES)
    gpu = detections_by_frame("cuda:0", FRAMES)
    assert sorted(gpu) == sorted(cpu) == list(range(FRAMES))
    totals = AgreementTotals()
    for index in range(FRAMES):
        match = totals.add_frame(cpu[index], gpu[index])
        for i in match.unmatched_test:  # what a disagreement looks like, for the log
            print(f"frame {index}: GPU only, score {gpu[index].scores[i]:.3f}")
        for i in match.unmatched_ref:
            print(f"frame {index}: CPU only, score {cpu[index].scores[i]:.3f}")
    found = sum(len(d) for d in cpu.values())
    print(f"GPU vs CPU on {FRAMES} frames, {found} CPU detections: {totals.as_dict()}")
    assert found > 50  # the sample has people in most frames
    assert totals.f1 >= 0.99
    assert totals.mean_iou >= 0.97


def test_model_input_from_nvdec_equals_the_cpu_tensor(gpu_ctx: GpuContext) -> None:
    """The fused NV12 kernel's tensor against core.preprocess on CPU-decoded frames.

    Isolates preprocessing from inference: if detections differ while this holds, the
    difference is the engine's (cuDNN), not the kernels'.
    """
    import pycuda.driver as cuda
    from framelens.core.stages.preprocess.cpu import Preprocessor

    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), device="cuda:0")
    pipeline = build.gpu_pipelines(settings, 1)[0]
    with gpu_ctx.active():
        stream = cuda.Stream()
    gpu_source = open_gpu_source(SAMPLE, gpu_ctx, stream)
    cpu_source = open_source(SAMPLE)
    worst = 0.0
    try:
        for index in (0, 120, 300, 330, 600):
            gpu_source.seek(index)
            cpu_source.seek(index)
            frame, ref = gpu_source.read(), cpu_source.read()
            assert frame is not None and ref is not None and frame.index == ref.index == index
            pipeline.infer(frame, StageTimes())
            sized = pipeline.device_half._sizes[(frame.width, frame.height)]  # this size's buffers
            layout, model_input = sized.layout, sized.input
            got = np.empty(layout.shape, dtype=layout.numpy_dtype)
            with gpu_ctx.active():
                cuda.memcpy_dtoh(got, model_input.buffers[0].ptr)
            want = Preprocessor(settings.model, ref.width, ref.height)(ref.image)
            diff = np.abs(got.astype(np.float64) - want)
            off = int((diff > 1e-3).sum())
            print(
                f"frame {index}: tensor max |diff| {diff.max():.2e}, mean {diff.mean():.2e}, "
                f"{off} of {diff.size} values off by more than 1e-3"
            )
            worst = max(worst, float(diff.max()))
    finally:
        pipeline.close()
        gpu_source.close()
        cpu_source.close()
    # the same colour conversion and the same float bilinear taps: float rounding only
    assert worst <= 1e-3


def test_stage_times_come_from_cuda_events(gpu_ctx: GpuContext) -> None:
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), device="cuda:0")
    pipeline = build.gpu_pipelines(settings, 1)[0]
    with gpu_ctx.active():
        import pycuda.driver as cuda

        stream = cuda.Stream()
    source = open_gpu_source(SAMPLE, gpu_ctx, stream)
    try:
        for _ in range(5):
            frame = source.read()
            assert frame is not None
            result = pipeline.infer(frame, StageTimes(decode=1.0))
        t = result.times
        for name in ("preprocess", "inference", "postprocess", "display"):
            value = getattr(t, name)
            assert 0 < value < 1000, (name, value)
        assert t.preprocess < t.inference  # a 1-pass kernel against a network
        assert math.isnan(t.draw)  # overlays are drawn by the canvas, not into the frame
    finally:
        pipeline.close()
        source.close()


def test_display_frame_matches_the_cpu_decoded_frame(gpu_ctx: GpuContext) -> None:
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), device="cuda:0")
    pipeline = build.gpu_pipelines(settings, 1)[0]
    with gpu_ctx.active():
        import pycuda.driver as cuda

        stream = cuda.Stream()
    gpu_source = open_gpu_source(SAMPLE, gpu_ctx, stream)
    cpu_source = open_source(SAMPLE)
    try:
        gpu_source.seek(300)
        cpu_source.seek(300)
        frame, ref = gpu_source.read(), cpu_source.read()
        assert frame is not None and ref is not None and frame.index == ref.index == 300
        frame.arrived, frame.source_id = 1234.5, 3  # a paced source's release, a wall's tile
        result = pipeline.infer(frame, StageTimes())
        # the result's frame is the display picture, still the same frame: its release
        # time (the wall's latency on screen counts from it), tile, index and time
        got = result.frame
        assert (got.arrived, got.source_id, got.index, got.pts) == (1234.5, 3, 300, frame.pts)
        shown = result.frame.image  # the RGBA display frame, downloaded, as BGR
        diff = np.abs(shown.astype(np.int16) - ref.image.astype(np.int16))
        print(f"display vs CPU decode: max {diff.max()}, mean {diff.mean():.3f}")
        assert shown.shape == ref.image.shape
        # the CPU converts BT.601 yuv420p with OpenCV, which the display kernel reproduces
        assert diff.max() <= 2 and diff.mean() < 0.05
    finally:
        pipeline.close()
        gpu_source.close()
        cpu_source.close()


def test_gpu_failure_mid_run_goes_on_on_the_cpu(
    gpu_ctx: GpuContext, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv(FAULT_ENV, "40")
    messages: list[str] = []
    out = tmp_path / "dets.json"
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), device="cuda:0")
    summary = run_to_outputs(
        SAMPLE, settings, detections=str(out), frames=80, progress=False,
        on_message=messages.append,
    )  # fmt: skip
    import json

    indices = [f["index"] for f in json.loads(out.read_text())["frames"]]
    assert indices == list(range(80))
    assert summary.path == "cpu pipeline"
    assert any(m.startswith("cuda:0 failed (frame 40: injected fault") for m in messages), messages
    assert any("going on on the CPU from frame 40" in m for m in messages), messages


def test_a_turned_video_on_the_gpu_finds_what_the_cpu_finds(
    gpu_ctx: GpuContext, tmp_path: Path
) -> None:
    """A phone's portrait video (stored on its side, a display matrix turning it): NVDEC
    would hand it on its side, so the host decodes and turns it and the GPU pipeline
    takes the upright host frames; the same detections as the CPU's, the path says so."""
    import json
    import sys

    sys.path.insert(0, str(ROOT / "tests" / "unit"))
    from media_factory import encode_frames, sample_frames

    video = str(encode_frames(tmp_path / "phone.mp4", sample_frames(Path(SAMPLE), tuple(
        range(290, 350))), turns=1))  # fmt: skip
    found = {}
    for device in ("cpu", "cuda:0"):
        out = tmp_path / f"{device.replace(':', '')}.json"
        # on CUDA in batches of 4: host frames batched into the GPU pipeline
        batch = 4 if device.startswith("cuda") else 1
        settings = PipelineSettings(resolve_model(DEFAULT_MODEL), device=device, batch=batch)
        summary = run_to_outputs(video, settings, detections=str(out), progress=False)
        found[device] = {f["index"]: f for f in json.loads(out.read_text())["frames"]}
    assert summary.path.startswith("gpu pipeline"), summary.path
    assert "decoder cpu (turned 90 degrees for display" in summary.path, summary.path
    assert sorted(found["cuda:0"]) == sorted(found["cpu"]) == list(range(60))
    totals = AgreementTotals()
    for index, cpu in found["cpu"].items():
        totals.add_frame(frame_detections(cpu), frame_detections(found["cuda:0"][index]))
    assert sum(len(f["detections"]) for f in found["cpu"].values()) >= 40  # person in view
    assert totals.f1 >= 0.99 and totals.mean_iou >= 0.97, totals.as_dict()


def test_open_close_cycles_leak_no_device_memory(gpu_ctx: GpuContext) -> None:
    cycles = int(os.environ.get("FRAMELENS_LEAK_CYCLES", "200"))
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), device="cuda:0")

    def one_cycle(pipeline: GpuFramePipeline, stream: Any) -> None:
        source = open_gpu_source(SAMPLE, gpu_ctx, stream)
        try:
            for _ in range(2):
                frame = source.read()
                assert frame is not None
                pipeline.infer(frame, StageTimes())
        finally:
            source.close()

    with gpu_ctx.active():
        import pycuda.driver as cuda

        stream = cuda.Stream()
    pipeline = build.gpu_pipelines(settings, 1)[0]
    try:
        for _ in range(3):  # warm-up: ORT's arena and cuDNN workspaces settle
            one_cycle(pipeline, stream)
        gpu_ctx.synchronize()
        before = gpu_ctx.memory_used()
        for _ in range(cycles):
            one_cycle(pipeline, stream)
        gpu_ctx.synchronize()
        grown = gpu_ctx.memory_used() - before
    finally:
        pipeline.close()
    print(f"{cycles} source open/decode/infer/close cycles: memory grew {grown / MiB:.1f} MiB")
    assert grown < 16 * MiB

    # whole pipelines (an ORT session each) too, fewer: each takes ~0.5 s to create
    pipelines = int(os.environ.get("FRAMELENS_ENGINE_CYCLES", "20"))
    gpu_ctx.synchronize()
    before = gpu_ctx.memory_used()
    for _ in range(pipelines):
        p = build.gpu_pipelines(settings, 1)[0]
        one_cycle(p, stream)
        p.close()
    gpu_ctx.synchronize()
    grown = gpu_ctx.memory_used() - before
    print(f"{pipelines} pipeline create/run/close cycles: device memory grew {grown / MiB:.1f} MiB")
    assert grown < 64 * MiB
