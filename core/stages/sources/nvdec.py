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
(one line, None when the first choice worked).

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
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Self, cast

import av
import cv2
import numpy as np
import numpy.typing as npt
from av.bitstream import BitStreamFilterContext
from av.codec.hwaccel import HWAccel
from av.video.frame import VideoFrame
from av.video.stream import VideoStream
from framelens.core.closing import Closing
from framelens.core.errors import EngineError, GpuError, SourceError
from framelens.core.gpu.buffers import (
    DeviceBuffer,
    DevicePool,
    PinnedPool,
    cuda_driver,
    cuda_message,
)
from framelens.core.gpu.context import GpuContext
from framelens.core.stages.sources.file import FileReader, PyAVFileReader
from framelens.core.types import Image, SourceInfo

log = logging.getLogger(__name__)

DecoderChoice = Literal["auto", "pynvvideocodec", "pyav-hwaccel", "pyav-cpu"]
CHOICES: tuple[DecoderChoice, ...] = ("auto", "pynvvideocodec", "pyav-hwaccel", "pyav-cpu")
DECODER_NAMES = {
    "pynvvideocodec": "nvdec (PyNvVideoCodec)",
    "pyav-hwaccel": "nvdec (PyAV hwaccel)",
    "pyav-cpu": "cpu (PyAV)",
}

# PyAV codec name -> PyNvVideoCodec.cudaVideoCodec member.
_NVDEC_CODECS = {
    "h264": "H264",
    "hevc": "HEVC",
    "av1": "AV1",
    "vp9": "VP9",
    "vp8": "VP8",
    "mpeg2video": "MPEG2",
    "mpeg1video": "MPEG1",
    "vc1": "VC1",
}
# MP4/MKV store H.264/HEVC length-prefixed (extradata starts with version byte 1);
# NVDEC's parser wants Annex B start codes with the parameter sets in band.
_ANNEXB_FILTERS = {"h264": "h264_mp4toannexb", "hevc": "hevc_mp4toannexb"}
_NVDEC_PIX_FMTS = ("yuv420p", "yuvj420p")  # 8-bit 4:2:0: NVDEC's NV12 output
_NO_PTS = -(1 << 62)  # packet without a timestamp; NVDEC needs some integer
_PROBE_ERRORS = 8  # decode errors before the first frame that rule a decoder out


def _one_line(exc: BaseException) -> str:
    """The first line of an exception's text (PyNvVideoCodec appends pages of advice)."""
    for line in str(exc).splitlines():
        if line.strip():
            return " ".join(line.split())
    return type(exc).__name__


# --- NV12 on the host ------------------------------------------------------------------


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
    elif fmt in _NVDEC_PIX_FMTS:
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


def _color_of(stream: VideoStream) -> tuple[str, bool]:
    """(matrix, full_range) of a stream, from FFmpeg's AVColorSpace / AVColorRange codes."""
    cc = stream.codec_context
    space = int(getattr(cc, "colorspace", 2) or 2)
    matrix = "bt709" if space == 1 else "bt2020" if space in (9, 10) else "bt601"
    full = int(getattr(cc, "color_range", 0) or 0) == 2 or str(cc.pix_fmt).startswith("yuvj")
    return matrix, full


# --- the frame ---------------------------------------------------------------------------


class DeviceNV12Frame:
    """One decoded frame in device memory, NV12, in a pooled buffer of its source.

    ``index``/``pts`` (seconds) are those ``FileSource`` gives the same frame. Luma is
    ``height`` rows of ``width`` bytes at ``y_ptr`` (``y_pitch`` bytes apart); chroma is
    ceil(height/2) rows of interleaved U,V pairs at ``uv_ptr`` (``uv_pitch`` apart).
    ``matrix`` ("bt601", "bt709", "bt2020") and ``full_range`` say how to turn it into RGB.
    The data is written on ``stream``; ``ready`` is an event recorded after the write.
    """

    __slots__ = (
        "_buffer",
        "_ctx",
        "_pool",
        "full_range",
        "height",
        "index",
        "matrix",
        "pts",
        "ready",
        "stream",
        "uv_pitch",
        "uv_ptr",
        "width",
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
    ) -> None:
        self.index = index
        self.pts = pts
        self.width = layout.width
        self.height = layout.height
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
        return Nv12Layout(self.width, self.height)

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


