"""What a user chooses about tracking: which tracker and its parameters.

The same settings drive every way of watching (core/stages/tracking/stage.py makes one
tracker per source from them): ``framelens run --track``, ``framelens track``, the
window's tracking menu, the wall, compare panes and archive jobs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal, get_args

__all__ = ["TRACKER_KINDS", "TrackerKind", "TrackerSettings"]

TrackerKind = Literal["bytetrack", "ocsort", "botsort"]
TRACKER_KINDS: tuple[TrackerKind, ...] = get_args(TrackerKind)
"""Every tracker, the default first."""

_PUBLISHED: dict[TrackerKind, dict[str, Any]] = {
    "bytetrack": {},  # the field defaults are ByteTrack's
    # OC-SORT (Cao et al. 2023, github.com/noahcao/OC_SORT): det_thresh 0.6,
    # iou_threshold 0.3, min_hits 3, max_age 30, delta_t 3, inertia 0.2
    "ocsort": {"high_threshold": 0.6, "new_track_threshold": 0.6, "match_iou": 0.3, "min_hits": 3},
    # BoT-SORT (Aharon et al. 2022, github.com/NirAharon/BoT-SORT): track_high_thresh
    # 0.6, track_low_thresh 0.1, new_track_thresh 0.7, match_thresh 0.8, track_buffer 30
    "botsort": {"high_threshold": 0.6, "new_track_threshold": 0.7},
}


@dataclass(frozen=True, slots=True)
class TrackerSettings:
    """A tracker and its parameters. The field defaults are ByteTrack's published ones;
    :meth:`for_kind` gives each tracker's own published defaults (the way to make
    settings for a chosen tracker; ``dataclasses.replace`` then changes single fields).

    high_threshold: detections at or above it are matched first (ByteTrack's
        ``track_thresh``, BoT-SORT's ``track_high_thresh``, OC-SORT's ``det_thresh``);
        below it and at or above ``low_threshold`` they only extend tracks that already
        exist (the second association), never start one. OC-SORT drops them unless
        ``ocsort_use_byte``.
    new_track_threshold: a detection left over must score this to start a track.
    track_buffer: frames a lost track is kept, so it can be found again after an
        occlusion (scaled by ``frame_rate`` / 30 as ByteTrack does; OC-SORT's max_age).
    match_iou: the least IoU for a detection and a track to be matched in the first
        association (ByteTrack and BoT-SORT weight it by the detection's score:
        ``match_thresh`` 0.8 is a cost, 1 - IoU x score).
    second_match_iou: the least IoU in the second association (low-score detections
        and the tracks left; the original's 0.5).
    unconfirmed_match_iou: the least score-weighted IoU for a track started last frame
        and not yet confirmed (the original's cost 0.7).
    min_hits: consecutive observations before a new track is confirmed and gets its
        ID (every track is confirmed at once in the tracker's first frames: ByteTrack
        and BoT-SORT the first frame, OC-SORT the first ``min_hits`` frames).
    frame_rate: the source's frames per second (scales ``track_buffer``).
    trail_length: centre points kept per track for trails (0: none).
    cmc: BoT-SORT's camera-motion compensation ("sparse": OpenCV's sparse optical flow,
        "ecc", or "none"); cmc_downscale: the frame is shrunk by this before it.
    ocsort_delta_t: OC-SORT's velocity is measured between observations this many
        frames apart (observation-centric momentum).
    ocsort_inertia: the weight of that velocity's direction in OC-SORT's matching cost.
    ocsort_use_byte: OC-SORT also matches low-score detections to the tracks left
        (ByteTrack's second association; off in the published default).
    """

    kind: TrackerKind = "bytetrack"
    high_threshold: float = 0.5
    low_threshold: float = 0.1
    new_track_threshold: float = 0.6
    track_buffer: int = 30
    match_iou: float = 0.2
    second_match_iou: float = 0.5
    unconfirmed_match_iou: float = 0.3
    min_hits: int = 2
    frame_rate: float = 30.0
    trail_length: int = 30
    cmc: Literal["sparse", "ecc", "none"] = "sparse"
    cmc_downscale: int = 2
    ocsort_delta_t: int = 3
    ocsort_inertia: float = 0.2
    ocsort_use_byte: bool = False

    def __post_init__(self) -> None:
        if self.kind not in TRACKER_KINDS:
            raise ValueError(f"unknown tracker {self.kind!r} (one of {', '.join(TRACKER_KINDS)})")
        if not 0.0 <= self.low_threshold <= self.high_threshold <= 1.0:
            raise ValueError("tracker thresholds must satisfy 0 <= low <= high <= 1")
        if self.track_buffer < 0 or self.min_hits < 1 or self.trail_length < 0:
            raise ValueError("track_buffer and trail_length must be >= 0, min_hits >= 1")
        for iou in (self.match_iou, self.second_match_iou, self.unconfirmed_match_iou):
            if not 0.0 <= iou <= 1.0:
                raise ValueError("match IoUs must be between 0 and 1")
        if self.frame_rate <= 0 or self.cmc_downscale < 1 or self.ocsort_delta_t < 1:
            raise ValueError("frame_rate must be > 0, cmc_downscale and ocsort_delta_t >= 1")
        if self.cmc not in ("sparse", "ecc", "none"):
            raise ValueError(f"unknown camera-motion compensation {self.cmc!r}")

    @classmethod
    def for_kind(cls, kind: TrackerKind, **changes: Any) -> TrackerSettings:
        """``kind`` with its published defaults, then ``changes`` (field=value)."""
        if kind not in TRACKER_KINDS:
            raise ValueError(f"unknown tracker {kind!r} (one of {', '.join(TRACKER_KINDS)})")
        return dataclasses.replace(cls(), kind=kind, **{**_PUBLISHED[kind], **changes})
