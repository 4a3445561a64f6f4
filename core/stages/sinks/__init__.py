"""Writers for what a run produces: annotated video, detections, snapshots.

Every writer goes through a temporary file renamed on success (atomic.py), so a
target path holds either the complete result or nothing.
"""

from framelens.core.stages.sinks.atomic import AtomicFile, atomic_output, write_bytes_atomic
from framelens.core.stages.sinks.detections import DetectionsWriter, load_detections_json
from framelens.core.stages.sinks.snapshot import save_snapshot
from framelens.core.stages.sinks.video import VideoExporter, provenance_metadata

__all__ = [
    "AtomicFile",
    "DetectionsWriter",
    "VideoExporter",
    "atomic_output",
    "load_detections_json",
    "provenance_metadata",
    "save_snapshot",
    "write_bytes_atomic",
]
