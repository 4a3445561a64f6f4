"""Videos stored sideways and turned for display: phones record portrait video as
landscape frames and a display matrix that tells players to turn them. Every player
(FFmpeg's autorotate, VLC, browsers) shows them upright, so FrameLens does too: the
frames, their size and the boxes found in them are the upright picture's.

Only quarter turns are applied, as FFmpeg does; a matrix that is not one (a mirror or
an odd angle, very rare) is left alone.
"""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path

import numpy as np
from av.video.frame import VideoFrame
from framelens.core.types import Image

log = logging.getLogger(__name__)

__all__ = ["display_turns", "quarter_turns", "turn", "turned_size"]


def quarter_turns(frame: VideoFrame) -> int:
    """How many quarter turns counterclockwise (0-3, as ``np.rot90`` counts them) show
    ``frame`` as its video's display matrix asks; 0 without one."""
    try:
        degrees = float(frame.rotation)  # counterclockwise, in [-180, 180]
    except (AttributeError, ValueError, TypeError):  # no or malformed side data
        return 0
    turns = round(degrees / 90)
    if abs(degrees - 90 * turns) > 1:
        log.warning("a display rotation of %.1f degrees is not a quarter turn: ignored", degrees)
        return 0
    return turns % 4


def turn(image: Image, turns: int) -> Image:
    """``image`` turned ``turns`` quarter turns counterclockwise (contiguous; the same
    array when ``turns`` is 0)."""
    if turns % 4 == 0:
        return image
    return np.ascontiguousarray(np.rot90(image, turns))


def turned_size(width: int, height: int, turns: int) -> tuple[int, int]:
    """(width, height) of a ``width`` x ``height`` picture after ``turns`` quarter turns."""
    return (height, width) if turns % 2 else (width, height)


def display_turns(path: str | os.PathLike[str]) -> int:
    """The quarter turns the video file at ``path`` is shown with (its first frame's),
    0 when it has none or cannot be read (opening it then says why)."""
    p = Path(path)
    try:
        stat = p.stat()
    except OSError:
        return 0
    return _probe(os.fspath(p), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _probe(path: str, _mtime_ns: int, _size: int) -> int:
    """Decodes the first frame on the CPU (the display matrix reaches PyAV with frames
    only); keyed by the file's time and size, so a file replaced is probed again."""
    import av
    from framelens.core.stages.sources.file import DECODER_LIMITS

    try:
        with av.open(path, options=DECODER_LIMITS) as container:
            stream = container.streams.video[0]
            for frame in container.decode(stream):
                return quarter_turns(frame)
    except Exception as exc:  # a broken file: opening it for real reports it
        log.debug("%s: no display rotation read: %s", path, exc)
    return 0
