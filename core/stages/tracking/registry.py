"""Which class implements each tracker kind: ``make_tracker(settings)``."""

from __future__ import annotations

import functools

from framelens.core.stages.tracking.base import Tracker
from framelens.core.stages.tracking.botsort import BoTSort
from framelens.core.stages.tracking.bytetrack import ByteTrack
from framelens.core.stages.tracking.ocsort import OCSort
from framelens.core.stages.tracking.settings import TrackerSettings

__all__ = ["make_tracker", "trackers_uncompiled"]


def make_tracker(settings: TrackerSettings) -> Tracker:
    """A new tracker (no tracks, IDs from 1) of ``settings.kind`` with its parameters."""
    if settings.kind == "bytetrack":
        if trackers_uncompiled() is not None:
            return ByteTrack(settings)  # the reference: the same IDs, ~10x the time
        from framelens.core.stages.tracking.bytetrack_compiled import CompiledByteTrack

        return CompiledByteTrack(settings)
    if settings.kind == "ocsort":
        if trackers_uncompiled() is not None:
            return OCSort(settings)  # the reference: the same IDs, ~40x the time
        from framelens.core.stages.tracking.ocsort_compiled import CompiledOCSort

        return CompiledOCSort(settings)
    if settings.kind == "botsort":
        return BoTSort(settings)
    raise ValueError(f"unknown tracker {settings.kind!r}")


@functools.cache
def trackers_uncompiled() -> str | None:
    """Why ByteTrack and OC-SORT run as their numpy references here (numba missing, or
    not built for this numpy): None where they run compiled (``framelens doctor`` says
    which)."""
    try:
        import framelens.core.stages.tracking.bytetrack_compiled
        import framelens.core.stages.tracking.ocsort_compiled  # noqa: F401
    except Exception as exc:  # ImportError; RuntimeError where no cache folder is writable
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"numba not available ({reason})"
    return None
