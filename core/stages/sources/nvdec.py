"""Video files decoded into device memory as NV12, for the GPU pipeline.

``open_gpu_source(path, ctx, stream)`` picks the fastest decoder that works for the file:

1. ``nvdec (PyNvVideoCodec)``: NVDEC writes the frame into device memory in our context,
   on our stream; no host round trip. PyAV demuxes (and rewrites MP4 H.264/HEVC into
   Annex B, as NVDEC wants it), so numbering, timing and seeking are those of
   ``FileSource`` to the frame.
2. ``nvdec (PyAV hwaccel)``: FFmpeg drives NVDEC, frames come back to the host as NV12,
   go through a page-locked buffer and are uploaded asynchronously.
3. ``cpu (PyAV)``: FFmpeg decodes on the CPU; frames are repacked as NV12 and uploaded
   the same way, so the rest of the GPU pipeline sees the same ``DeviceNV12Frame``.

``decoder_name`` tells which one runs, ``fallback_reason`` why the faster ones did not
(one line, None when the first choice worked). The readers are in ``nvdec_readers``,
the NV12 layout, host conversion and the frame type in ``nv12``.

Frames live in a pool of ``pool_size`` pitched device buffers allocated once. A frame
owns its buffer until ``release()``: release every frame (or use it as a context
manager), or ``read()`` waits for a free buffer and fails after ``acquire_timeout_s``.
The planes are written on the source's stream; use them on that stream, or make yours
wait with ``frame.wait(stream)``, and pass your stream to ``release(stream)`` if work
queued there still reads the frame.

PyNvVideoCodec returns each frame in an output buffer of its own decoder that the next
``Decode`` call overwrites, so frames are copied (one 2D copy per plane, on our stream,
which the decoder also runs on) into the pool before the next packet goes in. A seek
recreates the NVDEC decoder: queued pictures of the old position cannot leak into the
new one, and creating one costs far less than decoding from the keyframe.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
from av.video.frame import VideoFrame
from framelens.core.errors import EngineError, GpuError, SourceError
from framelens.core.gpu.buffers import (
    DeviceBuffer,
    DevicePool,
    PinnedPool,
    cuda_driver,
    cuda_message,
)
from framelens.core.gpu.context import GpuContext
from framelens.core.stages.sources.base import Source
from framelens.core.stages.sources.file import FileReader
from framelens.core.stages.sources.nv12 import (
    DeviceNV12Frame,
    Nv12Layout,
    color_of,
    nv12_to_bgr,
    pack_nv12,
)
from framelens.core.stages.sources.nvdec_readers import (
    CHOICES,
    DECODER_NAMES,
    DecoderChoice,
    NvdecFrame,
    NvdecReader,
    one_line,
    open_reader,
)

__all__ = [
    "CHOICES",
    "DECODER_NAMES",
    "DecoderChoice",
    "DeviceNV12Frame",
    "GpuVideoSource",
    "Nv12Layout",
    "nv12_to_bgr",
    "open_gpu_source",
    "pack_nv12",
]

log = logging.getLogger(__name__)


class GpuVideoSource(Source):
    """A video file read into pooled device NV12 buffers; see the module docstring.

    A Source whose frames are ``DeviceNV12Frame``s: release each one. Use from one
    thread at a time (like every Source); each call makes ``ctx`` current.
    """

    def __init__(
        self,
        reader: FileReader[Any],
        choice: DecoderChoice,
        ctx: GpuContext,
        stream: Any,
        *,
        fallback_reason: str | None,
        pool_size: int,
        acquire_timeout_s: float | None,
    ) -> None:
        self._reader = reader
        self._ctx = ctx
        self.stream = stream
        self.decoder_name = DECODER_NAMES[choice]
        self._fallback_reason = fallback_reason
        self.info = reader.info
        self.acquire_timeout_s = acquire_timeout_s
        self._layout = Nv12Layout(reader.info.width, reader.info.height)
        self._matrix, self._full_range = color_of(reader.av_stream)
        self._device: DevicePool | None = None
        self._pinned: PinnedPool | None = None
        self._ready: list[Any] = []
        self._closed = False
        try:
            cuda = cuda_driver()
            layout = self._layout
            self._device = DevicePool.pitched(
                ctx, layout.row_bytes, layout.rows, pool_size, kind="frame"
            )
            with ctx.active():
                flags = cuda.event_flags.DISABLE_TIMING
                self._ready = [cuda.Event(flags) for _ in range(pool_size)]
            if not isinstance(reader, NvdecReader):
                pitch = self._device.pitch
                self._pinned = PinnedPool(ctx, (layout.rows, pitch), np.uint8, 2, kind="upload")
            self._configured: dict[int, tuple[tuple[int, ...], tuple[Any, Any]]] = {}
        except EngineError as exc:
            self.close()
            raise SourceError(str(exc)) from exc
        except Exception as exc:
            self.close()
            raise SourceError(f"GPU frame buffers: {cuda_message(exc)}") from exc

    @property
    def fallback_reason(self) -> str | None:
        """Why NVDEC is not the decoder (PyAV decodes, through CUDA or on the CPU)."""
        return self._fallback_reason

    @property
    def decode_errors(self) -> int:
        return self._reader.decode_errors

    @property
    def truncated(self) -> bool:
        return self._reader.truncated

    @property
    def frames_there(self) -> int | None:
        return self._reader.frames_there

    def read(self) -> DeviceNV12Frame | None:
        """The next frame in device memory, or None at the end of the file."""
        self._check_open()
        try:
            with self._ctx.active():
                return self._read()
        except (SourceError, GpuError):
            raise
        except EngineError as exc:  # every frame buffer held (a pool time-out)
            raise SourceError(f"{self.info.uri}: {exc}") from exc
        except Exception as exc:  # pycuda, PyNvVideoCodec
            # the GPU failed, not the file: a GpuError lets a run go on on the CPU
            raise GpuError(f"{self.info.uri}: GPU decoding failed: {one_line(exc)}") from exc

    def _read(self) -> DeviceNV12Frame | None:
        decoded = self._reader.read_decoded()
        if decoded is None:
            return None
        assert self._device is not None
        buf = self._device.acquire(self.stream, self.acquire_timeout_s)
        try:
            if isinstance(decoded.item, NvdecFrame):
                self._copy_nvdec(decoded.item, buf)
            else:
                self._upload(decoded.item, buf)
            ready = self._ready[buf.slot]
            ready.record(self.stream)
        except BaseException:
            self._device.release(buf)
            raise
        return DeviceNV12Frame(
            index=decoded.index,
            pts=decoded.pts,
            layout=self._layout,
            buffer=buf,
            pool=self._device,
            ctx=self._ctx,
            stream=self.stream,
            ready=ready,
            matrix=self._matrix,
            full_range=self._full_range,
            source_id=self.source_id,
        )

    def _copy_nvdec(self, frame: NvdecFrame, buf: DeviceBuffer) -> None:
        # one pair of plane copies per pool slot, configured again only when NVDEC hands
        # out another output buffer for that slot: two calls per frame, not a dozen more
        key = (frame.y_ptr, frame.uv_ptr, frame.y_pitch, frame.uv_pitch, frame.y_rows,
               frame.uv_rows, frame.y_row_bytes, frame.uv_row_bytes, buf.ptr)  # fmt: skip
        kept = self._configured.get(buf.slot)
        if kept is None or kept[0] != key:
            kept = self._configured[buf.slot] = (key, self._plane_copies(frame, buf))
        for copy in kept[1]:
            copy(self.stream)

    def _plane_copies(self, frame: NvdecFrame, buf: DeviceBuffer) -> tuple[Any, Any]:
        cuda = cuda_driver()
        copies = (cuda.Memcpy2D(), cuda.Memcpy2D())
        layout = self._layout
        planes = (
            (frame.y_ptr, frame.y_pitch, frame.y_rows, frame.y_row_bytes, 0, layout.height),
            (
                frame.uv_ptr,
                frame.uv_pitch,
                frame.uv_rows,
                frame.uv_row_bytes,
                layout.height,
                layout.chroma_rows,
            ),
        )
        for copy, (src, src_pitch, src_rows, src_bytes, row0, rows) in zip(
            copies, planes, strict=True
        ):
            copy.set_src_device(src)
            copy.src_pitch = src_pitch
            copy.set_dst_device(buf.ptr + buf.pitch * row0)
            copy.dst_pitch = buf.pitch
            copy.width_in_bytes = min(src_bytes, layout.row_bytes)
            copy.height = min(src_rows, rows)
        return copies

    def _upload(self, frame: VideoFrame, buf: DeviceBuffer) -> None:
        assert self._pinned is not None
        cuda = cuda_driver()
        pinned = self._pinned.acquire()  # waits until its previous upload has finished
        try:
            pack_nv12(frame, pinned.array, self._layout)
            cuda.memcpy_htod_async(buf.ptr, pinned.array, self.stream)
        finally:
            self._pinned.release(pinned, self.stream)

    def seek(self, index: int) -> None:
        """Make the next read return frame ``index``; SourceError if not possible."""
        self._check_open()
        try:
            with self._ctx.active():
                self._reader.seek(index)
        except SourceError:
            raise
        except Exception as exc:
            raise SourceError(f"seeking in {self.info.uri} failed: {one_line(exc)}") from exc

    def close(self) -> None:
        """Release decoder, buffers and file; frames not yet released become invalid."""
        if self._closed:
            return
        self._closed = True
        with self._ctx.active():
            try:
                self._reader.close()
                self.stream.synchronize()
            finally:
                for pool in (self._pinned, self._device):
                    if pool is not None:
                        pool.close()
                self._ready = []

    def __iter__(self) -> Iterator[DeviceNV12Frame]:
        while (frame := self.read()) is not None:
            yield frame

    def __repr__(self) -> str:
        return f"<GpuVideoSource {self.info.uri!r} {self.decoder_name}>"

    def _check_open(self) -> None:
        if self._closed:
            raise SourceError(f"{self.info.uri} is closed")


def open_gpu_source(
    path: str | os.PathLike[str],
    ctx: GpuContext,
    stream: Any,
    *,
    prefer: DecoderChoice = "auto",
    pool_size: int = 4,
    acquire_timeout_s: float | None = 10.0,
) -> GpuVideoSource:
    """A video file decoded into device NV12 frames in ``ctx``, written on ``stream``.

    ``prefer`` is the fastest decoder to try ("auto" = "pynvvideocodec"); slower ones
    follow when it cannot handle the file. ``pool_size``: frames that may be held at once.
    Raises SourceError (one line) when the file cannot be read at all.
    """
    if prefer not in CHOICES:
        raise SourceError(f"unknown decoder {prefer!r} (known: {', '.join(CHOICES)})")
    if pool_size < 1:
        raise SourceError("pool_size must be at least 1")
    order: list[DecoderChoice] = ["pynvvideocodec", "pyav-hwaccel", "pyav-cpu"]
    start = 0 if prefer == "auto" else order.index(prefer)
    reasons = [f"{DECODER_NAMES[c]}: not tried ({prefer} requested)" for c in order[:start]]
    for choice in order[start:]:
        try:
            reader = open_reader(choice, path, ctx, stream)
        except (SourceError, EngineError) as exc:
            if choice == "pyav-cpu":
                if isinstance(exc, SourceError):
                    raise
                raise SourceError(str(exc)) from exc
            reasons.append(f"{DECODER_NAMES[choice]}: {one_line(exc)}")
            continue
        except Exception as exc:  # a GPU library failing in its own way
            if choice == "pyav-cpu":
                raise SourceError(f"{os.fspath(path)}: {one_line(exc)}") from exc
            reasons.append(f"{DECODER_NAMES[choice]}: {one_line(exc)}")
            continue
        fallback = "; ".join(reasons) or None
        if fallback:
            log.info("%s: decoding with %s (%s)", os.fspath(path), DECODER_NAMES[choice], fallback)
        source = GpuVideoSource(
            reader,
            choice,
            ctx,
            stream,
            fallback_reason=fallback,
            pool_size=pool_size,
            acquire_timeout_s=acquire_timeout_s,
        )
        return source
    raise AssertionError("unreachable: the CPU decoder either opens or raises")
