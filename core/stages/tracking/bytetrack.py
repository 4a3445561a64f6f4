"""ByteTrack (Zhang et al., ECCV 2022): associate every detection box, low scores too.

Each frame, following the original code (github.com/ifzhang/ByteTrack, BYTETracker):

1. every track's Kalman filter predicts its box (lost tracks with their height
   velocity zeroed);
2. detections at or above ``high_threshold`` are matched to confirmed and lost tracks
   by IoU, the IoU weighted by the detection's score (``fuse_score``); cost limit
   ``1 - match_iou``. A matched lost track is found again with its old ID;
3. detections between ``low_threshold`` and ``high_threshold`` are matched to the
   tracks still unmatched that were tracked in the last frame, IoU >= ``second_match_iou``
   (0.5): the low-score boxes of occluded objects keep their tracks alive; these
   boxes never start a track;
4. tracks still unmatched are lost; unconfirmed tracks (new last frame) are matched to
   the high detections left (score-weighted IoU >= ``unconfirmed_match_iou``), and
   removed when unmatched;
5. a high detection left over that scores ``new_track_threshold`` starts a track;
   it is confirmed (and numbered) after ``min_hits`` consecutive observations, at
   once on the tracker's first frame;
6. a lost track unseen for more than ``track_buffer * frame_rate / 30`` frames is
   removed; a lost track that overlaps a tracked one (IoU > 0.85) is a duplicate and
   the younger of the two is dropped.

Unlike the original, an ID is given when a track is confirmed (not when it starts),
so IDs run 1, 2, 3 ... without gaps; and the output keeps the detector's boxes.
All tracks live in arrays (core/stages/tracking/kalman.py): one numpy call per step.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from framelens.core.stages.tracking.assignment import gated_pairs
from framelens.core.stages.tracking.geometry import iou_matrix, xyah_to_xyxy, xyxy_to_xyah
from framelens.core.stages.tracking.kalman import BoxKalman
from framelens.core.stages.tracking.settings import TrackerSettings
from framelens.core.types import Detections

__all__ = ["ByteTrack", "Match", "TrackTable", "match_cascade"]

TRACKED = 0
LOST = 1
_DUPLICATE_IOU = 0.85  # the original's iou_distance < 0.15


class TrackTable:
    """Every live track of a tracker as parallel arrays (one row per track)."""

    COLUMNS: tuple[str, ...] = ("confirmed", "cov", "end", "hits", "ids", "mean", "start", "state")
    __slots__ = ("confirmed", "cov", "end", "hits", "ids", "mean", "start", "state")

    def __init__(self) -> None:
        self.mean = np.zeros((0, 8))
        self.cov = np.zeros((0, 8, 8))
        self.ids = np.zeros(0, dtype=np.int64)  # -1 until confirmed
        self.state = np.zeros(0, dtype=np.int8)  # TRACKED or LOST
        self.confirmed = np.zeros(0, dtype=bool)
        self.hits = np.zeros(0, dtype=np.int64)  # consecutive observations while unconfirmed
        self.start = np.zeros(0, dtype=np.int64)  # frame it started
        self.end = np.zeros(0, dtype=np.int64)  # frame last observed

    def __len__(self) -> int:
        return len(self.ids)

    def keep(self, mask: npt.NDArray[np.bool_] | npt.NDArray[np.intp]) -> None:
        for name in self.COLUMNS:
            setattr(self, name, getattr(self, name)[mask])

    def append(
        self,
        mean: npt.NDArray[np.float64],
        cov: npt.NDArray[np.float64],
        frame: int | npt.NDArray[np.int64],
    ) -> None:
        """New tracks started at ``frame`` (one for all, or one per track)."""
        n = len(mean)
        frames = np.full(n, frame, dtype=np.int64) if isinstance(frame, int) else frame
        self.mean = np.concatenate([self.mean, mean])
        self.cov = np.concatenate([self.cov, cov])
        self.ids = np.concatenate([self.ids, np.full(n, -1, dtype=np.int64)])
        self.state = np.concatenate([self.state, np.full(n, TRACKED, dtype=np.int8)])
        self.confirmed = np.concatenate([self.confirmed, np.zeros(n, dtype=bool)])
        self.hits = np.concatenate([self.hits, np.ones(n, dtype=np.int64)])
        self.start = np.concatenate([self.start, frames])
        self.end = np.concatenate([self.end, frames])


class ByteTrack:
    """ByteTrack for one source (see the module's docstring)."""

    needs_image = False

    def __init__(self, settings: TrackerSettings) -> None:
        self.settings = settings
        self._kalman = BoxKalman("xyah")
        self._max_lost = int(settings.frame_rate / 30.0 * settings.track_buffer)
        self._min_hits = settings.min_hits
        self._next_id = 1
        self._tracks = TrackTable()
        self._frame = 0

    # the measurement the filter keeps (BoT-SORT: xywh)
    def _to_measurement(self, boxes: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return xyxy_to_xyah(boxes)

    def _to_boxes(self, mean: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return xyah_to_xyxy(mean)

    # the state's entries a lost track stops changing: its height's velocity
    _frozen_when_lost = slice(7, 8)

    def _predict(self, image: npt.NDArray[np.uint8] | None) -> None:
        t = self._tracks
        if len(t) == 0:
            return
        lost = t.state != TRACKED
        if np.count_nonzero(lost):
            t.mean[lost, self._frozen_when_lost] = 0.0
        t.mean, t.cov = self._kalman.predict(t.mean, t.cov)

    def reset(self) -> None:
        self._tracks = TrackTable()
        self._frame = 0

    def update(
        self, detections: Detections, image: npt.NDArray[np.uint8] | None = None
    ) -> npt.NDArray[np.int64]:
        # A matching step whose tracks or detections are none is skipped (most frames:
        # no track is unconfirmed, no detection scores low): a frame of a few objects
        # costs its numpy calls, so each step makes as few as it can.
        s = self.settings
        self._frame += 1
        frame = self._frame
        boxes = detections.boxes.astype(np.float64)
        scores = detections.scores.astype(np.float64)
        n = len(boxes)
        owner = np.empty(n, dtype=np.intp)  # detection -> row in the track table
        owner.fill(-1)
        t = self._tracks
        count = len(t)
        self._predict(image)
        is_high = scores >= s.high_threshold
        high = is_high.nonzero()[0]
        pool = t.confirmed.nonzero()[0]  # tracked and lost, confirmed
        unconfirmed = (~t.confirmed).nonzero()[0]
        iou = None
        if count and n:
            iou = iou_matrix(self._to_boxes(t.mean), boxes)  # (tracks, detections)

        def match(
            rows: npt.NDArray[np.intp], cols: npt.NDArray[np.intp], weighted: bool, least: float
        ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
            assert iou is not None
            similarity = _part(iou, rows, cols, count, n)
            if weighted:
                similarity = similarity * scores[cols]
            return gated_pairs(1.0 - similarity, 1.0 - least)

        high_left, left_unconfirmed = match_cascade(
            match if iou is not None else None, s, owner, t.state, scores, is_high, high,
            pool, unconfirmed,
        )  # fmt: skip

        # correct every matched track with its detection
        matched = (owner >= 0).nonzero()[0]
        if len(matched):
            rows = owner[matched]
            mean, cov = self._kalman.update(
                t.mean[rows], t.cov[rows], self._to_measurement(boxes[matched])
            )
            t.mean[rows] = mean
            t.cov[rows] = cov
            t.state[rows] = TRACKED
            t.end[rows] = frame
            t.hits[rows] += 1

        # 4. new tracks from the high detections left that score enough
        new = high_left
        if len(high_left):
            new = high_left[scores[high_left] >= s.new_track_threshold]
        if len(new):
            mean, cov = self._kalman.initiate(self._to_measurement(boxes[new]))
            t.append(mean, cov, frame)
            owner[new] = np.arange(count, count + len(new))
        alive = _trues(len(t))
        if len(left_unconfirmed):
            alive[left_unconfirmed] = False

        # confirmation: min_hits consecutive observations (at once on the first frame)
        if len(unconfirmed) or len(new):
            promote = ~t.confirmed & alive & ((t.hits >= self._min_hits) | (frame == 1))
            for row in promote.nonzero()[0]:
                t.ids[row] = self._next_id
                self._next_id += 1
            t.confirmed |= promote

        # lost too long: removed; duplicates of a tracked track among the lost: dropped
        stale = t.end < frame - self._max_lost
        if np.count_nonzero(stale):
            alive &= ~(stale & (t.state == LOST))
        self._drop_duplicates(alive)
        if len(t) == 0:
            return owner.astype(np.int64)  # no track: every box -1
        # a track dropped as a duplicate shows no ID (the original)
        ids: npt.NDArray[np.int64] = np.where(owner >= 0, np.where(alive, t.ids, -1)[owner], -1)
        if np.count_nonzero(alive) < len(alive):
            t.keep(alive)
        return ids

    def _drop_duplicates(self, alive: npt.NDArray[np.bool_]) -> None:
        """The original's remove_duplicate_stracks: a tracked track and a lost one on
        the same place; the one followed for fewer frames goes."""
        t = self._tracks
        lost = t.state == LOST
        candidates = alive & lost
        if not np.count_nonzero(candidates):
            return
        tracked = (alive & ~lost).nonzero()[0]
        if len(tracked) == 0:
            return
        lost_rows = candidates.nonzero()[0]
        boxes = self._to_boxes(t.mean)
        iou = iou_matrix(boxes[tracked], boxes[lost_rows])
        for i, j in zip(*(iou > _DUPLICATE_IOU).nonzero(), strict=True):
            p, q = tracked[i], lost_rows[j]
            if self._frame - t.start[p] > self._frame - t.start[q]:
                alive[q] = False
            else:
                alive[p] = False


Match = Callable[[npt.NDArray[np.intp], npt.NDArray[np.intp], bool, float],
                 tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]]  # fmt: skip
"""``match(rows, cols, weighted, least)``: the pairs (positions in ``rows``, in
``cols``) of tracks ``rows`` and detections ``cols`` by IoU (times the detection's score
where ``weighted``) of at least ``least``, by least total cost."""


def match_cascade(
    match: Match | None,
    s: TrackerSettings,
    owner: npt.NDArray[np.intp],
    state: npt.NDArray[np.int8],
    scores: npt.NDArray[np.float64],
    is_high: npt.NDArray[np.bool_],
    high: npt.NDArray[np.intp],
    pool: npt.NDArray[np.intp],
    unconfirmed: npt.NDArray[np.intp],
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """ByteTrack's three matching steps (the module's docstring, 2 to 4), ``match``
    pairing rows and columns of the frame's IoU matrix. ``owner`` (detection -> track
    row) and ``state`` (the tracks not found again: LOST) are filled in; ``match`` None:
    no track or no detection. Returns the high detections and the unconfirmed tracks
    left unmatched."""
    # 1. high detections <-> confirmed tracks (score-weighted IoU)
    pool_left, high_left = pool, high
    if match is not None and len(pool) and len(high):
        r, c = match(pool, high, True, s.match_iou)
        owner[high[c]] = pool[r]
        pool_left, high_left = _left(pool, r), _left(high, c)

    # 2. low detections <-> tracks still unmatched that were tracked last frame
    if len(pool_left):
        second = pool_left[state[pool_left] == TRACKED]
        if match is not None and len(second):
            low = ((scores >= s.low_threshold) & ~is_high).nonzero()[0]
            if len(low):
                r, c = match(second, low, False, s.second_match_iou)
                owner[low[c]] = second[r]
                second = _left(second, r)
        if len(second):
            state[second] = LOST

    # 3. the high detections left <-> unconfirmed tracks
    left_unconfirmed = unconfirmed
    if match is not None and len(unconfirmed) and len(high_left):
        r, c = match(unconfirmed, high_left, True, s.unconfirmed_match_iou)
        owner[high_left[c]] = unconfirmed[r]
        left_unconfirmed, high_left = _left(unconfirmed, r), _left(high_left, c)
    return high_left, left_unconfirmed


def _part(
    matrix: npt.NDArray[np.float64],
    rows: npt.NDArray[np.intp],
    cols: npt.NDArray[np.intp],
    all_rows: int,
    all_cols: int,
) -> npt.NDArray[np.float64]:
    """``matrix[rows][:, cols]``, without copies where they are every row or column."""
    if len(rows) != all_rows:
        matrix = matrix[rows]
    if len(cols) != all_cols:
        matrix = matrix[:, cols]
    return matrix


def _left(indices: npt.NDArray[np.intp], taken: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
    """``indices`` without the positions ``taken``."""
    if len(taken) == 0:
        return indices
    if len(taken) == len(indices):
        return indices[:0]
    left = _trues(len(indices))
    left[taken] = False
    return indices[left]


def _trues(n: int) -> npt.NDArray[np.bool_]:
    """``np.ones(n, dtype=bool)`` in a fraction of its time (it is called every frame)."""
    out = np.empty(n, dtype=bool)
    out.fill(True)
    return out
