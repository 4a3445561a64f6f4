"""The video wall's composite kernel on the H200 against the host composite: real frames
of the sample as RGBA device images, tiled into one RGBA buffer by ``fl_rgba_resize``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from framelens.core.gpu.buffers import DevicePool, cuda_driver
from framelens.core.gpu.context import GpuContext
from framelens.core.gpu.images import upload_bgr
from framelens.core.gpu.shared_kernels import kernels_for
from framelens.core.gpu.wall_composite import (
    composite_device,
    composite_host,
    tile_rects,
    wall_grid,
)

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"


@pytest.mark.parametrize("count", [4, 16])
def test_the_kernel_composite_equals_the_host_composite(
    gpu_ctx: GpuContext, gpu_stream: Any, count: int
) -> None:
    import sys

    sys.path.insert(0, str(ROOT / "tests" / "unit"))
    from media_factory import sample_frames

    base = sample_frames(SAMPLE, (0, 300, 330, 600))
    frames = [base[i % 4] if i % 3 else cv2.resize(base[i % 4], (640, 480)) for i in range(count)]
    width, height = 1920, 1080
    rects = tile_rects([(f.shape[1], f.shape[0]) for f in frames], wall_grid(count), width, height)
    want = composite_host(frames, rects, width, height)
    cuda = cuda_driver()
    images = [upload_bgr(gpu_ctx, f, gpu_stream) for f in frames]
    wall = DevicePool.pitched(gpu_ctx, width * 4, height, 1, kind="wall")
    try:
        dst = wall.buffers[0]
        with gpu_ctx.active():
            cuda.memset_d8_async(dst.ptr, 0, dst.pitch * height, gpu_stream)
            composite_device(kernels_for(gpu_ctx), images, rects, dst.ptr, dst.pitch, gpu_stream)
            got = np.empty((height, width, 4), dtype=np.uint8)
            copy = cuda.Memcpy2D()
            copy.set_src_device(dst.ptr)
            copy.src_pitch = dst.pitch
            copy.set_dst_host(got)
            copy.dst_pitch = width * 4
            copy.width_in_bytes = width * 4
            copy.height = height
            gpu_stream.synchronize()
            copy(aligned=False)  # pageable host memory: a synchronous copy
    finally:
        wall.close()
    got_bgr = cv2.cvtColor(got, cv2.COLOR_RGBA2BGR)
    for rect in rects:
        assert rect is not None
        x, y, w, h = rect
        diff = np.abs(got_bgr[y : y + h, x : x + w].astype(np.int16) - want[y : y + h, x : x + w])
        assert diff.max() <= 1, rect  # cv2's fixed-point resize against the kernel's float
        assert (got[y : y + h, x : x + w, 3] == 255).all()
    assert got[0, 0, 3] == 0  # outside the tiles: untouched (the caller's background)


def test_the_wall_picture_on_the_device_is_the_host_picture(
    gpu_ctx: GpuContext, gpu_stream: Any
) -> None:
    """What the wall canvas hands its interop uploader: the picture the kernel draws a
    result at a time, equal to the host picture of the same frames (one 8-bit level),
    before and after a layout change; the device frames are not held (their buffers
    go back to their pools as soon as they are drawn)."""
    import gc
    import sys
    import weakref

    from framelens.core.gpu.wall_picture import DeviceWallPicture, WallPicture
    from framelens.core.types import Frame

    sys.path.insert(0, str(ROOT / "tests" / "unit"))
    from media_factory import sample_frames

    frames = sample_frames(SAMPLE, (0, 300, 330))
    host, device = WallPicture((1280, 720)), WallPicture((1280, 720))
    images = [upload_bgr(gpu_ctx, f, gpu_stream) for f in frames]
    alive = [weakref.ref(image) for image in images]
    for picture in (host, device):
        picture.set_layout(3, "2x2")
    for i, (frame, image) in enumerate(zip(frames, images, strict=True)):
        host.put(i, Frame(image=frame, index=0, pts=0.0))
        device.put(i, Frame(None, 0, 0.0, device=image))
    del images, image
    gc.collect()
    assert all(ref() is None for ref in alive), "the wall kept a device frame"
    try:
        # a paused wall's relayout resamples the tiles it carries: each resampling may
        # add one 8-bit level between the kernel's float and cv2's fixed point (the H200
        # measured 3 after the third), while the pictures stay the same on the whole
        for resamples, layout in enumerate(("2x2", "1", "auto"), start=1):
            if layout != "2x2":
                host.set_layout(3, layout)
                device.set_layout(3, layout)
            got = device.picture()
            assert isinstance(got, DeviceWallPicture)
            want = host.picture()
            assert isinstance(want, np.ndarray)
            diff = np.abs(got.to_host_bgr().astype(np.int16) - want)
            assert diff.max() <= resamples, layout
            assert diff.mean() < 1.0, (layout, float(diff.mean()))
            assert got.width == 1280 and got.height == 720
    finally:
        device.close()
