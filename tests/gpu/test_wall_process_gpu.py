"""The video wall in a process of its own on the GPU path (core/sessions/wall_process.py):
the child decodes with NVDEC, runs the engine on CUDA and draws its tiles into the device
picture; each publish downloads it once into shared memory (the host transport, asked
for here; CUDA IPC: test_wall_ipc_gpu.py). Held against the same wall run on the CPU:
every result reaches this process, and the last picture shows the same frames."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest
from framelens.core.gpu.context import GpuContext
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline.settings import PipelineSettings

pytestmark = pytest.mark.gpu

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from test_wall_process import Consumer, clips, ended  # noqa: E402

__all__ = ["clips"]  # the fixture: two clips of 30 frames cut from the sample


def _played(clips: list[str], device: str) -> Consumer:
    consumer = Consumer("host")  # the download into shared memory (CUDA IPC: test_wall_ipc_gpu)
    consumer.wall.open(clips, PipelineSettings(model=resolve_model(DEFAULT_MODEL), device=device))
    try:
        consumer.wait(lambda: ended(consumer) and consumer.pictures)
        time.sleep(0.5)  # the last results' picture on its way
    finally:
        consumer.wall.close()
    return consumer


def test_the_gpu_wall_in_its_own_process_shows_every_result_as_the_cpu_wall_does(
    gpu_ctx: GpuContext, clips: list[str]
) -> None:
    del gpu_ctx  # skips without a usable GPU
    gpu = _played(clips, "cuda:0")
    assert not gpu.errors, gpu.errors
    final = gpu.states[-1]
    assert all(t.status == "ended" for t in final.tiles)
    made = sum(t.frames for t in final.tiles)
    assert made >= 50
    assert sum(p.shown for p in gpu.pictures) == made  # every result in a picture
    assert gpu.pictures[-1].replaced == 0
    assert any(len(o.detections) for p in gpu.pictures for o in p.overlays.values())

    cpu = _played(clips, "cpu")
    assert not cpu.errors, cpu.errors
    for got, want in zip(gpu.tiles[-1], cpu.tiles[-1], strict=True):
        assert got.shape == want.shape
        assert got.std() > 12, "a tile of the GPU wall looks blank"
        # the same last frame of each clip, scaled by the kernel and by OpenCV
        assert np.abs(got - want).mean() < 6.0
