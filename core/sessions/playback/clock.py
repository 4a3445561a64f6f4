"""The player's clock: when each frame is due on screen, and which frames are too late
to be worth processing.

Real-time playback shows frame ``pts`` at ``anchor_wall + (pts - anchor_pts) / speed``.
When processing is slower than the source (a heavy model, a 60 fps camera), frames
would queue behind the workers and the picture would drift ever further behind: the
executor asks ``drop(pts, newer_waiting)`` before it takes a decoded frame and drops the
ones whose time has passed by more than ``STALE_INTERVALS`` frame intervals, so what is on
screen stays within a couple of intervals of decode + inference. When the model is what
is slow, the frames dropped catch up with the clock (their timestamps run ahead of it);
when decoding itself is slower than the asked rate (a 4K camera on a slow machine, a
file at 32x) every frame is late and dropping them all would show nothing at all: after
``1 / SHOW_AT_LEAST_HZ`` s of dropping frames that do not catch up, the next late frame
with no newer one waiting behind it is let through. The clock is read from worker
threads and set from the player thread, hence the lock. The video wall paces each file
source by one too (core/sessions/wall.py ``PacedSource``).
"""

from __future__ import annotations

import threading
import time

RESYNC_S = 1.0
"""Further behind than this (a stalled source, a model swap) or ahead by more than 2 s (a
jump in the timestamps), the clock restarts from the frame at hand instead of dropping
everything in between or waiting. Lateness below it is caught up by dropping frames."""

STALE_INTERVALS = 1.0
"""A decoded frame already later than this many frame intervals is dropped, unprocessed."""

CATCH_UP_MARGIN = 1.25
"""Dropped frames catch up with the clock when their timestamps run ahead of it by this
factor (a model slower than the source, decoding faster than the asked rate)."""

SHOW_AT_LEAST_HZ = 30.0
"""However late the frames, one is let through at least this often (a moving picture)."""


def now() -> float:
    return time.perf_counter()


class PlaybackClock:
    """Due times of frames by their timestamps (seconds), at ``speed``; thread-safe."""

    def __init__(self, interval_s: float = 1 / 30, *, resync_s: float = RESYNC_S) -> None:
        self._lock = threading.Lock()
        self._resync_s = resync_s
        self._anchor: tuple[float, float] | None = None  # (wall s, pts s)
        self._next_due: float | None = None  # the first frame's due time after a reset
        self._speed = 1.0
        self._realtime = True
        self._interval_s = interval_s
        # (wall s, pts s) of the first drop since a frame was let through
        self._dropping_since: tuple[float, float] | None = None

    def configure(
        self,
        *,
        speed: float | None = None,
        realtime: bool | None = None,
        interval_s: float | None = None,
    ) -> None:
        """Change what the clock follows; it restarts from the next frame."""
        with self._lock:
            if speed is not None:
                self._speed = speed
            if realtime is not None:
                self._realtime = realtime
            if interval_s is not None and interval_s > 0:
                self._interval_s = interval_s
            self._anchor = None
            self._dropping_since = None

    def reset(self, next_due: float | None = None) -> None:
        """Restart from the next frame (play, seek, a new source): due at once, or at
        ``next_due`` (wall s; the A-B loop's A, one interval after B was shown)."""
        with self._lock:
            self._anchor = None
            self._next_due = next_due
            self._dropping_since = None

    @property
    def realtime(self) -> bool:
        return self._realtime

    @property
    def interval_s(self) -> float:
        """Wall time between two frames at the current speed."""
        return self._interval_s / self._speed

    def due(self, pts: float) -> float:
        """Wall time (perf_counter s) at which the frame at ``pts`` should be shown; 0
        when playback is not paced. The first frame after a reset anchors the clock."""
        if not self._realtime:
            return 0.0
        wall = now()
        with self._lock:
            if self._anchor is None:
                first, self._next_due = self._next_due, None
                self._anchor = (wall if first is None else max(wall, first), pts)
            due = self._due_locked(pts)
            if wall - due > self._resync_s or due - wall > 2.0:
                self._anchor = (wall, pts)
                due = wall
        return due

    def drop(self, pts: float, newer_waiting: bool) -> bool:
        """True for a decoded frame so late that processing it would only add delay: its
        due time passed more than ``STALE_INTERVALS`` intervals ago, and dropping still
        helps: a newer frame waits behind it, or frames have been dropped for less than
        ``1 / SHOW_AT_LEAST_HZ`` s, or the frames dropped are catching up with the clock
        (their timestamps advance faster than it; for at most ``resync_s``). Never before
        the clock has started, and never when not paced (a run or a step shows every
        frame)."""
        if not self._realtime:
            return False
        with self._lock:
            if self._anchor is None:
                return False
            wall = now()
            if wall - self._due_locked(pts) > STALE_INTERVALS * self.interval_s:
                if self._dropping_since is None:
                    self._dropping_since = (wall, pts)
                since_wall, since_pts = self._dropping_since
                dropping = wall - since_wall
                if newer_waiting or dropping < 1.0 / SHOW_AT_LEAST_HZ:
                    return True
                # clearly ahead (by a quarter): a live source steadily late by less than
                # resync_s advances at the clock's own pace, jitter either way
                catching_up = (pts - since_pts) / self._speed > CATCH_UP_MARGIN * dropping
                if catching_up and dropping < self._resync_s:
                    return True
            self._dropping_since = None
        return False

    def _due_locked(self, pts: float) -> float:
        assert self._anchor is not None
        return self._anchor[0] + (pts - self._anchor[1]) / self._speed
