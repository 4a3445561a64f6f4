"""The compare view's running track numbers, computed beside the comparison.

Scoring every pane's tracks against the reference's (core/pipeline/compare/tracks.py)
runs TrackEval over all the frames compared so far: a fraction of a second for a few
hundred frames, seconds for thousands. The view's worker must not wait for it, so
LiveTracks computes on a thread of its own, at most once a ``every_s`` (or, when a
computation took long, ten times its duration later), and the worker hands the latest
numbers out with each frame, and the final ones at the end of the video (``final``).
Saved reports compute their own, over their frames.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from framelens.core.pipeline.compare.kept import KeptFrames
from framelens.core.pipeline.compare.tracks import tracks_summary
from framelens.core.threads import NamedThread

__all__ = ["LiveTracks", "TrackNumbers"]


@dataclass(frozen=True)
class TrackNumbers:
    """Each pane's "tracking" entry of the report (tracks.py ``tracks_summary``), over
    the ``frames`` compared when they were computed; ``counts``: with lines and zones,
    each pane's "analytics" entry (core/pipeline/compare/events.py: its counts and
    their changes from the reference's), else empty."""

    frames: int
    panes: tuple[dict[str, Any], ...]
    counts: tuple[dict[str, Any], ...] = ()


class LiveTracks:
    """The latest TrackNumbers of a live comparison's ``kept`` frames (see the module doc)."""

    def __init__(self, kept: KeptFrames, every_s: float = 1.0) -> None:
        self._kept = kept
        self._every = every_s
        self._next_at = 0.0
        self._busy = False
        self._latest: TrackNumbers | None = None
        self._lock = threading.Lock()

    def latest(self) -> TrackNumbers | None:
        """The numbers last computed (None before the first), starting a computation
        when none runs and one is due."""
        with self._lock:
            start = not self._busy and time.monotonic() >= self._next_at
            if start:
                self._busy = True
            latest = self._latest
        if start:
            NamedThread(target=self._compute, name="fl-compare-tracks", daemon=True).start()
        return latest

    def final(self) -> TrackNumbers | None:
        """The numbers over every frame kept, computed now (at the end of the video)."""
        self._compute()
        with self._lock:
            return self._latest

    def _compute(self) -> None:
        t0 = time.monotonic()
        numbers: TrackNumbers | None = None
        try:
            frames = self._kept.track_frames()
            if frames and frames[0]:
                labels = [s.label for s in self._kept.specs]
                panes = tracks_summary(labels, self._kept.reference, frames)
                counts: list[dict[str, Any]] = []
                if self._kept.zones is not None:
                    counts, _ = self._kept.log().analytics()
                numbers = TrackNumbers(len(frames[0]), tuple(panes), tuple(counts))
        finally:
            took = time.monotonic() - t0
            with self._lock:
                old = self._latest
                if numbers is not None and (old is None or numbers.frames >= old.frames):
                    self._latest = numbers
                self._busy = False
                self._next_at = time.monotonic() + max(self._every, 10 * took)
