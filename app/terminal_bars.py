"""The command line's progress bars: tqdm on stderr, drawn only where stderr is a
terminal (core reports progress through these, core/progress.py)."""

from __future__ import annotations

import sys
from typing import Any

from framelens.core.progress import Bar, Progress
from tqdm import tqdm

__all__ = ["bars_for", "terminal_bars"]


def terminal_bars(
    *,
    total: float | None = None,
    unit: str = "frame",
    desc: str | None = None,
    position: int | None = None,
    leave: bool = True,
) -> Bar:
    """A tqdm bar on stderr; shown only on a terminal (tqdm's ``disable=None``)."""
    bar: Bar = tqdm(
        total=total, unit=unit, desc=desc, position=position, leave=leave, file=sys.stderr,
        disable=None,
    )  # fmt: skip
    return bar


def bars_for(args: Any) -> Progress:
    """What a command gives core for progress: the terminal's bars, none with --quiet."""
    return False if getattr(args, "quiet", False) else terminal_bars
