"""The video wall in a process of its own hands its device picture to this process through
CUDA IPC (core/gpu/wall_ipc.py, core/sessions/wall_transport.py): the child on cuda:0
copies its picture device-to-device into an IPC buffer; here the buffer is copied on the
device, as the canvas's interop upload does (``write_rgba`` on a stream of this process),
then read back by the test alone. Held against the shared-memory transport of the same
wall: every result reaches this process, and the pictures are the same."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from framelens.core.gpu.context import GpuContext
from framelens.core.gpu.wall_ipc import IpcWallFrame
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.wall_process import SharedWallFrame
from framelens.core.sessions.wall_transport import HOST, IPC, WallTransport

pytestmark = pytest.mark.gpu

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from test_wall_process import (  # noqa: E402
    SIZE,
    Consumer,
    PaintingConsumer,
    all_shown,
    clips,
    handed_all,
)

__all__ = ["clips"]  # the fixture: two clips of 30 frames cut from the sample


class DeviceConsumer(Consumer):
    """A canvas on the IPC transport: each picture copied on the device into a buffer of
    this process's (the canvas: its mapped GL pixel buffer), on a stream of its own."""

    def __init__(self, ctx: GpuContext) -> None:
        import pycuda.driver as cuda

        super().__init__("auto")
        self.ctx = ctx
        with ctx.active():
            self.stream: Any = cuda.Stream()
            self.target: Any = cuda.mem_alloc(SIZE[0] * SIZE[1] * 4)
        self.mismatches = 0  # pictures whose download differs from their device copy

    def bgr(self, frame: SharedWallFrame) -> np.ndarray:
        import pycuda.driver as cuda

        assert frame.transport == IPC and frame.image is None  # no host copy on this path
        assert isinstance(frame.device, IpcWallFrame)
        w, h = frame.size
        frame.device.write_rgba(int(self.target), w * 4, self.stream)  # what interop runs
        rgba = np.empty((h, w, 4), np.uint8)
        with self.ctx.active():
            self.stream.synchronize()
            cuda.memcpy_dtoh(rgba, self.target)  # the test's own read-back, not the path's
        image = cv2.cvtColor(rgba, cv2.COLOR_RGBA2BGR)
        if not np.array_equal(frame.device.to_host_bgr(), image):
            self.mismatches += 1
        return image

    def free(self) -> None:
        with self.ctx.active():
            self.target.free()
            self.stream = None


def _play(consumer: Consumer, clips: list[str]) -> None:
    settings = PipelineSettings(model=resolve_model(DEFAULT_MODEL), device="cuda:0")
    consumer.wall.open(clips, settings)
    try:
        consumer.wait(lambda: all_shown(consumer))
        time.sleep(0.3)  # a picture too many would come now
    finally:
        consumer.wall.close()


def test_the_gpu_wall_hands_every_picture_through_cuda_ipc_as_shared_memory_would(
    gpu_ctx: GpuContext, clips: list[str]
) -> None:
    ipc = DeviceConsumer(gpu_ctx)
    try:
        _play(ipc, clips)
    finally:
        ipc.free()
    assert not ipc.errors, ipc.errors
    assert ipc.transports == [WallTransport(IPC, device=0)], ipc.transports
    tiles = ipc.states[-1].tiles
    made = sum(t.frames for t in tiles)
    assert made >= 50 and sum(t.shown + t.dropped for t in tiles) == made
    # every result handed out in a picture (the child's queue of device frames is short:
    # a burst beyond it is dropped before the publisher and counted, not lost unseen)
    assert sum(p.shown for p in ipc.pictures) == sum(t.shown for t in tiles)
    assert sum(t.dropped for t in tiles) <= 0.1 * made
    assert ipc.pictures[-1].replaced == 0
    assert all(p.transport == IPC for p in ipc.pictures)
    assert ipc.mismatches == 0
    assert any(len(o.detections) for p in ipc.pictures for o in p.overlays.values())

    host = Consumer("host")
    _play(host, clips)
    assert not host.errors, host.errors
    assert [t.kind for t in host.transports] == [HOST]
    assert all(p.transport == HOST for p in host.pictures)
    assert ipc.last is not None and host.last is not None
    assert ipc.last.shape == host.last.shape == (SIZE[1], SIZE[0], 3)
    assert ipc.last.std() > 12, "the wall through CUDA IPC looks blank"
    # the same device picture (the clips' last frames), read through either transport
    assert np.abs(ipc.last.astype(np.int16) - host.last).mean() < 0.5


