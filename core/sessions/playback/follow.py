"""Follow this ID: one track kept in view as frames go by, and when it is lost or found.

No Qt: the window hands each frame shown (its index and detections) to ``TrackFollow``
and gets back the followed track's box in that frame (to mark on the canvas) and, when
the track has just disappeared or come back, the line to say ("person #12 lost at frame
N", "person #12 found again at frame M", frames numbered from 1 as the window counts
them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from framelens.core.types import Detections

__all__ = ["FollowStep", "TrackFollow", "track_name"]

Box = tuple[float, float, float, float]


def track_name(class_id: int, track_id: int, labels: Sequence[str]) -> str:
    """ "person #12": the class's name and the track's ID, as the overlay tags it."""
    name = labels[class_id] if 0 <= class_id < len(labels) else str(class_id)
    return f"{name} #{track_id}"


@dataclass(frozen=True, slots=True)
class FollowStep:
    """The followed track in one frame: its box (None: not in this frame) and what to
    say (None: nothing new; else "lost" or "found" and the line)."""

    box: Box | None
    event: str | None = None
    message: str = ""


class TrackFollow:
    """One track ID followed (see the module doc)."""

    def __init__(self, track_id: int, class_id: int, labels: Sequence[str]) -> None:
        self.track_id = track_id
        self.name = track_name(class_id, track_id, labels)
        self._labels = tuple(labels)
        self._present: bool | None = None  # None until the first frame seen

    @property
    def present(self) -> bool:
        """Whether the track was in the last frame seen."""
        return bool(self._present)

    def see(self, frame_index: int, detections: Detections) -> FollowStep:
        """The next frame shown (its source index and detections)."""
        box = self.box_in(detections)
        here = box is not None
        before, self._present = self._present, here
        if before is None or before == here:
            return FollowStep(box)
        if here:
            return FollowStep(box, "found", f"{self.name} found again at frame {frame_index + 1}")
        return FollowStep(None, "lost", f"{self.name} lost at frame {frame_index + 1}")

    def box_in(self, detections: Detections) -> Box | None:
        """The followed track's box among ``detections`` (None: not there)."""
        ids = detections.track_ids
        if ids is None:
            return None
        hits = (ids == self.track_id).nonzero()[0]
        if not len(hits):
            return None
        x1, y1, x2, y2 = (float(v) for v in detections.boxes[int(hits[0])])
        return (x1, y1, x2, y2)
