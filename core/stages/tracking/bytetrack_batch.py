"""ByteTrack for many sources at once: the frames of several sources in one set of numpy
calls, each source's IDs exactly those its own :class:`ByteTrack` would give.

A process tracking many sources pays ByteTrack's per-frame cost mostly in numpy's
per-call overhead (about 100 calls of ~1 us for a frame of a few objects). Here the
track tables of every source are one table with a source column; a call takes one frame
of each of several sources (a *round*) and runs each step once for all of them:

- one Kalman predict for the tracks of the sources in the round (other sources'
  tracks are left as they are: their time does not move);
- one IoU matrix over all tracks and all detections of the round; each matching step
  takes the rows and columns of every source as contiguous blocks and solves each
  source's block on its own (scipy's ``linear_sum_assignment``, only where both sides
  have members): the values of a block are those of the source's own matrix, so the
  pairs are too;
- one Kalman update for every matched track, one initiation for every new one;
- confirmation, lost-too-long and duplicate removal with the source column: IDs are
  numbered per source from 1, each source's frame count its own.

The rows of one source keep, in the shared table, the order they have in that source's
own table (new rows go to the end, removals keep the order), so every per-source step
sees its tracks in the same order as :class:`ByteTrack` does: the result is the same to
the last bit, which tests/unit/test_bytetrack_batch.py checks against it.

:meth:`ByteTrackBatch.update_many` takes frames of sources in any grouping: a source's
frames must come in order, and two frames of one source in one call are tracked in two
rounds (round k: the k-th frame of each source present). :meth:`ByteTrackBatch.source`
gives a source's view with the one-source :class:`Tracker` interface.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeGuard

import numpy as np
import numpy.typing as npt
from framelens.core.stages.tracking.bytetrack import (
    LOST,
    TRACKED,
    ByteTrack,
    TrackTable,
    match_cascade,
)
from framelens.core.stages.tracking.geometry import iou_matrix, xyah_to_xyxy, xyxy_to_xyah
from framelens.core.stages.tracking.kalman import BoxKalman, Covariances, Means
from framelens.core.stages.tracking.settings import TrackerSettings
from framelens.core.types import Detections
from scipy.optimize import linear_sum_assignment

__all__ = ["ByteTrackBatch", "SourceTracker", "batchable", "update_trackers"]

_FORBIDDEN = 1e5  # as core/stages/tracking/assignment.py
PAIRS_PER_ROUND = 8192
"""The most (track, detection) pairs one round's IoU matrix takes: the matrix spans every
source of the round, so its size grows as the square of the sources taken together;
past this, sources are tracked in smaller rounds (one source alone: its own cost)."""
_DUPLICATE_IOU = 0.85
_Ints = npt.NDArray[np.intp]


class _Table(TrackTable):
    """Every live track of every source: a TrackTable with ``src``, its source's slot."""

    COLUMNS = (*TrackTable.COLUMNS, "src")
    __slots__ = ("src",)

    def __init__(self) -> None:
        super().__init__()
        self.src = np.zeros(0, dtype=np.intp)

    def append_of(
        self, mean: Means, cov: Covariances, frames: npt.NDArray[np.int64], src: _Ints
    ) -> None:
        """New tracks of the sources ``src``, started at ``frames``."""
        self.append(mean, cov, frames)
        self.src = np.concatenate([self.src, src])


