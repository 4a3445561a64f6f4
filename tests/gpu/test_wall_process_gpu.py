"""The video wall in a process of its own on the GPU path (core/sessions/wall_process.py):
the child decodes with NVDEC, runs the engine on CUDA and draws its tiles into the device
picture; each publish downloads it once into shared memory (the host transport, asked
for here; CUDA IPC: test_wall_ipc_gpu.py). Held against the same wall run on the CPU:
every result reaches this process, and the last picture shows the same frames."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from framelens.core.gpu.context import GpuContext
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline.settings import PipelineSettings

pytestmark = pytest.mark.gpu

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from test_wall_process import Consumer, all_shown, clips  # noqa: E402

__all__ = ["clips"]  # the fixture: two clips of 30 frames cut from the sample


def _played(clips: list[str], device: str) -> Consumer:
    consumer = Consumer("host")  # the download into shared memory (CUDA IPC: test_wall_ipc_gpu)
    consumer.wall.open(clips, PipelineSettings(model=resolve_model(DEFAULT_MODEL), device=device))
    try:
        consumer.wait(lambda: all_shown(consumer))  # the last results' picture came
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
    assert made >= 50 and sum(t.shown + t.dropped for t in final.tiles) == made
    # every result handed out in a picture (the child's queue of device frames is short:
    # a burst beyond it is dropped before the publisher and counted, not lost unseen)
    assert sum(p.shown for p in gpu.pictures) == sum(t.shown for t in final.tiles)
    assert sum(t.dropped for t in final.tiles) <= 0.1 * made
    assert gpu.pictures[-1].replaced == 0
    assert any(len(o.detections) for p in gpu.pictures for o in p.overlays.values())

    cpu = _played(clips, "cpu")
    assert not cpu.errors, cpu.errors
    assert sorted(gpu.crops) == sorted(cpu.crops) == [0, 1]
    for got, want in ((gpu.crops[t], cpu.crops[t]) for t in (0, 1)):
        assert got.shape == want.shape
        assert got.std() > 12, "a tile of the GPU wall looks blank"
        # the same last frame of each clip, scaled by the kernel and by OpenCV
        assert np.abs(got - want).mean() < 6.0
