"""A file played as a camera delivers it: each frame released at its own time, those not
taken in time dropped (``framelens run --realtime``).

A camera does not wait for its reader. Frame k of a file is released at its timestamp
after the first read (``start + pts_k - pts_0``) and stamped with that time
(``Frame.arrived``: end-to-end times count from it). The reader takes the next frame
once it is released; it is decoded only then, as a camera's stream is, so decoding is
part of the frame's way. A reader that comes late finds the frames released meanwhile
waiting in the camera's buffer of ``buffer`` frames (1: only the newest, the latest-frame
policy of the product's network streams, core/stages/sources/stream.py); a frame
``buffer`` newer frames have overtaken was overwritten: it is decoded (H.264 frames need
the ones before them), given back at once and counted in ``dropped``, never queued
without bound. Live sources (cameras, streams) come at their own rate and are not
wrapped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from framelens.core.stages.sources.base import Source
from framelens.core.stages.timing import now_ms
from framelens.core.types import Frame

__all__ = ["Realtime", "RealtimeSource"]

DEFAULT_FPS = 30.0  # a file that says no rate


class RealtimeSource(Source):
    """``inner`` released at its frames' timestamps, as a camera delivers; see the module.

    ``frames``: the camera plays that many frames of the file (those dropped included),
    then ends. ``clock()`` (milliseconds, ``now_ms``'s clock) and ``sleep(ms)`` may be
    given (tests); ``close`` cuts a wait short."""

    def __init__(
        self,
        inner: Source,
        *,
        buffer: int = 1,
        frames: int | None = None,
        clock: Callable[[], float] = now_ms,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        if buffer < 1:
            raise ValueError("a camera holds at least one frame")
        self.inner = inner
        self._left = frames
        self.info = inner.info
        self.decoder_name = inner.decoder_name
        self.buffer = buffer
        fps = inner.info.fps if inner.info.fps > 0 else DEFAULT_FPS
        self.interval_ms = 1000.0 / fps
        self._clock = clock
        self._stop = threading.Event()
        self._sleep = sleep or (lambda ms: self._stop.wait(ms / 1000.0))
        self._dropped = 0
        self._start: float | None = None  # clock of the first frame's release
        self._first_pts = 0.0
        self._next_due = 0.0  # when the next frame is expected (decoded no earlier)

    @property
    def dropped(self) -> int:
        return self._dropped

    @property
    def fallback_reason(self) -> str | None:
        return self.inner.fallback_reason

    @property
    def frames_there(self) -> int | None:
        return self.inner.frames_there

    def damage_note(self) -> str | None:
        return self.inner.damage_note()

    def _wait_until(self, due: float) -> None:
        while not self._stop.is_set() and (left := due - self._clock()) > 0:
            self._sleep(left)

    def read(self) -> Frame | None:
        """The next frame the camera still holds, once released; None at the end."""
        while True:
            if self._start is not None:
                self._wait_until(self._next_due)  # not decoded before it is there
            if self._left is not None:
                if self._left <= 0:
                    return None
                self._left -= 1
            frame = self.inner.read()
            if frame is None or self._stop.is_set():
                return frame
            if self._start is None:  # the clock starts with the first frame read
                self._start, self._first_pts = self._clock(), float(frame.pts)
            due = self._start + (float(frame.pts) - self._first_pts) * 1000.0
            self._next_due = due + self.interval_ms
            self._wait_until(due)  # a gap in a variable-rate file
            if self._clock() - due >= self.buffer * self.interval_ms:
                # ``buffer`` newer frames were released since: this one was overwritten
                frame.release()  # an NVDEC buffer back to its pool at once
                self._dropped += 1
                continue
            frame.arrived = due
            return frame

    def seek(self, index: int) -> None:
        """Play on from ``index``: the clock starts again with the next frame (the frames
        left to play stay as they were)."""
        self.inner.seek(index)
        self._start = None

    def close(self) -> None:
        self._stop.set()
        self.inner.close()


@dataclass(frozen=True)
class Realtime:
    """What wraps each source of a run played at real time (``SessionOptions.wrap``;
    picklable, so a run's processes wrap theirs too): files and folders paced, live
    sources as they are. ``frames``: a run's ``--frames``, frames of the file played
    (those dropped included: the camera's time, not the frames processed)."""

    buffer: int = 1
    frames: int | None = None

    def __call__(self, source: Source) -> Source:
        if not source.recorded:  # a camera, a live feed: at their own time already
            return source
        return RealtimeSource(source, buffer=self.buffer, frames=self.frames)