class ByteTrackBatch:
    """ByteTrack of many sources in one table (see the module's docstring). Every source
    has ``settings``; ``frame_rate`` may differ per source (:meth:`add`)."""

    def __init__(self, settings: TrackerSettings) -> None:
        self.settings = settings
        self._kalman = BoxKalman("xyah")
        self._min_hits = settings.min_hits
        self._slots: dict[Hashable, int] = {}
        self._frames = np.zeros(0, dtype=np.int64)  # per slot: frames tracked since reset
        self._next_ids = np.zeros(0, dtype=np.int64)  # per slot: the next ID to give
        self._max_lost = np.zeros(0, dtype=np.int64)  # per slot: frames a lost track lives
        self._t = _Table()

    def add(self, key: Hashable, frame_rate: float | None = None) -> None:
        """Make ``key`` a source (done on its first frame otherwise), at ``frame_rate``
        (None: the settings')."""
        if key in self._slots:
            return
        rate = self.settings.frame_rate if frame_rate is None else frame_rate
        self._slots[key] = len(self._frames)
        self._frames = np.append(self._frames, 0)
        self._next_ids = np.append(self._next_ids, 1)
        self._max_lost = np.append(self._max_lost, int(rate / 30.0 * self.settings.track_buffer))

    def source(self, key: Hashable, frame_rate: float | None = None) -> SourceTracker:
        """``key``'s tracker, one frame at a time (the :class:`Tracker` interface)."""
        self.add(key, frame_rate)
        return SourceTracker(self, key)

    def reset(self, key: Hashable) -> None:
        """Forget ``key``'s tracks (its numbering goes on); other sources are untouched."""
        slot = self._slots.get(key)
        if slot is None:
            return
        t = self._t
        if len(t):
            t.keep(t.src != slot)
        self._frames[slot] = 0

    def tracks(self, key: Hashable) -> _Table:
        """A copy of ``key``'s live tracks, in the order of its own rows."""
        out = _Table()
        slot = self._slots.get(key)
        if slot is not None:
            for name in _Table.COLUMNS:
                setattr(out, name, getattr(self._t, name)[self._t.src == slot])
        return out

    def update_many(
        self, items: Sequence[tuple[Hashable, Detections]]
    ) -> list[npt.NDArray[np.int64]]:
        """Each (source, detections) item's IDs, in the items' order; a source's items
        are its next frames, in order."""
        out: list[npt.NDArray[np.int64]] = [np.zeros(0, dtype=np.int64)] * len(items)
        seen: dict[Hashable, int] = {}
        rounds: list[list[int]] = []
        for i, (key, _) in enumerate(items):
            self.add(key)
            k = seen.get(key, 0)
            seen[key] = k + 1
            if k == len(rounds):
                rounds.append([])
            rounds[k].append(i)
        for members in rounds:
            members.sort(key=lambda i: self._slots[items[i][0]])  # the table's order
            slots = [self._slots[items[i][0]] for i in members]
            tracks = np.bincount(self._t.src, minlength=len(self._frames))[slots].tolist()
            sizes = [len(items[i][1].boxes) for i in members]
            for part in _chunks(tracks, sizes):
                ids = self._round([slots[j] for j in part], [items[members[j]][1] for j in part])
                for j, one in zip(part, ids, strict=True):
                    out[members[j]] = one
        return out

    def _round(self, slots: list[int], detections: list[Detections]) -> list[npt.NDArray[np.int64]]:
        """One frame of each of ``slots`` (all different): ByteTrack.update, batched."""
        s = self.settings
        k = len(slots)
        slot_of = np.array(slots, dtype=np.intp)
        self._frames[slot_of] += 1
        frames = self._frames
        sizes = [len(d.boxes) for d in detections]
        if k == 1:
            boxes = detections[0].boxes.astype(np.float64)
            scores = detections[0].scores.astype(np.float64)
        else:
            boxes = np.concatenate([d.boxes for d in detections]).astype(np.float64)
            scores = np.concatenate([d.scores for d in detections]).astype(np.float64)
        n = len(boxes)
        det_pos = np.repeat(np.arange(k), sizes)  # detection -> its source's place
        owner = np.empty(n, dtype=np.intp)
        owner.fill(-1)
        t = self._t
        count = len(t)
        pos_of_slot = np.full(len(frames), -1, dtype=np.intp)
        pos_of_slot[slot_of] = np.arange(k)
        row_pos = pos_of_slot[t.src]  # row -> its source's place in the round (-1: absent)
        active = row_pos >= 0
        self._predict(active)
        is_high = scores >= s.high_threshold
        high = is_high.nonzero()[0]
        # the table is kept ordered by slot and the round's slots increase: the rows of
        # each source are one block, in the round's order, and so are the detections
        pool = (t.confirmed & active).nonzero()[0]
        unconfirmed = (~t.confirmed & active).nonzero()[0]
        iou = None
        at = None
        if count and n:
            # the IoU of every track of the round's sources with every detection
            if np.count_nonzero(active) == count:
                iou = iou_matrix(xyah_to_xyxy(t.mean), boxes)
            else:  # a row of the table -> its row of the matrix (where active)
                iou = iou_matrix(xyah_to_xyxy(t.mean[active]), boxes)
                at = np.cumsum(active) - 1

        def match(rows: _Ints, cols: _Ints, weighted: bool, least: float) -> tuple[_Ints, _Ints]:
            assert iou is not None
            similarity = iou[_at(at, rows)][:, cols]
            if weighted:
                similarity = similarity * scores[cols]
            return _assign(1.0 - similarity, 1.0 - least, row_pos[rows], det_pos[cols], k)

        high_left, left_unconfirmed = match_cascade(
            match if iou is not None else None, s, owner, t.state, scores, is_high, high,
            pool, unconfirmed,
        )  # fmt: skip

        # correct every matched track with its detection
        matched = (owner >= 0).nonzero()[0]
        if len(matched):
            rows = owner[matched]
            mean, cov = self._update(
                t.mean[rows], t.cov[rows], xyxy_to_xyah(boxes[matched]), t.src[rows]
            )
            t.mean[rows] = mean
            t.cov[rows] = cov
            t.state[rows] = TRACKED
            t.end[rows] = frames[t.src[rows]]
            t.hits[rows] += 1

        # 4. new tracks from the high detections left that score enough
        new = high_left
        if len(high_left):
            new = high_left[scores[high_left] >= s.new_track_threshold]
        if len(new):
            mean, cov = self._kalman.initiate(xyxy_to_xyah(boxes[new]))
            src = slot_of[det_pos[new]]
            t.append_of(mean, cov, frames[src], src)
            owner[new] = np.arange(count, count + len(new))
            active = np.concatenate([active, np.ones(len(new), dtype=bool)])
        alive = np.ones(len(t), dtype=bool)
        if len(left_unconfirmed):
            alive[left_unconfirmed] = False

        # confirmation: min_hits consecutive observations (at once on a source's first
        # frame); IDs numbered per source, in the order of its rows
        if len(unconfirmed) or len(new):
            row_frames = frames[t.src]
            promote = (
                ~t.confirmed & alive & active & ((t.hits >= self._min_hits) | (row_frames == 1))
            )
            self._number(promote.nonzero()[0])
            t.confirmed |= promote

        # lost too long: removed; duplicates of a tracked track among the lost: dropped
        lost = t.state == LOST
        stale = lost & active & (t.end < frames[t.src] - self._max_lost[t.src])
        if np.count_nonzero(stale):
            alive &= ~stale
        self._drop_duplicates(alive, active)
        if len(t) == 0:
            ids = owner.astype(np.int64)
        else:
            ids = np.where(owner >= 0, np.where(alive, t.ids, -1)[owner], -1).astype(np.int64)
            if np.count_nonzero(alive) < len(alive):
                t.keep(alive)
            if len(new) and len(t) and np.count_nonzero(np.diff(t.src) < 0):
                t.keep(np.argsort(t.src, kind="stable"))  # new rows to their source's block
        if k == 1:
            return [ids]
        return np.split(ids, np.cumsum(sizes[:-1]))

    def _predict(self, active: npt.NDArray[np.bool_]) -> None:
        """Every track of the round's sources one frame ahead (lost ones with their
        height velocity zeroed)."""
        t = self._t
        if len(t) == 0:
            return
        lost = active & (t.state != TRACKED)
        if np.count_nonzero(lost):
            t.mean[lost, 7:8] = 0.0
        if np.count_nonzero(active) == len(t):
            t.mean, t.cov = self._kalman.predict(t.mean, t.cov)
            return
        rows = active.nonzero()[0]
        if len(rows):
            mean, cov = self._kalman.predict(t.mean[rows], t.cov[rows])
            t.mean[rows] = mean
            t.cov[rows] = cov

    def _update(
        self, mean: Means, cov: Covariances, measurement: npt.NDArray[np.float64], src: _Ints
    ) -> tuple[Means, Covariances]:
        """The Kalman update, the way each source's own filter chooses it: a source with
        any coupled innovation covariance (off-diagonal terms) solves for all its rows,
        the others divide (BoxKalman.update decides once per call)."""
        n = len(mean)
        coupled = np.count_nonzero(
            cov[:, :4, :4].reshape(n, 16)[:, 1:].reshape(n, 3, 5)[:, :, :4], axis=(1, 2)
        )
        if not np.count_nonzero(coupled) or np.count_nonzero(coupled) == n:
            return self._kalman.update(mean, cov, measurement)
        solve = np.isin(src, np.unique(src[coupled > 0]))
        if np.count_nonzero(solve) == n:
            return self._kalman.update(mean, cov, measurement)
        out_mean, out_cov = mean.copy(), cov.copy()
        for part in (solve, ~solve):
            m, c = self._kalman.update(mean[part], cov[part], measurement[part])
            out_mean[part] = m
            out_cov[part] = c
        return out_mean, out_cov

    def _number(self, rows: _Ints) -> None:
        """IDs for the promoted ``rows`` (increasing), each source numbering on."""
        if len(rows) == 0:
            return
        t = self._t
        src = t.src[rows]
        order = np.argsort(src, kind="stable")
        grouped = src[order]
        rank = np.arange(len(rows)) - np.searchsorted(grouped, grouped)
        t.ids[rows[order]] = self._next_ids[grouped] + rank
        self._next_ids += np.bincount(src, minlength=len(self._next_ids))

    def _drop_duplicates(self, alive: npt.NDArray[np.bool_], active: npt.NDArray[np.bool_]) -> None:
        """A tracked track and a lost one of one source on the same place: the one
        followed for fewer frames goes (``active``: the rows of the round's sources).
        Each pair's decision depends on the two tracks' starts alone, as in ByteTrack."""
        t = self._t
        lost = t.state == LOST
        candidates = alive & active & lost
        if not np.count_nonzero(candidates):
            return
        tracked = (alive & active & ~lost).nonzero()[0]
        if len(tracked) == 0:
            return
        lost_rows = candidates.nonzero()[0]
        boxes = xyah_to_xyxy(t.mean)
        iou = iou_matrix(boxes[tracked], boxes[lost_rows])
        same = t.src[tracked][:, None] == t.src[lost_rows][None, :]
        i, j = ((iou > _DUPLICATE_IOU) & same).nonzero()
        if len(i) == 0:
            return
        p, q = tracked[i], lost_rows[j]
        p_older = t.start[p] < t.start[q]  # frame - start[p] > frame - start[q]
        alive[q[p_older]] = False
        alive[p[~p_older]] = False


