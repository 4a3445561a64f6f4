"""The tracking stage: one source's detections get track IDs and trails, frame by frame.

A :class:`TrackingStage` sits in its source's stage chain (core/stages/source_stages.py)
and replaces each result's ``Detections`` by the same boxes with ``track_ids`` (and
``trails`` when ``trail_length`` > 0). Other outputs (super-resolution) pass untouched.

Playback moves in time; IDs must not depend on how the user got to a frame:

- the stage keeps a bounded record (``record_frames``, default 20,000; none where the
  consumer never steps back: a run, the wall) of the IDs it gave to each frame since
  its tracker last started;
- ``reset()`` (a seek, a step back) only marks that the next result may not follow;
- the next result after it: a frame inside the record (stepping back, or forward again
  up to where tracking stopped) shows the recorded IDs and trails and leaves the
  tracker as it is; the frame right after the last tracked one goes on tracking; any
  other frame (a jump) restarts the tracker: its tracks are new, numbered on from the
  last ID given (an ID is never shown for two objects), and the record starts again.

A recorded frame whose boxes differ from the ones now given (the detector's settings
changed) is not replayed: tracking restarts there.
"""

from __future__ import annotations

import bisect
import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from framelens.core.stages.source_stages import SourceStage, StageFactory
from framelens.core.stages.tracking.base import Tracker
from framelens.core.stages.tracking.geometry import centres
from framelens.core.stages.tracking.registry import make_tracker
from framelens.core.stages.tracking.settings import TrackerSettings
from framelens.core.types import Detections, FrameResult, PixelsNotKept

__all__ = ["FORGET_AFTER", "RECORD_FRAMES", "TrackingStage", "tracking_stages"]

RECORD_FRAMES = 20_000
"""Frames of IDs a stage keeps for stepping back (about 11 minutes at 30 fps)."""
FORGET_AFTER = 3_000
"""Frames after which a track not seen keeps no trail (trackers drop lost tracks far
sooner: ``track_buffer``, 30 frames by default)."""

_NO_TRAIL = np.zeros((0, 2), dtype=np.float32)


class _Given(NamedTuple):
    """What a frame was given: its boxes' IDs and centres, and its boxes' fingerprint
    (a tuple: made every frame, in a fraction of a frozen dataclass's time)."""

    ids: npt.NDArray[np.int64]
    centres: npt.NDArray[np.float32]
    boxes_key: bytes


