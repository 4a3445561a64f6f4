"""NV12, the frame format of the GPU path: its layout in one pitched buffer, packing
decoded frames into it on the host, converting it to BGR, and ``DeviceNV12Frame``, a
``Frame`` whose NV12 planes stay in a pooled device buffer."""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self, cast

import cv2
import numpy as np
import numpy.typing as npt
from av.video.frame import VideoFrame
from av.video.stream import VideoStream
from framelens.core.errors import SourceError
from framelens.core.gpu.buffers import DeviceBuffer, DevicePool, cuda_driver, cuda_message
from framelens.core.gpu.context import GpuContext
from framelens.core.types import Frame, Image

PLANAR_420 = ("yuv420p", "yuvj420p")
"""8-bit planar 4:2:0: repacked into NV12 bit-exactly (and what NVDEC decodes to NV12)."""


@dataclass(frozen=True, slots=True)
class Nv12Layout:
    """Where NV12 planes sit in one pitched buffer: luma rows, then interleaved UV rows."""

    width: int
    height: int

    @property
    def row_bytes(self) -> int:
        """Bytes of pixels per row: UV pairs cover ceil(width / 2) pairs."""
        return self.width + (self.width & 1)

    @property
    def chroma_rows(self) -> int:
        return (self.height + 1) // 2

    @property
    def rows(self) -> int:
        return self.height + self.chroma_rows


def _plane(frame: VideoFrame, index: int) -> npt.NDArray[np.uint8]:
    """A plane as (rows, line_size) uint8, without copying."""
    plane = frame.planes[index]
    rows = plane.height
    data = np.frombuffer(cast(Any, plane), dtype=np.uint8, count=rows * plane.line_size)
    return data.reshape(rows, plane.line_size)


def pack_nv12(frame: VideoFrame, dst: npt.NDArray[np.uint8], layout: Nv12Layout) -> None:
    """Write a decoded frame into ``dst`` ((rows, pitch) uint8) as NV12 in ``layout``.

    nv12 (NVDEC through FFmpeg) and yuv420p are repacked bit-exactly; anything else is
    converted by FFmpeg first.
    """
    w, h, ch, rb = layout.width, layout.height, layout.chroma_rows, layout.row_bytes
    fmt = frame.format.name
    if fmt == "nv12":
        dst[:h, :w] = _plane(frame, 0)[:h, :w]
        dst[h : h + ch, :rb] = _plane(frame, 1)[:ch, :rb]
    elif fmt in PLANAR_420:
        dst[:h, :w] = _plane(frame, 0)[:h, :w]
        cw = rb // 2
        uv = dst[h : h + ch, :rb]
        uv[:, 0::2] = _plane(frame, 1)[:ch, :cw]
        uv[:, 1::2] = _plane(frame, 2)[:ch, :cw]
    else:
        pack_nv12(frame.reformat(format="nv12"), dst, layout)


# BT.601/709/2020 as (Cr->R, Cb->G, Cr->G, Cb->B) on [-0.5, 0.5] chroma.
_MATRICES = {
    "bt601": (1.402, -0.344136, -0.714136, 1.772),
    "bt709": (1.5748, -0.187324, -0.468124, 1.8556),
    "bt2020": (1.4746, -0.164553, -0.571353, 1.8814),
}


def nv12_to_bgr(
    nv12: npt.NDArray[np.uint8],
    layout: Nv12Layout,
    *,
    matrix: str = "bt601",
    full_range: bool = False,
) -> Image:
    """Host NV12 ((rows, >= row_bytes) uint8) to a BGR image.

    BT.601 limited range with even sizes goes through OpenCV; other matrices, full range
    and odd sizes through numpy (nearest-neighbour chroma, as OpenCV does).
    """
    w, h, ch = layout.width, layout.height, layout.chroma_rows
    if matrix == "bt601" and not full_range and w % 2 == 0 and h % 2 == 0:
        packed = np.ascontiguousarray(nv12[: h + ch, :w])
        return cast(Image, cv2.cvtColor(packed, cv2.COLOR_YUV2BGR_NV12))
    return _yuv_to_bgr(nv12, layout, matrix, full_range)


