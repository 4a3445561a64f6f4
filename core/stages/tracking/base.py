"""The one interface every tracker implements (ByteTrack, OC-SORT, BoT-SORT).

A tracker is told one source's detections frame after frame, in order, and says which
track each box belongs to. It keeps the detector's boxes (what the user sees is what
was detected) and adds IDs; tracks that were not detected in a frame give no box there.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt
from framelens.core.types import Detections

__all__ = ["Tracker"]


class Tracker(Protocol):
    """One source's tracks."""

    needs_image: bool
    """Whether ``update`` wants the frame's pixels (camera-motion compensation)."""

    def update(
        self, detections: Detections, image: npt.NDArray[np.uint8] | None = None
    ) -> npt.NDArray[np.int64]:
        """The next frame's detections; returns one track ID per box, in the boxes'
        order: >= 1 for a box of a confirmed track, -1 for a box of none (a low score
        left over, a track not yet confirmed). ``image``: the frame (BGR, source
        pixels), given when ``needs_image``. IDs are never reused for another object."""
        ...

    def reset(self) -> None:
        """Forget every track: the next frame does not follow the last one. Numbering
        goes on from the last ID given (an ID is never given to a second object)."""
        ...
