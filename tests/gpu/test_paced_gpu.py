"""Files played as cameras on the H200 (``framelens run --realtime``): NVDEC frames a slow
reader missed go back to their decoder's pool, and a run accounts for every frame."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from framelens.core.gpu.context import GpuContext
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.runs import run_many
from framelens.core.stages.sources.paced import RealtimeSource

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"  # 10 fps


def test_frames_a_slow_reader_missed_go_back_to_the_nvdec_pool(gpu_ctx: GpuContext) -> None:
    import pycuda.driver as cuda
    from framelens.core.stages.sources.nvdec import open_gpu_source

    with gpu_ctx.active():
        stream = cuda.Stream()
    # a pool of 4 buffers: without the dropped frames given back it runs dry at once
    inner = open_gpu_source(str(SAMPLE), gpu_ctx, stream, pool_size=4, acquire_timeout_s=2.0)
    camera = RealtimeSource(inner, frames=30)
    got = 0
    try:
        while (frame := camera.read()) is not None:
            got += 1
            frame.release()
            # three of the sample's frame intervals a frame (10 fps; 0.1 s, one interval,
            # kept pace with it and nothing was dropped): the camera overwrites two
            time.sleep(3 / camera.info.fps)
    finally:
        camera.close()
    assert got + camera.dropped == 30
    assert camera.dropped >= 15  # about two of every three


def test_cameras_on_the_gpu_account_for_every_frame(gpu_ctx: GpuContext, tmp_path: Path) -> None:
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), device="cuda:0")
    began = time.perf_counter()
    summary = run_many(
        [str(SAMPLE)] * 4, settings, str(tmp_path / "out"), videos=False, frames=60,
        progress=False, realtime=True,
    )  # fmt: skip
    assert time.perf_counter() - began >= 5.9  # 60 frames at 10 fps: played, not raced
    assert summary.path.startswith("gpu pipeline")
    for source in summary.sources:
        assert source.error is None and source.dropped is not None
        assert source.frames + source.dropped == 60
        assert source.p99_ms is not None and 0 < source.p99_ms < 1000
