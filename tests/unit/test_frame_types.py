"""What every source's frames share: ``Frame`` (with ``source_id``), and NVDEC's device
frames as Frames, checked without a GPU (a fake pool stands in for device memory)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from framelens.core.gpu.buffers import DeviceBuffer
from framelens.core.gpu.context import GpuContext
from framelens.core.stages.sources.base import Source
from framelens.core.stages.sources.file import FileSource
from framelens.core.stages.sources.nv12 import DeviceNV12Frame, Nv12Layout, nv12_to_bgr
from framelens.core.stages.sources.nvdec import GpuVideoSource
from framelens.core.types import Frame

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"


def test_a_frame_knows_its_source_id_keyword_only_default_0() -> None:
    image = np.zeros((2, 4, 3), np.uint8)
    assert Frame(image, 3, 0.3).source_id == 0
    assert Frame(image, 3, 0.3, source_id=2).source_id == 2
    with pytest.raises(TypeError):
        Frame(image, 3, 0.3, None, 2)  # type: ignore[misc]


def test_a_frame_held_elsewhere_is_still_the_same_frame() -> None:
    """A result's frame made anew around its display picture (the GPU path) or a host
    copy keeps what says which frame it is, and when a paced source released it: the
    wall's latency on screen counts from that."""
    frame = Frame(np.zeros((2, 4, 3), np.uint8), 7, 0.7, source_id=5)
    frame.arrived = 1234.5
    copy = frame.holding(np.ones((2, 4, 3), np.uint8))
    assert (copy.index, copy.pts, copy.source_id, copy.arrived) == (7, 0.7, 5, 1234.5)
    assert int(copy.image[0, 0, 0]) == 1 and copy is not frame


def test_a_source_stamps_its_id_on_its_frames() -> None:
    with FileSource(SAMPLE) as src:
        assert src.source_id == 0
        first = src.read()
        src.source_id = 5
        second = src.read()
    assert first is not None and second is not None
    assert (first.source_id, second.source_id) == (0, 5)


def test_the_gpu_source_is_a_source() -> None:
    assert issubclass(GpuVideoSource, Source)
    assert issubclass(DeviceNV12Frame, Frame)


class FakePool:
    def __init__(self) -> None:
        self.returned: list[tuple[DeviceBuffer, Any]] = []

    def release(self, buffer: DeviceBuffer, stream: Any = None) -> None:
        self.returned.append((buffer, stream))


def device_frame(pool: FakePool, index: int = 7, source_id: int = 0) -> DeviceNV12Frame:
    layout = Nv12Layout(4, 2)
    buffer = DeviceBuffer(slot=0, event=None, ptr=4096, pitch=512, rows=layout.rows)
    return DeviceNV12Frame(
        index=index,
        pts=index / 10,
        layout=layout,
        buffer=buffer,
        pool=pool,  # type: ignore[arg-type]
        ctx=GpuContext.__new__(GpuContext),
        stream="stream",
        ready=None,
        matrix="bt601",
        full_range=False,
        source_id=source_id,
    )


def test_a_device_nv12_frame_is_a_frame_whose_device_image_is_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pool = FakePool()
    frame = device_frame(pool, source_id=1)
    assert (frame.index, frame.pts, frame.source_id) == (7, 0.7, 1)
    assert (frame.width, frame.height) == (4, 2)
    assert (frame.y_ptr, frame.uv_ptr, frame.uv_pitch) == (4096, 4096 + 512 * 2, 512)
    assert frame.device is frame and not frame.on_host
    nv12 = np.full((3, 4), 128, np.uint8)
    nv12[:2] = 100

    def host_nv12(self: DeviceNV12Frame) -> npt.NDArray[np.uint8]:
        return nv12

    monkeypatch.setattr(DeviceNV12Frame, "to_host_nv12", host_nv12)
    np.testing.assert_array_equal(frame.image, nv12_to_bgr(nv12, frame.layout))
    assert frame.on_host and frame.image.shape == (2, 4, 3)
    frame.release("other")
    frame.release()
    assert frame.released and len(pool.returned) == 1 and pool.returned[0][1] == "other"
