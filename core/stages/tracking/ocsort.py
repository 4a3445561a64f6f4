"""OC-SORT (Cao et al., CVPR 2023): SORT made observation-centric.

Following the paper and the original code's logic (github.com/noahcao/OC_SORT):

- a Kalman filter per track on (centre x, centre y, area, aspect ratio) with constant
  velocity for x, y and area (SORT's filter and noise);
- observation-centric momentum (OCM): a track's direction is measured between its
  observations ``ocsort_delta_t`` frames apart, not from the filter; matching adds to
  the IoU how well the direction from that old observation to a detection agrees
  with it (weight ``ocsort_inertia``, scaled by the detection's score);
- with ``ocsort_use_byte`` the low-score detections are then matched to the tracks
  left (ByteTrack's second association, by IoU);
- observation-centric recovery (OCR): detections still left are matched by IoU to the
  last observed box of the tracks still unmatched (an object that stopped while lost);
- observation-centric re-update (ORU): when a track is found again after frames
  without observation, its filter goes back to where it was lost and is re-updated
  along a straight virtual path from the last observation to the new one, instead of
  keeping the velocity it drifted on;
- a detection at or above ``high_threshold`` left over starts a track; a track gets
  its ID in a frame it is observed after ``min_hits`` consecutive observations (in
  the first ``min_hits`` frames of the tracker: at once); a track unobserved for more
  than ``track_buffer`` frames (scaled by ``frame_rate`` / 30) is removed.

All matches need IoU >= ``match_iou``. IDs are given when a track is first shown, so
they run 1, 2, 3 ... without gaps; the output keeps the detector's boxes.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from framelens.core.stages.tracking.assignment import assign_then_filter
from framelens.core.stages.tracking.geometry import iou_matrix
from framelens.core.stages.tracking.settings import TrackerSettings
from framelens.core.types import Detections

__all__ = ["OCSort"]

_F = np.eye(7)
_F[0, 4] = _F[1, 5] = _F[2, 6] = 1.0
_FT = _F.T.copy()
_R = np.diag([1.0, 1.0, 10.0, 10.0])
_Q = np.diag([1.0, 1.0, 1.0, 1.0, 0.01, 0.01, 0.0001])
_P0 = np.diag([10.0, 10.0, 10.0, 10.0, 10000.0, 10000.0, 10000.0])


def _to_z(boxes: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """(N, 4) x1 y1 x2 y2 -> (N, 4) centre x, centre y, area, aspect ratio w/h."""
    w = boxes[:, 2] - boxes[:, 0]
    h = boxes[:, 3] - boxes[:, 1]
    out = np.empty((len(boxes), 4))
    out[:, 0] = boxes[:, 0] + w / 2
    out[:, 1] = boxes[:, 1] + h / 2
    out[:, 2] = w * h
    out[:, 3] = w / (h + 1e-6)
    return out


def _to_boxes(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """States (N, >=4) -> boxes; NaN where area x ratio is negative (a collapsed box)."""
    with np.errstate(invalid="ignore"):
        w = np.sqrt(x[:, 2] * x[:, 3])
        h = x[:, 2] / w
    out = np.empty((len(x), 4))
    out[:, 0] = x[:, 0] - w / 2
    out[:, 1] = x[:, 1] - h / 2
    out[:, 2] = x[:, 0] + w / 2
    out[:, 3] = x[:, 1] + h / 2
    return out


def _kalman_update(
    x: npt.NDArray[np.float64], p: npt.NDArray[np.float64], z: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Batched update: (T, 7), (T, 7, 7) by (T, 4) measurements."""
    s = p[:, :4, :4] + _R
    kt = np.linalg.solve(s, p[:, :4, :])  # K^T (P symmetric)
    x = x + np.einsum("ti,tij->tj", z - x[:, :4], kt)
    p = p - p[:, :, :4] @ kt
    return x, p


def _predict_one(
    x: npt.NDArray[np.float64], p: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    if x[6] + x[2] <= 0:
        x = x.copy()
        x[6] = 0.0
    return _F @ x, _F @ p @ _FT + _Q


class _Track:
    """One track's bookkeeping beside its filter's row."""

    __slots__ = (
        "age",
        "frozen",
        "hit_streak",
        "id",
        "last",
        "last_z",
        "observations",
        "since_update",
        "velocity",
    )

    def __init__(self) -> None:
        self.id = -1
        self.age = 0  # predictions made
        self.since_update = 0
        self.hit_streak = 0
        self.last: npt.NDArray[np.float64] | None = None  # last observed box (4,)
        self.last_z: npt.NDArray[np.float64] | None = None  # its measurement
        self.observations: dict[int, npt.NDArray[np.float64]] = {}  # age -> box
        self.velocity = np.zeros(2)  # unit direction (dy, dx) of the last observations
        self.frozen: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]] | None = None

    def previous(self, delta_t: int) -> npt.NDArray[np.float64] | None:
        """The observation ``delta_t`` predictions ago, else the closest one after it,
        else the latest (the original's k_previous_obs)."""
        for dt in range(delta_t, 0, -1):
            box = self.observations.get(self.age - dt)
            if box is not None:
                return box
        return self.last


