"""Progress as core reports it, drawn by whoever calls: core never draws a bar itself.

A long call (a run, a comparison, a batch, an INT8 calibration, the benchmark) takes
``progress``: False for none, or a ``Bars`` factory that the entry layer provides (the
command line's terminal bars, app/terminal_bars.py); the call makes the bars it needs
through it and updates them. The GUI passes False and listens to the calls' own
callbacks (``on_progress``) instead.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["Bar", "Bars", "Progress", "make_bar"]


class Bar(Protocol):
    """One progress bar (tqdm's interface, the part core uses)."""

    n: float
    total: float | None

    def update(self, n: float | None = 1) -> object: ...

    def set_description_str(self, desc: str | None = None, refresh: bool | None = True) -> None: ...

    def set_postfix_str(self, s: str = "", refresh: bool | None = True) -> None: ...

    def reset(self, total: float | None = None) -> None: ...

    def refresh(self) -> None: ...

    def close(self) -> None: ...


class Bars(Protocol):
    """Makes a bar: ``total`` (None: unknown), ``unit``, ``desc``, the terminal line it
    takes (``position``) and whether it stays when closed (``leave``)."""

    def __call__(
        self,
        *,
        total: float | None = None,
        unit: str = "frame",
        desc: str | None = None,
        position: int | None = None,
        leave: bool = True,
    ) -> Bar: ...


Progress = bool | Bars
"""What a long call is given: False (or True, with no way to draw) for no bars."""


class _Unseen:
    """A bar nobody sees: counts, draws nothing."""

    def __init__(self, total: float | None) -> None:
        self.n: float = 0
        self.total = total

    def update(self, n: float | None = 1) -> object:
        self.n += n or 0
        return None

    def set_description_str(self, desc: str | None = None, refresh: bool | None = True) -> None:
        return None

    def set_postfix_str(self, s: str = "", refresh: bool | None = True) -> None:
        return None

    def reset(self, total: float | None = None) -> None:
        self.n, self.total = 0, total

    def refresh(self) -> None:
        return None

    def close(self) -> None:
        return None


def make_bar(
    progress: Progress,
    *,
    total: float | None = None,
    unit: str = "frame",
    desc: str | None = None,
    position: int | None = None,
    leave: bool = True,
) -> Bar:
    """A bar from ``progress``'s factory, or one that draws nothing."""
    if callable(progress):
        return progress(total=total, unit=unit, desc=desc, position=position, leave=leave)
    return _Unseen(total)
