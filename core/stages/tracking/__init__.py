"""Tracking: every detected object followed from frame to frame, per source.

settings.py  TrackerSettings (which tracker, its parameters)
base.py      Tracker, the interface of every tracker
"""

from framelens.core.stages.tracking.base import Tracker
from framelens.core.stages.tracking.settings import TRACKER_KINDS, TrackerKind, TrackerSettings

__all__ = ["TRACKER_KINDS", "Tracker", "TrackerKind", "TrackerSettings"]
