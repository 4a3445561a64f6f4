"""A file's frames as players show them. Two things in a file make the picture shown
differ from the frames stored, and every player (FFmpeg, VLC, browsers) honours both:

- a display matrix: phones record portrait video as landscape frames and a matrix that
  tells players to turn them. It is read as FFmpeg's autorotate reads it: quarter
  turns, with the mirror some matrices add; any other angle (very rare) is left alone,
  with a warning.
- non-square pixels (a sample aspect ratio): SD broadcast and DV video, and many CCTV
  recorders, store 704x576 frames shown at 768x576.

FrameLens shows them as meant too: a file's frames, their size and the boxes found in
them are those of the picture shown (``Display``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from fractions import Fraction
from typing import cast

import cv2
import numpy as np
from av.sidedata.sidedata import Type as SideDataType
from av.video.frame import VideoFrame
from framelens.core.stages.sources.av_input import to_bgr
from framelens.core.types import Image

log = logging.getLogger(__name__)

__all__ = ["AS_STORED", "UPRIGHT", "Display", "Orientation", "orientation_of"]

_ROTATE = {1: cv2.ROTATE_90_COUNTERCLOCKWISE, 2: cv2.ROTATE_180, 3: cv2.ROTATE_90_CLOCKWISE}
_PLAUSIBLE_ASPECT = (Fraction(1, 4), Fraction(4))  # pixels beyond: broken metadata, ignored


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


AS_STORED = "as stored"  # Display.describe of frames that are the picture shown


@dataclass(frozen=True, slots=True)
class Display:
    """How a file's stored frames (``stored``: width, height) become the picture shown:
    scaled to ``scaled`` (square pixels, from pixels ``pixel_aspect`` wide for 1 high),
    then ``orientation``. False when the picture shown is the frames as stored."""

    stored: tuple[int, int]
    scaled: tuple[int, int]
    pixel_aspect: Fraction = Fraction(1)
    orientation: Orientation = UPRIGHT

    @classmethod
    def of(
        cls, width: int, height: int, first: VideoFrame | None, aspect: Fraction | None
    ) -> Display:
        """The display of a ``width`` x ``height`` video whose first frame is ``first``
        (None: not known, not turned) and whose pixels are ``aspect`` (the stream's
        sample aspect ratio; None or 0: square). Scaled as FFmpeg's scale=iw*sar:ih, to
        an even width."""
        lowest, highest = _PLAUSIBLE_ASPECT
        if not aspect or aspect <= 0:
            aspect = Fraction(1)
        elif not lowest <= aspect <= highest:
            log.warning("a pixel aspect ratio of %s is implausible: ignored", aspect)
            aspect = Fraction(1)
        scaled_width = 2 * round(width * aspect / 2) if aspect != 1 else width
        shown = UPRIGHT if first is None else orientation_of(first)
        return cls((width, height), (max(2, scaled_width), height), aspect, shown)

    def __bool__(self) -> bool:
        return self.scaled != self.stored or bool(self.orientation)

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of the picture shown."""
        return self.orientation.size(*self.scaled)

    def picture(self, frame: VideoFrame, uri: str) -> Image:
        """A decoded ``frame`` as shown: BGR at the scaled size (a frame of another size,
        the picture size changed mid-stream, too), then turned."""
        return self.orientation.apply(to_bgr(frame, uri, self.scaled))

    def describe(self) -> str:
        """In words, for messages: "pixels of 12:11 made square, turned 90 degrees"..."""
        parts = []
        if self.scaled != self.stored:
            a = self.pixel_aspect
            parts.append(f"pixels of {a.numerator}:{a.denominator} made square")
        if self.orientation:
            parts.append(self.orientation.describe())
        return ", ".join(parts) or AS_STORED