# --- readers: one per decoder, all numbering frames like FileSource ----------------------


@dataclass(frozen=True, slots=True)
class _NvdecFrame:
    """A frame in one of PyNvVideoCodec's output buffers (valid until the next Decode)."""

    pts: int | None
    y_ptr: int
    y_pitch: int
    y_rows: int
    y_row_bytes: int
    uv_ptr: int
    uv_pitch: int
    uv_rows: int
    uv_row_bytes: int


def _cai_plane(view: Any) -> tuple[int, int, int, int]:
    """(ptr, pitch, rows, row bytes) of a __cuda_array_interface__ plane view."""
    cai = view.__cuda_array_interface__
    shape = [int(s) for s in cai["shape"]]
    itemsize = int(str(cai.get("typestr", "|u1"))[2:] or 1)
    row_bytes = itemsize
    for extent in shape[1:]:
        row_bytes *= extent
    strides = cai.get("strides")
    pitch = int(strides[0]) if strides else row_bytes
    return int(cai["data"][0]), pitch, shape[0], row_bytes


def _import_pynvvideocodec() -> Any:
    try:
        import PyNvVideoCodec as nvc
    except Exception as exc:  # ImportError, or RuntimeError from its driver check
        raise SourceError(f"PyNvVideoCodec is not usable ({_one_line(exc)})") from exc
    return nvc


class _ProbedReader:
    """Rules a GPU decoder out early: errors before any frame mean it cannot do this file
    (the CPU decoder, the last resort, keeps FileSource's rule: fail only if none decodes)."""

    decode_errors: int
    _delivered: int
    _label: str

    def _give_up_early(self, error: str) -> None:
        if self._label == DECODER_NAMES["pyav-cpu"]:
            return
        if self._delivered == 0 and self.decode_errors >= _PROBE_ERRORS:
            raise SourceError(f"{self._label} cannot decode this file ({error})")


