"""Annotated-video export with PyAV: H.264 (NVENC, else x264, else MPEG-4 Part 2).

Timestamps: the first frame written is at t=0 in the export and every later frame
keeps its distance from it (``pts_s - first_pts_s``), so a range that starts at
source frame 500 starts at 0 and keeps the source's frame timing, variable rate
included. Audio of ``[audio_start_s, audio_end_s)`` is shifted by the same amount;
when the first frame is not at ``audio_start_s`` (the caller estimated it from a
frame rate the file does not keep), the audio starts at the first frame and ends with
the last one instead, so sound and picture stay together.

Odd frame sizes: yuv420p needs even sizes, and padding would change the size, so an
odd-sized export is encoded as H.264 4:4:4 (yuv444p) at exactly the input size. Every
FFmpeg-based player (mpv, VLC, ffplay) plays it; some hardware decoders do not. The
MPEG-4 fallback handles odd sizes in yuv420p itself.
"""

from __future__ import annotations

import contextlib
import math
import weakref
from collections.abc import Iterator, Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np
from framelens.core import __version__
from framelens.core.errors import ExportError
from framelens.core.stages.sinks.atomic import AtomicFile, AtomicWriter, StrPath, error_text
from framelens.core.types import Image

CONTAINERS = {".mp4": "mp4", ".m4v": "mp4", ".mov": "mov", ".mkv": "matroska", ".avi": "avi"}
"""Extension -> FFmpeg muxer."""

AUTO_ENCODERS = ("h264_nvenc", "libx264", "mpeg4")
"""Tried in order by ``encoder="auto"``; the first that really opens is used."""

_NVENC_PRESET = {  # x264 preset names -> NVENC p1 (fastest) .. p7 (best)
    "ultrafast": "p1",
    "superfast": "p1",
    "veryfast": "p2",
    "faster": "p3",
    "fast": "p4",
    "medium": "p4",
    "slow": "p5",
    "slower": "p6",
    "veryslow": "p7",
}

_FINE_TIME_BASE = Fraction(1, 90000)
_AUDIO_LEAD_S = 0.5  # mux audio this far ahead of the video so the muxer can interleave


def provenance_metadata(meta: Mapping[str, object]) -> dict[str, str]:
    """Container tags describing how an export was made.

    ``comment`` carries a compact one-line summary (kept by every container);
    ``framelens_<key>`` tags carry the individual values (kept by mkv, and by
    mp4/mov because the exporter writes them as mdta tags).
    """

    def get(key: str, default: str = "?") -> str:
        value = meta.get(key)
        return default if value is None or value == "" else str(value)

    sha = get("model_sha256", "")
    model = get("model") + (f" (sha256 {sha[:12]})" if sha else "")
    backend = get("backend") + (f"/{meta['device']}" if meta.get("device") else "")
    task = get("task_summary", "") or f"conf {get('conf')}; iou {get('iou')}"
    comment = (
        f"FrameLens {get('app_version', __version__)}; model {model}; "
        f"precision {get('precision')}; backend {backend}; {task}"
    )
    tags = {"comment": comment, "title": f"FrameLens: {Path(get('source', '')).name}"}
    for key, value in meta.items():
        if value is not None and value != "":
            tags[f"framelens_{key}"] = str(value)
    return tags


