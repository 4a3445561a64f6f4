"""Matching tracks to detections: the optimal one-to-one assignment under a cost limit."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.optimize import linear_sum_assignment

__all__ = ["Assignment", "assign_then_filter", "gated_pairs", "linear_assignment"]

Assignment = tuple[npt.NDArray[np.intp], npt.NDArray[np.intp], npt.NDArray[np.intp]]
"""(matches (K, 2) rows of (track, detection), unmatched tracks, unmatched detections)."""

_FORBIDDEN = 1e5


def linear_assignment(cost: npt.NDArray[np.floating], limit: float) -> Assignment:
    """The pairs of least total cost whose cost is at most ``limit``.

    Pairs above the limit are forbidden before solving (as ``lap.lapjv(cost_limit=)``
    does in the original ByteTrack and BoT-SORT), so an impossible pair never pushes a
    possible one out of the solution; scipy's Jonker-Volgenant solver does the rest.
    """
    rows, cols = cost.shape
    if rows == 0 or cols == 0:
        return (np.empty((0, 2), dtype=np.intp), np.arange(rows), np.arange(cols))
    r, c = gated_pairs(cost, limit)
    return _pairs_and_left_over(r, c, rows, cols)


def gated_pairs(
    cost: npt.NDArray[np.floating], limit: float
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """:func:`linear_assignment`'s pairs alone, as (rows, columns) in increasing rows;
    ``cost`` must not be empty."""
    allowed = cost <= limit
    r, c = linear_sum_assignment(np.where(allowed, cost, _FORBIDDEN))
    keep = allowed[r, c]
    return r[keep], c[keep]


def assign_then_filter(
    cost: npt.NDArray[np.floating], allowed: npt.NDArray[np.bool_]
) -> Assignment:
    """The assignment of least total ``cost`` over all pairs, then the pairs not
    ``allowed`` dropped (SORT's and OC-SORT's way: the threshold is checked after
    solving, so a pair above it still takes part in the optimisation)."""
    rows, cols = cost.shape
    if rows == 0 or cols == 0:
        return (np.empty((0, 2), dtype=np.intp), np.arange(rows), np.arange(cols))
    r, c = linear_sum_assignment(cost)
    keep = allowed[r, c]
    return _pairs_and_left_over(r[keep], c[keep], rows, cols)


def _pairs_and_left_over(
    r: npt.NDArray[np.intp], c: npt.NDArray[np.intp], rows: int, cols: int
) -> Assignment:
    """The kept pairs, then the rows and the columns no pair took."""
    matched_rows = np.zeros(rows, dtype=bool)
    matched_rows[r] = True
    matched_cols = np.zeros(cols, dtype=bool)
    matched_cols[c] = True
    pairs = np.empty((len(r), 2), dtype=np.intp)
    pairs[:, 0] = r
    pairs[:, 1] = c
    return pairs, (~matched_rows).nonzero()[0], (~matched_cols).nonzero()[0]