class TrackingStage:
    """One source's tracker as a stage (see the module's docstring)."""

    def __init__(
        self,
        tracker: Tracker,
        trail_length: int = 30,
        record_frames: int = RECORD_FRAMES,
        forget_after: int = FORGET_AFTER,
    ) -> None:
        self.tracker = tracker
        self.trail_length = trail_length
        self._record_frames = max(0, record_frames)  # 0: none (a run never steps back)
        self._forget_after = max(1, forget_after)
        self._record: OrderedDict[int, _Given] = OrderedDict()
        self._first_seen: dict[int, int] = {}  # track ID -> first recorded frame
        self._last_seen: dict[int, int] = {}  # track ID -> last frame it had a box
        # trails: each track's last ``trail_length`` centres, the newest last, in a row
        # of one array (a frame extends every trail with a few numpy calls)
        self._trails: dict[int, int] = {}  # track ID -> its row of points
        self._points = np.zeros((0, max(1, trail_length), 2), dtype=np.float32)
        self._counts: list[int] = []  # centres kept per row
        self._free: list[int] = []  # rows of forgotten tracks
        self._last: int | None = None  # the last frame tracked
        self._discontinuity = False

    def reset(self) -> None:
        """The next result may not follow the last one (see the module's docstring)."""
        self._discontinuity = True

    def __call__(self, result: FrameResult) -> None:
        detections = result.output
        if not isinstance(detections, Detections):
            return
        if self._begin(result, detections):
            ids = self._track(detections, self._image(result))
            result.output = self._finish(detections, result.frame.index, ids)

    def _track(
        self, detections: Detections, image: npt.NDArray[np.uint8] | None
    ) -> npt.NDArray[np.int64]:
        """The tracker's IDs for the frame's boxes; a box with a coordinate or score that
        is not a number (a broken model's) gets none and is kept from the tracker, whose
        filters and assignment it would poison."""
        # a sum of finite values is finite (unless it overflows: then the exact check)
        sums_finite = math.isfinite(detections.boxes.sum()) and math.isfinite(
            detections.scores.sum()
        )
        finite = None
        if not sums_finite:
            finite = np.isfinite(detections.boxes).all(axis=1) & np.isfinite(detections.scores)
        if finite is None or finite.all():
            return np.asarray(self.tracker.update(detections, image), np.int64)
        ids = np.full(len(detections), -1, np.int64)
        ids[finite] = self.tracker.update(detections.select(finite), image)
        return ids

    def _begin(self, result: FrameResult, detections: Detections) -> bool:
        """After a reset: replay a recorded frame (False: done) or restart the tracker
        where the frame does not follow (see the module's docstring)."""
        if not self._discontinuity:
            return True
        index = result.frame.index
        given = self._record.get(index)
        if given is not None and given.boxes_key == _boxes_key(detections):
            result.output = self._replay(detections, index, given)
            return False
        if self._last is None or index != self._last + 1:
            self._restart()
        self._discontinuity = False
        return True

    def _restart(self) -> None:
        self.tracker.reset()
        self._record.clear()
        self._first_seen.clear()
        self._last_seen.clear()
        self._trails.clear()
        self._free = list(range(len(self._counts)))
        self._last = None

    def _image(self, result: FrameResult) -> npt.NDArray[np.uint8] | None:
        """The frame's pixels, for a tracker that wants them (and where they are kept)."""
        if self.tracker.needs_image and not isinstance(result.frame.device, PixelsNotKept):
            return result.frame.image
        return None

    def _finish(self, detections: Detections, index: int, ids: npt.NDArray[np.int64]) -> Detections:
        """The frame's boxes with the IDs the tracker gave: recorded, trails extended."""
        if not self._record_frames and self.trail_length <= 0:  # a run's: IDs alone
            self._last = index
            return _with_tracks(detections, ids, None)
        points = centres(detections.boxes)
        if self._record_frames:
            self._record[index] = _Given(ids.copy(), points, _boxes_key(detections))
            if len(self._record) > self._record_frames:
                self._record.popitem(last=False)
        if index % min(256, self._forget_after) == 0:
            self._forget(index)
        self._last = index
        trails = self._extend_trails(ids, points, index) if self.trail_length > 0 else None
        return _with_tracks(detections, ids, trails)

    def _extend_trails(
        self, ids: npt.NDArray[np.int64], points: npt.NDArray[np.float32], index: int
    ) -> tuple[npt.NDArray[np.float32], ...]:
        """Each box's point added to its track's trail; the trails (one per box, empty
        for a box of no track)."""
        id_list = ids.tolist()
        if id_list and min(id_list) < 0:  # boxes of no track: no trail
            boxes = [k for k, i in enumerate(id_list) if i >= 0]
            id_list = [id_list[k] for k in boxes]
            points = points[boxes]
        else:
            boxes = list(range(len(id_list)))
        trails = [_NO_TRAIL] * len(ids)
        if not boxes:
            return tuple(trails)
        known = self._trails.get
        found = [known(i) for i in id_list]
        rows = [
            self._row(i, index) if r is None else r for i, r in zip(id_list, found, strict=True)
        ]
        self._last_seen.update(dict.fromkeys(id_list, index))
        length = self.trail_length
        counts = self._counts
        if len(set(rows)) < len(rows):  # one track on two boxes (not from our trackers)
            for j, (k, row) in enumerate(zip(boxes, rows, strict=True)):
                window = self._points[row]
                window[:-1] = window[1:].copy()
                window[-1] = points[j]
                counts[row] = min(counts[row] + 1, length)
                trails[k] = window[length - counts[row] :].copy()
            return tuple(trails)
        at = np.array(rows)
        windows = self._points[at]  # a copy: the trails given are views of it
        windows[:, :-1] = windows[:, 1:]
        windows[:, -1] = points
        self._points[at] = windows
        for j, (k, row) in enumerate(zip(boxes, rows, strict=True)):
            count = counts[row] = min(counts[row] + 1, length)
            trails[k] = windows[j, length - count :]
        return tuple(trails)

    def _row(self, track_id: int, index: int) -> int:
        """The track's row of trail points (a new, empty one for a track without)."""
        row = self._trails.get(track_id)
        if row is not None:
            return row
        if not self._free:
            size = len(self._counts)
            grown = max(16, 2 * size)
            self._free = list(range(grown - 1, size - 1, -1))
            points = np.zeros((grown, *self._points.shape[1:]), dtype=np.float32)
            points[:size] = self._points
            self._points = points
            self._counts.extend([0] * (grown - size))
        row = self._trails[track_id] = self._free.pop()
        self._counts[row] = 0
        self._first_seen.setdefault(track_id, index)
        return row

    def _forget(self, index: int) -> None:
        """Tracks unseen for ``forget_after`` frames lose their trail (an ID is never
        given again, and a track lost that long is removed by its tracker); those
        older than the whole record are forgotten."""
        oldest = next(iter(self._record), index)
        for track_id, seen in list(self._last_seen.items()):
            if seen < index - self._forget_after:
                row = self._trails.pop(track_id, None)
                if row is not None:
                    self._free.append(row)
            if seen < oldest:
                del self._last_seen[track_id]
                self._first_seen.pop(track_id, None)

    def _replay(self, detections: Detections, index: int, given: _Given) -> Detections:
        trails: tuple[npt.NDArray[np.float32], ...] | None = None
        if self.trail_length > 0:
            frames = list(self._record)  # tracked in order: increasing frame indices
            upto = bisect.bisect_right(frames, index)
            trails = tuple(self._past_trail(int(i), frames[:upto]) for i in given.ids)
        return _with_tracks(detections, given.ids.copy(), trails)

    def _past_trail(self, track_id: int, frames: list[int]) -> npt.NDArray[np.float32]:
        """The track's last ``trail_length`` recorded centres in ``frames`` (the record's
        frames up to the one replayed), as they were given."""
        if track_id < 0:
            return _NO_TRAIL
        first = self._first_seen.get(track_id, frames[-1])
        points: list[npt.NDArray[np.float32]] = []
        for frame in reversed(frames):
            if frame < first or len(points) == self.trail_length:
                break
            given = self._record[frame]
            hit = np.flatnonzero(given.ids == track_id)
            if len(hit):
                points.append(given.centres[hit[0]])
        return np.stack(points[::-1]) if points else _NO_TRAIL


