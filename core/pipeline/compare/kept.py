"""What a live comparison has computed, kept frame by frame so its report needs no rerun.

The compare view steps its panes for as long as the user watches; "Save report" then
writes what was computed instead of running the panes over the frames again. A
KeptFrames holds one light row per frame (the numbers of records.FrameRow and each
pane's match against the reference, no images), the latest computation of a frame
replacing an earlier one (after Home the first frames come round again). The frames
between the first and the last kept that were never computed (a jump, e.g. Home
from frame 200 back to 0) are the report's to compute: ``missing`` lists them.

``inference_median`` is the median the report will give (records.CompareLog's
``latency_ms_median``), kept up to date as frames come in, so a view can show the
same number while the frames play.

When the panes track (``tracking``), each row keeps every pane's tracked boxes:
``track_frames`` gives them for the view's running track numbers, and the report scores
them (records.py); the frames of a gap are tracked by the report's own trackers, their
IDs numbered above every ID kept (``max_track_ids``), so no ID stands for two objects.

One thread adds (the view's worker), another may read (a report being written):
every method takes the lock.
"""

from __future__ import annotations

import bisect
import itertools
import math
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from framelens.core.pipeline.compare.panes import CompareStep, PaneSpec
from framelens.core.pipeline.compare.records import CompareLog, FrameRow, frame_row
from framelens.core.pipeline.ranges import RunRange
from framelens.core.stages.tasks.detect.agreement import FrameMatch

if TYPE_CHECKING:
    from framelens.core.stages.analytics.zones import ZonesFile
    from framelens.core.stages.tracking.mot import MotFrame
    from framelens.core.stages.tracking.settings import TrackerSettings

__all__ = ["KeptFrames"]

_Kept = tuple[FrameRow, tuple[FrameMatch, ...]]


class KeptFrames:
    """Every frame a comparison of ``specs`` computed, by source index (see the module doc)."""

    def __init__(
        self,
        specs: Sequence[PaneSpec],
        reference: int = 0,
        tracking: TrackerSettings | None = None,
        zones: ZonesFile | None = None,
    ) -> None:
        self.specs = tuple(specs)
        self.reference = reference
        self.tracking = tracking  # the panes' trackers: the report's gaps use the same
        self.zones = zones  # the lines and zones each pane's tracks are counted against
        self._frames: dict[int, _Kept] = {}
        self._sorted: list[list[float]] = [[] for _ in self.specs]  # inference ms, per pane
        self._lock = threading.Lock()

    def add(self, step: CompareStep) -> None:
        """Keep ``step``'s numbers (replacing an earlier computation of its frame)."""
        self.add_row(*frame_row(step))

    def add_row(self, row: FrameRow, matches: Sequence[FrameMatch]) -> None:
        with self._lock:
            old = self._frames.get(row.index)
            if old is not None:
                for values, pane in zip(self._sorted, old[0].panes, strict=True):
                    if not math.isnan(pane.inference_ms):
                        del values[bisect.bisect_left(values, pane.inference_ms)]
            self._frames[row.index] = (row, tuple(matches))
            for values, pane in zip(self._sorted, row.panes, strict=True):
                if not math.isnan(pane.inference_ms):
                    bisect.insort(values, pane.inference_ms)

    def __len__(self) -> int:
        with self._lock:
            return len(self._frames)

    def __contains__(self, index: object) -> bool:
        with self._lock:
            return index in self._frames

    @property
    def span(self) -> tuple[int, int] | None:
        """(first, last) source index kept; None before any frame."""
        with self._lock:
            if not self._frames:
                return None
            return min(self._frames), max(self._frames)

    def row(self, index: int) -> FrameRow | None:
        """The numbers kept for frame ``index``, None when it was not computed."""
        with self._lock:
            kept = self._frames.get(index)
        return None if kept is None else kept[0]

    def missing(self) -> list[RunRange]:
        """The runs of frames between the first and the last kept that were never computed."""
        with self._lock:
            indices = sorted(self._frames)
        gaps: list[RunRange] = []
        for before, after in itertools.pairwise(indices):
            if after > before + 1:
                gaps.append(RunRange(before + 1, after - before - 1))
        return gaps

    def inference_median(self, pane: int) -> float:
        """Median inference ms of ``pane`` over the frames kept; NaN before any."""
        with self._lock:
            values = self._sorted[pane]  # sorted: the middle, as statistics.median takes it
            n = len(values)
            if not n:
                return math.nan
            mid = n // 2
            return values[mid] if n % 2 else (values[mid - 1] + values[mid]) / 2

    def track_frames(self) -> list[list[MotFrame | None]]:
        """Each pane's tracked boxes on every frame kept, in frame order (None where the
        pane did not track)."""
        with self._lock:
            rows = [self._frames[i][0] for i in sorted(self._frames)]
        return [[r.panes[p].tracks for r in rows] for p in range(len(self.specs))]

    def max_track_ids(self) -> list[int]:
        """The highest track ID each pane was given on the frames kept (0: none)."""
        top = [0] * len(self.specs)
        for pane, frames in enumerate(self.track_frames()):
            for f in frames:
                if f is not None and len(f):
                    top[pane] = max(top[pane], int(f.ids.max()))
        return top

    def log(self) -> CompareLog:
        """A CompareLog of the frames kept, in frame order: what the report is written from
        (with the lines and zones: each pane's counts and events, records.py)."""
        log = CompareLog(self.specs, self.reference, zones=self.zones)
        with self._lock:
            kept = [self._frames[i] for i in sorted(self._frames)]
        for row, matches in kept:
            log.add(row, matches)
        return log
