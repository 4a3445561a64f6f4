"""Network streams (RTSP, HTTP, RTMP, UDP, TCP) decoded with PyAV on a reader thread.

Latest-frame policy: the reader keeps only the newest decoded frame, so a consumer slower
than the stream skips frames (``Frame.index`` shows the gaps) instead of falling behind.
Only frames that are actually read get converted to BGR.

Any end of the stream — network error, read time-out, or plain EOF — counts as a drop:
live streams don't end. After a drop the reader reconnects after ``backoff_s``, doubling
the wait each attempt; after ``reconnect_attempts`` failed attempts in a row ``read``
raises SourceError. The first connection is not retried: a wrong URL fails at once.

``Frame.pts`` is arrival time on a monotonic clock, seconds since the source opened,
because stream timestamps restart on every reconnect.

A recording served over HTTP (a file on a web server, an HLS playlist that has ended:
the container knows its duration) is read as a file is (``recorded``): every frame,
in order, the reader waiting for the consumer instead of skipping; its end is the end
of the source, not a drop; ``Frame.pts`` is the frame's time in it. A connection lost
half way is made again and the reading goes on after the last frame handed out.

Frames are shown as players show them (``display``, from the first frame): a phone's MP4
served over HTTP turned upright, non-square pixels made square, as files are.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, replace
from fractions import Fraction

from av.container import InputContainer
from av.video.frame import VideoFrame
from av.video.stream import VideoStream
from framelens.core.errors import SourceError
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
from framelens.core.stages.sources.display import Display
from framelens.core.threads import NamedThread
from framelens.core.types import Frame, SourceInfo

log = logging.getLogger(__name__)

STREAM_SCHEMES = ("rtsp", "rtsps", "http", "https", "rtmp", "udp", "tcp")
FIRST_FRAME_WAIT_S = 2.0  # for the display of the first frame; a live feed sends it at once
_END = "end of stream"


@dataclass(slots=True)
class _Latest:
    frame: VideoFrame
    index: int
    pts: float


class StreamSource(Source):
    """A live stream, or a recording read over HTTP (``recorded``); ``reconnects``
    counts recoveries, ``decode_errors`` skipped packets."""

    def __init__(
        self,
        url: str,
        *,
        reconnect_attempts: int = 5,
        backoff_s: float = 0.5,
        frame_timeout_s: float = 10.0,
        open_timeout_s: float = 10.0,
        read_timeout_s: float = 5.0,
    ) -> None:
        self._url = url
        self._attempts = reconnect_attempts
        self._backoff_s = backoff_s
        self._frame_timeout_s = frame_timeout_s
        self._timeouts = (open_timeout_s, read_timeout_s)
        container, stream = self._connect()
        self._recorded = url.lower().startswith(("http:", "https:")) and bool(
            container.duration and container.duration > 0
        )
        self._time_base = stream.time_base
        ctx = stream.codec_context
        try:
            check_frame_size(url, ctx.width, ctx.height)
        except SourceError:
            container.close()
            raise
        self.info = SourceInfo(
            uri=url,
            kind="stream",
            width=ctx.width,
            height=ctx.height,
            fps=frame_rate(stream),
            frame_count=None,
            codec=ctx.codec.canonical_name,
            seekable=False,
            has_audio=len(container.streams.audio) > 0,
        )
        self.reconnects = 0
        self.decode_errors = 0
        self._cond = threading.Condition()
        self._latest: _Latest | None = None
        self._returned = -1  # index of the last frame read() handed out
        self._error: str | None = None
        self._reconnecting = False
        self._got_frame = False  # since the current connection was made
        self._ended = False  # a recording read to its end
        self._last_time: float | None = None  # a recording's last frame published (s)
        self._closed = False
        self._stop = threading.Event()
        self._t0 = time.monotonic()
        aspect = stream.sample_aspect_ratio  # read before the reader thread owns the stream
        self._thread = NamedThread(
            target=self._run, args=(container, stream), name=f"stream {url}", daemon=True
        )
        self._thread.start()
        try:
            self.display = self._await_display(aspect)
        except BaseException:  # Ctrl+C in the wait: the reader does not live on
            self.close()
            raise
        width, height = self.display.size
        self.info = replace(self.info, width=width, height=height)

    def _await_display(self, aspect: Fraction | None) -> Display:
        """How the stream's frames are shown: non-square pixels made square (known at
        open), a phone's MP4 over HTTP turned (known from its first frame: waited for
        ``FIRST_FRAME_WAIT_S`` at most, else not turned). Live feeds (RTSP, RTMP, UDP,
        TCP) carry no display matrix: their first frame, up to a keyframe interval away,
        is not waited for, so a wall of cameras opens as fast as before."""
        waits = self._url.lower().startswith(("http:", "https:"))
        deadline = time.monotonic() + (FIRST_FRAME_WAIT_S if waits else 0.0)
        with self._cond:
            while self._latest is None and self._error is None and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            first = self._latest
        frame = None if first is None else first.frame
        return Display.of(self.info.width, self.info.height, frame, aspect)

    @property
    def recorded(self) -> bool:
        """A recording over HTTP, read as a file is (the module's docstring)."""
        return self._recorded

    @property
    def reconnecting(self) -> bool:
        """True while the stream is down and being reconnected (a wall's tile says so)."""
        return self._reconnecting

    def read(self) -> Frame | None:
        with self._cond:
            deadline = time.monotonic() + self._frame_timeout_s
            while True:
                if self._closed:
                    raise SourceError(f"stream {self._url} is closed")
                latest = self._latest
                if latest is not None and latest.index > self._returned:
                    self._returned = latest.index
                    self._cond.notify_all()  # a recording's reader waits for this
                    break
                if self._ended:
                    return None
                if self._error is not None:
                    raise SourceError(self._error)
                now = time.monotonic()
                if self._reconnecting:  # back-off has its own limit; don't double-count
                    deadline = now + self._frame_timeout_s
                if now >= deadline:
                    raise SourceError(
                        f"stream {self._url}: no frame for {self._frame_timeout_s:g} s"
                    )
                self._cond.wait(deadline - now)
        # a feed that changes resolution keeps the size it opened with
        image = self.display.picture(latest.frame, self._url)
        return Frame(image, latest.index, latest.pts, source_id=self.source_id)

    def seek(self, index: int) -> None:
        raise SourceError(f"stream {self._url} is live and cannot seek")

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._stop.set()
        # The reader may sit in a blocking network read for up to read_timeout_s; it
        # is a daemon and checks _stop after that read, so don't wait for it long.
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=0.5)

    def _connect(self) -> tuple[InputContainer, VideoStream]:
        options = {"analyzeduration": "1000000", **DECODER_LIMITS}  # open in ~1 s, not 5
        if self._url.lower().startswith(("rtsp:", "rtsps:")):
            options["rtsp_transport"] = "tcp"  # UDP loses packets and smears frames
        container = open_container(
            self._url,
            f"could not open stream {self._url}",
            options=options,
            timeout=self._timeouts,
        )
        try:
            return container, video_stream(container, self._url)
        except SourceError:
            container.close()
            raise

    def _run(self, container: InputContainer, stream: VideoStream) -> None:
        try:
            self._read_forever(container, stream)
        except Exception as exc:  # never leave read() waiting on a dead thread
            log.exception("stream reader for %s failed", self._url)
            self._fail(f"stream {self._url} failed: {exc}")

    def _read_forever(self, container: InputContainer, stream: VideoStream) -> None:
        failures = 0  # reconnect attempts since the last frame
        while True:
            why = self._pump(container, stream)
            container.close()
            if self._stop.is_set():
                return
            # a recording's end: its last frame read (past it, some servers' streams
            # end in an error: a demuxer seeking where it cannot), or a plain end
            if self._recorded and (why == _END or stream.frames) and not self._short(stream):
                with self._cond:
                    self._ended = True
                    self._cond.notify_all()
                return
            if self._got_frame:
                failures = 0
            log.warning("stream %s dropped: %s", self._url, why)
            with self._cond:
                self._reconnecting = True
                self._cond.notify_all()
            while True:
                if failures >= self._attempts:
                    self._fail(
                        f"stream {self._url} lost after {failures} reconnect attempts"
                        f" (last error: {why})"
                    )
                    return
                if self._stop.wait(self._backoff_s * 2**failures):
                    return
                failures += 1
                try:
                    container, stream = self._connect()
                except SourceError as exc:
                    why = reason(exc.__cause__) if exc.__cause__ else str(exc)
                    continue
                self.reconnects += 1
                if self._recorded:
                    self._resume(container, stream)
                break

    def _time_of(self, decoded: VideoFrame) -> float | None:
        """A recording's frame's time in it (s); from its pts and the stream's time base,
        since frames drained from the decoder carry no time base of their own."""
        if decoded.pts is None or not self._time_base:
            return None
        return float(decoded.pts * self._time_base)

    def _short(self, stream: VideoStream) -> bool:
        """A recording's end came before the frames its index holds: the connection was
        cut (a server sending no length ends as if the file did), so it is made again."""
        with self._cond:
            published = 0 if self._latest is None else self._latest.index + 1
        return bool(stream.frames) and published < stream.frames

    def _resume(self, container: InputContainer, stream: VideoStream) -> None:
        """A recording connected again: near its last frame handed out when the server
        lets it seek (the frames up to it are skipped in _pump either way)."""
        last = self._last_time
        if last is None or not stream.time_base:
            return
        try:
            container.seek(int(last / stream.time_base), stream=stream, backward=True)
        except AV_ERRORS:
            log.debug("stream %s: no seek on reconnecting; read from the start", self._url)

    def _pump(self, container: InputContainer, stream: VideoStream) -> str:
        """Decode and publish frames until the stream ends; returns why it ended."""
        self._got_frame = False
        try:
            for packet in container.demux(stream):
                if self._stop.is_set():
                    return "closed"
                frames, error = decode_packet(stream, packet)
                if error is not None:
                    self.decode_errors += 1
                    log.debug("stream %s: skipped undecodable data: %s", self._url, error)
                for decoded in frames:
                    self._publish(decoded)
        except AV_ERRORS as exc:
            if self._recorded:  # the frames the decoder still holds were read whole
                for decoded in decode_packet(stream, None)[0]:
                    self._publish(decoded)
            return reason(exc)
        return _END

    def _publish(self, decoded: VideoFrame) -> None:
        with self._cond:
            at = self._time_of(decoded) if self._recorded else None
            if self._recorded:
                if at is not None and self._last_time is not None and at <= self._last_time:
                    return  # handed out before the connection was lost
                # every frame: wait until the one before is taken
                while (
                    self._latest is not None
                    and self._latest.index > self._returned
                    and not (self._closed or self._stop.is_set())
                ):
                    self._cond.wait(0.1)
                if at is not None:
                    self._last_time = at
            index = 0 if self._latest is None else self._latest.index + 1
            pts = at if at is not None else time.monotonic() - self._t0
            self._latest = _Latest(decoded, index, pts)
            self._got_frame = True
            self._reconnecting = False
            self._cond.notify_all()

    def _fail(self, message: str) -> None:
        with self._cond:
            self._error = message
            self._reconnecting = False
            self._cond.notify_all()