def update_trackers(
    trackers: Sequence[ByteTrack], detections: Sequence[Detections]
) -> list[npt.NDArray[np.int64]]:
    """One frame of each of several one-source ``ByteTrack``s (all different, all of
    the same settings but their frame rate), tracked in one round: each tracker's
    tracks are taken into one table and given back after, each ``update`` as it would
    have been (the same IDs and the same tracks to the last bit)."""
    parts = _chunks([len(t._tracks) for t in trackers], [len(d.boxes) for d in detections])
    if len(parts) > 1:
        out: list[npt.NDArray[np.int64]] = [np.zeros(0, dtype=np.int64)] * len(trackers)
        for part in parts:
            ids = update_trackers([trackers[i] for i in part], [detections[i] for i in part])
            for i, one in zip(part, ids, strict=True):
                out[i] = one
        return out
    if len(trackers) == 1:
        return [trackers[0].update(detections[0])]
    batch = ByteTrackBatch(trackers[0].settings)
    k = len(trackers)
    tables = [tracker._tracks for tracker in trackers]
    t = batch._t
    for name in TrackTable.COLUMNS:
        setattr(t, name, np.concatenate([getattr(table, name) for table in tables]))
    t.src = np.repeat(np.arange(k), [len(table) for table in tables])
    batch._frames = np.array([tracker._frame for tracker in trackers], dtype=np.int64)
    batch._next_ids = np.array([tracker._next_id for tracker in trackers], dtype=np.int64)
    batch._max_lost = np.array([tracker._max_lost for tracker in trackers], dtype=np.int64)
    ids = batch._round(list(range(k)), list(detections))
    bounds = np.searchsorted(t.src, np.arange(k + 1)).tolist()
    frames = batch._frames.tolist()
    next_ids = batch._next_ids.tolist()
    for i, tracker in enumerate(trackers):
        table = tracker._tracks = TrackTable()
        b0, b1 = bounds[i], bounds[i + 1]
        for name in TrackTable.COLUMNS:
            setattr(table, name, getattr(t, name)[b0:b1])
        tracker._frame = frames[i]
        tracker._next_id = next_ids[i]
    return ids


