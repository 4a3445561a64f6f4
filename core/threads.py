"""Threads that carry their names into the operating system as well as into Python.

Python names a thread for itself only: to ``top -H``, ``/proc/<pid>/task/*/comm``,
``perf`` and the benchmarks' per-thread CPU readings (benchmarks/wall_screen.py), every
Python thread reads "python". ``NamedThread`` sets the kernel's name of the thread too
(Linux, the first 15 bytes), so a profile says which of FrameLens's threads (a worker,
the decode-ahead, the wall's publisher) spent the time.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from typing import Any

__all__ = ["NamedThread", "set_native_name"]

_PR_SET_NAME = 15  # prctl(2)
_NAME_BYTES = 15  # the kernel keeps 16 bytes with the terminating zero


def _load_prctl() -> Any:
    """libc's prctl from the process's own symbols (no library search: that can run a
    subprocess, and would fall on the first thread to start), or None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _load_prctl()  # once, at import: every thread's start costs one call


def set_native_name(name: str) -> bool:
    """Name the calling thread ``name`` for the operating system (its first 15 bytes);
    False where the system has no such name or refused it."""
    if _PRCTL is None:
        return False
    raw = name.encode("utf-8", "replace")[:_NAME_BYTES]
    return bool(_PRCTL(_PR_SET_NAME, ctypes.c_char_p(raw), 0, 0, 0) == 0)


class NamedThread(threading.Thread):
    """A ``threading.Thread`` whose name the operating system sees too (set as it starts
    running)."""

    def run(self) -> None:
        set_native_name(self.name)
        super().run()
