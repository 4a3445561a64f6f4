"""Video files decoded with PyAV (FFmpeg): whatever codec and container FFmpeg reads.

Damage policy, so a long analysis run survives a bad file:

* a file cut short opens (if its index is still there) and ends cleanly where the data
  ends; ``truncated`` tells that this happened;
* a packet the decoder rejects is skipped and counted in ``decode_errors``; a file where
  *no* frame decodes (damaged, or cut before its first frame) fails to open with
  SourceError. ``damage_note()`` sums the damage up in one line for the run to report;
* frames larger than ``MAX_FRAME_PIXELS`` are refused before anything allocates them:
  a header that claims such a size fails at open, and FFmpeg's decoder (``max_pixels``)
  rejects such a frame mid-stream as undecodable;
* a frame whose size differs from the size the file opened with (the picture size
  changed mid-stream) is scaled to that size, so every frame of a source has one size;
  ``resized`` counts them.

Frame k is the k-th frame the file presents (0-based; the GUI shows k + 1), whatever its
timestamps say: variable-rate recordings and GIFs with uneven delays number as FFmpeg
counts them. A frame's time is its own timestamp. The numbering comes from the file's
frame index (``frame_index.FrameIndex``: every frame's timestamp, read from its packets
when the file opens, cached for long files), which also gives the frame count, the real
duration (to the end of the last frame) and the average rate. Seeking to k decodes from
the last keyframe before frame k's timestamp up to it: exact. Frames lost to damage
leave their places empty (the index knows where each one was). Without usable
timestamps (raw elementary streams, streams joined end to end) frames are counted, and
seeking counts from the start.

The numbering, seeking and damage handling live in ``FileReader``, which is generic
over the decoder: ``FileSource`` decodes with PyAV into BGR frames, the GPU layer
(``framelens.core.stages.sources.nvdec``) reuses the same reader with NVDEC decoders, so both
number and time every frame of a file identically.
"""

from __future__ import annotations

import functools
import logging
import os
from abc import ABC, abstractmethod
from collections.abc import Generator, Iterable
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Generic, Protocol, TypeVar

import av
from av.codec.hwaccel import HWAccel
from av.video.frame import VideoFrame
from av.video.stream import VideoStream
from framelens.core.errors import FrameLensError, SourceError
from framelens.core.stages.sources.av_input import (
    AV_ERRORS,
    DECODER_LIMITS,
    check_frame_size,
    decode_packet,
    frame_rate,
    open_container,
    reason,
    video_stream,
)
from framelens.core.stages.sources.base import Source
from framelens.core.stages.sources.display import AS_STORED, Display
from framelens.core.stages.sources.frame_index import FrameIndex, frame_index
from framelens.core.types import Frame, SourceInfo

log = logging.getLogger(__name__)


class Timestamped(Protocol):
    """What a decoder hands the reader: anything with a timestamp in stream time base."""

    @property
    def pts(self) -> int | None: ...


DecodedT = TypeVar("DecodedT", bound=Timestamped)


@dataclass(frozen=True, slots=True)
class Decoded(Generic[DecodedT]):
    """A decoder's frame with the index and time (seconds) the reader gave it."""

    item: DecodedT
    index: int
    pts: float


