"""ByteTrack compiled: the tracker of bytetrack.py, a frame in one call of machine code.

bytetrack.py's :class:`ByteTrack` is written as whole-array numpy calls; at the few
objects a frame of most footage has, its cost is those calls' overhead (~100 of them,
~70 us a frame), not the arithmetic, and a process tracking several sources pays it on
the thread that delivers every result, where it holds the interpreter from the rest of
the pipeline. :class:`CompiledByteTrack` runs the same steps (the module docstring of
bytetrack.py: predict, the three matchings, update, new tracks, confirmation, lost and
duplicate removal) as one numba function over the track table (~5 us a frame),
compiled on first use and cached on disk.

The arithmetic is the reference's, step by step and in its order (the Kalman filter of
kalman.py, the IoU of geometry.py, the gated assignment of assignment.py with scipy's
solver ported: the same shortest augmenting path, so ties are broken alike):
tests/unit/test_bytetrack_compiled.py holds the two to the same IDs on crowded scenes
and the same states to 1e-9. The reference stays: BoT-SORT is built on it, and it is
what this is checked against.

The table is two arrays: ``floats`` (T, 72), a track's mean (8) then its covariance
(64, row-major); ``ints`` (T, 6), its state, whether confirmed, hits, ID, first and last
frame.
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt
from framelens.core.stages.tracking.settings import TrackerSettings
from framelens.core.types import Detections

__all__ = ["CompiledByteTrack", "compile_now", "solve_assignment"]

_STATE, _CONFIRMED, _HITS, _ID, _START, _END = range(6)
_TRACKED = 0
_LOST = 1
_WP = 1.0 / 20  # kalman.py's std_weight_position
_WV = 1.0 / 160  # ... std_weight_velocity
_FORBIDDEN = 1e5  # assignment.py's cost of a pair over the limit
_DUPLICATE_IOU = 0.85


class CompiledByteTrack:
    """ByteTrack for one source (the :class:`Tracker` interface), compiled."""

    needs_image = False

    def __init__(self, settings: TrackerSettings) -> None:
        self.settings = settings
        self._max_lost = int(settings.frame_rate / 30.0 * settings.track_buffer)
        s = settings
        self._params = np.array(
            [s.high_threshold, s.low_threshold, s.new_track_threshold, s.match_iou,
             s.second_match_iou, s.unconfirmed_match_iou],
        )  # fmt: skip
        self._next_id = 1
        self._frame = 0
        self._floats = np.zeros((0, 72))
        self._ints = np.zeros((0, 6), dtype=np.int64)

    def __len__(self) -> int:
        """Live tracks (tracked, lost and not yet confirmed)."""
        return len(self._ints)

    def update(
        self, detections: Detections, image: npt.NDArray[np.uint8] | None = None
    ) -> npt.NDArray[np.int64]:
        del image
        self._frame += 1
        boxes = np.ascontiguousarray(detections.boxes, dtype=np.float64).reshape(-1, 4)
        scores = np.ascontiguousarray(detections.scores, dtype=np.float64)
        self._floats, self._ints, ids, self._next_id = _step(
            self._floats, self._ints, boxes, scores, self._frame, self._next_id,
            self._max_lost, self.settings.min_hits, self._params,
        )  # fmt: skip
        return ids

    def reset(self) -> None:
        self._floats = np.zeros((0, 72))
        self._ints = np.zeros((0, 6), dtype=np.int64)
        self._frame = 0

    def state(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Every live track's mean (T, 8) and covariance (T, 8, 8), in table order."""
        return self._floats[:, :8].copy(), self._floats[:, 8:].reshape(-1, 8, 8).copy()


