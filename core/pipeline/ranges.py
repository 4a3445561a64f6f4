"""A range of a source's frames (first frame, how many) and going to its start."""

from __future__ import annotations

from dataclasses import dataclass

from framelens.core.errors import SourceError
from framelens.core.stages.sources import Source

__all__ = ["RunRange", "seek_to_start"]


@dataclass(frozen=True)
class RunRange:
    start: int = 0
    count: int | None = None  # None = to the end of the source


def seek_to_start(source: Source, rng: RunRange) -> None:
    if rng.start:
        if not source.info.seekable:
            raise SourceError(f"{source.info.uri} cannot seek; --start needs a file")
        source.seek(rng.start)
