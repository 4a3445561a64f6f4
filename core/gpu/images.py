"""Frames the GPU pipeline hands out: RGBA8 images in pooled device buffers."""

from __future__ import annotations

import weakref
from typing import Any, cast

import cv2
import numpy as np
from framelens.core.errors import GpuError
from framelens.core.gpu.buffers import DeviceBuffer, DevicePool, cuda_driver, cuda_message
from framelens.core.gpu.context import GpuContext
from framelens.core.types import Image


class RgbaDeviceImage:
    """An RGBA8 frame in a pooled device buffer, made by the display kernel.

    The canvas copies it into its GL pixel buffer (``write_rgba``, the interop
    protocol); export and snapshots download it (``to_host_bgr``). The buffer goes
    back to its pool when this object is dropped.
    """

    __slots__ = ("__weakref__", "_buffer", "_pool", "_ready", "context", "height", "width")

    def __init__(
        self,
        buffer: DeviceBuffer,
        pool: DevicePool,
        width: int,
        height: int,
        context: GpuContext,
        ready: Any,
    ) -> None:
        self._buffer = buffer
        self._pool = pool
        self._ready = ready  # event recorded after the display kernel
        self.width, self.height, self.context = width, height, context
        weakref.finalize(self, pool.release, buffer)

    def write_rgba(self, dst_ptr: int, dst_pitch: int, stream: Any) -> None:
        with self.context.active():
            stream.wait_for_event(self._ready)
            copy_rgba(self._buffer.ptr, self._buffer.pitch, dst_ptr, dst_pitch, self.width,
                      self.height, stream)  # fmt: skip
        # the buffer's next user (a display kernel) waits for this copy too
        self._pool.mark_used(self._buffer, stream)

    def read_on(self, stream: Any) -> tuple[int, int, int, int]:
        """(pointer, pitch, width, height) for a kernel queued next on ``stream`` to read
        (the video wall's composite): the stream waits for the frame first. Call
        ``read_done(stream)`` once the reading work is queued."""
        with self.context.active():
            stream.wait_for_event(self._ready)
        return self._buffer.ptr, self._buffer.pitch, self.width, self.height

    def read_done(self, stream: Any) -> None:
        """The buffer's next user waits for what ``stream`` has queued so far."""
        self._pool.mark_used(self._buffer, stream)

    def to_host_rgba(self) -> np.ndarray[Any, np.dtype[np.uint8]]:
        try:
            return self._download()
        except Exception as exc:  # a failing device: the run may go on on the CPU
            raise GpuError(f"downloading a frame failed: {cuda_message(exc)}") from exc

    def _download(self) -> np.ndarray[Any, np.dtype[np.uint8]]:
        return download_rgba(
            self.context, self._buffer.ptr, self._buffer.pitch, self.width, self.height, self._ready
        )

    def to_host_bgr(self) -> Image:
        return cast(Image, cv2.cvtColor(self.to_host_rgba(), cv2.COLOR_RGBA2BGR))


def copy_rgba(
    src_ptr: int, src_pitch: int, dst_ptr: int, dst_pitch: int, width: int, height: int,
    stream: Any,
) -> None:  # fmt: skip
    """Queue on ``stream`` the copy of a ``width`` x ``height`` RGBA8 device image into
    another (the context current)."""
    copy = cuda_driver().Memcpy2D()
    copy.set_src_device(src_ptr)
    copy.src_pitch = src_pitch
    copy.set_dst_device(dst_ptr)
    copy.dst_pitch = dst_pitch
    copy.width_in_bytes = width * 4
    copy.height = height
    copy(stream)


def replicate_edges(
    ptr: int, pitch: int, width: int, height: int, padded_w: int, padded_h: int,
    stream: Any,
) -> None:  # fmt: skip
    """Queue on ``stream`` the padding of a ``width`` x ``height`` RGBA8 device image to
    ``padded_w`` x ``padded_h`` in place (its buffer that large): the last column
    repeated to the right, then the last row (padding included) below, as OpenCV's
    BORDER_REPLICATE on the right and bottom. The context current."""
    cuda = cuda_driver()
    for x in range(width, padded_w):
        copy = cuda.Memcpy2D()
        copy.set_src_device(ptr + (width - 1) * 4)
        copy.src_pitch = pitch
        copy.set_dst_device(ptr + x * 4)
        copy.dst_pitch = pitch
        copy.width_in_bytes = 4
        copy.height = height
        copy(stream)
    for y in range(height, padded_h):
        cuda.memcpy_dtod_async(ptr + y * pitch, ptr + (height - 1) * pitch, padded_w * 4, stream)


def download_rgba(
    ctx: GpuContext, ptr: int, pitch: int, width: int, height: int, ready: Any
) -> np.ndarray[Any, np.dtype[np.uint8]]:
    """An RGBA8 device image (rows ``pitch`` bytes apart at ``ptr``) as a host array, once
    the event ``ready`` has completed."""
    cuda = cuda_driver()
    host = np.empty((height, width, 4), dtype=np.uint8)
    with ctx.active():
        ready.synchronize()
        copy = cuda.Memcpy2D()
        copy.set_src_device(ptr)
        copy.src_pitch = pitch
        copy.set_dst_host(host)
        copy.dst_pitch = width * 4
        copy.width_in_bytes = width * 4
        copy.height = height
        copy(aligned=False)
    return host


def upload_bgr(ctx: GpuContext, image: Image, stream: Any) -> RgbaDeviceImage:
    """A host BGR image as the GPU pipeline's display frame (an RgbaDeviceImage in a pool
    of its own), ready once ``stream`` reaches this point: for tests and benchmarks that
    feed the canvas or the wall device frames of known content."""
    cuda = cuda_driver()
    h, w = image.shape[:2]
    pool = DevicePool.pitched(ctx, w * 4, h, 1, kind="uploaded frame")
    buf = pool.acquire()
    rgba = np.ascontiguousarray(cv2.cvtColor(image, cv2.COLOR_BGR2RGBA))
    with ctx.active():
        copy = cuda.Memcpy2D()
        copy.set_src_host(rgba)
        copy.src_pitch = w * 4
        copy.set_dst_device(buf.ptr)
        copy.dst_pitch = buf.pitch
        copy.width_in_bytes = w * 4
        copy.height = h
        copy(aligned=False)  # pageable host memory: a synchronous copy
    pool.mark_used(buf, stream)
    return RgbaDeviceImage(buf, pool, w, h, ctx, buf.event)