def compile_now() -> None:
    """Compile (or load from the disk cache) every compiled step: a few frames of two
    boxes tracked. The installer calls it, so that the first tracked frame of a session
    does not wait ~10 s for the compiler."""
    tracker = CompiledByteTrack(TrackerSettings())
    box = np.array([[10.0, 10.0, 50.0, 90.0], [60.0, 10.0, 100.0, 90.0]], dtype=np.float32)
    for k, score in enumerate((0.9, 0.3, 0.9, 0.9)):  # the low-score matching too
        shift = np.float32(2 * k)
        tracker.update(
            Detections(box + shift, np.full(2, score, np.float32), np.zeros(2, np.int32))
        )
    solve_assignment(np.ones((3, 2)))  # a tall matrix: the transposed case


def solve_assignment(cost: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.intp], ...]:
    """scipy.optimize.linear_sum_assignment (minimum, finite costs), compiled: the rows
    and their columns, rows increasing."""
    rows, cols = _lsa(np.ascontiguousarray(cost, dtype=np.float64))
    return rows, cols


# ---- the compiled steps ------------------------------------------------------------------

# numpy's error model: a division by zero gives inf or nan, as the reference's arithmetic
# does (a zero-height box matched at a zero IoU threshold), not an exception
_compiled = numba.njit(cache=True, error_model="numpy")


@_compiled
def _augmenting_path(
    nc: int, cost: npt.NDArray[np.float64], u: npt.NDArray[np.float64],
    v: npt.NDArray[np.float64], path: npt.NDArray[np.intp], row4col: npt.NDArray[np.intp],
    costs: npt.NDArray[np.float64], i: int, sr: npt.NDArray[np.bool_],
    sc: npt.NDArray[np.bool_], remaining: npt.NDArray[np.intp],
) -> tuple[int, float]:  # fmt: skip
    """scipy's augmenting_path (scipy/optimize/rectangular_lsap, Crouse's shortest
    augmenting path): the sink column and the path's cost (-1: infeasible)."""
    min_val = 0.0
    left = nc
    for it in range(nc):
        remaining[it] = nc - it - 1  # reversed: a constant matrix gives the identity
    sr[:] = False
    sc[:] = False
    costs[:] = np.inf
    sink = -1
    while sink == -1:
        index = -1
        lowest = np.inf
        sr[i] = True
        for it in range(left):
            j = remaining[it]
            r = min_val + cost[i, j] - u[i] - v[j]
            if r < costs[j]:
                path[j] = i
                costs[j] = r
            if costs[j] < lowest or (costs[j] == lowest and row4col[j] == -1):
                lowest = costs[j]
                index = it
        min_val = lowest
        if min_val == np.inf:
            return -1, min_val
        j = remaining[index]
        if row4col[j] == -1:
            sink = j
        else:
            i = row4col[j]
        sc[j] = True
        left -= 1
        remaining[index] = remaining[left]
    return sink, min_val


