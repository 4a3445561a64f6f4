"""The file readers behind ``GpuVideoSource``, one per decoder, all numbering frames like
``FileSource`` (PyAV demuxes for each of them):

* ``NvdecReader``: PyNvVideoCodec decodes into device memory (MP4 H.264/HEVC rewritten
  into Annex B first); a frame stays valid only until the next ``Decode`` call.
* the PyAV reader: FFmpeg decodes on the CPU, or on NVDEC through ``hwaccel``; frames
  come to the host.

``open_reader`` opens one and probes it: its first frame decoded (and kept for read).
A GPU decoder that fails before its first frame is ruled out early, so that
``open_gpu_source`` can fall back to the next one.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, cast

import av
import numpy as np
from av.bitstream import BitStreamFilterContext
from av.codec.hwaccel import HWAccel
from av.video.stream import VideoStream
from framelens.core.errors import SourceError
from framelens.core.gpu.context import GpuContext
from framelens.core.stages.sources.file import FileReader, PyAVFileReader
from framelens.core.stages.sources.nv12 import PLANAR_420

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
_NVDEC_PIX_FMTS = PLANAR_420  # 8-bit 4:2:0: NVDEC's NV12 output
_NO_PTS = -(1 << 62)  # packet without a timestamp; NVDEC needs some integer
_PROBE_ERRORS = 8  # decode errors before the first frame that rule a decoder out


def one_line(exc: BaseException) -> str:
    """The first line of an exception's text (PyNvVideoCodec appends pages of advice)."""
    for line in str(exc).splitlines():
        if line.strip():
            return " ".join(line.split())
    return type(exc).__name__


@dataclass(frozen=True, slots=True)
class NvdecFrame:
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
        raise SourceError(f"PyNvVideoCodec is not usable ({one_line(exc)})") from exc
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


class NvdecReader(_ProbedReader, FileReader[NvdecFrame]):
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
            raise SourceError(f"NVDEC decoder could not be created ({one_line(exc)})") from exc

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

    def _decode_packet(self, packet: av.Packet[VideoStream] | None) -> Iterator[NvdecFrame]:
        if packet is None or packet.size == 0:  # end of stream: drain filter and decoder
            if self._bsf is not None:
                for filtered in self._bsf.filter(None):
                    yield from self._nvdec(filtered)
                self._bsf.flush()
            yield from self._nvdec(None)
            return
        for filtered in self._bsf.filter(packet) if self._bsf is not None else [packet]:
            yield from self._nvdec(filtered)

    def _nvdec(self, packet: av.Packet[VideoStream] | None) -> Iterator[NvdecFrame]:
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
            self._decode_failed(one_line(exc))
            return
        del data
        for frame in frames:
            yield self._nvdec_frame(frame)

    def _nvdec_frame(self, frame: Any) -> NvdecFrame:
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
        return NvdecFrame(
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


def _make_reader(
    choice: DecoderChoice, path: str | os.PathLike[str], ctx: GpuContext, stream: Any
) -> FileReader[Any]:
    if choice == "pynvvideocodec":
        return NvdecReader(path, ctx, stream)
    return _PyAVReader(path, ctx if choice == "pyav-hwaccel" else None)


def open_reader(
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