class FileReader(ABC, Generic[DecodedT]):
    """Frame numbering, seeking and damage handling of a seekable video file.

    Subclasses decode packets (``_decode_packet``); the reader demuxes with PyAV, numbers
    and times what comes out, seeks, and keeps ``decode_errors`` and ``truncated``. Not
    thread-safe: use it from one thread at a time.
    """

    def __init__(self, path: str | os.PathLike[str], *, hwaccel: HWAccel | None = None) -> None:
        uri = os.fspath(path)
        if not Path(uri).exists():
            raise SourceError(f"no such file: {uri}")
        if Path(uri).is_file() and Path(uri).stat().st_size == 0:
            raise SourceError(f"{uri} is not a readable video: the file is empty (0 bytes)")
        self._hwaccel = hwaccel
        self._container = open_container(
            uri, f"{uri} is not a readable video", options=DECODER_LIMITS, hwaccel=hwaccel
        )
        try:
            self._stream = video_stream(self._container, uri)
            check_frame_size(
                uri, self._stream.codec_context.width, self._stream.codec_context.height
            )
        except SourceError:
            self._container.close()
            raise
        stream, ctx = self._stream, self._stream.codec_context
        self._fps = frame_rate(stream)
        self._time_base = stream.time_base or Fraction(1, round(self._fps))
        self._start = stream.start_time or 0
        # Where every frame is (None: the packets carry no timestamps). Else
        # stream.frames comes from the container's index; 0 means it has none.
        self._index = frame_index(uri)
        self._exact_count = self._index is not None or stream.frames > 0
        # the frames the container says it holds (more than are there when cut short)
        self._claimed = stream.frames if stream.frames > 0 else None
        self.info = SourceInfo(
            uri=uri,
            kind="file",
            width=ctx.width,
            height=ctx.height,
            fps=self._fps,
            frame_count=stream.frames if stream.frames > 0 else self._estimate_count(),
            codec=ctx.codec.canonical_name,
            seekable=True,
            has_audio=len(self._container.streams.audio) > 0,
            duration=self._duration(),
        )
        if self._index is not None:
            self._describe_index(self._index)
        self.decode_errors = 0
        self.truncated = False
        self.resized = 0  # frames of another size, scaled to the size the file opened with
        self._closed = False
        self._delivered = 0
        self._next_index = 0
        self._pending: Decoded[DecodedT] | None = None
        self._frames = self._decode()

    @property
    def av_stream(self) -> VideoStream:
        """The PyAV video stream being read (it changes when a seek reopens the file)."""
        return self._stream

    @abstractmethod
    def _decode_packet(self, packet: av.Packet[VideoStream] | None) -> Iterable[DecodedT]:
        """Decode one demuxed packet; None, or an empty packet, drains the decoder.

        Failures are counted with ``_decode_failed`` and yield no frames. The result is
        consumed lazily, frame by frame, before the next packet is decoded.
        """

    def _repositioned(self) -> None:
        """Called after the demuxer moved (seek or rewind): reset decoder state here."""

    def _describe_index(self, index: FrameIndex) -> None:
        """``info`` from the index: the frames there are, their real duration and rate."""
        seconds = (index.end - index.pts[0]) * self._time_base  # a Fraction: 25 fps is 25.0
        fps = float(len(index) / seconds) if seconds > 0 else self._fps
        self._fps = fps if 0 < fps <= 1000 else self._fps
        duration = float((index.end - self._start) * self._time_base)
        self.info = replace(self.info, frame_count=len(index), fps=self._fps, duration=duration)

    def _duration(self) -> float | None:
        stream = self._stream
        if stream.duration and stream.time_base:
            return float(stream.duration * stream.time_base)
        if self._container.duration:
            return self._container.duration / av.time_base
        return None

    def _estimate_count(self) -> int | None:
        stream = self._stream
        if stream.duration and stream.time_base:
            seconds = float(stream.duration * stream.time_base)
        elif self._container.duration:
            seconds = self._container.duration / av.time_base
        else:
            return None
        return max(1, round(seconds * self._fps))

    def read_decoded(self) -> Decoded[DecodedT] | None:
        """The next decoded frame with its index and time, or None at the end."""
        self._check_open()
        if self._pending is not None:
            decoded, self._pending = self._pending, None
        else:
            item = next(self._frames, None)
            if item is None:
                self._at_end()
                return None
            decoded = self._stamp(item, self._linear_index(item))
        self._delivered += 1
        return decoded

    def _unread(self, decoded: Decoded[DecodedT]) -> None:
        """Hand ``decoded`` out again on the next read (after a probe read)."""
        self._pending = decoded
        self._delivered -= 1

    def _linear_index(self, item: DecodedT) -> int:
        """The frame's place in the file: from the index when there is one (damage leaves
        the lost frames' places empty), else the next count."""
        index = self._index
        if index is not None and item.pts is not None:
            return index.position(item.pts)
        return self._next_index

    def _at_end(self) -> None:
        count = self._claimed if self._claimed is not None else self.info.frame_count
        if self._exact_count and count is not None and self._next_index < count:
            if not self.truncated:
                log.info("%s ends at frame %d of %d", self.info.uri, self._next_index, count)
            self.truncated = True
        if self._delivered == 0 and (self.decode_errors or self.truncated):
            errors = self.decode_errors
            why = (
                f"{errors} undecodable packet{'s' if errors != 1 else ''}"
                if errors
                else "the file is cut short before its first frame"
            )
            raise SourceError(f"{self.info.uri}: no frame could be decoded ({why})")

    @property
    def frames_there(self) -> int | None:
        """How many frames a file found cut short holds (the count at the end it read
        to); None while no frame is known to be missing."""
        return self._next_index if self.truncated else None

    def damage_note(self) -> str | None:
        """The damage met so far as one line for the user (None for a sound file):
        frames cut off, packets skipped, frames scaled to the opening size."""
        parts = []
        count = self._claimed if self._claimed is not None else self.info.frame_count
        if self.truncated:
            of = f" of {count}" if self._exact_count and count else ""
            parts.append(f"cut short or damaged, its frames stop at {self._next_index}{of}")
        if self.decode_errors:
            n = self.decode_errors
            parts.append(f"{n} undecodable packet{'s were' if n != 1 else ' was'} skipped")
        if self.resized:
            w, h = self.info.width, self.info.height
            n = self.resized
            parts.append(f"{n} frame{'s' if n != 1 else ''} of another size scaled to {w}x{h}")
        return f"{self.info.uri}: " + "; ".join(parts) if parts else None

    def seek(self, index: int) -> None:
        """Make the next read return frame ``index``; SourceError if not possible."""
        self._check_open()
        frames = self._index
        count = len(frames) if frames is not None else self.info.frame_count
        if self._claimed is not None and count is not None and count <= index < self._claimed:
            raise SourceError(
                f"cannot seek to frame {index}: {self.info.uri} ends before it "
                f"(cut short: its frames stop at {count} of {self._claimed})"
            )
        if index < 0 or (self._exact_count and count is not None and index >= count):
            last = f"0..{count - 1}" if count else "unknown"
            raise SourceError(f"frame {index} is out of range for {self.info.uri} ({last})")
        self._pending = None
        if frames is None:
            self._seek_by_count(index)
            return
        target = frames.pts[index]
        item = self._seek_before(frames, target)
        while item is not None and (item.pts is None or item.pts < target):
            item = next(self._frames, None)
        if item is None:
            raise SourceError(f"cannot seek to frame {index}: {self.info.uri} ends before it")
        self._pending = self._stamp(item, self._linear_index(item))

    def _seek_by_count(self, index: int) -> None:
        """No timestamps: count from the first frame (exact in every container)."""
        self._rewind()
        item, at = next(self._frames, None), 0
        while item is not None and at < index:
            item, at = next(self._frames, None), at + 1
        if item is None:
            raise SourceError(f"cannot seek to frame {index}: {self.info.uri} ends before it")
        self._pending = self._stamp(item, at)

    def close(self) -> None:
        """Release the file. Safe to call more than once."""
        if not self._closed:
            self._closed = True
            self._frames.close()
            self._container.close()

    def _seek_before(self, frames: FrameIndex, target: int) -> DecodedT | None:
        """The first frame decoded from a keyframe at or before ``target``'s frame, with
        every frame from there to ``target`` decodable (their references read too).

        Keyframe indexes can be coarse and some containers (MPEG-TS) seek by estimate,
        so a seek that lands after its keyframe is retried further back, and at last the
        file is read from its start.
        """
        for key_pts, key_dts in frames.seek_points(target):
            if key_pts <= frames.pts[0]:
                break  # that's the start, where a rewind is exact
            self._seek_to_timestamp(key_dts)
            item = next(self._frames, None)
            # Landed on that keyframe (or a frame shown before it, which open GOPs
            # decode after it), not on a later one: later frames all decode right.
            if item is not None and item.pts is not None and item.pts <= key_pts:
                return item
        self._rewind()
        return next(self._frames, None)

    def _seek_to_timestamp(self, timestamp: int) -> None:
        try:
            self._container.seek(timestamp, backward=True, stream=self._stream)
        except AV_ERRORS as exc:
            raise SourceError(f"seeking in {self.info.uri} failed: {reason(exc)}") from exc
        # The old generator may hold packets from before the seek.
        self._frames.close()
        self._repositioned()
        self._frames = self._decode()

    def _rewind(self) -> None:
        """Back to the first frame by reopening the file: exact in every container."""
        self._frames.close()
        self._container.close()
        uri = self.info.uri
        self._container = open_container(
            uri, f"{uri} is not a readable video", options=DECODER_LIMITS, hwaccel=self._hwaccel
        )
        self._stream = video_stream(self._container, uri)
        self._repositioned()
        self._frames = self._decode()

    def _stamp(self, item: DecodedT, index: int) -> Decoded[DecodedT]:
        if item.pts is None:
            pts = index / self._fps
        else:
            pts = float((item.pts - self._start) * self._time_base)
        self._next_index = index + 1
        return Decoded(item, index, pts)

    def _decode(self) -> Generator[DecodedT, None, None]:
        try:
            for packet in self._container.demux(self._stream):
                yield from self._shown(self._decode_packet(packet))
        except AV_ERRORS as exc:
            # Cut short or damaged container: keep what is there, then end.
            self.truncated = True
            log.info("%s: reading stopped early: %s", self.info.uri, reason(exc))
            yield from self._shown(self._decode_packet(None))

    def _shown(self, items: Iterable[DecodedT]) -> Iterable[DecodedT]:
        """The frames the file presents: not those an edit list cuts off, decoded only
        as references of the first frame shown. FFmpeg's decoders drop those themselves;
        NVDEC hands them over, and numbering them would shift every frame after."""
        index = self._index
        if index is None:
            return items
        first, last = index.pts[0], index.pts[-1]
        return (i for i in items if i.pts is None or first <= i.pts <= last)

    def _decode_failed(self, error: str) -> None:
        # reported once, by damage_note(), when the run or the player is done with it
        self.decode_errors += 1
        level = logging.INFO if self.decode_errors == 1 else logging.DEBUG
        log.log(level, "%s: skipped undecodable data: %s", self.info.uri, error)

    def _check_open(self) -> None:
        if self._closed:
            raise SourceError(f"{self.info.uri} is closed")