def batchable(tracker: object) -> TypeGuard[ByteTrack]:
    """Whether :func:`update_trackers` may take ``tracker`` (a ByteTrack, not a kind
    derived from it)."""
    return type(tracker) is ByteTrack


class SourceTracker:
    """One source of a :class:`ByteTrackBatch`, as a one-source tracker."""

    needs_image = False

    def __init__(self, batch: ByteTrackBatch, key: Hashable) -> None:
        self.batch = batch
        self.key = key

    def update(
        self, detections: Detections, image: npt.NDArray[np.uint8] | None = None
    ) -> npt.NDArray[np.int64]:
        del image
        return self.batch.update_many([(self.key, detections)])[0]

    def reset(self) -> None:
        self.batch.reset(self.key)


def _at(at: _Ints | None, rows: _Ints) -> _Ints:
    """Table rows as rows of the round's IoU matrix (None: the same)."""
    return rows if at is None else at[rows]


def _chunks(tracks: list[int], detections: list[int]) -> list[list[int]]:
    """The sources of a round (their tracks and detections), in order, in parts whose
    IoU matrix takes at most PAIRS_PER_ROUND pairs (a source alone may take more)."""
    parts: list[list[int]] = []
    rows = cols = 0
    for i, (t, d) in enumerate(zip(tracks, detections, strict=True)):
        if parts and (rows + t) * (cols + d) <= PAIRS_PER_ROUND:
            parts[-1].append(i)
            rows, cols = rows + t, cols + d
        else:
            parts.append([i])
            rows, cols = t, d
    return parts


