"""Which class implements each tracker kind: ``make_tracker(settings)``."""

from __future__ import annotations

from framelens.core.stages.tracking.base import Tracker
from framelens.core.stages.tracking.botsort import BoTSort
from framelens.core.stages.tracking.ocsort import OCSort
from framelens.core.stages.tracking.settings import TrackerSettings

__all__ = ["make_tracker"]


def make_tracker(settings: TrackerSettings) -> Tracker:
    """A new tracker (no tracks, IDs from 1) of ``settings.kind`` with its parameters."""
    if settings.kind == "bytetrack":
        from framelens.core.stages.tracking.bytetrack_compiled import CompiledByteTrack

        return CompiledByteTrack(settings)
    if settings.kind == "ocsort":
        return OCSort(settings)
    if settings.kind == "botsort":
        return BoTSort(settings)
    raise ValueError(f"unknown tracker {settings.kind!r}")
