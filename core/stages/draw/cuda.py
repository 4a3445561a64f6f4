"""The CUDA painter: boxes, trails and landmark dots drawn straight into a device image.

What is drawn is ``framelens.core.stages.draw.style``'s ``layout``, the same geometry
and colours as OpenCV's and the canvas' painting, put on the pixels by the kernel
``fl_draw_rects`` (``kernels/draw.cu``) through ``GpuKernels``: box outlines and
landmark discs, exactly the pixels OpenCV colours for them. Tags (their background
and text) are not drawn here: label text is drawn by the host painters only (OpenCV
into host frames, QPainter over the canvas), so a frame annotated on the device gets
its tags from the canvas' overlay or not at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from framelens.core.gpu.rects import DISC, RECT
from framelens.core.stages.draw.style import BGR, DEFAULT_STYLE, Overlay, OverlayStyle, layout
from framelens.core.types import Detections

if TYPE_CHECKING:
    from framelens.core.gpu.context import GpuContext
    from framelens.core.gpu.kernels import GpuKernels

ORDERS = {"rgba": (2, 1, 0, 255), "bgra": (0, 1, 2, 255), "rgb": (2, 1, 0), "bgr": (0, 1, 2)}
"""Channel order of a device image -> for each channel, the BGR index (or a constant 255)."""


@dataclass(frozen=True, slots=True)
class DeviceImage:
    """A packed uint8 image in device memory: ``ptr`` (int device address), ``pitch``
    (bytes between rows), size, channel ``order`` (RGBA by default, as the display
    kernels write it) and the pycuda stream its work goes on (None: the default)."""

    ptr: int
    pitch: int
    width: int
    height: int
    stream: Any = None
    order: str = "rgba"

    @property
    def channels(self) -> int:
        return len(self.order)


def _colour(bgr: BGR, order: str) -> int:
    packed = 0
    for k, source in enumerate(ORDERS[order]):
        byte = 255 if k == 3 else bgr[source]
        packed |= (byte & 0xFF) << (8 * k)
    return packed - (1 << 32) if packed >= 1 << 31 else packed  # as int32


def shape_rows(overlay: Overlay, order: str = "rgba") -> npt.NDArray[np.int32]:
    """The overlay's trails, box outlines and landmark dots as ``fl_draw_rects`` shapes
    (M, 8), in painting order, colours in ``order``'s channel order. Tags are left out.
    A trail is its runs of pixels, each a filled one-row rectangle (half -1)."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {sorted(ORDERS)}, not {order!r}")
    rows: list[tuple[int, ...]] = []
    for trail in overlay.trails:
        colour = _colour(trail.colour, order)
        rows += [(r.x1, r.y1, r.x2, r.y2, colour, -1, RECT, 0) for r in trail.spans()]
    for mark in overlay.boxes:
        if mark.outline:
            b = mark.box
            rows.append((b.x1, b.y1, b.x2, b.y2, _colour(mark.colour, order), mark.half, RECT, 0))
    for dot in overlay.dots:
        colour = _colour(dot.colour, order)
        rows.append((dot.x, dot.y, dot.x, dot.y, colour, dot.radius, DISC, 0))
    return np.array(rows, dtype=np.int32).reshape(-1, 8)


class CudaAnnotator:
    """``Annotator`` of device images: ``annotate(DeviceImage, ...)`` draws the boxes and
    landmarks of ``style`` in place, asynchronously on the image's stream, and returns
    the image. No label text (host painters only, see the module's docstring).

    The shapes go to the device through one page-locked buffer and one device buffer,
    grown as needed; a call waits on the host until the previous call's kernel has read
    them (drawing takes microseconds). One thread at a time per annotator.
    """

    def __init__(self, ctx: GpuContext, kernels: GpuKernels) -> None:
        self._ctx = ctx
        self._kernels = kernels
        self._capacity = 0
        self._host: Any = None
        self._device: Any = None
        self._done: Any = None  # event after the last draw: its shapes were read

    def annotate(
        self,
        image: DeviceImage,
        detections: Detections,
        labels: Sequence[str],
        style: OverlayStyle = DEFAULT_STYLE,
    ) -> DeviceImage:
        overlay = layout(detections, labels, style, image.width, image.height)
        rows = shape_rows(overlay, image.order)
        if len(rows):
            self.draw(image, rows)
        return image

    def draw(self, image: DeviceImage, rows: npt.NDArray[np.int32]) -> None:
        """Launch ``fl_draw_rects`` with ``rows`` (``shape_rows``) on ``image``."""
        import pycuda.driver as cuda

        n = len(rows)
        with self._ctx.active():
            if self._done is not None:
                self._done.synchronize()  # the last launch has read the buffers
            if n > self._capacity:
                self.close()
                self._capacity = max(64, 1 << (n - 1).bit_length())
                self._host = cuda.pagelocked_empty((self._capacity, 8), np.int32)
                self._device = cuda.mem_alloc(self._capacity * 8 * 4)
                self._done = cuda.Event(cuda.event_flags.DISABLE_TIMING)
            self._host[:n] = rows
            cuda.memcpy_htod_async(self._device, self._host[:n], image.stream)
            self._kernels.draw_rects(
                image.ptr,
                image.pitch,
                image.width,
                image.height,
                image.channels,
                int(self._device),
                n,
                image.stream,
            )
            self._done.record(image.stream)

    def close(self) -> None:
        """Free the buffers (after the last draw has finished)."""
        if self._device is None:
            return
        with self._ctx.active():
            if self._done is not None:
                self._done.synchronize()
            self._device.free()
        self._device = self._host = self._done = None
        self._capacity = 0


__all__ = ["ORDERS", "CudaAnnotator", "DeviceImage", "shape_rows"]