def _direction(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Unit (dy, dx) from the centres of boxes ``a`` to those of ``b`` (broadcasting)."""
    dx = (b[..., 0] + b[..., 2]) / 2 - (a[..., 0] + a[..., 2]) / 2
    dy = (b[..., 1] + b[..., 3]) / 2 - (a[..., 1] + a[..., 3]) / 2
    norm = np.sqrt(dx**2 + dy**2) + 1e-6
    out = np.empty((*np.shape(dx), 2))
    out[..., 0] = dy / norm
    out[..., 1] = dx / norm
    return out


class OCSort:
    """OC-SORT for one source (see the module's docstring)."""

    needs_image = False

    def __init__(self, settings: TrackerSettings) -> None:
        self.settings = settings
        self._max_age = int(settings.frame_rate / 30.0 * settings.track_buffer)
        self._next_id = 1
        self.reset()

    def reset(self) -> None:
        self._tracks: list[_Track] = []
        self._x = np.zeros((0, 7))
        self._p = np.zeros((0, 7, 7))
        self._frame = 0

    def update(
        self, detections: Detections, image: npt.NDArray[np.uint8] | None = None
    ) -> npt.NDArray[np.int64]:
        s = self.settings
        self._frame += 1
        boxes = detections.boxes.astype(np.float64)
        scores = detections.scores.astype(np.float64)
        n = len(boxes)
        high = (scores >= s.high_threshold).nonzero()[0]
        low = ((scores >= s.low_threshold) & (scores < s.high_threshold)).nonzero()[0]
        predicted = self._predict()
        tracks = self._tracks
        owner = np.full(n, -1, dtype=np.intp)  # detection -> track index

        # 1. high detections <-> predicted boxes, IoU plus direction consistency
        iou = iou_matrix(predicted, boxes[high])
        cost = -(iou + self._direction_bonus(boxes[high], scores[high]))
        matches, left_tracks, left_high = assign_then_filter(cost, iou >= s.match_iou)
        owner[high[matches[:, 1]]] = matches[:, 0]
        left_high = high[left_high]

        # 2. (ocsort_use_byte) low detections <-> predicted boxes of the tracks left
        if s.ocsort_use_byte and len(low) and len(left_tracks):
            iou = iou_matrix(predicted[left_tracks], boxes[low])
            matches, rest, _ = assign_then_filter(-iou, iou >= s.match_iou)
            owner[low[matches[:, 1]]] = left_tracks[matches[:, 0]]
            left_tracks = left_tracks[rest]

        # 3. recovery: high detections left <-> last observations of the tracks left
        observed = [i for i in left_tracks if tracks[i].last is not None]
        if len(left_high) and observed:
            rows = np.array(observed, dtype=np.intp)
            last = np.array([tracks[i].last for i in observed])
            iou = iou_matrix(last, boxes[left_high])
            matches, _, rest = assign_then_filter(-iou, iou >= s.match_iou)
            owner[left_high[matches[:, 1]]] = rows[matches[:, 0]]
            left_high = left_high[rest]

        matched = (owner >= 0).nonzero()[0]
        self._observe(owner[matched], boxes[matched])
        for i in set(range(len(tracks))) - set(owner[matched].tolist()):
            t = tracks[i]
            if t.frozen is None and t.last is not None and t.since_update == 1:
                t.frozen = (self._x[i].copy(), self._p[i].copy())  # lost here: kept for ORU

        # 4. new tracks from the high detections left
        first = len(tracks)
        if len(left_high):
            z = _to_z(boxes[left_high])
            x = np.zeros((len(left_high), 7))
            x[:, :4] = z
            self._x = np.concatenate([self._x, x])
            self._p = np.concatenate([self._p, np.repeat(_P0[None], len(left_high), axis=0)])
            tracks.extend(_Track() for _ in left_high)
            owner[left_high] = np.arange(first, first + len(left_high))

        ids = np.full(n, -1, dtype=np.int64)
        early = self._frame <= s.min_hits
        for d in (owner >= 0).nonzero()[0]:
            t = tracks[owner[d]]
            if t.since_update == 0 and (t.hit_streak >= s.min_hits or early):
                if t.id < 0:
                    t.id = self._next_id
                    self._next_id += 1
                ids[d] = t.id
        keep = np.array([t.since_update <= self._max_age for t in tracks], dtype=bool)
        if not keep.all():
            self._tracks = [t for t, k in zip(tracks, keep, strict=True) if k]
            self._x, self._p = self._x[keep], self._p[keep]
        return ids

    def _predict(self) -> npt.NDArray[np.float64]:
        """Every track one frame ahead; tracks whose box collapsed are dropped."""
        if not self._tracks:
            return np.zeros((0, 4))
        x = self._x
        shrinking = x[:, 6] + x[:, 2] <= 0
        x[shrinking, 6] = 0.0
        self._x = x @ _FT
        self._p = _F @ self._p @ _FT + _Q
        for t in self._tracks:
            t.age += 1
            if t.since_update > 0:
                t.hit_streak = 0
            t.since_update += 1
        boxes = _to_boxes(self._x)
        valid: npt.NDArray[np.bool_] = np.asarray(np.isfinite(boxes).all(axis=1), dtype=bool)
        if not valid.all():
            self._tracks = [t for t, v in zip(self._tracks, list(valid), strict=True) if v]
            self._x, self._p, boxes = self._x[valid], self._p[valid], boxes[valid]
        return boxes

    def _direction_bonus(
        self, boxes: npt.NDArray[np.float64], scores: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.float64]:
        """(T, D) OCM: inertia x score x (pi/2 - angle between the track's direction and
        the direction from its observation delta_t ago to the detection) / pi."""
        tracks = self._tracks
        bonus = np.zeros((len(tracks), len(boxes)))
        if not tracks or not len(boxes):
            return bonus
        prev = [t.previous(self.settings.ocsort_delta_t) for t in tracks]
        rows = np.array([i for i, b in enumerate(prev) if b is not None], dtype=np.intp)
        if not len(rows):
            return bonus
        origin = np.array([prev[i] for i in rows])
        to_det = _direction(origin[:, None, :], boxes[None, :, :])  # (R, D, 2)
        velocity = np.array([tracks[i].velocity for i in rows])  # (R, 2)
        cos = np.clip(np.einsum("rdk,rk->rd", to_det, velocity), -1.0, 1.0)
        # the C library's arccos, as the compiled tracker's: numpy's own SIMD arccos
        # differs from it in the last bit on some CPUs, which decides between two copies
        # of one box in the assignment (ocsort_compiled.py gives the same IDs)
        arccos = np.frompyfunc(math.acos, 1, 1)(cos).astype(np.float64)
        angle = (np.pi / 2 - np.abs(arccos)) / np.pi
        bonus[rows] = self.settings.ocsort_inertia * angle * scores[None, :]
        return bonus

    def _observe(self, rows: npt.NDArray[np.intp], boxes: npt.NDArray[np.float64]) -> None:
        """Matched tracks take their detections: direction, history, filter (ORU for
        tracks found again after a gap)."""
        delta_t = self.settings.ocsort_delta_t
        z = _to_z(boxes)
        plain: list[int] = []
        tracks = [self._tracks[i] for i in rows.tolist()]
        # each direction from the observation delta_t ago to the new box: one call for all
        seen = [k for k, t in enumerate(tracks) if t.last is not None]
        if seen:
            origins = np.array([tracks[k].previous(delta_t) for k in seen])
            for k, velocity in zip(seen, _direction(origins, boxes[seen]), strict=True):
                tracks[k].velocity = velocity
        for k, (i, t) in enumerate(zip(rows.tolist(), tracks, strict=True)):
            box = boxes[k]
            if t.frozen is not None and t.last_z is not None:
                self._re_update(i, t, z[k])
            else:
                plain.append(k)
            t.frozen = None
            t.last = box
            t.last_z = z[k]
            t.observations[t.age] = box
            for old in [a for a in t.observations if a < t.age - delta_t]:
                del t.observations[old]
            t.since_update = 0
            t.hit_streak += 1
        if plain:
            sel = rows[plain]
            self._x[sel], self._p[sel] = _kalman_update(self._x[sel], self._p[sel], z[plain])

    def _re_update(self, i: int, t: _Track, z: npt.NDArray[np.float64]) -> None:
        """ORU: back to the state where the track was lost, then predict-update along
        the straight path (centre, width, height) from the last observation to ``z``,
        ending with ``z`` itself (and updated with ``z`` once more, as the original)."""
        assert t.frozen is not None and t.last_z is not None
        x, p = t.frozen
        gap = t.since_update
        x1, y1, s1, r1 = t.last_z
        x2, y2, s2, r2 = z
        w1, h1 = np.sqrt(s1 * r1), np.sqrt(s1 / r1)
        w2, h2 = np.sqrt(s2 * r2), np.sqrt(s2 / r2)
        for step in range(1, gap + 1):
            f = step / gap
            w, h = w1 + f * (w2 - w1), h1 + f * (h2 - h1)
            virtual = np.array([x1 + f * (x2 - x1), y1 + f * (y2 - y1), w * h, w / h])
            xs, ps = _kalman_update(x[None], p[None], virtual[None])
            x, p = xs[0], ps[0]
            if step < gap:
                x, p = _predict_one(x, p)
        xs, ps = _kalman_update(x[None], p[None], z[None])
        self._x[i], self._p[i] = xs[0], ps[0]