def _with_tracks(
    detections: Detections,
    ids: npt.NDArray[np.int64],
    trails: tuple[npt.NDArray[np.float32], ...] | None,
) -> Detections:
    """The same boxes with track IDs and trails (``dataclasses.replace`` in a fraction
    of its time: every other field of Detections kept)."""
    kept = {name: getattr(detections, name) for name in _KEPT_FIELDS}
    return Detections(**kept, track_ids=ids, trails=trails)


_KEPT_FIELDS = tuple(f.name for f in fields(Detections) if f.name not in ("track_ids", "trails"))


def _boxes_key(detections: Detections) -> bytes:
    return np.ascontiguousarray(detections.boxes, dtype=np.float32).tobytes()


@dataclass(frozen=True, slots=True)
class TrackingStages:
    """The stage factory of ``tracking_stages``: picklable, so a run spread over
    processes (``run --processes``) or Ray workers (archives) takes it along."""

    settings: TrackerSettings
    make: Callable[[TrackerSettings], Tracker] = make_tracker
    record: bool = True

    def prepare(self) -> None:
        """The tracker's code ready before the first result (ByteTrack's compiled steps
        loaded from numba's cache: ~0.4 s, in a process's first tracked frame
        otherwise): a throwaway tracker given one frame of one box."""
        tracker = self.make(self.settings)
        if not tracker.needs_image:
            box = np.array([[0.0, 0.0, 8.0, 16.0]], dtype=np.float32)
            one = Detections(box, np.ones(1, np.float32), np.zeros(1, np.int32))
            tracker.update(one)

    def __call__(self, source: int) -> list[SourceStage]:
        del source  # every source alike, each its own tracker
        settings = self.settings
        lost = int(settings.track_buffer * settings.frame_rate / 30.0)
        forget = max(FORGET_AFTER, 2 * lost + 1)  # a trail outlives its track's buffer
        stage = TrackingStage(
            self.make(settings), settings.trail_length,
            record_frames=RECORD_FRAMES if self.record else 0, forget_after=forget,
        )  # fmt: skip
        return [stage]


def tracking_stages(
    settings: TrackerSettings,
    make: Callable[[TrackerSettings], Tracker] = make_tracker,
    *,
    record: bool = True,
) -> StageFactory:
    """A stage factory giving each source a tracking stage with a tracker of its own.
    ``record=False``: no record of the IDs given (for consumers that never step back,
    a run's or the wall's: a reset then restarts tracking unless the next frame
    follows)."""
    return TrackingStages(settings, make, record)
