"""Camera-motion compensation (BoT-SORT's GMC): how the picture moved since the last
frame, as a 2x3 affine matrix in source pixels.

The frame is turned grey and shrunk by ``downscale`` first (the cost is then a small
fraction of a full frame's). Two methods, as in BoT-SORT's code:

sparse  OpenCV's corner features (goodFeaturesToTrack) followed into the new frame by
        pyramidal Lucas-Kanade optical flow, then a rotation + scale + translation
        fitted with RANSAC (estimateAffinePartial2D): robust to moving objects
ecc     OpenCV's ECC image alignment (findTransformECC, Euclidean motion: rotation and
        translation) on a blurred frame; for scenes with few corners. ECC only finds
        motions within a few pixels of its start, so (unlike the original, which runs
        one level for up to 5000 iterations) it runs coarse to fine on an image
        pyramid, each level started from the last, 100 iterations or a change below
        1e-5 per level: a sudden jerk of the camera is found too.

The matrix maps a point of the last frame to where it is now; the identity on the
first frame, after a reset, when the frame size changes, or when no motion can be
estimated (too few features, ECC not converging).
"""

from __future__ import annotations

from typing import Any, Literal, cast

import cv2
import numpy as np
import numpy.typing as npt

__all__ = ["CameraMotion", "Warp", "identity", "warp_states"]

_ECC_SMALLEST = 40  # pixels: the pyramid's coarsest level is at least this small side

_find_ecc = cast(Any, cv2.findTransformECC)  # its stubs lack the Gaussian filter size

Warp = npt.NDArray[np.float64]
"""A (2, 3) affine matrix."""


def identity() -> Warp:
    return np.eye(2, 3, dtype=np.float64)


class CameraMotion:
    """One source's camera-motion estimator (it keeps the previous frame)."""

    def __init__(self, method: Literal["sparse", "ecc"], downscale: int = 2) -> None:
        self.method = method
        self.downscale = max(1, int(downscale))
        self._previous: npt.NDArray[np.uint8] | None = None
        self._points: npt.NDArray[np.float32] | None = None

    def reset(self) -> None:
        self._previous = None
        self._points = None

    def _grey(self, image: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
        grey = image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
        if self.method == "ecc":
            grey = cv2.GaussianBlur(grey, (3, 3), 1.5)
        if self.downscale > 1:
            h, w = grey.shape[:2]
            size = (max(1, w // self.downscale), max(1, h // self.downscale))
            grey = cv2.resize(grey, size, interpolation=cv2.INTER_AREA)
        return np.ascontiguousarray(grey)

    def apply(self, image: npt.NDArray[np.uint8]) -> Warp:
        """The motion from the last frame given to ``image`` (BGR or grey)."""
        grey = self._grey(image)
        previous = self._previous
        if previous is None or previous.shape != grey.shape:
            self._start(grey)
            return identity()
        warp = (
            self._sparse(previous, grey) if self.method == "sparse" else self._ecc(previous, grey)
        )
        warp[:, 2] *= self.downscale
        return warp

    def _start(self, grey: npt.NDArray[np.uint8]) -> None:
        self._previous = grey
        if self.method == "sparse":
            self._points = self._features(grey)

    @staticmethod
    def _features(grey: npt.NDArray[np.uint8]) -> npt.NDArray[np.float32] | None:
        points = cv2.goodFeaturesToTrack(
            grey, maxCorners=1000, qualityLevel=0.01, minDistance=1, blockSize=3
        )
        return None if points is None else np.asarray(points, dtype=np.float32)

    def _sparse(self, previous: npt.NDArray[np.uint8], grey: npt.NDArray[np.uint8]) -> Warp:
        points = self._points
        self._previous = grey
        self._points = self._features(grey)
        if points is None or len(points) < 5:
            return identity()
        moved, status, _ = cv2.calcOpticalFlowPyrLK(previous, grey, points, None)
        ok = status.reshape(-1) == 1
        if int(ok.sum()) < 5:
            return identity()
        warp, _ = cv2.estimateAffinePartial2D(points[ok], moved[ok], method=cv2.RANSAC)
        return identity() if warp is None else np.asarray(warp, dtype=np.float64)

    def _ecc(self, previous: npt.NDArray[np.uint8], grey: npt.NDArray[np.uint8]) -> Warp:
        self._previous = grey
        pyramid: list[tuple[Any, Any]] = [(previous, grey)]
        while min(pyramid[-1][0].shape[:2]) >= 2 * _ECC_SMALLEST:
            a, b = pyramid[-1]
            pyramid.append((cv2.pyrDown(a), cv2.pyrDown(b)))
        criteria = (cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 100, 1e-5)
        warp = np.eye(2, 3, dtype=np.float32)
        for level, (a, b) in enumerate(reversed(pyramid)):
            if level:
                warp[:, 2] *= 2  # the next level is twice the size
            try:
                _, warp = _find_ecc(a, b, warp, cv2.MOTION_EUCLIDEAN, criteria, None, 1)
            except cv2.error:
                return identity()
        return np.asarray(warp, dtype=np.float64)


def warp_states(
    mean: npt.NDArray[np.float64], cov: npt.NDArray[np.float64], warp: Warp
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Kalman states (T, 8) (centre x, centre y, w, h and their velocities) moved with
    the camera: each (x, y) pair turned by the warp's 2x2 part, the centre shifted."""
    if len(mean) == 0:
        return mean, cov
    r8 = np.kron(np.eye(4), warp[:, :2])
    mean = mean @ r8.T
    mean[:, :2] += warp[:, 2]
    cov = r8 @ cov @ r8.T
    return mean, cov
