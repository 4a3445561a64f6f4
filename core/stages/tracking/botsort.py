"""BoT-SORT (Aharon et al., 2022) without appearance features: ByteTrack's two
associations with a better motion model.

Following the original code's logic (github.com/NirAharon/BoT-SORT, BoTSORT with ReID
off), BoT-SORT differs from ByteTrack (core/stages/tracking/bytetrack.py, whose steps
it shares) in:

- the Kalman filter keeps the box's width and height (xywh), not aspect ratio and
  height, with noise proportional to each (a better box for objects that change
  shape); a lost track stops changing size;
- camera-motion compensation: before matching, every track's predicted state is moved
  with the camera (core/stages/tracking/cmc.py: sparse optical flow or ECC on a
  downscaled grey frame, ``cmc``, ``cmc_downscale``), so a panning camera does not
  break tracks;
- its published thresholds: high 0.6, new track 0.7 (``TrackerSettings.for_kind``).

It needs the frame's pixels (``needs_image``) unless ``cmc`` is "none"; without a frame
it tracks without compensation.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from framelens.core.stages.tracking.bytetrack import ByteTrack
from framelens.core.stages.tracking.cmc import CameraMotion, warp_states
from framelens.core.stages.tracking.geometry import xywh_to_xyxy, xyxy_to_xywh
from framelens.core.stages.tracking.kalman import BoxKalman
from framelens.core.stages.tracking.settings import TrackerSettings

__all__ = ["BoTSort"]


class BoTSort(ByteTrack):
    """BoT-SORT for one source (see the module's docstring)."""

    def __init__(self, settings: TrackerSettings) -> None:
        super().__init__(settings)
        self._kalman = BoxKalman("xywh")
        self._cmc = (
            None if settings.cmc == "none" else CameraMotion(settings.cmc, settings.cmc_downscale)
        )
        self.needs_image = self._cmc is not None

    def _to_measurement(self, boxes: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return xyxy_to_xywh(boxes)

    def _to_boxes(self, mean: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return xywh_to_xyxy(mean)

    _frozen_when_lost = slice(6, 8)  # a lost track's size stops changing

    def _predict(self, image: npt.NDArray[np.uint8] | None) -> None:
        super()._predict(image)
        if self._cmc is not None and image is not None:
            t = self._tracks
            warp = self._cmc.apply(image)  # every frame, tracks or none: it follows the view
            t.mean, t.cov = warp_states(t.mean, t.cov, warp)

    def reset(self) -> None:
        super().reset()
        if self._cmc is not None:
            self._cmc.reset()
