"""Archives at scale: one pipeline over folders of footage, locally or on Ray,
resumable (``DIR/manifest.json``) and queryable (``DIR/detections/``, Parquet).

    run_batch(inputs, output_dir, settings, ray=None | "local" | "auto" | ADDRESS)
    query_detections(output_dir, label="person", min_score=0.5, ...)
    query_events(output_dir, kind="cross", name="gate", direction="in", ...)

The driver (batch.py) discovers and probes the inputs (inputs.py), keeps the manifest
(manifest.py), plans segments of long files (segments.py) and follows the jobs
(progress.py); the jobs run on JobRunners (jobs.py) in this process (local.py)
or on Ray actors (ray_runner.py), writing Parquet rows (parquet.py) beside the per-file
detections, and with lines and zones (``zones``) their events (events.py); query.py
reads the datasets back.
"""

from framelens.core.sessions.archive.batch import run_batch
from framelens.core.sessions.archive.events import EVENTS_DIR
from framelens.core.sessions.archive.inputs import VIDEO_EXTENSIONS, discover_inputs
from framelens.core.sessions.archive.manifest import MANIFEST, read_manifest
from framelens.core.sessions.archive.parquet import DETECTIONS_DIR
from framelens.core.sessions.archive.query import (
    DIRECTIONS,
    EVENT_KINDS,
    archive_event_names,
    archive_labels,
    archive_tracks,
    query_detections,
    query_events,
    search_detections,
)
from framelens.core.sessions.archive.segments import DEFAULT_SEGMENT_FRAMES
from framelens.core.sessions.archive.types import (
    BatchSummary,
    DetectionHit,
    EventCounts,
    EventRow,
    InputProgress,
    InputState,
    TrackRow,
)

__all__ = [
    "DEFAULT_SEGMENT_FRAMES",
    "DETECTIONS_DIR",
    "DIRECTIONS",
    "EVENTS_DIR",
    "EVENT_KINDS",
    "MANIFEST",
    "VIDEO_EXTENSIONS",
    "BatchSummary",
    "DetectionHit",
    "EventCounts",
    "EventRow",
    "InputProgress",
    "InputState",
    "TrackRow",
    "archive_event_names",
    "archive_labels",
    "archive_tracks",
    "discover_inputs",
    "query_detections",
    "query_events",
    "read_manifest",
    "run_batch",
    "search_detections",
]
