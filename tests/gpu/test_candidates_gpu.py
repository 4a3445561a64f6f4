"""Detection candidates gathered on the H200 (kernels/candidates.cu) against the host's
numpy gather, on real YOLOX-Nano outputs: the same rows, the same detections; and the
GPU pipeline with the device gather against the same pipeline copying whole outputs."""

from __future__ import annotations

import json
import os
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from framelens.core.gpu.context import GpuContext
from framelens.core.gpu.shared_kernels import kernels_for
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.runs import run_to_outputs
from framelens.core.stages.tasks.detect import candidates_cuda
from framelens.core.stages.tasks.detect.candidates import gather_host
from framelens.core.stages.tasks.detect.candidates_cuda import DeviceCandidateGather
from framelens.core.stages.tasks.detect.device import HOST_CANDIDATES_ENV

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"


@pytest.fixture(scope="module")
def yolox_batch() -> np.ndarray:
    from framelens.core.pipeline import build
    from framelens.core.stages.sources import open_source
    from framelens.core.stages.tasks.base import stack_batch

    settings = build.resolve(PipelineSettings(resolve_model(DEFAULT_MODEL), batch=8))
    pipeline = build.host_pipeline(settings)
    source = open_source(str(SAMPLE))
    try:
        frames = [f for i, f in enumerate(islice(iter(source.read, None), 240)) if i % 30 == 29]
        pres = [pipeline.task.preprocessor(f.width, f.height, settings.params) for f in frames]
        batch = stack_batch([pre(f.image) for pre, f in zip(pres, frames, strict=True)])
        return np.ascontiguousarray(pipeline.engine.infer(batch)[0], dtype=np.float32)
    finally:
        source.close()
        pipeline.close()


@pytest.mark.parametrize(
    ("conf", "eager"),
    [(0.25, None), (0.05, None), (0.05, 1), (0.0005, None)],
    ids=["usual", "many", "more-than-the-first-copy", "overflow"],
)
def test_the_device_gather_picks_the_rows_the_host_picks(
    gpu_ctx: GpuContext,
    gpu_stream: Any,
    yolox_batch: np.ndarray,
    conf: float,
    eager: int | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pycuda.driver as cuda

    if conf < 0.001:  # more candidates than the buffers hold: the whole-output path
        monkeypatch.setattr(candidates_cuda, "CAPACITY_PER_FRAME", 16)
    if eager is not None:  # more than the rows copied with the count: a second copy
        monkeypatch.setattr(candidates_cuda, "EAGER_PER_FRAME", eager)
    host = gather_host(yolox_batch, 4, conf)
    gather = DeviceCandidateGather(gpu_ctx, kernels_for(gpu_ctx))
    with gpu_ctx.active():
        device = cuda.mem_alloc(yolox_batch.nbytes)
        cuda.memcpy_htod(device, yolox_batch)
    try:
        got = gather.gather(int(device), yolox_batch.shape, 4, conf, gpu_stream)
    finally:
        gather.close()
        with gpu_ctx.active():
            device.free()
    assert got.frames == 8 and got.rows == yolox_batch.shape[1]
    assert np.array_equal(got.frame, host.frame) and np.array_equal(got.row, host.row)
    assert np.array_equal(got.values, host.values)
    assert gather.overflows == (1 if conf < 0.001 else 0)
    assert len(host.row) > 0
    if eager is not None:
        assert len(host.row) > eager * 8  # the second copy was needed


def test_the_gpu_pipeline_detects_the_same_with_and_without_the_device_gather(
    gpu_ctx: GpuContext, tmp_path: Path
) -> None:
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), device="cuda:0", batch=4)
    frames = []
    for name, env in (("device", None), ("host", "1")):
        if env is None:
            os.environ.pop(HOST_CANDIDATES_ENV, None)
        else:
            os.environ[HOST_CANDIDATES_ENV] = env
        try:
            out = tmp_path / f"{name}.json"
            run_to_outputs(str(SAMPLE), settings, detections=str(out), frames=120,
                           progress=False)  # fmt: skip
        finally:
            os.environ.pop(HOST_CANDIDATES_ENV, None)
        frames.append(json.loads(out.read_text())["frames"])
    device, host = frames
    assert len(device) == len(host) == 120
    assert device == host  # identical rows in, identical decoding: identical JSON
    assert sum(len(f["detections"]) for f in device) > 60