class VideoExporter(AtomicWriter):
    """Encode BGR frames into a video file that appears only when complete.

    Usage::

        with VideoExporter(path, width=w, height=h, fps=fps, metadata=tags) as out:
            for frame in frames:
                out.write(image, frame.pts)
        # closed and renamed here; on an exception the partial file is removed

    Every error is an ExportError with a one-line message. A bad path, an unknown
    extension or an unusable encoder fail in the constructor, before any work.
    """

    def __init__(
        self,
        path: StrPath,
        *,
        width: int,
        height: int,
        fps: float,
        time_base_hint: Fraction | None = None,
        metadata: Mapping[str, str] | None = None,
        audio_source: str | None = None,
        audio_start_s: float = 0.0,
        audio_end_s: float | None = None,
        encoder: str = "auto",
        preset: str = "veryfast",
        crf: int = 23,
        threads: int = 0,
    ) -> None:
        target = Path(path)
        fmt = CONTAINERS.get(target.suffix.lower())
        if fmt is None:
            known = ", ".join(sorted(CONTAINERS))
            raise ExportError(f"cannot write {target}: unknown video extension (use {known})")
        if width <= 0 or height <= 0 or not (fps > 0 and math.isfinite(fps)):
            raise ExportError(f"cannot write {target}: bad size {width}x{height} or fps {fps}")
        self.width, self.height, self.fps = width, height, fps
        self.frames_written = 0
        self.audio_mode = "none"  # "none" | "copy" | "aac"
        self._closed = False
        self._aborted = False
        self._t0: float | None = None
        self._last_pts = -1
        self._last_rel_s = 0.0
        self._audio: _AudioCopier | None = None
        self._out: Any = None

        self._file = AtomicFile(target)  # ExportError here when the path is unwritable
        self.path: Path = self._file.target
        # Collected even if the caller forgets close()/abort(): never leave a partial file.
        self._finalizer = weakref.finalize(self, self._file.discard)
        try:
            self._rate = Fraction(fps).limit_denominator(1001)
            self._choose_encoder(fmt, time_base_hint, encoder, preset, crf)
            audio = (audio_source, audio_start_s, audio_end_s) if audio_source else None
            try:
                self._open(fmt, metadata, threads, audio, force_aac=False)
            except (av.FFmpegError, OSError):
                if self.audio_mode != "copy":
                    raise
                # The container took the codec id but refused the stream when writing
                # its header: start over with the audio re-encoded to AAC.
                self._close_output()
                self._open(fmt, metadata, threads, audio, force_aac=True)
        except ExportError:
            self.abort()
            raise
        except (av.FFmpegError, OSError) as exc:
            self.abort()
            raise ExportError(f"cannot write {self.path}: {error_text(exc)}") from None

    # -- setup -------------------------------------------------------------------------

    def _choose_encoder(
        self, fmt: str, time_base_hint: Fraction | None, encoder: str, preset: str, crf: int
    ) -> None:
        odd = self.width % 2 == 1 or self.height % 2 == 1
        if fmt == "avi":
            # AVI has no timestamps, only a frame rate: the muxer fills every gap of one
            # time-base tick with an empty chunk, so there the tick must be one frame.
            time_base = 1 / self._rate
        elif fmt == "matroska":
            # Matroska stores milliseconds whatever we ask for; rounding here keeps the
            # "strictly increasing" rule in write() true in the file too.
            time_base = Fraction(1, 1000)
        else:
            time_base = time_base_hint or _FINE_TIME_BASE
        names = AUTO_ENCODERS if encoder == "auto" else (encoder,)
        errors: list[str] = []
        for name in names:
            pix_fmt = "yuv444p" if odd and name != "mpeg4" else "yuv420p"
            tb = time_base
            if name == "mpeg4" and tb.denominator > 65535:
                tb = Fraction(1, 60000)  # MPEG-4 Part 2 allows 16-bit time bases only
            options = _encoder_options(name, preset, crf, self.width, self.height, self.fps)
            if fmt == "avi":
                # AVI stores no presentation times, so reordered (B) frames come back
                # with wrong timestamps: encode in display order.
                options["bf"] = "0"
            try:
                self._probe(name, pix_fmt, tb, options)
            except av.codec.codec.UnknownCodecError:
                errors.append(f"{name}: not in this FFmpeg build")
            except (av.FFmpegError, OSError, ValueError) as exc:
                errors.append(f"{name}: {error_text(exc)}")
            else:
                self.encoder_name, self.pix_fmt, self.time_base = name, pix_fmt, tb
                self._options = options
                break
        else:
            raise ExportError(f"cannot write {self.path}: no usable encoder ({'; '.join(errors)})")
        # yuv420p at an even size: OpenCV's BGR->I420 is ~6x faster than swscale here
        # and uses the same BT.601 limited-range matrix.
        self._i420 = self.pix_fmt == "yuv420p" and not odd
        self._i420_buf = np.empty((self.height * 3 // 2, self.width), np.uint8)

    def _probe(self, name: str, pix_fmt: str, tb: Fraction, options: dict[str, str]) -> None:
        """Open the encoder on its own: a stream cannot be removed from a container once
        added, and NVENC may be listed yet fail to open (no GPU, no driver, no session)."""
        ctx: Any = av.CodecContext.create(name, "w")
        if ctx.type != "video":
            raise ValueError("not a video encoder")
        _configure(ctx, self.width, self.height, pix_fmt, tb)
        ctx.framerate = self._rate
        ctx.options = options
        ctx.open()  # freed when collected; PyAV has no explicit close

    def _open(
        self,
        fmt: str,
        metadata: Mapping[str, str] | None,
        threads: int,
        audio: tuple[str, float, float | None] | None,
        *,
        force_aac: bool,
    ) -> None:
        """Create the container and its streams and write the header now, so that every
        problem shows up in the constructor rather than at the first frame."""
        container_opts = {}
        if fmt in ("mp4", "mov"):
            # use_metadata_tags: keep arbitrary framelens_* tags (else only title/comment
            # survive); faststart: index up front so the file plays while downloading.
            container_opts["movflags"] = "+faststart+use_metadata_tags"
        self._out = av.open(str(self._file.tmp), "w", format=fmt, options=container_opts)
        self._out.metadata.update(dict(metadata or {}))
        stream: Any = self._out.add_stream(
            self.encoder_name, rate=self._rate, options=self._options
        )
        _configure(stream.codec_context, self.width, self.height, self.pix_fmt, self.time_base)
        stream.time_base = self.time_base
        stream.thread_type = "AUTO"
        stream.codec_context.thread_count = threads
        self._stream = stream
        if audio is not None:
            self._open_audio(*audio, force_aac=force_aac)
        self._out.start_encoding()

    def _open_audio(
        self, source: str, start_s: float, end_s: float | None, *, force_aac: bool
    ) -> None:
        try:
            src: Any = av.open(source)
        except (av.FFmpegError, OSError) as exc:
            raise ExportError(f"cannot read audio from {source}: {error_text(exc)}") from None
        if not src.streams.audio:
            src.close()
            return
        self._audio = _AudioCopier(src, self._out, start_s, end_s, force_aac=force_aac)
        self.audio_mode = self._audio.mode

    def _close_output(self) -> None:
        if self._audio is not None:
            self._audio.close()
            self._audio = None
        out, self._out = self._out, None
        if out is not None:
            with contextlib.suppress(Exception):  # the file is being thrown away anyway
                out.close()

    # -- writing ---------------------------------------------------------------------

    def write(self, image: Image, pts_s: float, index: int | None = None) -> None:
        """Encode one BGR frame shown at ``pts_s`` seconds (source time); ``index`` (its
        place in the source) is for folders of frames, not needed here."""
        if self._closed:
            raise ExportError(f"cannot write {self.path}: exporter is closed")
        if image.shape != (self.height, self.width, 3) or image.dtype != np.uint8:
            raise ExportError(
                f"cannot write {self.path}: frame {image.shape} {image.dtype} does not match "
                f"{self.width}x{self.height} BGR uint8"
            )
        if self._t0 is None:
            self._t0 = pts_s
            if self._audio is not None:
                self._audio.align(pts_s, 0.5 / self.fps)
        rel = pts_s - self._t0
        # Strictly increasing pts, even if the source repeats or reorders a timestamp.
        pts = max(round(rel / self.time_base), self._last_pts + 1)
        self._last_pts = pts
        self._last_rel_s = float(pts * self.time_base)
        try:
            if self._i420:
                cv2.cvtColor(image, cv2.COLOR_BGR2YUV_I420, dst=self._i420_buf)
                frame = av.VideoFrame.from_ndarray(self._i420_buf, format="yuv420p")
            else:  # the encoder converts to its pixel format with swscale
                frame = av.VideoFrame.from_ndarray(image, format="bgr24")
            frame.pts = pts
            frame.time_base = self.time_base
            self._out.mux(self._stream.encode(frame))
            self.frames_written += 1
            if self._audio is not None:
                self._audio.pump(self._last_rel_s)
        except (av.FFmpegError, OSError) as exc:
            self.abort()
            raise ExportError(f"cannot write {self.path}: {error_text(exc)}") from None

    def close(self) -> Path:
        """Flush the encoder, finish the container and move it onto the target path."""
        if self._closed:
            if not self._aborted:
                return self.path
            raise ExportError(f"cannot write {self.path}: exporter was aborted")
        if self.frames_written == 0:
            self.abort()
            raise ExportError(f"cannot write {self.path}: no frames were written")
        try:
            self._out.mux(self._stream.encode(None))
            if self._audio is not None:
                self._audio.finish(self._last_rel_s + 1.0 / self.fps)
            self._out.close()
        except (av.FFmpegError, OSError) as exc:
            self.abort()
            raise ExportError(f"cannot write {self.path}: {error_text(exc)}") from None
        self._closed = True
        self._finalizer.detach()
        self._file.commit()
        return self.path

    def abort(self) -> None:
        """Stop and remove the partial file. Safe to call at any time, repeatedly."""
        self._closed = True
        self._aborted = True
        self._close_output()
        self._finalizer.detach()
        self._file.discard()


class _AudioCopier:
    """Moves the audio of ``[start_s, end_s)`` of a source into the export, shifted to 0.

    Packets are copied unchanged when the container accepts the codec, else decoded
    and re-encoded to AAC. ``pump`` is called after every video frame so audio and
    video stay interleaved in the file.
    """

    def __init__(
        self, src: Any, out: Any, start_s: float, end_s: float | None, *, force_aac: bool
    ) -> None:
        self._src = src
        self._in: Any = src.streams.audio[0]
        self._tb: Fraction = self._in.time_base
        self._start_s = max(0.0, start_s)
        self._end_s = end_s
        self._start_pts = round(self._start_s / self._tb)
        name = self._in.codec_context.name
        self.mode = "copy" if name in out.supported_codecs and not force_aac else "aac"
        self._out = out
        if self.mode == "copy":
            self._ost: Any = out.add_stream_from_template(self._in)
        else:
            rate = self._in.codec_context.sample_rate or 48000
            self._ost = out.add_stream("aac", rate=rate)
            self._ost.layout = self._in.codec_context.layout
            self._ost.time_base = Fraction(1, rate)
        if self._start_s > 0:
            src.seek(self._start_pts, stream=self._in)  # to the packet at or before start
        self._packets: Iterator[Any] = src.demux(self._in)
        self._pending: Any = None
        self._done = False

    def align(self, first_frame_s: float, tolerance_s: float) -> None:
        """Start at the first video frame's time when the range was given elsewhere
        (further than ``tolerance_s``), and end with the video: the video starts there."""
        if abs(first_frame_s - self._start_s) <= tolerance_s:
            return
        self._start_s = max(0.0, first_frame_s)
        self._start_pts = round(self._start_s / self._tb)
        self._end_s = None
        self._src.seek(self._start_pts, stream=self._in)
        self._packets = self._src.demux(self._in)
        self._pending = None

    def pump(self, video_rel_s: float, hard_end_s: float | None = None) -> None:
        """Mux source audio up to the video's time ``video_rel_s`` (export seconds).

        With a known end, run a little ahead so the muxer always holds both streams;
        without one, the video's end is unknown, so never pass the last frame.
        """
        end = self._end_s if self._end_s is not None else hard_end_s
        until_rel_s = video_rel_s + (_AUDIO_LEAD_S if end is not None else 0.0)
        while not self._done:
            pkt = self._pending if self._pending is not None else next(self._packets, None)
            self._pending = None
            if pkt is None:
                self._done = True
                break
            if pkt.pts is None or pkt.size == 0:
                continue
            t = float(pkt.pts * self._tb)
            if t < self._start_s - 1e-6:
                continue  # seek lands before the start
            if end is not None and t >= end:
                self._done = True
                break
            if t - self._start_s > until_rel_s:
                self._pending = pkt
                break
            self._emit(pkt)

    def _emit(self, pkt: Any) -> None:
        if self.mode == "copy":
            pkt.pts -= self._start_pts
            if pkt.dts is not None:
                pkt.dts = max(0, pkt.dts - self._start_pts)
            pkt.stream = self._ost
            self._out.mux(pkt)
            return
        rate = self._ost.codec_context.sample_rate
        for frame in self._in.codec_context.decode(pkt):
            frame.pts = round((float(frame.pts * frame.time_base) - self._start_s) * rate)
            frame.time_base = Fraction(1, rate)
            self._out.mux(self._ost.encode(frame))

    def finish(self, video_end_rel_s: float) -> None:
        """Mux the rest: up to ``audio_end_s``, or to the end of the video when None."""
        hard_end = self._start_s + video_end_rel_s
        self.pump(math.inf, hard_end_s=hard_end)
        if self.mode == "aac":
            self._out.mux(self._ost.encode(None))
        self.close()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._src.close()


def _configure(ctx: Any, width: int, height: int, pix_fmt: str, tb: Fraction) -> None:
    ctx.width, ctx.height, ctx.pix_fmt, ctx.time_base = width, height, pix_fmt, tb
    # Tag what the frames really are (BT.601, limited range) so players do not guess
    # BT.709 for HD sizes and shift the colours.
    ctx.colorspace = 5  # AVCOL_SPC_BT470BG (the BT.601 matrix)
    ctx.color_range = 1  # AVCOL_RANGE_MPEG


def _encoder_options(
    name: str, preset: str, crf: int, width: int, height: int, fps: float
) -> dict[str, str]:
    if name == "libx264":
        return {"preset": preset, "crf": str(crf)}
    if name == "h264_nvenc":
        return {"preset": _NVENC_PRESET.get(preset, "p4"), "rc": "vbr", "cq": str(crf)}
    if name == "mpeg4":
        # No CRF: a bitrate of ~0.2 bit per pixel looks about like x264 at crf 23.
        return {"b": str(int(width * height * fps * 0.2))}
    return {}