def _yuv_to_bgr(
    nv12: npt.NDArray[np.uint8], layout: Nv12Layout, matrix: str, full_range: bool
) -> Image:
    w, h, ch, rb = layout.width, layout.height, layout.chroma_rows, layout.row_bytes
    y = nv12[:h, :w].astype(np.float32)
    uv = nv12[h : h + ch, :rb].astype(np.float32).reshape(ch, rb // 2, 2)
    uv = uv.repeat(2, axis=0).repeat(2, axis=1)[:h, :w]
    if full_range:
        cb, cr = (uv[..., 0] - 128.0) / 255.0, (uv[..., 1] - 128.0) / 255.0
        luma = y / 255.0
    else:
        cb, cr = (uv[..., 0] - 128.0) / 224.0, (uv[..., 1] - 128.0) / 224.0
        luma = (y - 16.0) / 219.0
    r_cr, g_cb, g_cr, b_cb = _MATRICES.get(matrix, _MATRICES["bt601"])
    bgr = np.stack([luma + b_cb * cb, luma + g_cb * cb + g_cr * cr, luma + r_cr * cr], axis=-1)
    return cast(Image, np.clip(bgr * 255.0 + 0.5, 0, 255).astype(np.uint8))


def color_of(stream: VideoStream) -> tuple[str, bool]:
    """(matrix, full_range) of a stream, from FFmpeg's AVColorSpace / AVColorRange codes."""
    cc = stream.codec_context
    space = int(getattr(cc, "colorspace", 2) or 2)
    matrix = "bt709" if space == 1 else "bt2020" if space in (9, 10) else "bt601"
    full = int(getattr(cc, "color_range", 0) or 0) == 2 or str(cc.pix_fmt).startswith("yuvj")
    return matrix, full


class DeviceNV12Frame(Frame):
    """One decoded frame in device memory, NV12, in a pooled buffer of its source.

    A ``Frame`` whose device image is itself: GPU stages read the planes, ``image``
    downloads and converts them on first use. ``index``/``pts`` (seconds) are those
    ``FileSource`` gives the same frame. Luma is ``height`` rows of ``width`` bytes at
    ``y_ptr`` (``y_pitch`` bytes apart); chroma is ceil(height/2) rows of interleaved
    U,V pairs at ``uv_ptr`` (``uv_pitch`` apart).
    ``matrix`` ("bt601", "bt709", "bt2020") and ``full_range`` say how to turn it into RGB.
    The data is written on ``stream``; ``ready`` is an event recorded after the write.
    """

    __slots__ = (
        "_buffer",
        "_ctx",
        "_layout",
        "_pool",
        "full_range",
        "matrix",
        "ready",
        "stream",
        "uv_pitch",
        "uv_ptr",
        "y_pitch",
        "y_ptr",
    )

    def __init__(
        self,
        *,
        index: int,
        pts: float,
        layout: Nv12Layout,
        buffer: DeviceBuffer,
        pool: DevicePool,
        ctx: GpuContext,
        stream: Any,
        ready: Any,
        matrix: str,
        full_range: bool,
        source_id: int = 0,
    ) -> None:
        super().__init__(None, index, pts, device=self, source_id=source_id)
        self._layout = layout
        self.y_ptr = buffer.ptr
        self.y_pitch = buffer.pitch
        self.uv_ptr = buffer.ptr + buffer.pitch * layout.height
        self.uv_pitch = buffer.pitch
        self.matrix = matrix
        self.full_range = full_range
        self.stream = stream
        self.ready = ready
        self._buffer: DeviceBuffer | None = buffer
        self._pool = pool
        self._ctx = ctx

    @property
    def layout(self) -> Nv12Layout:
        return self._layout

    @property
    def width(self) -> int:
        return self._layout.width

    @property
    def height(self) -> int:
        return self._layout.height

    @property
    def released(self) -> bool:
        return self._buffer is None

    def wait(self, stream: Any) -> None:
        """Make ``stream`` wait until the planes are written (no host stall)."""
        with self._ctx.active():
            stream.wait_for_event(self.ready)

    def release(self, stream: Any = None) -> None:
        """Hand the buffer back to the source's pool; ``stream``: work queued there still
        reads the planes. Safe to call more than once; the pointers are invalid after."""
        buffer, self._buffer = self._buffer, None
        if buffer is not None:
            self._pool.release(buffer, stream)

    def to_host_nv12(self) -> npt.NDArray[np.uint8]:
        """The planes on the host: (height + ceil(height/2), row_bytes) uint8, luma rows
        then UV rows (waits for the frame to be written)."""
        if self._buffer is None:
            raise SourceError(f"frame {self.index} was released")
        layout = self.layout
        host = np.empty((layout.rows, layout.row_bytes), dtype=np.uint8)
        cuda = cuda_driver()
        try:
            with self._ctx.active():
                self.ready.synchronize()
                for ptr, pitch, rows, row0, width in (
                    (self.y_ptr, self.y_pitch, layout.height, 0, layout.width),
                    (
                        self.uv_ptr,
                        self.uv_pitch,
                        layout.chroma_rows,
                        layout.height,
                        layout.row_bytes,
                    ),
                ):
                    copy = cuda.Memcpy2D()
                    copy.set_src_device(ptr)
                    copy.src_pitch = pitch
                    copy.set_dst_host(host[row0:])
                    copy.dst_pitch = host.strides[0]
                    copy.width_in_bytes = width
                    copy.height = rows
                    copy(aligned=False)
        except Exception as exc:
            raise SourceError(
                f"downloading frame {self.index} failed: {cuda_message(exc)}"
            ) from exc
        return host

    def to_host_bgr(self) -> Image:
        """The frame as a host BGR image (download + colour conversion)."""
        return nv12_to_bgr(
            self.to_host_nv12(), self.layout, matrix=self.matrix, full_range=self.full_range
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        state = " released" if self._buffer is None else ""
        return (
            f"<DeviceNV12Frame {self.index} {self.width}x{self.height} pts={self.pts:.3f}{state}>"
        )
