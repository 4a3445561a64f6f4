"""OC-SORT compiled: the tracker of ocsort.py, a frame in one call of machine code.

ocsort.py's :class:`OCSort` is written as numpy calls over the track table plus a
Python object per track (its observations, its frozen state for re-update); at the few
objects a frame of most footage has, its cost is those calls' and objects' overhead
(~300 us a frame, ~40x compiled ByteTrack's), paid on the thread that delivers every
result, where it holds the interpreter from the rest of the pipeline.
:class:`CompiledOCSort` runs the same steps (the module docstring of ocsort.py: predict,
the matching with observation-centric momentum, ByteTrack's second association, the
recovery by last observations, the re-update of tracks found again, new tracks, IDs,
removal) as one numba function over two arrays, compiled on first use and cached on disk.

The arithmetic is the reference's, step by step and in its order (SORT's filter, the
IoU of geometry.py, scipy's assignment ported in bytetrack_compiled.py):
tests/unit/test_ocsort_compiled.py holds the two to the same IDs on crowded scenes and
the same filter states to 1e-9. The reference stays: it is what this is checked against,
and what runs where numba cannot.

The table: ``floats`` (T, 122 + 4 W), W = ``ocsort_delta_t`` + 1: the state x (7), its
covariance P (49, row-major), the last observed box (4) and its measurement (4), the
direction (dy, dx) of the last observations (2), the state frozen where the track was
lost (7 + 49), then the ring of the last W observations' boxes (slot: age mod W);
``ints`` (T, 6 + W): ID, age (predictions made), frames since the last observation,
consecutive observations, whether it has an observation, whether a state is frozen,
then each ring slot's age (-1: empty).
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt
from framelens.core.stages.tracking.bytetrack_compiled import _iou, _left, _lsa
from framelens.core.stages.tracking.settings import TrackerSettings
from framelens.core.types import Detections

__all__ = ["CompiledOCSort", "compile_now"]

_X, _P, _LAST, _LAST_Z, _VEL, _FX, _FP, _RING = 0, 7, 56, 60, 64, 66, 73, 122
_ID, _AGE, _SINCE, _STREAK, _HAS_LAST, _FROZEN, _RING_AGE = range(7)


class CompiledOCSort:
    """OC-SORT for one source (the :class:`Tracker` interface), compiled."""

    needs_image = False

    def __init__(self, settings: TrackerSettings) -> None:
        self.settings = settings
        self._max_age = int(settings.frame_rate / 30.0 * settings.track_buffer)
        self._window = max(1, settings.ocsort_delta_t) + 1
        self._params = np.array(
            [settings.high_threshold, settings.low_threshold, settings.match_iou,
             settings.ocsort_inertia],
        )  # fmt: skip
        self._next_id = 1
        self.reset()

    def __len__(self) -> int:
        """Live tracks (observed lately or not, with an ID or not yet)."""
        return len(self._ints)

    def reset(self) -> None:
        self._floats = np.zeros((0, _RING + 4 * self._window))
        self._ints = np.zeros((0, _RING_AGE + self._window), dtype=np.int64)
        self._frame = 0

    def update(
        self, detections: Detections, image: npt.NDArray[np.uint8] | None = None
    ) -> npt.NDArray[np.int64]:
        del image
        s = self.settings
        self._frame += 1
        boxes = np.ascontiguousarray(detections.boxes, dtype=np.float64).reshape(-1, 4)
        scores = np.ascontiguousarray(detections.scores, dtype=np.float64)
        self._floats, self._ints, ids, self._next_id = _step(
            self._floats, self._ints, boxes, scores, self._frame, self._next_id,
            self._max_age, s.min_hits, s.ocsort_delta_t, s.ocsort_use_byte, self._params,
        )  # fmt: skip
        return ids

    def state(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Every live track's state (T, 7) and covariance (T, 7, 7), in table order."""
        return self._floats[:, :7].copy(), self._floats[:, _P:_LAST].reshape(-1, 7, 7).copy()


def compile_now() -> None:
    """Compile (or load from the disk cache) the step: a few frames of two boxes, one
    of them lost for two frames and found again (the re-update), low scores matched."""
    tracker = CompiledOCSort(TrackerSettings.for_kind("ocsort"))
    box = np.array([[10.0, 10.0, 50.0, 90.0], [60.0, 10.0, 100.0, 90.0]], dtype=np.float32)
    for k, (score, both) in enumerate(((0.9, 1), (0.9, 1), (0.9, 0), (0.2, 0), (0.9, 1))):
        n = 1 + both
        boxes = box[:n] + np.float32(2 * k)
        tracker.update(Detections(boxes, np.full(n, score, np.float32), np.zeros(n, np.int32)))


