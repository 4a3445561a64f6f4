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

import numpy as np
import numpy.typing as npt
from framelens.core.stages.tracking.assignment import linear_assignment
from framelens.core.stages.tracking.geometry import iou_matrix, xyah_to_xyxy, xyxy_to_xyah
from framelens.core.stages.tracking.kalman import BoxKalman
from framelens.core.stages.tracking.settings import TrackerSettings
from framelens.core.types import Detections

__all__ = ["ByteTrack", "TrackTable"]

TRACKED = 0
LOST = 1
_DUPLICATE_IOU = 0.85  # the original's iou_distance < 0.15


class TrackTable:
    """Every live track of a tracker as parallel arrays (one row per track)."""

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

    def keep(self, mask: npt.NDArray[np.bool_]) -> None:
        for name in self.__slots__:
            setattr(self, name, getattr(self, name)[mask])

    def append(
        self, mean: npt.NDArray[np.float64], cov: npt.NDArray[np.float64], frame: int
    ) -> None:
        n = len(mean)
        self.mean = np.concatenate([self.mean, mean])
        self.cov = np.concatenate([self.cov, cov])
        self.ids = np.concatenate([self.ids, np.full(n, -1, dtype=np.int64)])
        self.state = np.concatenate([self.state, np.full(n, TRACKED, dtype=np.int8)])
        self.confirmed = np.concatenate([self.confirmed, np.zeros(n, dtype=bool)])
        self.hits = np.concatenate([self.hits, np.ones(n, dtype=np.int64)])
        self.start = np.concatenate([self.start, np.full(n, frame, dtype=np.int64)])
        self.end = np.concatenate([self.end, np.full(n, frame, dtype=np.int64)])


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

    def _predict(self, image: npt.NDArray[np.uint8] | None) -> None:
        t = self._tracks
        lost = t.state != TRACKED
        if lost.any():
            t.mean[lost, 7] = 0.0  # a lost track's height stops changing
        t.mean, t.cov = self._kalman.predict(t.mean, t.cov)

    def reset(self) -> None:
        self._tracks = TrackTable()
        self._frame = 0

    def update(
        self, detections: Detections, image: npt.NDArray[np.uint8] | None = None
    ) -> npt.NDArray[np.int64]:
        s = self.settings
        self._frame += 1
        frame = self._frame
        boxes = detections.boxes.astype(np.float64)
        scores = detections.scores.astype(np.float64)
        n = len(boxes)
        owner = np.full(n, -1, dtype=np.intp)  # detection -> row in the track table
        t = self._tracks
        self._predict(image)
        track_boxes = self._to_boxes(t.mean)

        high = np.flatnonzero(scores >= s.high_threshold)
        low = np.flatnonzero((scores >= s.low_threshold) & (scores < s.high_threshold))
        pool = np.flatnonzero(t.confirmed)  # tracked and lost, confirmed
        unconfirmed = np.flatnonzero(~t.confirmed)

        # 1. high detections <-> confirmed tracks (score-weighted IoU)
        iou = iou_matrix(track_boxes[pool], boxes[high])
        matches, left_tracks, left_high = linear_assignment(
            1.0 - iou * scores[high][None, :], 1.0 - s.match_iou
        )
        owner[high[matches[:, 1]]] = pool[matches[:, 0]]
        pool_left = pool[left_tracks]
        high_left = high[left_high]

        # 2. low detections <-> tracks still unmatched that were tracked last frame
        second = pool_left[t.state[pool_left] == TRACKED]
        iou = iou_matrix(track_boxes[second], boxes[low])
        matches, left_second, _ = linear_assignment(1.0 - iou, 1.0 - s.second_match_iou)
        owner[low[matches[:, 1]]] = second[matches[:, 0]]
        t.state[second[left_second]] = LOST

        # 3. the high detections left <-> unconfirmed tracks
        iou = iou_matrix(track_boxes[unconfirmed], boxes[high_left])
        matches, left_unconfirmed, left_new = linear_assignment(
            1.0 - iou * scores[high_left][None, :], 1.0 - s.unconfirmed_match_iou
        )
        owner[high_left[matches[:, 1]]] = unconfirmed[matches[:, 0]]
        high_left = high_left[left_new]

        # correct every matched track with its detection
        matched = np.flatnonzero(owner >= 0)
        rows = owner[matched]
        if len(rows):
            mean, cov = self._kalman.update(
                t.mean[rows], t.cov[rows], self._to_measurement(boxes[matched])
            )
            t.mean[rows] = mean
            t.cov[rows] = cov
            t.state[rows] = TRACKED
            t.end[rows] = frame
            t.hits[rows] += 1
        alive = np.ones(len(t), dtype=bool)
        alive[unconfirmed[left_unconfirmed]] = False

        # 4. new tracks from the high detections left that score enough
        new = high_left[scores[high_left] >= s.new_track_threshold]
        if len(new):
            first = len(t)
            mean, cov = self._kalman.initiate(self._to_measurement(boxes[new]))
            t.append(mean, cov, frame)
            owner[new] = np.arange(first, first + len(new))
            alive = np.concatenate([alive, np.ones(len(new), dtype=bool)])

        # confirmation: min_hits consecutive observations (at once on the first frame)
        promote = ~t.confirmed & alive & ((t.hits >= self._min_hits) | (frame == 1))
        for row in np.flatnonzero(promote):
            t.ids[row] = self._next_id
            self._next_id += 1
        t.confirmed |= promote

        # lost too long: removed; duplicates of a tracked track among the lost: dropped
        alive &= ~((t.state == LOST) & (frame - t.end > self._max_lost))
        self._drop_duplicates(alive)
        ids = np.full(n, -1, dtype=np.int64)
        given = np.flatnonzero(owner >= 0)
        rows = owner[given]
        shown = alive[rows]  # a track dropped as a duplicate shows no ID (the original)
        ids[given[shown]] = t.ids[rows[shown]]
        t.keep(alive)
        return ids

    def _drop_duplicates(self, alive: npt.NDArray[np.bool_]) -> None:
        """The original's remove_duplicate_stracks: a tracked track and a lost one on
        the same place; the one followed for fewer frames goes."""
        t = self._tracks
        tracked = np.flatnonzero(alive & (t.state == TRACKED))
        lost = np.flatnonzero(alive & (t.state == LOST))
        if len(tracked) == 0 or len(lost) == 0:
            return
        boxes = self._to_boxes(t.mean)
        iou = iou_matrix(boxes[tracked], boxes[lost])
        for i, j in zip(*np.nonzero(iou > _DUPLICATE_IOU), strict=True):
            p, q = tracked[i], lost[j]
            if self._frame - t.start[p] > self._frame - t.start[q]:
                alive[q] = False
            else:
                alive[p] = False
