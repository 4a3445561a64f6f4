"""The archive's events as a Parquet dataset: ``DIR/events/``, one file per input of a
batch that counted lines and zones (``--track --zones``), one row per event, beside
the detections' dataset (``DIR/detections/``).

The columns are the events CSV's (core/stages/analytics/events.py) and the input's
``source``: ``source, frame, time_s, track_id, class, kind, name, direction``
(``direction`` "in"/"out" for a crossing, "" otherwise). Like the detections, a file is
written to a hidden temporary sibling and renamed when the input's outputs are all
complete, so a reader sees an input's events all or not at all.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from framelens.core.errors import ExportError
from framelens.core.stages.analytics.counting import Event
from framelens.core.stages.analytics.events import EVENT_COLUMNS
from framelens.core.stages.sinks.atomic import AtomicFile, StrPath, error_text

if TYPE_CHECKING:  # pyarrow is loaded by a batch or a query, not by opening the window
    import pyarrow as pa
    import pyarrow.dataset as pads

__all__ = ["EVENTS_DIR", "EVENT_ROW_COLUMNS", "ParquetEvents", "event_schema", "events_dataset"]

EVENTS_DIR = "events"

EVENT_ROW_COLUMNS = ("source", *EVENT_COLUMNS)


@cache
def event_schema() -> pa.Schema:
    """The events dataset's columns and their types."""
    import pyarrow as pa

    text = pa.string()
    types = (text, pa.int64(), pa.float64(), pa.int64(), text, text, text, text)
    return pa.schema(list(zip(EVENT_ROW_COLUMNS, types, strict=True)))


class ParquetEvents:
    """One input's events as a Parquet file; it appears on close(). A run's writer
    (add, close, abort) that takes its events through ``add_events``, as the events
    CSV does."""

    def __init__(self, path: StrPath, meta: Mapping[str, Any], labels: Sequence[str]) -> None:
        self._file = AtomicFile(path)
        self.path = self._file.target
        self._finalizer = weakref.finalize(self, self._file.discard)
        self._source = str(meta.get("source", ""))
        self._labels = dict(enumerate(labels))
        self._rows: list[Event] = []
        self._closed = False
        self.rows = 0

    def add(self, index: int, pts: float, output: object) -> None:
        """A run's writer interface: events come through ``add_events``."""

    def add_events(self, events: Iterable[Event]) -> None:
        self._rows.extend(events)

    def close(self) -> Path:
        if self._closed:
            return self.path
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = self._rows
        columns = {
            "source": [self._source] * len(rows),
            "frame": [e.frame for e in rows],
            "time_s": [round(e.time_s, 6) for e in rows],
            "track_id": [e.track_id for e in rows],
            "class": [self._labels.get(e.class_id, str(e.class_id)) for e in rows],
            "kind": [e.kind for e in rows],
            "name": [e.name for e in rows],
            "direction": [e.direction for e in rows],
        }
        try:
            pq.write_table(pa.table(columns, schema=event_schema()), str(self._file.tmp))
        except (OSError, pa.ArrowException) as exc:
            self.abort()
            raise ExportError(f"cannot write {self.path}: {error_text(exc)}") from None
        self.rows = len(rows)
        self._closed = True
        self._finalizer.detach()
        return self._file.commit()

    def abort(self) -> None:
        self._closed = True
        self._finalizer.detach()
        with contextlib.suppress(OSError):
            self._file.discard()


def events_dataset(output_dir: StrPath) -> pads.Dataset | None:
    """The archive's events (``pyarrow.dataset``), or None when it has none."""
    import pyarrow as pa
    import pyarrow.dataset as pads

    folder = Path(output_dir) / EVENTS_DIR
    if not folder.is_dir() or not any(folder.glob("*.parquet")):
        return None
    try:
        return pads.dataset(str(folder), format="parquet", schema=event_schema())
    except (OSError, pa.ArrowException) as exc:
        raise ExportError(f"cannot read {folder}: {error_text(exc)}") from None