# ---- the compiled step -------------------------------------------------------------------

_compiled = numba.njit(cache=True, error_model="numpy")


@_compiled
def _to_z(box: npt.NDArray[np.float64], out: npt.NDArray[np.float64]) -> None:
    """ocsort._to_z of one box: centre x, centre y, area, aspect ratio."""
    w = box[2] - box[0]
    h = box[3] - box[1]
    out[0] = box[0] + w / 2
    out[1] = box[1] + h / 2
    out[2] = w * h
    out[3] = w / (h + 1e-6)


@_compiled
def _to_box(x: npt.NDArray[np.float64], out: npt.NDArray[np.float64]) -> None:
    """ocsort._to_boxes of one state (nan where area x ratio is negative)."""
    w = np.sqrt(x[2] * x[3])
    h = x[2] / w
    out[0] = x[0] - w / 2
    out[1] = x[1] - h / 2
    out[2] = x[0] + w / 2
    out[3] = x[1] + h / 2


@_compiled
def _predict(x: npt.NDArray[np.float64], p: npt.NDArray[np.float64]) -> None:
    """One state (7) and its covariance (7, 7) a frame ahead, in place: SORT's constant
    velocity (F) and noise (Q); an area about to turn negative stops shrinking."""
    if x[6] + x[2] <= 0:
        x[6] = 0.0
    for d in range(3):
        x[d] = x[d] + x[4 + d]
    for i in range(3):  # F P
        for j in range(7):
            p[i, j] = p[i, j] + p[i + 4, j]
    for i in range(7):  # (F P) F^T
        for j in range(3):
            p[i, j] = p[i, j] + p[i, j + 4]
    p[0, 0] += 1.0
    p[1, 1] += 1.0
    p[2, 2] += 1.0
    p[3, 3] += 1.0
    p[4, 4] += 0.01
    p[5, 5] += 0.01
    p[6, 6] += 0.0001


@_compiled
def _update(
    x: npt.NDArray[np.float64], p: npt.NDArray[np.float64], z: npt.NDArray[np.float64]
) -> None:
    """ocsort._kalman_update of one state by measurement ``z`` (R: 1, 1, 10, 10), in place."""
    s = p[:4, :4].copy()
    s[0, 0] += 1.0
    s[1, 1] += 1.0
    s[2, 2] += 10.0
    s[3, 3] += 10.0
    kt = np.linalg.solve(s, p[:4, :].copy())  # K^T (P symmetric)
    innovation = np.empty(4)
    for a in range(4):
        innovation[a] = z[a] - x[a]
    for b in range(7):
        acc = innovation[0] * kt[0, b]
        for a in range(1, 4):
            acc += innovation[a] * kt[a, b]
        x[b] = x[b] + acc
    old = p.copy()
    for a in range(7):
        for b in range(7):
            acc = old[a, 0] * kt[0, b]
            for i in range(1, 4):
                acc += old[a, i] * kt[i, b]
            p[a, b] = old[a, b] - acc


@_compiled
def _previous(
    floats: npt.NDArray[np.float64], ints: npt.NDArray[np.int64], row: int, delta_t: int
) -> npt.NDArray[np.float64]:
    """_Track.previous: the observation ``delta_t`` predictions ago, else the closest
    one after it, else the last one."""
    window = ints.shape[1] - _RING_AGE
    age = ints[row, _AGE]
    for dt in range(delta_t, 0, -1):
        want = age - dt
        if want >= 0:
            slot = want % window
            if ints[row, _RING_AGE + slot] == want:
                return floats[row, _RING + 4 * slot : _RING + 4 * slot + 4]
    return floats[row, _LAST : _LAST + 4]


@_compiled
def _direction(
    a: npt.NDArray[np.float64], b: npt.NDArray[np.float64], out: npt.NDArray[np.float64]
) -> None:
    """ocsort._direction: unit (dy, dx) from the centre of box ``a`` to that of ``b``."""
    dx = (b[0] + b[2]) / 2 - (a[0] + a[2]) / 2
    dy = (b[1] + b[3]) / 2 - (a[1] + a[3]) / 2
    norm = np.sqrt(dx**2 + dy**2) + 1e-6
    out[0] = dy / norm
    out[1] = dx / norm