class PyAVFileReader(FileReader[VideoFrame]):
    """A FileReader decoding with PyAV: on the CPU, or with ``hwaccel`` on a device."""

    def _decode_packet(self, packet: av.Packet[VideoStream] | None) -> list[VideoFrame]:
        frames, error = decode_packet(self._stream, packet)
        if error is not None:
            self._decode_failed(error)
        return frames


class FileSource(PyAVFileReader, Source):
    """A seekable video file, its frames as players show them (``display``: turned by a
    phone's display matrix, non-square pixels made square), ``info`` giving the size
    shown. ``decode_errors``, ``truncated`` and ``resized`` report damage. Opening
    decodes the first frame: a file without one fails here."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(path)
        try:
            first = self.read_decoded()
            if first is None:
                raise SourceError(f"{self.info.uri} holds no video frames")
        except BaseException:
            self.close()
            raise
        self._unread(first)
        aspect = self._stream.sample_aspect_ratio
        self.display = Display.of(self.info.width, self.info.height, first.item, aspect)
        width, height = self.display.size
        self.info = replace(self.info, width=width, height=height)

    @property
    def fallback_reason(self) -> str | None:
        """Why a GPU run has this file decoded here rather than by NVDEC, if it does."""
        if not self.display:
            return None
        return f"{self.display.describe()} for display, on the CPU"

    def read(self) -> Frame | None:
        decoded = self.read_decoded()
        if decoded is None:
            return None
        display = self.display
        if (decoded.item.width, decoded.item.height) != display.stored:
            self.resized += 1
        return Frame(
            display.picture(decoded.item, self.info.uri),
            decoded.index,
            decoded.pts,
            source_id=self.source_id,
        )


def display_of(path: str | os.PathLike[str]) -> str:
    """How the video file at ``path`` is shown (``Display.describe``: AS_STORED when the
    frames are the picture, or when it cannot be read: opening it then says why)."""
    return _probed(path)[0]


def frame_count_of(path: str | os.PathLike[str]) -> int | None:
    """The frames of the video file at ``path``: as a run numbers them (its frame index),
    or, for a file without usable timestamps, the count its container claims or its
    duration times its rate suggest (``SourceInfo.frame_count``); None when it cannot be
    read or does not say."""
    return _probed(path)[1]


def _probed(path: str | os.PathLike[str]) -> tuple[str, int | None]:
    p = Path(path)
    try:
        stat = p.stat()
    except OSError:
        return AS_STORED, None
    return _probe(os.fspath(p), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _probe(path: str, _mtime_ns: int, _size: int) -> tuple[str, int | None]:
    """Opens the file as a run does (the display matrix reaches PyAV with frames only);
    keyed by the file's time and size, so a file replaced is probed again."""
    try:
        with FileSource(path) as source:
            return source.display.describe(), source.info.frame_count or None
    except (FrameLensError, OSError) as exc:
        log.debug("%s: not probed: %s", path, exc)
    return AS_STORED, None
