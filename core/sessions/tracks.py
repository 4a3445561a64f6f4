"""Tracking in what a run keeps: each source's tracker as a stage, its tracks counted and
written as MOT Challenge text.

    TrackStages(settings)   the stage factory of a run, a several-source run, the wall or
                            an archive job: one tracker per source (IDs from 1 each),
                            its frame rate the source's own; picklable (a run's device
                            processes, Ray's actors)
    TrackCount              the distinct tracks a source's results carried (the summary)
    MotTracks               a source's tracks as MOT text (``--export-tracks``), a writer
                            committed with the run's other outputs

The trackers and their stage are core/stages/tracking/ (stage.py: ``tracking_stages``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from framelens.core.stages.source_stages import (
    SourceStage,
    StageFactory,
    chain_stages,
    prepare_stages,
)
from framelens.core.stages.tracking.settings import TrackerSettings
from framelens.core.types import Detections, SourceInfo

__all__ = [
    "MOT_SUFFIX",
    "MotTracks",
    "TrackCount",
    "TrackStages",
    "drawn_or_not",
    "tracker_json",
    "with_tracking",
]

MOT_SUFFIX = ".tracks.txt"
"""A source's MOT tracks beside its other outputs in a several-source run:
``DIR/<name>.tracks.txt`` next to ``DIR/<name>.json``."""

MakeStages = Callable[[TrackerSettings], StageFactory]


def _tracking_stages(settings: TrackerSettings) -> StageFactory:
    """A run's, an archive's or the wall's tracking stages: none of them steps back in
    time, so no record of the IDs given is kept for it."""
    from framelens.core.stages.tracking.stage import tracking_stages

    return tracking_stages(settings, record=False)


@dataclass(frozen=True)
class TrackStages:
    """A run's tracking stage per source: each source gets a tracker of its own, made
    from ``settings`` with the source's frame rate (a source that gives none:
    ``settings.frame_rate``); stages after it (analytics) are chained by
    ``with_tracking``. ``make``: the tracking stages for some settings (default: the
    trackers of core/stages/tracking/); a module-level function, so the factory
    pickles."""

    settings: TrackerSettings
    make: MakeStages | None = None

    def __call__(self, number: int) -> Sequence[SourceStage]:
        return self.for_source(number, None)

    @property
    def needs_pixels(self) -> bool:
        """Whether the stages look at the frames' pixels (BoT-SORT's camera-motion
        compensation): a session then keeps them even where nothing is drawn."""
        from framelens.core.stages.tracking.registry import make_tracker

        return bool(make_tracker(self.settings).needs_image)

    def prepare(self) -> None:
        """The tracker's code ready before the first result (see TrackingStages)."""
        prepare_stages((self.make or _tracking_stages)(self.settings))

    def for_source(self, number: int, info: SourceInfo | None) -> Sequence[SourceStage]:
        settings = self.settings
        if info is not None and info.fps > 0:
            settings = replace(settings, frame_rate=float(info.fps))
        make = self.make or _tracking_stages
        return make(settings)(number)


def with_tracking(
    stages: StageFactory | None, tracker: TrackerSettings | None
) -> StageFactory | None:
    """``stages`` with a tracker before them when ``tracker`` is given."""
    if tracker is None:
        return stages
    tracks = TrackStages(tracker)
    return tracks if stages is None else chain_stages(tracks, stages)


def drawn_or_not(tracker: TrackerSettings | None, drawn: bool) -> TrackerSettings | None:
    """The tracker of a run: trails (only ever drawn) are kept where a video is drawn,
    and none where nothing is (their bookkeeping cost twice the tracker itself at 50
    objects a frame)."""
    if tracker is None or drawn or tracker.trail_length == 0:
        return tracker
    return replace(tracker, trail_length=0)


def tracker_json(settings: TrackerSettings | None) -> dict[str, Any] | None:
    """The tracker of a run as its summary and provenance say it: its kind and
    parameters (the frame rate is each source's own)."""
    if settings is None:
        return None
    out = asdict(settings)
    out.pop("frame_rate")
    return {"kind": out.pop("kind"), **out, "frame_rate": "each source's own"}


class TrackCount:
    """The distinct track IDs (>= 1) a source's results carried."""

    def __init__(self) -> None:
        self._ids: set[int] = set()
        self.tracked = False  # a result carried track IDs (a tracker ran)

    def add(self, output: object) -> None:
        if not isinstance(output, Detections) or output.track_ids is None:
            return
        self.tracked = True
        ids = output.track_ids
        if len(ids):
            self._ids.update(int(i) for i in ids if i > 0)

    @property
    def tracks(self) -> int | None:
        """How many tracks; None when no tracker ran."""
        return len(self._ids) if self.tracked else None


class MotTracks:
    """A source's tracks as MOT Challenge text (core/stages/tracking/mot.py), taking a
    run's results as the detections writers do (``add(index, pts, output)``) and
    committed with them: the file appears when the run's outputs all do."""

    def __init__(self, path: str | Path) -> None:
        from framelens.core.stages.tracking.mot import MotTracksWriter

        self._writer = MotTracksWriter(path)
        self.path = self._writer.path

    def add(self, index: int, pts: float, output: object) -> None:
        del pts
        if isinstance(output, Detections):
            if output.track_ids is None:  # no tracker ran on this frame: no track
                output = replace(output, track_ids=np.full(len(output), -1, np.int64))
            self._writer.add(index, output)

    def close(self) -> Path:
        return self._writer.close()

    def abort(self) -> None:
        self._writer.abort()
