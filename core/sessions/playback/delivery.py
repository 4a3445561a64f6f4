"""Back-pressure between the player's thread and the screen's.

The player hands each result over from its own thread; the screen takes them when its
thread gets to them. At most a few wait between the two, so memory stays flat and the
plots see every frame: the player waits briefly for room, and when the screen is
blocked for longer (a modal dialog, a slow repaint) the result is dropped rather than
queued without end.
"""

from __future__ import annotations

import threading

__all__ = ["IN_FLIGHT", "WAIT_S", "ResultGate"]

IN_FLIGHT = 3  # results handed over and not yet taken by the screen
WAIT_S = 0.5  # how long the player waits for room before a result is dropped


class ResultGate:
    """Counts results in flight: ``admit`` on the player's thread, ``taken`` on the
    screen's, once for each result admitted."""

    def __init__(self, in_flight: int = IN_FLIGHT, wait_s: float = WAIT_S) -> None:
        self._slots = threading.Semaphore(in_flight)
        self._wait_s = wait_s

    def admit(self) -> bool:
        """Whether a result may be handed over now (waiting up to ``wait_s`` for room);
        False: the screen is behind, drop it."""
        return self._slots.acquire(timeout=self._wait_s)

    def taken(self) -> None:
        """The screen took a result handed over: room for the next."""
        self._slots.release()
