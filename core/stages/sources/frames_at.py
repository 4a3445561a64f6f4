"""Frames of a video file at given indices, each decoded once (thumbnails of hits)."""

from __future__ import annotations

from collections.abc import Generator, Iterable
from pathlib import Path

from framelens.core.errors import SourceError
from framelens.core.stages.sources import open_source
from framelens.core.types import Image

__all__ = ["FORWARD_READ", "frames_at"]

FORWARD_READ = 48
"""A frame this close after the last one read is reached by reading on, not by seeking
(a seek decodes from the keyframe before it anyway)."""


def frames_at(
    source: str | Path, indices: Iterable[int]
) -> Generator[tuple[int, Image], None, None]:
    """``(index, BGR image)`` of a video file's frames at ``indices``, in increasing
    order, each decoded once, the file opened once. Close the generator (or exhaust it)
    to release the file. SourceError (a FrameLensError) when it cannot be opened or a
    frame is not there."""
    wanted = sorted({int(i) for i in indices})
    if not wanted:
        return
    with open_source(str(source)) as src:
        at = 0  # the index the next read returns
        for index in wanted:
            if not at <= index <= at + FORWARD_READ:
                src.seek(index)
                at = index
            frame = src.read()
            while frame is not None and frame.index < index:
                frame = src.read()
            if frame is None:
                raise SourceError(f"frame {index} is not in {source}: the video ends before it")
            at = frame.index + 1
            yield index, frame.image