class _NvdecReader(_ProbedReader, FileReader[_NvdecFrame]):
    """PyAV demuxing, PyNvVideoCodec decoding into device memory."""

    _label = DECODER_NAMES["pynvvideocodec"]

    def __init__(self, path: str | os.PathLike[str], ctx: GpuContext, stream: Any) -> None:
        super().__init__(path)
        self._gpu = ctx
        self._cuda_stream = stream
        self._decoder: Any = None
        self._bsf: BitStreamFilterContext | None = None
        try:
            cc = self._stream.codec_context
            codec = cc.name
            if codec not in _NVDEC_CODECS:
                raise SourceError(f"codec {codec} is not one NVDEC decodes here")
            if cc.pix_fmt not in _NVDEC_PIX_FMTS:
                raise SourceError(f"{cc.pix_fmt} video: this path handles 8-bit 4:2:0 only")
            self._nvc = _import_pynvvideocodec()
            self._codec_id = getattr(self._nvc.cudaVideoCodec, _NVDEC_CODECS[codec])
            self._pixel_nv12 = self._nvc.Pixel_Format.NV12
            self._repositioned()
        except Exception:
            self.close()
            raise

    def _create_decoder(self) -> Any:
        ctx, nvc = self._gpu, self._nvc
        kwargs: dict[str, Any] = {
            "gpuid": ctx.index,
            "codec": self._codec_id,
            "cudacontext": ctx.handle,
            "usedevicememory": True,
        }
        try:
            # Decoding on our stream orders its output copy before our copy out of it.
            return nvc.CreateDecoder(cudastream=int(self._cuda_stream.handle), **kwargs)
        except Exception as exc:
            log.debug("CreateDecoder on our stream failed (%s); using the NULL stream", exc)
        try:
            # The legacy NULL stream synchronises with our (blocking) stream: still ordered.
            return nvc.CreateDecoder(cudastream=0, **kwargs)
        except Exception as exc:
            raise SourceError(f"NVDEC decoder could not be created ({_one_line(exc)})") from exc

    def _repositioned(self) -> None:
        self._drop_decoder()
        self._decoder = self._create_decoder()
        cc = self._stream.codec_context
        name = _ANNEXB_FILTERS.get(cc.name)
        extradata = cc.extradata or b""
        self._bsf = None
        if name is not None and extradata[:1] == b"\x01":
            self._bsf = BitStreamFilterContext(name, self._stream)

    def _drop_decoder(self) -> None:
        if self._decoder is not None:
            # Its output buffers may still be read by our copies: let them finish first.
            self._cuda_stream.synchronize()
            self._decoder = None

    def close(self) -> None:
        super().close()
        self._drop_decoder()

    def _decode_packet(self, packet: av.Packet[VideoStream] | None) -> Iterator[_NvdecFrame]:
        if packet is None or packet.size == 0:  # end of stream: drain filter and decoder
            if self._bsf is not None:
                for filtered in self._bsf.filter(None):
                    yield from self._nvdec(filtered)
                self._bsf.flush()
            yield from self._nvdec(None)
            return
        for filtered in self._bsf.filter(packet) if self._bsf is not None else [packet]:
            yield from self._nvdec(filtered)

    def _nvdec(self, packet: av.Packet[VideoStream] | None) -> Iterator[_NvdecFrame]:
        """Decode one Annex B packet (None: end of stream) and hand out its frames."""
        data = None
        packet_data = self._nvc.PacketData()  # zero size = end of stream
        if packet is not None:
            data = np.frombuffer(cast(Any, packet), dtype=np.uint8)  # kept alive below
            packet_data.bsl_data = int(data.ctypes.data)
            packet_data.bsl = int(data.size)
            packet_data.pts = _NO_PTS if packet.pts is None else int(packet.pts)
        try:
            with self._gpu.active():
                frames = self._decoder.Decode(packet_data)
        except Exception as exc:
            self._decode_failed(_one_line(exc))
            return
        del data
        for frame in frames:
            yield self._nvdec_frame(frame)

    def _nvdec_frame(self, frame: Any) -> _NvdecFrame:
        if frame.format != self._pixel_nv12:
            raise SourceError(f"NVDEC returned {frame.format} frames, not NV12")
        views = frame.cuda()
        y_ptr, y_pitch, y_rows, y_row_bytes = _cai_plane(views[0])
        uv_ptr, uv_pitch, uv_rows, uv_row_bytes = _cai_plane(views[1])
        width, height = self.info.width, self.info.height
        if y_rows < height or y_row_bytes < width:
            raise SourceError(
                f"NVDEC frames are {y_row_bytes}x{y_rows}, the container says {width}x{height}"
            )
        pts = int(frame.getPTS())
        return _NvdecFrame(
            None if pts == _NO_PTS else pts,
            y_ptr,
            y_pitch,
            y_rows,
            y_row_bytes,
            uv_ptr,
            uv_pitch,
            uv_rows,
            uv_row_bytes,
        )

    def _decode_failed(self, error: str) -> None:
        super()._decode_failed(error)
        self._give_up_early(error)


class _PyAVReader(_ProbedReader, PyAVFileReader):
    """PyAV decoding on the CPU, or on NVDEC through ``hwaccel`` (frames come to the host)."""

    def __init__(self, path: str | os.PathLike[str], ctx: GpuContext | None) -> None:
        if ctx is None:
            self._label = DECODER_NAMES["pyav-cpu"]
            super().__init__(path)
            return
        self._label = DECODER_NAMES["pyav-hwaccel"]
        # Seen on the H200 (PyAV 19): with device= and allow_software_fallback=False the
        # open fails ("Operation not supported"); a plain cuda HWAccel works, also with
        # primary_ctx. So try the strict form first and the plain ones after it.
        attempts = (
            HWAccel(
                device_type="cuda",
                device=str(ctx.index),
                allow_software_fallback=False,
                options={"primary_ctx": "1"},  # share our context instead of making another
            ),
            HWAccel(device_type="cuda", device=str(ctx.index), options={"primary_ctx": "1"}),
            HWAccel(device_type="cuda", options={"primary_ctx": "1"}),
            HWAccel(device_type="cuda"),
        )
        for i, hwaccel in enumerate(attempts):
            try:
                super().__init__(path, hwaccel=hwaccel)
                break
            except SourceError:
                if i == len(attempts) - 1:
                    raise
        if not self._stream.codec_context.is_hwaccel:
            self.close()
            raise SourceError("FFmpeg opened no NVDEC decoder for this stream")

    def _decode_failed(self, error: str) -> None:
        super()._decode_failed(error)
        self._give_up_early(error)