def _assign(
    cost: npt.NDArray[np.float64],
    limit: float,
    row_pos: _Ints,
    col_pos: _Ints,
    k: int,
) -> tuple[_Ints, _Ints]:
    """gated_pairs (core/stages/tracking/assignment.py) of every source's block of
    ``cost`` (rows and columns grouped by source place, ``row_pos`` / ``col_pos``
    increasing): the pairs, in block order."""
    allowed = cost <= limit
    gated = np.where(allowed, cost, _FORBIDDEN)
    if k == 1:
        r, c = linear_sum_assignment(gated)
    else:
        places = np.arange(k + 1)
        rb = np.searchsorted(row_pos, places).tolist()
        cb = np.searchsorted(col_pos, places).tolist()
        rs: list[_Ints] = []
        cs: list[_Ints] = []
        for p in range(k):
            r0, r1, c0, c1 = rb[p], rb[p + 1], cb[p], cb[p + 1]
            if r1 > r0 and c1 > c0:
                r, c = linear_sum_assignment(gated[r0:r1, c0:c1])
                rs.append(r + r0)
                cs.append(c + c0)
        if not rs:
            return row_pos[:0], col_pos[:0]
        r, c = (rs[0], cs[0]) if len(rs) == 1 else (np.concatenate(rs), np.concatenate(cs))
    keep = allowed[r, c]
    return r[keep], c[keep]
