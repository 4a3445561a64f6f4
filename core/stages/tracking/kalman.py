"""Constant-velocity Kalman filters for boxes, batched over every track at once.

The state of a track is 8 numbers: a 4-number box measurement and its velocity. Two
measurements are in use, as in the original code of each tracker:

xyah  centre x, centre y, aspect ratio w/h, height (ByteTrack; OC-SORT keeps its own
      filter, core/stages/tracking/ocsort.py)
xywh  centre x, centre y, width, height (BoT-SORT)

The noise is proportional to the box's size (``std_weight_position`` 1/20 and
``std_weight_velocity`` 1/160, the published values). Every function takes and returns
arrays of all tracks, (T, 8) means and (T, 8, 8) covariances: one numpy call per step
for all tracks, not one per track.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt

__all__ = ["BoxKalman", "Covariances", "Means"]

Means = npt.NDArray[np.float64]
"""(T, 8) track states."""
Covariances = npt.NDArray[np.float64]
"""(T, 8, 8) their covariances."""

_WP = 1.0 / 20  # std_weight_position
_WV = 1.0 / 160  # std_weight_velocity
_DIAG8 = slice(None, None, 9)  # the diagonal of a flattened 8x8 matrix
_DIAG4 = slice(None, None, 5)  # ... of a 4x4 one
_INITIAL = np.array([2.0] * 4 + [10.0] * 4)  # a new track's uncertainty, in those weights


class BoxKalman:
    """The filter of one measurement kind, applied to many tracks.

    Every step is a few whole-array numpy calls: at a handful of tracks a frame costs
    the calls, not the arithmetic. The arithmetic is the published filter's, each
    number computed the same way as by the straightforward formulation.
    """

    def __init__(self, kind: Literal["xyah", "xywh"]) -> None:
        self.kind = kind
        # the standard deviations are the box's size (xyah: its height, each coordinate;
        # xywh: w, h, w, h) times these weights; xyah's aspect ratio has a constant one
        self._sizes = np.array([3] * 8 if kind == "xyah" else [2, 3] * 4)
        weights = np.array([_WP] * 4 + [_WV] * 4)
        if kind == "xyah":
            weights[[2, 6]] = 0.0
        self._weights = weights
        self._weights_update = weights[:4].copy()

    def _std(
        self, mean: Means, weights: npt.NDArray[np.float64], fixed: tuple[float, ...]
    ) -> npt.NDArray[np.float64]:
        """(T, len(weights)) standard deviations: size x weight, the aspect ratio's
        constant (xyah: ``fixed`` for its position and velocity terms)."""
        if self.kind == "xyah":
            std = mean[:, 3:4] * weights
            std[:, 2] = fixed[0]
            if len(fixed) > 1:
                std[:, 6] = fixed[1]
            return std
        sizes = self._sizes if len(weights) == 8 else self._sizes[:4]
        out: npt.NDArray[np.float64] = mean[:, sizes] * weights
        return out

    def initiate(self, measurement: npt.NDArray[np.float64]) -> tuple[Means, Covariances]:
        """New tracks from (T, 4) measurements: zero velocity, a wide covariance."""
        n = len(measurement)
        mean = np.zeros((n, 8))
        mean[:, :4] = measurement
        std = self._std(mean, self._weights * _INITIAL, (1e-2, 1e-5))
        cov = np.zeros((n, 64))
        cov[:, _DIAG8] = std * std
        return mean, cov.reshape(n, 8, 8)

    def predict(self, mean: Means, cov: Covariances) -> tuple[Means, Covariances]:
        """One frame ahead."""
        n = len(mean)
        if n == 0:
            return mean, cov
        std = self._std(mean, self._weights, (1e-2, 1e-5))
        # F = [[I, I], [0, I]]: x' = (p + v, v); with P = [[A, B], [B^T, C]],
        # F P F^T = [[A + B + B^T + C, B + C], [B^T + C, C]] (no 8x8 products)
        mean = mean.copy()
        mean[:, :4] += mean[:, 4:]
        out = cov.copy()
        c = cov[:, 4:, 4:]
        out[:, :4, 4:] += c
        out[:, 4:, :4] += c
        out[:, :4, :4] += cov[:, :4, 4:] + cov[:, 4:, :4] + c
        out.reshape(n, 64)[:, _DIAG8] += std * std
        return mean, out

    def update(
        self, mean: Means, cov: Covariances, measurement: npt.NDArray[np.float64]
    ) -> tuple[Means, Covariances]:
        """Corrected by (T, 4) measurements, one per track."""
        n = len(mean)
        if n == 0:
            return mean, cov
        std = self._std(mean, self._weights_update, (1e-1,))
        s = cov[:, :4, :4].copy()
        flat = s.reshape(n, 16)
        flat[:, _DIAG4] += std * std
        # K^T = S^-1 H P (P symmetric); x' = x + (z - Hx) K^T; P' = P - P H^T K^T
        if np.count_nonzero(flat[:, 1:].reshape(n, 3, 5)[:, :, :4]):  # S's off-diagonal
            kt = np.linalg.solve(s, cov[:, :4, :])
        else:  # coordinates uncoupled (no camera rotation mixed them): S is diagonal
            kt = cov[:, :4, :] / flat[:, _DIAG4, None]
        innovation = measurement - mean[:, :4]
        mean = mean + np.einsum("ti,tij->tj", innovation, kt)
        cov = cov - cov[:, :, :4] @ kt
        return mean, cov
