"""Bookmarks of the video on screen: frames marked to come back to (``M`` marks the
frame on screen or unmarks it; PgUp / PgDown go to the one before / after, as mpv's keys
go through chapters). Qt-free; another video starts with none."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Bookmarks"]


@dataclass(frozen=True)
class Bookmarks:
    """Frame indices of the source, in order."""

    frames: tuple[int, ...] = ()

    def toggle(self, index: int) -> Bookmarks:
        """``index`` marked, or unmarked when it was."""
        if index in self.frames:
            return Bookmarks(tuple(f for f in self.frames if f != index))
        return Bookmarks(tuple(sorted((*self.frames, index))))

    def after(self, index: int) -> int | None:
        """The first bookmark after frame ``index`` (None: none)."""
        return next((f for f in self.frames if f > index), None)

    def before(self, index: int) -> int | None:
        """The last bookmark before frame ``index`` (None: none)."""
        return next((f for f in reversed(self.frames) if f < index), None)
