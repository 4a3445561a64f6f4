"""What is known of each track of a video so far: its class, where it starts and ends.

The window's track list reads it: per track ID, the class, the first and last frame
(and their timestamps), the duration and how many frames saw it. It is fed the results
of one source in frame order by ``TrackLogStage``, a per-source stage placed after the
tracker (core/stages/source_stages.py), on the player's thread, and read from another
(the window's): it holds a lock. A new log stage (made for each new video, and when
the tracker changes) clears it, so the list never mixes two videos' tracks.

A frame seen again (a step back, a seek back) adds nothing new: observations are
counted once per frame, and the first and last frame are the least and greatest seen.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

from framelens.core.types import Detections, FrameResult

__all__ = ["TrackLog", "TrackLogStage", "TrackRecord"]


@dataclass(frozen=True, slots=True)
class TrackRecord:
    """One track as the log knows it. Frames are the source's 0-based indices; times
    are the frames' timestamps in seconds."""

    track_id: int
    class_id: int  # the class most of its boxes had
    first_frame: int
    last_frame: int
    first_time: float
    last_time: float
    observations: int  # frames with a box of this track

    @property
    def duration(self) -> float:
        """Seconds from its first frame to its last."""
        return max(0.0, self.last_time - self.first_time)


@dataclass(slots=True)
class _Track:
    first_frame: int
    last_frame: int
    first_time: float
    last_time: float
    classes: Counter[int] = field(default_factory=Counter)
    frames: set[int] = field(default_factory=set)


class TrackLog:
    """Every track of one video seen so far (see the module doc)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tracks: dict[int, _Track] = {}
        self._version = 0
        self._generation = 0  # one per clear: a stage of an older one adds nothing

    @property
    def version(self) -> int:
        """Goes up with every change: a reader redraws only when it moved."""
        return self._version

    def __len__(self) -> int:
        return len(self._tracks)

    def clear(self) -> int:
        """Forget every track; returns the log's new generation (``add``'s)."""
        with self._lock:
            self._tracks.clear()
            self._version += 1
            self._generation += 1
            return self._generation

    def add(
        self, frame_index: int, time_s: float, detections: Detections, generation: int | None = None
    ) -> None:
        """The boxes of frame ``frame_index`` (at ``time_s``); those of no track
        (``track_ids`` -1, or none) are left out. ``generation``: what ``clear`` gave the
        caller; the boxes of an older one (a tracker replaced, its last frame still in
        flight) are left out too."""
        ids = detections.track_ids
        if ids is None or not len(ids):
            return
        classes = detections.class_ids.tolist()
        changed = False
        with self._lock:
            if generation is not None and generation != self._generation:
                return
            for track_id, class_id in zip(ids.tolist(), classes, strict=True):
                if track_id < 1:
                    continue
                track = self._tracks.get(track_id)
                if track is None:
                    track = self._tracks[track_id] = _Track(
                        frame_index, frame_index, time_s, time_s
                    )
                if frame_index in track.frames:
                    continue
                track.frames.add(frame_index)
                track.classes[class_id] += 1
                if frame_index < track.first_frame:
                    track.first_frame, track.first_time = frame_index, time_s
                if frame_index > track.last_frame:
                    track.last_frame, track.last_time = frame_index, time_s
                changed = True
            if changed:
                self._version += 1

    def tracks(self) -> list[TrackRecord]:
        """Every track, by ID."""
        with self._lock:
            return [_record(i, t) for i, t in sorted(self._tracks.items())]

    def get(self, track_id: int) -> TrackRecord | None:
        with self._lock:
            track = self._tracks.get(track_id)
            return None if track is None else _record(track_id, track)


def _record(track_id: int, t: _Track) -> TrackRecord:
    class_id = t.classes.most_common(1)[0][0] if t.classes else -1
    return TrackRecord(
        track_id, class_id, t.first_frame, t.last_frame, t.first_time, t.last_time, len(t.frames)
    )


class TrackLogStage:
    """The per-source stage that feeds a ``TrackLog`` (after the tracker). Made for a
    new video (or a new tracker), it starts the log afresh."""

    def __init__(self, log: TrackLog) -> None:
        self._log = log
        self._generation = log.clear()

    def __call__(self, result: FrameResult) -> None:
        output = result.output
        if isinstance(output, Detections):
            frame = result.frame
            self._log.add(frame.index, float(frame.pts), output, self._generation)

    def reset(self) -> None:
        """A seek: the tracks seen stay known (the log is of the whole video)."""
