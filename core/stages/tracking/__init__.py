"""Tracking: every detected object followed from frame to frame, per source.

settings.py    TrackerSettings (which tracker, its parameters)
base.py        Tracker, the interface of every tracker
geometry.py    IoU and box <-> Kalman state conversions
kalman.py      constant-velocity Kalman filters batched over all tracks
assignment.py  the optimal assignment under a cost limit (scipy)
bytetrack.py   ByteTrack, the reference (numpy; BoT-SORT is built on it)
bytetrack_compiled.py  ByteTrack compiled (numba): the same IDs, a frame in one call of
               machine code; what "bytetrack" makes (the default)
ocsort.py      OC-SORT, the reference (numpy)
ocsort_compiled.py  OC-SORT compiled (numba): the same IDs; what "ocsort" makes
botsort.py     BoT-SORT
cmc.py         camera-motion compensation (BoT-SORT)
registry.py    make_tracker(settings)
compile_ahead.py  both compiled trackers compiled at install (python -m ...)
stage.py       TrackingStage, tracking_stages(settings): the per-source stage
mot.py         tracks and detections as files: MOT Challenge text, FrameLens JSON
evaluation.py  tracks scored against ground truth by TrackEval (HOTA, CLEAR, Identity)
evaluation_report.py  the evaluation's report folder (JSON, plots, index.html)
"""

from framelens.core.stages.tracking.base import Tracker
from framelens.core.stages.tracking.botsort import BoTSort
from framelens.core.stages.tracking.bytetrack import ByteTrack
from framelens.core.stages.tracking.ocsort import OCSort
from framelens.core.stages.tracking.registry import make_tracker
from framelens.core.stages.tracking.settings import TRACKER_KINDS, TrackerKind, TrackerSettings
from framelens.core.stages.tracking.stage import (
    FORGET_AFTER,
    RECORD_FRAMES,
    TrackingStage,
    tracking_stages,
)

__all__ = [
    "FORGET_AFTER",
    "RECORD_FRAMES",
    "TRACKER_KINDS",
    "BoTSort",
    "ByteTrack",
    "OCSort",
    "Tracker",
    "TrackerKind",
    "TrackerSettings",
    "TrackingStage",
    "make_tracker",
    "tracking_stages",
]