# --- the source --------------------------------------------------------------------------


class GpuVideoSource(Closing):
    """A video file read into pooled device NV12 buffers; see the module docstring.

    Use from one thread at a time (like every Source); each call makes ``ctx`` current.
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
        self.fallback_reason = fallback_reason
        self.info: SourceInfo = reader.info
        self.acquire_timeout_s = acquire_timeout_s
        self._layout = Nv12Layout(reader.info.width, reader.info.height)
        self._matrix, self._full_range = _color_of(reader.av_stream)
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
            if not isinstance(reader, _NvdecReader):
                pitch = self._device.pitch
                self._pinned = PinnedPool(ctx, (layout.rows, pitch), np.uint8, 2, kind="upload")
            self._copies = [cuda.Memcpy2D(), cuda.Memcpy2D()]
        except EngineError as exc:
            self.close()
            raise SourceError(str(exc)) from exc
        except Exception as exc:
            self.close()
            raise SourceError(f"GPU frame buffers: {cuda_message(exc)}") from exc

    @property
    def decode_errors(self) -> int:
        return self._reader.decode_errors

    @property
    def truncated(self) -> bool:
        return self._reader.truncated

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
            raise GpuError(f"{self.info.uri}: GPU decoding failed: {_one_line(exc)}") from exc

    def _read(self) -> DeviceNV12Frame | None:
        decoded = self._reader.read_decoded()
        if decoded is None:
            return None
        assert self._device is not None
        buf = self._device.acquire(self.stream, self.acquire_timeout_s)
        try:
            if isinstance(decoded.item, _NvdecFrame):
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
        )

    def _copy_nvdec(self, frame: _NvdecFrame, buf: DeviceBuffer) -> None:
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
            self._copies, planes, strict=True
        ):
            copy.set_src_device(src)
            copy.src_pitch = src_pitch
            copy.set_dst_device(buf.ptr + buf.pitch * row0)
            copy.dst_pitch = buf.pitch
            copy.width_in_bytes = min(src_bytes, layout.row_bytes)
            copy.height = min(src_rows, rows)
            copy(self.stream)

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
            raise SourceError(f"seeking in {self.info.uri} failed: {_one_line(exc)}") from exc

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


def _make_reader(
    choice: DecoderChoice, path: str | os.PathLike[str], ctx: GpuContext, stream: Any
) -> FileReader[Any]:
    if choice == "pynvvideocodec":
        return _NvdecReader(path, ctx, stream)
    return _PyAVReader(path, ctx if choice == "pyav-hwaccel" else None)


def _open_reader(
    choice: DecoderChoice, path: str | os.PathLike[str], ctx: GpuContext, stream: Any
) -> FileReader[Any]:
    """The reader for one decoder, probed: its first frame decoded (and kept for read)."""
    with ctx.active():
        reader = _make_reader(choice, path, ctx, stream)
        try:
            first = reader.read_decoded()
        except Exception:
            reader.close()
            raise
        if first is not None:
            reader._unread(first)
        elif reader.decode_errors:
            reader.close()
            raise SourceError("no frame could be decoded")
    return reader


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
            reader = _open_reader(choice, path, ctx, stream)
        except (SourceError, EngineError) as exc:
            if choice == "pyav-cpu":
                if isinstance(exc, SourceError):
                    raise
                raise SourceError(str(exc)) from exc
            reasons.append(f"{DECODER_NAMES[choice]}: {_one_line(exc)}")
            continue
        except Exception as exc:  # a GPU library failing in its own way
            if choice == "pyav-cpu":
                raise SourceError(f"{os.fspath(path)}: {_one_line(exc)}") from exc
            reasons.append(f"{DECODER_NAMES[choice]}: {_one_line(exc)}")
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
