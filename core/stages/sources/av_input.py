"""Opening media with PyAV (FFmpeg) for reading, as every FrameLens source of video
does: the limits on frame size, the one-line reasons for bad input, the video stream
picked (never cover art, never a text file FFmpeg would draw), its frame rate, frames
decoded packet by packet and converted to BGR."""

from __future__ import annotations

import logging
import math
from typing import cast

import av
import cv2
import numpy as np
from av.codec.hwaccel import HWAccel
from av.container import InputContainer
from av.video.frame import VideoFrame
from av.video.stream import VideoStream
from framelens.core.errors import SourceError
from framelens.core.types import Image

log = logging.getLogger(__name__)

DEFAULT_FPS = 25.0

# What PyAV/FFmpeg raise for bad input: its own errors, OS errors, and ValueError for
# undecodable metadata and the like.
AV_ERRORS = (av.FFmpegError, OSError, ValueError)

MAX_FRAME_PIXELS = 8192 * 8192
"""The largest frame FrameLens decodes (8192x8192, 64 megapixels: 8K UHD fits twice);
larger ones are refused before FFmpeg or FrameLens allocates them."""
TEXT_CODECS = frozenset({"ansi", "bintext", "xbin", "idf"})
"""FFmpeg's decoders that draw text files (.txt, .nfo, .bin...) as frames: no video."""
DECODER_LIMITS = {"max_pixels": str(MAX_FRAME_PIXELS)}
"""Options for opening and decoding: FFmpeg itself refuses frames past the limit."""


def reason(exc: BaseException) -> str:
    """FFmpeg's own wording without PyAV's "[Errno …] …: 'path'" decoration."""
    if isinstance(exc, av.ExitError):  # the time-out callback stopped a blocking read
        return "timed out waiting for data"
    text = getattr(exc, "strerror", None)
    return str(text) if text else str(exc) or type(exc).__name__


def check_frame_size(uri: str, width: int, height: int) -> None:
    """SourceError unless ``width`` x ``height`` is a size FrameLens decodes."""
    if width <= 0 or height <= 0:
        raise SourceError(
            f"{uri}: the video declares no usable frame size (damaged, or larger than "
            f"FrameLens decodes: at most {MAX_FRAME_PIXELS // 1_000_000} megapixels, 8192x8192)"
        )
    if width * height > MAX_FRAME_PIXELS:
        raise SourceError(
            f"{uri}: frames of {width}x{height} are larger than FrameLens decodes "
            f"(at most {MAX_FRAME_PIXELS // 1_000_000} megapixels, e.g. 8192x8192)"
        )


def open_container(
    uri: str,
    failure: str,
    *,
    options: dict[str, str] | None = None,
    timeout: tuple[float, float] | None = None,
    hwaccel: HWAccel | None = None,
) -> InputContainer:
    """av.open for reading; failures become SourceError(f"{failure}: {reason}")."""
    try:
        if hwaccel is None:
            return av.open(uri, mode="r", options=options or {}, timeout=timeout)
        return av.open(uri, mode="r", options=options or {}, timeout=timeout, hwaccel=hwaccel)
    except AV_ERRORS as exc:
        raise SourceError(f"{failure}: {reason(exc)}") from exc


def video_stream(container: InputContainer, uri: str) -> VideoStream:
    """The first real video stream (not cover art), set up for threaded decoding and
    limited to frames of ``MAX_FRAME_PIXELS``."""
    if not container.streams:
        raise SourceError(f"{uri} holds no streams (not a video, or cut short before its index)")
    for stream in container.streams.video:
        if av.stream.Disposition.attached_pic in stream.disposition:
            continue
        # PyAV leaves codec_context unset when FFmpeg has no decoder for the codec.
        if cast(object, stream.codec_context) is None:
            raise SourceError(
                f"{uri} uses a video codec that this FFmpeg build cannot decode "
                "(or its header is damaged)"
            )
        if stream.codec_context.name in TEXT_CODECS:
            raise SourceError(f"{uri} is a text file, not a video (FFmpeg would draw its text)")
        stream.codec_context.thread_type = "AUTO"
        stream.codec_context.options = dict(DECODER_LIMITS)
        return stream
    raise SourceError(f"{uri} has no video stream")


def frame_rate(stream: VideoStream) -> float:
    for rate in (stream.average_rate, stream.guessed_rate):
        if rate and math.isfinite(float(rate)) and 0 < float(rate) <= 1000:
            return float(rate)
    return DEFAULT_FPS


# FFmpeg's AVColorSpace codes that mean BT.601 (or nothing said, which players read as
# BT.601 for SD) and its AVColorRange code for full ("JPEG") range.
_BT601_SPACES = {0, 2, 5, 6}
_FULL_RANGE = 2


def _opencv_converts(frame: VideoFrame) -> bool:
    """True for limited-range BT.601 yuv420p frames of even size: OpenCV converts those.

    OpenCV's YUV->BGR is the exact function the GPU path's kernels reproduce (and the
    CPU and GPU pipelines must agree); it is also faster than swscale here.
    """
    return (
        frame.format.name == "yuv420p"
        and frame.width % 2 == 0
        and frame.height % 2 == 0
        and int(frame.colorspace) in _BT601_SPACES
        and int(frame.color_range) != _FULL_RANGE
    )


def to_bgr(frame: VideoFrame, uri: str, size: tuple[int, int] | None = None) -> Image:
    """The frame as BGR, scaled to ``size`` (width, height) when given and different."""
    try:
        if size is not None and (frame.width, frame.height) != size:
            array = frame.to_ndarray(format="bgr24", width=size[0], height=size[1])
        elif _opencv_converts(frame):
            planes = frame.to_ndarray()  # (h * 3 / 2, w): Y, then U and V, as I420
            return cast(Image, cv2.cvtColor(planes, cv2.COLOR_YUV2BGR_I420))
        else:
            array = frame.to_ndarray(format="bgr24")
    except AV_ERRORS as exc:
        msg = f"{uri}: cannot convert a {frame.format.name} frame: {reason(exc)}"
        raise SourceError(msg) from exc
    return cast(Image, np.ascontiguousarray(array, dtype=np.uint8))


def decode_packet(
    stream: VideoStream, packet: av.Packet[VideoStream] | None
) -> tuple[list[VideoFrame], str | None]:
    """Decode one packet (None drains the decoder): the frames, or [] and why it failed."""
    try:
        if packet is None:
            return stream.codec_context.decode(None), None
        return packet.decode(), None
    except av.EOFError:  # draining a decoder that is already drained
        return [], None
    except AV_ERRORS as exc:
        return [], reason(exc)