class SwitchingConsumer(DeviceConsumer):
    """A window without CUDA-GL interop: after its first pictures through CUDA IPC it
    says so (the wall canvas's ``device_via_host``), and takes host pictures after."""

    def bgr(self, frame: SharedWallFrame) -> np.ndarray:
        if frame.transport == HOST:
            assert frame.image is not None
            return frame.image
        image = super().bgr(frame)
        if len(self.pictures) == 2:
            self.wall.display_copies_to_host("no CUDA-GL interop in this window")
        return image


def test_a_window_without_interop_gets_the_wall_through_shared_memory_after_it_says_so(
    gpu_ctx: GpuContext, clips: list[str]
) -> None:
    consumer = SwitchingConsumer(gpu_ctx)
    try:
        _play(consumer, clips)
    finally:
        consumer.free()
    assert not consumer.errors, consumer.errors
    kinds = [t.kind for t in consumer.transports]
    assert kinds == [IPC, HOST], consumer.transports
    assert "no CUDA-GL interop in this window" in consumer.transports[-1].reason
    via = [p.transport for p in consumer.pictures]
    switched = via.index(HOST)
    assert switched >= 3 and set(via[switched:]) == {HOST}  # for good, after it said so
    tiles = consumer.states[-1].tiles
    assert sum(p.shown for p in consumer.pictures) == sum(t.shown for t in tiles)


@pytest.mark.parametrize("every_s, hold_s", [(0.05, 0.03), (0.1, 0.06)], ids=["20-a-s", "6-a-s"])
def test_a_window_painting_at_its_own_pace_through_cuda_ipc_shows_every_result_handed_to_it(
    gpu_ctx: GpuContext, clips: list[str], every_s: float, hold_s: float
) -> None:
    """The hold rule of the CPU test (tests/unit/test_wall_process.py) with the wall on
    cuda:0 and its pictures through CUDA IPC: a window that takes only the newest picture
    and paints at its own pace never has a result drawn over unseen; what it cannot take
    core drops and counts."""
    del gpu_ctx  # skips without a usable GPU
    consumer = PaintingConsumer(every_s, hold_s)
    settings = PipelineSettings(model=resolve_model(DEFAULT_MODEL), device="cuda:0")
    consumer.wall.open(clips, settings)
    try:
        # the tiles end when their last results are made; those queued for the window go
        # on after, so wait for every result handed out or dropped (the CPU test's rule)
        consumer.wait(lambda: handed_all(consumer))
        end = time.monotonic() + 5.0
        while time.monotonic() < end and sum(p.shown for p in consumer.painted) != sum(
            t.shown for t in consumer.states[-1].tiles
        ):
            time.sleep(0.05)
        time.sleep(0.3)  # nothing more comes
    finally:
        consumer.stop()
        consumer.wall.close()
    assert not consumer.errors, consumer.errors
    assert [t.kind for t in consumer.transports] == [IPC], consumer.transports
    tiles = consumer.states[-1].tiles
    made, handed = sum(t.frames for t in tiles), sum(t.shown for t in tiles)
    assert made >= 50
    assert consumer.lost == 0 and consumer.pictures[-1].replaced == 0
    assert sum(p.shown for p in consumer.painted) == handed
    assert handed + sum(t.dropped for t in tiles) == made
