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
_OFF_ROWS, _OFF_COLS = np.nonzero(~np.eye(4, dtype=bool))  # S's off-diagonal entries


class BoxKalman:
    """The filter of one measurement kind, applied to many tracks."""

    def __init__(self, kind: Literal["xyah", "xywh"]) -> None:
        self.kind = kind
        self._f = np.eye(8)
        self._f[:4, 4:] = np.eye(4)
        self._ft = self._f.T.copy()

    def _scales(self, mean: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """(T, 4) the size each coordinate's noise is proportional to."""
        if self.kind == "xywh":
            w, h = mean[:, 2], mean[:, 3]
            return np.stack([w, h, w, h], axis=1)
        h = mean[:, 3]
        return np.stack([h, h, np.zeros_like(h), h], axis=1)

    def _fixed(self, position: float, velocity: float) -> tuple[npt.NDArray[np.float64], ...]:
        """The aspect ratio's constant noise (xyah): its position and velocity terms."""
        if self.kind == "xywh":
            return (np.zeros(4), np.zeros(4))
        return (np.array([0.0, 0.0, position, 0.0]), np.array([0.0, 0.0, velocity, 0.0]))

    def initiate(self, measurement: npt.NDArray[np.float64]) -> tuple[Means, Covariances]:
        """New tracks from (T, 4) measurements: zero velocity, a wide covariance."""
        n = len(measurement)
        mean = np.zeros((n, 8))
        mean[:, :4] = measurement
        scale = self._scales(mean)
        fixed_pos, fixed_vel = self._fixed(1e-2, 1e-5)
        std = np.concatenate([2 * _WP * scale + fixed_pos, 10 * _WV * scale + fixed_vel], axis=1)
        cov = np.zeros((n, 8, 8))
        idx = np.arange(8)
        cov[:, idx, idx] = std**2
        return mean, cov

    def predict(self, mean: Means, cov: Covariances) -> tuple[Means, Covariances]:
        """One frame ahead."""
        if len(mean) == 0:
            return mean, cov
        scale = self._scales(mean)
        fixed_pos, fixed_vel = self._fixed(1e-2, 1e-5)
        var = np.concatenate([_WP * scale + fixed_pos, _WV * scale + fixed_vel], axis=1) ** 2
        # F = [[I, I], [0, I]]: x' = (p + v, v); with P = [[A, B], [B^T, C]],
        # F P F^T = [[A + B + B^T + C, B + C], [B^T + C, C]] (no 8x8 products)
        mean = mean.copy()
        mean[:, :4] += mean[:, 4:]
        out = cov.copy()
        c = cov[:, 4:, 4:]
        out[:, :4, 4:] += c
        out[:, 4:, :4] += c
        out[:, :4, :4] += cov[:, :4, 4:] + cov[:, 4:, :4] + c
        idx = np.arange(8)
        out[:, idx, idx] += var
        return mean, out

    def update(
        self, mean: Means, cov: Covariances, measurement: npt.NDArray[np.float64]
    ) -> tuple[Means, Covariances]:
        """Corrected by (T, 4) measurements, one per track."""
        if len(mean) == 0:
            return mean, cov
        scale = self._scales(mean)
        fixed_pos, _ = self._fixed(1e-1, 0.0)
        var = (_WP * scale + fixed_pos) ** 2
        s = cov[:, :4, :4].copy()
        idx = np.arange(4)
        s[:, idx, idx] += var
        # K^T = S^-1 H P (P symmetric); x' = x + (z - Hx) K^T; P' = P - P H^T K^T
        if np.any(s[:, _OFF_ROWS, _OFF_COLS]):
            kt = np.linalg.solve(s, cov[:, :4, :])
        else:  # coordinates uncoupled (no camera rotation mixed them): S is diagonal
            kt = cov[:, :4, :] / s[:, idx, idx][:, :, None]
        innovation = measurement - mean[:, :4]
        mean = mean + np.einsum("ti,tij->tj", innovation, kt)
        cov = cov - cov[:, :, :4] @ kt
        return mean, cov
