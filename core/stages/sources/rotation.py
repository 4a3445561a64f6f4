"""Videos stored sideways and turned for display: phones record portrait video as
landscape frames and a display matrix that tells players to turn them. Every player
(FFmpeg's autorotate, VLC, browsers) shows them upright, so FrameLens does too: the
frames, their size and the boxes found in them are the upright picture's.

The matrix is read as FFmpeg's autorotate reads it: quarter turns, with the mirror
some matrices add. Any other angle (very rare) is left alone, with a warning.
"""

from __future__ import annotations

import functools
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import cv2
import numpy as np
from av.sidedata.sidedata import Type as SideDataType
from av.video.frame import VideoFrame
from framelens.core.types import Image

log = logging.getLogger(__name__)

__all__ = ["UPRIGHT", "Orientation", "display_orientation", "orientation_of"]

_ROTATE = {1: cv2.ROTATE_90_COUNTERCLOCKWISE, 2: cv2.ROTATE_180, 3: cv2.ROTATE_90_CLOCKWISE}


@dataclass(frozen=True, slots=True)
class Orientation:
    """How a stored frame becomes the picture shown: mirrored left to right first
    (``mirrored``), then ``turns`` quarter turns counterclockwise (as ``np.rot90``)."""

    turns: int = 0
    mirrored: bool = False

    def __bool__(self) -> bool:
        return bool(self.turns) or self.mirrored

    def apply(self, image: Image) -> Image:
        """``image`` as shown (the same array when nothing changes)."""
        if self.mirrored:
            image = cast(Image, cv2.flip(image, 1))
        if self.turns:
            image = cast(Image, cv2.rotate(image, _ROTATE[self.turns]))
        return image

    def size(self, width: int, height: int) -> tuple[int, int]:
        """(width, height) of a stored ``width`` x ``height`` frame as shown."""
        return (height, width) if self.turns % 2 else (width, height)

    def describe(self) -> str:
        """In words, for messages: "turned 90 degrees", "mirrored"..."""
        parts = [f"turned {90 * self.turns} degrees"] if self.turns else []
        return " and ".join([*parts, "mirrored"] if self.mirrored else parts)


UPRIGHT = Orientation()


def orientation_of(frame: VideoFrame) -> Orientation:
    """How ``frame`` is shown, from its display matrix, as FFmpeg's autorotate (fftools)
    turns it; UPRIGHT without one."""
    try:
        data = frame.side_data.get(SideDataType.DISPLAYMATRIX)  # type: ignore[call-overload]
        if data is None:
            return UPRIGHT
        m = np.frombuffer(bytes(data), "<i4")
        degrees = -float(frame.rotation)  # FFmpeg's theta: clockwise
    except (AttributeError, ValueError, TypeError):  # malformed side data
        return UPRIGHT
    theta = degrees - 360 * np.floor(degrees / 360 + 0.9 / 360)
    if abs(theta - 90) < 1:
        return Orientation(1, True) if m[3] > 0 else Orientation(3)  # transpose / clockwise
    if abs(theta - 180) < 1:  # each flip as the matrix has it
        return {(True, True): Orientation(2), (True, False): Orientation(0, True),
                (False, True): Orientation(2, True)}.get((m[0] < 0, m[4] < 0), UPRIGHT)  # fmt: skip
    if abs(theta - 270) < 1:
        return Orientation(3, True) if m[3] < 0 else Orientation(1)  # anti-transpose / ccw
    if abs(theta) < 1 or abs(theta - 360) < 1:
        return Orientation(2, True) if m[4] < 0 else UPRIGHT  # upside down mirrored: vflip
    log.warning("a display rotation of %.1f degrees is not a quarter turn: ignored", theta)
    return UPRIGHT


def display_orientation(path: str | os.PathLike[str]) -> Orientation:
    """How the video file at ``path`` is shown (as its first frame is), UPRIGHT when it
    cannot be read (opening it then says why)."""
    p = Path(path)
    try:
        stat = p.stat()
    except OSError:
        return UPRIGHT
    return _probe(os.fspath(p), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _probe(path: str, _mtime_ns: int, _size: int) -> Orientation:
    """Opens the file as a run does (the display matrix reaches PyAV with frames only);
    keyed by the file's time and size, so a file replaced is probed again."""
    from framelens.core.errors import FrameLensError
    from framelens.core.stages.sources.file import FileSource

    try:
        with FileSource(path) as source:
            return source.orientation
    except (FrameLensError, OSError) as exc:
        log.debug("%s: no display matrix read: %s", path, exc)
    return UPRIGHT
