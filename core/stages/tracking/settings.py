"""What a user chooses about tracking: which tracker and its parameters.

The same settings drive every way of watching (core/stages/tracking/stage.py makes one
tracker per source from them): ``framelens run --track``, ``framelens track``, the
window's tracking menu, the wall, compare panes and archive jobs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

__all__ = ["TRACKER_KINDS", "TrackerKind", "TrackerSettings"]

TrackerKind = Literal["bytetrack", "ocsort", "botsort"]
TRACKER_KINDS: tuple[TrackerKind, ...] = get_args(TrackerKind)
"""Every tracker, the default first."""


@dataclass(frozen=True, slots=True)
class TrackerSettings:
    """A tracker and its parameters (defaults: each tracker's published defaults).

    high_threshold: detections at or above it are matched first (ByteTrack's
        ``track_thresh``); below it and at or above ``low_threshold`` they only extend
        tracks that already exist (the second association), never start one.
    new_track_threshold: a detection left over must score this to start a track.
    track_buffer: frames a lost track is kept, so it can be found again after an
        occlusion (scaled by ``frame_rate`` / 30 as ByteTrack does).
    match_iou: the least IoU for a detection and a track to be matched.
    min_hits: observations before a new track is confirmed and gets its ID.
    frame_rate: the source's frames per second (scales ``track_buffer``).
    trail_length: centre points kept per track for trails (0: none).
    cmc: BoT-SORT's camera-motion compensation ("sparse": OpenCV's sparse optical flow,
        "ecc", or "none"); cmc_downscale: the frame is shrunk by this before it.
    """

    kind: TrackerKind = "bytetrack"
    high_threshold: float = 0.5
    low_threshold: float = 0.1
    new_track_threshold: float = 0.6
    track_buffer: int = 30
    match_iou: float = 0.2
    min_hits: int = 1
    frame_rate: float = 30.0
    trail_length: int = 30
    cmc: Literal["sparse", "ecc", "none"] = "sparse"
    cmc_downscale: int = 2

    def __post_init__(self) -> None:
        if self.kind not in TRACKER_KINDS:
            raise ValueError(f"unknown tracker {self.kind!r} (one of {', '.join(TRACKER_KINDS)})")
        if not 0.0 <= self.low_threshold <= self.high_threshold <= 1.0:
            raise ValueError("tracker thresholds must satisfy 0 <= low <= high <= 1")
        if self.track_buffer < 0 or self.min_hits < 1 or self.trail_length < 0:
            raise ValueError("track_buffer and trail_length must be >= 0, min_hits >= 1")
        if not 0.0 <= self.match_iou <= 1.0:
            raise ValueError("match_iou must be between 0 and 1")