@_compiled
def _assign(
    cost: npt.NDArray[np.float64], allowed: npt.NDArray[np.bool_]
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """assignment.assign_then_filter: the kept pairs' rows and columns, and the columns
    no pair took (the rows left: bytetrack_compiled's ``_left``)."""
    rows, cols = cost.shape
    if rows == 0 or cols == 0:
        return (
            np.empty(0, dtype=np.intp), np.empty(0, dtype=np.intp), np.arange(cols)
        )  # fmt: skip
    r, c = _lsa(cost)
    keep = np.zeros(len(r), dtype=np.bool_)
    for k in range(len(r)):
        keep[k] = allowed[r[k], c[k]]
    r, c = r[keep], c[keep]
    taken = np.zeros(cols, dtype=np.bool_)
    taken[c] = True
    return r, c, np.nonzero(~taken)[0]


@_compiled
def _re_update(
    floats: npt.NDArray[np.float64], ints: npt.NDArray[np.int64], row: int,
    z: npt.NDArray[np.float64],
) -> None:  # fmt: skip
    """OCSort._re_update (ORU): from the state frozen where the track was lost, predict
    and update along the straight path (centre, width, height) from the last
    observation to ``z``, then update with ``z`` once more."""
    f = floats[row]
    x = f[_FX:_FP].copy()
    p = f[_FP:_RING].copy().reshape(7, 7)
    gap = ints[row, _SINCE]
    x1, y1, s1, r1 = f[_LAST_Z], f[_LAST_Z + 1], f[_LAST_Z + 2], f[_LAST_Z + 3]
    x2, y2, s2, r2 = z[0], z[1], z[2], z[3]
    w1, h1 = np.sqrt(s1 * r1), np.sqrt(s1 / r1)
    w2, h2 = np.sqrt(s2 * r2), np.sqrt(s2 / r2)
    virtual = np.empty(4)
    for step in range(1, gap + 1):
        k = step / gap
        w, h = w1 + k * (w2 - w1), h1 + k * (h2 - h1)
        virtual[0] = x1 + k * (x2 - x1)
        virtual[1] = y1 + k * (y2 - y1)
        virtual[2] = w * h
        virtual[3] = w / h
        _update(x, p, virtual)
        if step < gap:
            _predict(x, p)
    _update(x, p, z)
    f[_X:_P] = x
    f[_P:_LAST] = p.reshape(49)


@_compiled
def _step(
    floats: npt.NDArray[np.float64], ints: npt.NDArray[np.int64],
    boxes: npt.NDArray[np.float64], scores: npt.NDArray[np.float64], frame: int,
    next_id: int, max_age: int, min_hits: int, delta_t: int, use_byte: bool,
    params: npt.NDArray[np.float64],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.int64], int]:  # fmt: skip
    """One frame of OCSort.update (ocsort.py): the new table, each box's ID and the next
    ID to give."""
    high_t, low_t, match_iou, inertia = params[0], params[1], params[2], params[3]
    window = ints.shape[1] - _RING_AGE
    n = len(boxes)

    # predict: every track a frame ahead; a track whose box collapsed is dropped
    count = len(ints)
    predicted = np.empty((count, 4))
    valid = np.ones(count, dtype=np.bool_)
    for row in range(count):
        f = floats[row]
        p = f[_P:_LAST].reshape(7, 7)
        _predict(f[_X:_P], p)
        ints[row, _AGE] += 1
        if ints[row, _SINCE] > 0:
            ints[row, _STREAK] = 0
        ints[row, _SINCE] += 1
        _to_box(f[_X:_P], predicted[row])
        for d in range(4):
            if not np.isfinite(predicted[row, d]):
                valid[row] = False
    if not valid.all():
        floats, ints, predicted = floats[valid], ints[valid], predicted[valid]
        count = len(ints)

    high = np.nonzero(scores >= high_t)[0]
    low = np.nonzero((scores >= low_t) & (scores < high_t))[0]
    owner = np.full(n, -1, dtype=np.intp)

    # 1. high detections <-> predicted boxes: IoU plus the direction's agreement (OCM)
    high_boxes = boxes[high]
    iou = _iou(predicted, high_boxes)
    cost = np.empty((count, len(high)))
    direction = np.empty(2)
    for row in range(count):
        has_origin = ints[row, _HAS_LAST] != 0  # previous() is None only without one
        origin = _previous(floats, ints, row, delta_t)
        vy, vx = floats[row, _VEL], floats[row, _VEL + 1]
        for j in range(len(high)):
            bonus = 0.0
            if has_origin:
                _direction(origin, high_boxes[j], direction)
                cos = min(max(direction[0] * vy + direction[1] * vx, -1.0), 1.0)
                angle = (np.pi / 2 - np.abs(np.arccos(cos))) / np.pi
                bonus = inertia * angle * scores[high[j]]
            cost[row, j] = -(iou[row, j] + bonus)
    r, c, rest = _assign(cost, iou >= match_iou)
    owner[high[c]] = r
    left_tracks = _left(np.arange(count), r)
    left_high = high[rest]

    # 2. (use_byte) low detections <-> predicted boxes of the tracks left
    if use_byte and len(low) and len(left_tracks):
        iou = _iou(predicted[left_tracks], boxes[low])
        r, c, _ = _assign(-iou, iou >= match_iou)
        owner[low[c]] = left_tracks[r]
        left_tracks = _left(left_tracks, r)

    # 3. recovery (OCR): high detections left <-> last observations of the tracks left
    observed = left_tracks[ints[left_tracks, _HAS_LAST] != 0]
    if len(left_high) and len(observed):
        last = floats[observed, _LAST : _LAST + 4].copy()
        iou = _iou(last, boxes[left_high])
        r, c, rest = _assign(-iou, iou >= match_iou)
        owner[left_high[c]] = observed[r]
        left_high = left_high[rest]

    # the matched tracks take their detections: direction, history, filter (ORU)
    matched = np.nonzero(owner >= 0)[0]
    rows = owner[matched]
    z = np.empty((len(matched), 4))
    for k in range(len(matched)):
        _to_z(boxes[matched[k]], z[k])
    velocity = np.empty((len(matched), 2))
    for k in range(len(matched)):  # every direction before any history changes
        row = rows[k]
        if ints[row, _HAS_LAST] != 0:
            _direction(_previous(floats, ints, row, delta_t), boxes[matched[k]], velocity[k])
            floats[row, _VEL : _VEL + 2] = velocity[k]
    for k in range(len(matched)):
        row = rows[k]
        f = floats[row]
        box = boxes[matched[k]]
        if ints[row, _FROZEN] != 0 and ints[row, _HAS_LAST] != 0:
            _re_update(floats, ints, row, z[k])
        else:
            _update(f[_X:_P], f[_P:_LAST].reshape(7, 7), z[k])
        ints[row, _FROZEN] = 0
        f[_LAST : _LAST + 4] = box
        f[_LAST_Z : _LAST_Z + 4] = z[k]
        ints[row, _HAS_LAST] = 1
        age = ints[row, _AGE]
        slot = age % window
        f[_RING + 4 * slot : _RING + 4 * slot + 4] = box
        ints[row, _RING_AGE + slot] = age
        for other in range(window):  # older than delta_t: forgotten
            if 0 <= ints[row, _RING_AGE + other] < age - delta_t:
                ints[row, _RING_AGE + other] = -1
        ints[row, _SINCE] = 0
        ints[row, _STREAK] += 1
    taken = np.zeros(count, dtype=np.bool_)
    taken[rows] = True
    for row in range(count):  # lost in this frame: the state kept for the re-update
        lost_now = ints[row, _FROZEN] == 0 and ints[row, _HAS_LAST] != 0 and ints[row, _SINCE] == 1
        if lost_now and not taken[row]:
            floats[row, _FX:_RING] = floats[row, _X:_LAST]
            ints[row, _FROZEN] = 1

    # 4. new tracks from the high detections left
    if len(left_high):
        added_f = np.zeros((len(left_high), floats.shape[1]))
        added_i = np.zeros((len(left_high), ints.shape[1]), dtype=np.int64)
        for k in range(len(left_high)):
            _to_z(boxes[left_high[k]], added_f[k, :4])
            for d in range(7):
                added_f[k, _P + 8 * d] = 10.0 if d < 4 else 10000.0
            added_i[k, _ID] = -1
            added_i[k, _RING_AGE:] = -1
            owner[left_high[k]] = count + k
        floats = np.concatenate((floats, added_f))
        ints = np.concatenate((ints, added_i))

    ids = np.full(n, -1, dtype=np.int64)
    early = frame <= min_hits
    for d in range(n):
        row = owner[d]
        if row < 0:
            continue
        if ints[row, _SINCE] == 0 and (ints[row, _STREAK] >= min_hits or early):
            if ints[row, _ID] < 0:
                ints[row, _ID] = next_id
                next_id += 1
            ids[d] = ints[row, _ID]
    keep = ints[:, _SINCE] <= max_age
    if not keep.all():
        floats, ints = floats[keep], ints[keep]
    return floats, ints, ids, next_id


if __name__ == "__main__":  # python -m ...ocsort_compiled: compile ahead (the installer)
    compile_now()
