"""CudaAnnotator (kernels/draw.cu) against OpenCV's drawing of the same detections on the
same image: box outlines and landmark dots at exactly the same pixels, in the same
colours. Tags are host-only: with them on, the images agree outside the tags and the
device image is untouched inside them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from framelens.core.gpu.context import GpuContext
from framelens.core.gpu.kernels import GpuKernels
from framelens.core.stages.draw.cuda import CudaAnnotator, DeviceImage
from framelens.core.stages.draw.opencv import annotate
from framelens.core.stages.draw.style import OverlayStyle, layout
from framelens.core.types import Detections

pytestmark = pytest.mark.gpu

cuda = pytest.importorskip("pycuda.driver")

W, H = 643, 359
LABELS = ("person", "bicycle", "car", "face")
U8 = npt.NDArray[np.uint8]


def scene(rng: np.random.Generator) -> tuple[U8, Detections]:
    image = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    boxes = [
        [60.2, 120.7, 220.4, 330.1],
        [300.0, 0.0, 470.0, 150.0],  # at the top edge
        [430.0, 110.0, 600.0, 250.0],  # over the previous one's corner
        [120.0, 180.0, 190.0, 260.0],  # a face
        [560.5, 290.0, 660.0, 400.0],  # beyond the bottom-right corner
        [-30.0, -20.0, 5.0, 8.0],  # beyond the top-left corner
        [700.0, 10.0, 800.0, 50.0],  # outside: not drawn
        [np.nan, 10.0, 50.0, 50.0],  # NaN: not drawn
    ]
    n = len(boxes)
    landmarks = np.full((n, 5, 2), np.nan, np.float32)
    landmarks[3] = [[140, 205], [170, 205], [155, 222], [142, 240], [168, 240]]
    landmarks[5] = [[0, 0], [2.4, 1.6], [W - 0.6, 3], [W - 1, H - 1], [-1, 5]]  # at the edges
    dets = Detections(
        np.array(boxes, np.float32),
        rng.uniform(0.3, 1.0, n).astype(np.float32),
        np.array([0, 2, 1, 3, 2, 5, 0, 1], np.int32),
        landmarks,
    )
    return image, dets


@pytest.fixture(scope="module")
def kernels(gpu_ctx: GpuContext) -> GpuKernels:
    return GpuKernels(gpu_ctx)


@pytest.fixture
def annotator(gpu_ctx: GpuContext, kernels: GpuKernels) -> Iterator[CudaAnnotator]:
    a = CudaAnnotator(gpu_ctx, kernels)
    yield a
    a.close()


def _draw_on_device(
    ctx: GpuContext,
    annotator: CudaAnnotator,
    bgr: U8,
    dets: Detections,
    style: OverlayStyle,
    order: str,
    stream: Any,
    extra_pitch: int,
) -> U8:
    """Upload ``bgr`` as an ``order`` image with padded rows, annotate, read it back as BGR."""
    h, w = bgr.shape[:2]
    channels = len(order)
    pixels = bgr[:, :, ::-1] if order.startswith("rgb") else bgr
    if channels == 4:
        pixels = np.dstack([pixels, np.full((h, w), 255, np.uint8)])
    pitch = w * channels + extra_pitch
    host = np.full((h, pitch), 0xAB, np.uint8)
    host[:, : w * channels] = pixels.reshape(h, -1)
    with ctx.active():
        mem = cuda.mem_alloc(host.nbytes)
        try:
            cuda.memcpy_htod(mem, host)
            image = DeviceImage(int(mem), pitch, w, h, stream, order)
            assert annotator.annotate(image, dets, LABELS, style) is image
            stream.synchronize()
            back = np.empty_like(host)
            cuda.memcpy_dtoh(back, mem)
        finally:
            mem.free()
    assert (back[:, w * channels :] == 0xAB).all(), "wrote past the row"
    got = back[:, : w * channels].reshape(h, w, channels)[:, :, :3]
    if channels == 4:
        assert (back[:, : w * channels].reshape(h, w, 4)[:, :, 3] == 255).all()
    return np.ascontiguousarray(got[:, :, ::-1] if order.startswith("rgb") else got)


@pytest.mark.parametrize("order", ["rgba", "bgra", "bgr"])
@pytest.mark.parametrize("thickness", [None, 1, 2, 3, 6])
def test_cuda_boxes_and_landmarks_are_opencvs_pixels(
    gpu_ctx: GpuContext,
    annotator: CudaAnnotator,
    gpu_stream: Any,
    order: str,
    thickness: int | None,
) -> None:
    rng = np.random.default_rng(17 + (thickness or 0))
    image, dets = scene(rng)
    style = OverlayStyle(labels=False, scores=False, thickness=thickness)
    ref = annotate(image, dets, LABELS, style)
    got = _draw_on_device(gpu_ctx, annotator, image, dets, style, order, gpu_stream, 12)
    differs = np.any(got != ref, axis=2)
    assert not differs.any(), f"{int(differs.sum())} pixels differ from OpenCV's"
    assert np.any(ref != image)  # something was drawn


def test_with_tags_the_device_image_matches_outside_them(
    gpu_ctx: GpuContext, annotator: CudaAnnotator, gpu_stream: Any
) -> None:
    rng = np.random.default_rng(3)
    image, dets = scene(rng)
    style = OverlayStyle()
    ref = annotate(image, dets, LABELS, style)
    got = _draw_on_device(gpu_ctx, annotator, image, dets, style, "rgba", gpu_stream, 0)
    tags = np.zeros((H, W), bool)
    for mark in layout(dets, LABELS, style, W, H).boxes:
        if mark.tag is not None:
            t = mark.tag.rect
            tags[t.y1 : t.y2 + 1, t.x1 : t.x2 + 1] = True
    assert tags.any()
    assert np.array_equal(got[~tags], ref[~tags])
    boxes_only = annotate(image, dets, LABELS, OverlayStyle(labels=False, scores=False))
    assert np.array_equal(got, boxes_only)  # no tags drawn on the device


def test_many_calls_grow_and_reuse_the_buffers(
    gpu_ctx: GpuContext, annotator: CudaAnnotator, gpu_stream: Any
) -> None:
    rng = np.random.default_rng(9)
    image = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    style = OverlayStyle(labels=False, scores=False)
    for n in (1, 70, 3, 300):
        x1 = rng.uniform(-20, W - 30, n)
        y1 = rng.uniform(-20, H - 30, n)
        boxes = np.stack([x1, y1, x1 + rng.uniform(5, 200, n), y1 + rng.uniform(5, 150, n)], 1)
        dets = Detections(
            boxes.astype(np.float32),
            rng.uniform(0, 1, n).astype(np.float32),
            rng.integers(0, 80, n).astype(np.int32),
        )
        ref = annotate(image, dets, LABELS, style)
        got = _draw_on_device(gpu_ctx, annotator, image, dets, style, "bgra", gpu_stream, 4)
        assert np.array_equal(got, ref), f"{n} boxes"
