"""The A-B loop of the player (mpv's ``l``, VLC's A→B): a policy, Qt-free.

A first press marks A at the frame on screen, a second marks B (before A: the two swap),
a third clears the loop. While playing, once frame B has been shown the next frame shown
is A, frame-exact: a loop A=10 B=20 plays 10, 11, ..., 20, 10, 11, ... Playback that
enters the loop from before A, or a seek to a frame inside it, is held in it; a seek past
B (or before A) plays on from there; steps and seeks while paused go where they are told.
Another video clears the loop.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NO_LOOP", "ABLoop"]


@dataclass(frozen=True)
class ABLoop:
    """A and B, frame indices of the source (None: not set)."""

    a: int | None = None
    b: int | None = None

    @property
    def active(self) -> bool:
        """Both ends are set: playback loops."""
        return self.a is not None and self.b is not None

    def press(self, index: int) -> ABLoop:
        """The loop after ``l`` pressed on frame ``index``: A, then B, then cleared."""
        if self.a is None:
            return ABLoop(index)
        if self.b is None:
            return ABLoop(min(self.a, index), max(self.a, index))
        return ABLoop()

    def wrap(self, previous: int | None, shown: int) -> int | None:
        """Playing, frame ``shown`` just shown after ``previous`` (None: after a seek, or
        when play starts): the frame to show next when it is not the following one (A at
        the loop's end), else None."""
        a, b = self.a, self.b
        if a is None or b is None:
            return None
        came_from = shown if previous is None else previous
        if a <= came_from <= b and shown >= b:
            return a
        return None

    def words(self) -> str:
        """The loop as the status bar says it, with frames counted from 1 as shown."""
        if self.a is None:
            return "A-B loop cleared"
        if self.b is None:
            return f"Loop A at frame {self.a + 1} (L again: B)"
        return f"Loop {self.a + 1}–{self.b + 1} (L clears)"


NO_LOOP = ABLoop()  # neither end set
