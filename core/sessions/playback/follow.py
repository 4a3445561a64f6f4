"""Follow this ID: one track kept in view as frames go by, and when it is lost or found.

No Qt: the window hands each frame shown (its index, detections, size and overlay
style) to ``TrackFollow`` and gets back the followed track's box in that frame and the
region to mark on the canvas (the box and its tag as the overlay draws them: a mark
around it leaves the tag readable) and, when the track has just disappeared or come
back, the line to say ("person #12 lost at frame N", "person #12 found again at frame
M", frames numbered from 1 as the window counts them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from framelens.core.stages.draw.style import DEFAULT_STYLE, OverlayStyle, mark_region
from framelens.core.types import Detections

__all__ = ["FollowStep", "TrackFollow", "track_name"]

Box = tuple[float, float, float, float]


def track_name(class_id: int, track_id: int, labels: Sequence[str]) -> str:
    """ "person #12": the class's name and the track's ID, as the overlay tags it."""
    name = labels[class_id] if 0 <= class_id < len(labels) else str(class_id)
    return f"{name} #{track_id}"


@dataclass(frozen=True, slots=True)
class FollowStep:
    """The followed track in one frame: its box (None: not in this frame), the region to
    mark around it (its box and tag, see ``mark_region``; image pixel edges) and what to
    say (None: nothing new; else "lost" or "found" and the line)."""

    box: Box | None
    event: str | None = None
    message: str = ""
    region: Box | None = None


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

    def see(
        self,
        frame_index: int,
        detections: Detections,
        size: tuple[int, int] | None = None,
        style: OverlayStyle = DEFAULT_STYLE,
    ) -> FollowStep:
        """The next frame shown (its source index and detections); ``size`` (width,
        height) and ``style``: the image the overlay is drawn on, and how (no size: the
        region to mark is the box alone)."""
        hit = self._index_in(detections)
        box = _box(detections, hit) if hit is not None else None
        region = box
        if hit is not None and size is not None:
            region = mark_region(detections, hit, self._labels, style, *size) or box
        here = box is not None
        before, self._present = self._present, here
        if before is None or before == here:
            return FollowStep(box, region=region)
        if here:
            said = f"{self.name} found again at frame {frame_index + 1}"
            return FollowStep(box, "found", said, region)
        return FollowStep(None, "lost", f"{self.name} lost at frame {frame_index + 1}")

    def box_in(self, detections: Detections) -> Box | None:
        """The followed track's box among ``detections`` (None: not there)."""
        hit = self._index_in(detections)
        return _box(detections, hit) if hit is not None else None

    def _index_in(self, detections: Detections) -> int | None:
        ids = detections.track_ids
        if ids is None:
            return None
        hits = (ids == self.track_id).nonzero()[0]
        return int(hits[0]) if len(hits) else None


def _box(detections: Detections, index: int) -> Box:
    x1, y1, x2, y2 = (float(v) for v in detections.boxes[index])
    return (x1, y1, x2, y2)