@_compiled
def _lsa(cost: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """scipy's solve (rectangular_lsap.cpp), for finite costs: (rows, columns)."""
    nr, nc = cost.shape
    if nr == 0 or nc == 0:
        return np.empty(0, dtype=np.intp), np.empty(0, dtype=np.intp)
    transpose = nc < nr
    if transpose:
        cost = cost.T.copy()
        nr, nc = nc, nr
    u = np.zeros(nr)
    v = np.zeros(nc)
    costs = np.empty(nc)
    path = np.full(nc, -1, dtype=np.intp)
    col4row = np.full(nr, -1, dtype=np.intp)
    row4col = np.full(nc, -1, dtype=np.intp)
    sr = np.zeros(nr, dtype=np.bool_)
    sc = np.zeros(nc, dtype=np.bool_)
    remaining = np.empty(nc, dtype=np.intp)
    for cur in range(nr):
        sink, min_val = _augmenting_path(
            nc, cost, u, v, path, row4col, costs, cur, sr, sc, remaining
        )
        if sink < 0:
            raise ValueError("cost matrix is infeasible")
        u[cur] += min_val
        for i in range(nr):
            if sr[i] and i != cur:
                u[i] += min_val - costs[col4row[i]]
        for j in range(nc):
            if sc[j]:
                v[j] -= min_val - costs[j]
        j = sink
        while True:
            i = path[j]
            row4col[j] = i
            j, col4row[i] = col4row[i], j
            if i == cur:
                break
    if transpose:
        order = np.argsort(col4row, kind="mergesort")
        return col4row[order].astype(np.intp), order.astype(np.intp)
    return np.arange(nr).astype(np.intp), col4row


@_compiled
def _match(
    iou: npt.NDArray[np.float64], rows: npt.NDArray[np.intp], cols: npt.NDArray[np.intp],
    scores: npt.NDArray[np.float64], weighted: bool, least: float,
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:  # fmt: skip
    """gated_pairs of 1 - IoU (times the score where ``weighted``) of tracks ``rows`` and
    detections ``cols``, limit 1 - ``least``: positions in ``rows`` and ``cols``."""
    n, m = len(rows), len(cols)
    limit = 1.0 - least
    gated = np.empty((n, m))
    allowed = np.empty((n, m), dtype=np.bool_)
    for a in range(n):
        for b in range(m):
            s = iou[rows[a], cols[b]]
            if weighted:
                s = s * scores[cols[b]]
            c = 1.0 - s
            allowed[a, b] = c <= limit
            gated[a, b] = c if c <= limit else _FORBIDDEN
    r, c = _lsa(gated)
    keep = np.zeros(len(r), dtype=np.bool_)
    for k in range(len(r)):
        keep[k] = allowed[r[k], c[k]]
    return r[keep], c[keep]


@_compiled
def _left(indices: npt.NDArray[np.intp], taken: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
    keep = np.ones(len(indices), dtype=np.bool_)
    keep[taken] = False
    return indices[keep]


@_compiled
def _box(f: npt.NDArray[np.float64], out: npt.NDArray[np.float64]) -> None:
    """geometry.xyah_to_xyxy of one state row."""
    half_h = f[3] * 0.5
    half_w = f[2] * half_h
    out[0] = f[0] - half_w
    out[1] = f[1] - half_h
    out[2] = f[0] + half_w
    out[3] = f[1] + half_h


@_compiled
def _iou(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """geometry.iou_matrix, in its order of operations."""
    out = np.zeros((len(a), len(b)))
    for i in range(len(a)):
        area_a = (a[i, 2] - a[i, 0]) * (a[i, 3] - a[i, 1])
        for j in range(len(b)):
            w = max(min(a[i, 2], b[j, 2]) - max(a[i, 0], b[j, 0]), 0.0)
            h = max(min(a[i, 3], b[j, 3]) - max(a[i, 1], b[j, 1]), 0.0)
            inter = w * h
            area_b = (b[j, 2] - b[j, 0]) * (b[j, 3] - b[j, 1])
            union = max(area_a + area_b - inter, 1e-12)
            out[i, j] = inter / union
    return out


@_compiled
def _predict(f: npt.NDArray[np.float64], lost: bool) -> None:
    """kalman.BoxKalman("xyah").predict of one track, in place (a lost track's height
    velocity zeroed first, as bytetrack.py does)."""
    if lost:
        f[7] = 0.0
    h = f[3]
    std = np.empty(8)
    for d in range(8):
        std[d] = h * (_WP if d < 4 else _WV)
    std[2] = 1e-2
    std[6] = 1e-5
    for d in range(4):
        f[d] += f[4 + d]
    cov = f[8:].reshape(8, 8)
    old = cov.copy()
    for a in range(4):
        for b in range(4):
            c = old[4 + a, 4 + b]
            cov[a, 4 + b] = old[a, 4 + b] + c
            cov[4 + a, b] = old[4 + a, b] + c
            cov[a, b] = old[a, b] + ((old[a, 4 + b] + old[4 + a, b]) + c)
    for d in range(8):
        cov[d, d] += std[d] * std[d]


@_compiled
def _update(
    floats: npt.NDArray[np.float64], rows: npt.NDArray[np.intp], z: npt.NDArray[np.float64]
) -> None:
    """kalman.BoxKalman("xyah").update of ``rows`` by measurements ``z`` (T, 4), in
    place: S divided where every row's S is diagonal (ByteTrack's own filter keeps it
    so), solved otherwise, decided once for all rows as the reference does."""
    n = len(rows)
    s = np.empty((n, 4, 4))
    coupled = False
    for k in range(n):
        f = floats[rows[k]]
        h = f[3]
        std = np.array([h * _WP, h * _WP, 1e-1, h * _WP])
        for a in range(4):
            for b in range(4):
                s[k, a, b] = f[8 + 8 * a + b]
                if a != b and s[k, a, b] != 0.0:
                    coupled = True
            s[k, a, a] += std[a] * std[a]
    for k in range(n):
        f = floats[rows[k]]
        cov = f[8:].reshape(8, 8).copy()
        if coupled:
            kt = np.linalg.solve(s[k], cov[:4, :].copy())
        else:
            kt = np.empty((4, 8))
            for a in range(4):
                for b in range(8):
                    kt[a, b] = cov[a, b] / s[k, a, a]
        innovation = np.empty(4)
        for a in range(4):
            innovation[a] = z[k, a] - f[a]
        for b in range(8):
            acc = innovation[0] * kt[0, b]
            for a in range(1, 4):
                acc += innovation[a] * kt[a, b]
            f[b] = f[b] + acc
        for a in range(8):
            for b in range(8):
                acc = cov[a, 0] * kt[0, b]
                for i in range(1, 4):
                    acc += cov[a, i] * kt[i, b]
                f[8 + 8 * a + b] = cov[a, b] - acc


@_compiled
def _measure(box: npt.NDArray[np.float64], out: npt.NDArray[np.float64]) -> None:
    """geometry.xyxy_to_xyah of one box."""
    out[0] = (box[0] + box[2]) * 0.5
    out[1] = (box[1] + box[3]) * 0.5
    h = box[3] - box[1]
    out[3] = h
    out[2] = (box[2] - box[0]) / max(h, 1e-6)


@_compiled
def _step(
    floats: npt.NDArray[np.float64], ints: npt.NDArray[np.int64],
    boxes: npt.NDArray[np.float64], scores: npt.NDArray[np.float64], frame: int,
    next_id: int, max_lost: int, min_hits: int, params: npt.NDArray[np.float64],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.int64], int]:  # fmt: skip
    """One frame of ByteTrack.update (bytetrack.py): the new table, each box's ID and
    the next ID to give."""
    high_t, low_t, new_t, match_iou, second_iou, unconfirmed_iou = (
        params[0], params[1], params[2], params[3], params[4], params[5]
    )  # fmt: skip
    n = len(boxes)
    count = len(ints)
    owner = np.full(n, -1, dtype=np.intp)
    for row in range(count):
        _predict(floats[row], ints[row, _STATE] != _TRACKED)
    is_high = scores >= high_t
    high = np.nonzero(is_high)[0]
    pool = np.nonzero(ints[:, _CONFIRMED] != 0)[0]
    unconfirmed = np.nonzero(ints[:, _CONFIRMED] == 0)[0]
    have = count > 0 and n > 0
    iou = np.zeros((count, n))
    if have:
        track_boxes = np.empty((count, 4))
        for row in range(count):
            _box(floats[row], track_boxes[row])
        iou = _iou(track_boxes, boxes)

    # 1. high detections <-> confirmed tracks (score-weighted IoU)
    pool_left, high_left = pool, high
    if have and len(pool) and len(high):
        r, c = _match(iou, pool, high, scores, True, match_iou)
        owner[high[c]] = pool[r]
        pool_left, high_left = _left(pool, r), _left(high, c)
    # 2. low detections <-> tracks still unmatched that were tracked last frame
    if len(pool_left):
        second = pool_left[ints[pool_left, _STATE] == _TRACKED]
        if have and len(second):
            low = np.nonzero((scores >= low_t) & ~is_high)[0]
            if len(low):
                r, c = _match(iou, second, low, scores, False, second_iou)
                owner[low[c]] = second[r]
                second = _left(second, r)
        ints[second, _STATE] = _LOST
    # 3. the high detections left <-> unconfirmed tracks
    left_unconfirmed = unconfirmed
    if have and len(unconfirmed) and len(high_left):
        r, c = _match(iou, unconfirmed, high_left, scores, True, unconfirmed_iou)
        owner[high_left[c]] = unconfirmed[r]
        left_unconfirmed, high_left = _left(unconfirmed, r), _left(high_left, c)

    # every matched track corrected by its detection
    matched = np.nonzero(owner >= 0)[0]
    if len(matched):
        rows = owner[matched]
        z = np.empty((len(matched), 4))
        for k in range(len(matched)):
            _measure(boxes[matched[k]], z[k])
        _update(floats, rows, z)
        for row in rows:
            ints[row, _STATE] = _TRACKED
            ints[row, _END] = frame
            ints[row, _HITS] += 1

    # 4. new tracks from the high detections left that score enough
    new = high_left[scores[high_left] >= new_t]
    if len(new):
        added_f = np.zeros((len(new), 72))
        added_i = np.zeros((len(new), 6), dtype=np.int64)
        xyah = np.empty(4)
        for k in range(len(new)):
            _measure(boxes[new[k]], xyah)
            f = added_f[k]
            f[:4] = xyah
            h = xyah[3]
            std = np.empty(8)
            for d in range(8):
                std[d] = h * ((_WP * 2.0) if d < 4 else (_WV * 10.0))
            std[2] = 1e-2
            std[6] = 1e-5
            for d in range(8):
                f[8 + 9 * d] = std[d] * std[d]
            added_i[k, _STATE] = _TRACKED
            added_i[k, _HITS] = 1
            added_i[k, _ID] = -1
            added_i[k, _START] = frame
            added_i[k, _END] = frame
            owner[new[k]] = count + k
        floats = np.concatenate((floats, added_f))
        ints = np.concatenate((ints, added_i))
    total = len(ints)
    alive = np.ones(total, dtype=np.bool_)
    alive[left_unconfirmed] = False

    # confirmation: min_hits consecutive observations (at once on the first frame)
    if len(unconfirmed) or len(new):
        for row in range(total):
            waiting = ints[row, _CONFIRMED] == 0 and alive[row]
            if waiting and (ints[row, _HITS] >= min_hits or frame == 1):
                ints[row, _ID] = next_id
                next_id += 1
                ints[row, _CONFIRMED] = 1

    # lost too long: removed; duplicates of a tracked track among the lost: dropped
    for row in range(total):
        if ints[row, _END] < frame - max_lost and ints[row, _STATE] == _LOST:
            alive[row] = False
    tracked = np.nonzero(alive & (ints[:, _STATE] != _LOST))[0]
    lost_rows = np.nonzero(alive & (ints[:, _STATE] == _LOST))[0]
    if len(tracked) and len(lost_rows):
        all_boxes = np.empty((total, 4))
        for row in range(total):
            _box(floats[row], all_boxes[row])
        overlap = _iou(all_boxes[tracked], all_boxes[lost_rows])
        for i in range(len(tracked)):
            for j in range(len(lost_rows)):
                if overlap[i, j] > _DUPLICATE_IOU:
                    p, q = tracked[i], lost_rows[j]
                    if frame - ints[p, _START] > frame - ints[q, _START]:
                        alive[q] = False
                    else:
                        alive[p] = False

    ids = np.full(n, -1, dtype=np.int64)
    for d in range(n):
        row = owner[d]
        if row >= 0 and alive[row]:
            ids[d] = ints[row, _ID]
    if not alive.all():
        floats = floats[alive]
        ints = ints[alive]
    return floats, ints, ids, next_id


if __name__ == "__main__":  # python -m ...bytetrack_compiled: compile ahead (the installer)
    compile_now()
