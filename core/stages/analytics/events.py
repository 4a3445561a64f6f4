"""Events as CSV, one row each: frame,time_s,track_id,class,kind,name,direction; the file
appears complete on close() or not at all (core/stages/sinks/atomic.py)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from typing import Protocol, runtime_checkable

from framelens.core.stages.analytics.counting import Event
from framelens.core.stages.sinks.atomic import AtomicTextWriter, StrPath

__all__ = ["EVENTS_SUFFIX", "EVENT_COLUMNS", "EventSink", "EventsWriter"]

EVENT_COLUMNS = ("frame", "time_s", "track_id", "class", "kind", "name", "direction")
EVENTS_SUFFIX = ".events.csv"
"""A source's events beside its other outputs in a several-source run:
``DIR/<name>.events.csv`` next to ``DIR/<name>.json``."""


@runtime_checkable
class EventSink(Protocol):
    """A run's writer that also takes the events its results carry (the events CSV, an
    archive's events Parquet)."""

    def add_events(self, events: Iterable[Event]) -> None: ...


class EventsWriter(AtomicTextWriter):
    """Events to ``path`` as CSV; ``labels`` names the classes (else their numbers);
    ``frame_offset`` is added to each event's frame (1: MOT frame numbers)."""

    def __init__(
        self, path: StrPath, labels: Mapping[int, str] | None = None, frame_offset: int = 0
    ) -> None:
        self.labels = dict(labels or {})
        self.frame_offset = frame_offset
        self.rows = 0
        super().__init__(path, newline="")
        self._write(",".join(EVENT_COLUMNS) + "\r\n")

    def add(self, index: int, pts: float, output: object) -> None:
        """A run's writer interface: events come through ``add_events``."""

    def add_events(self, events: Iterable[Event]) -> None:
        self._check_open()
        buf = io.StringIO()
        out = csv.writer(buf)
        for e in events:
            out.writerow([e.frame + self.frame_offset, f"{e.time_s:.3f}", e.track_id,
                          self.labels.get(e.class_id, str(e.class_id)), e.kind, e.name,
                          e.direction])  # fmt: skip
            self.rows += 1
        if buf.tell():
            self._write(buf.getvalue())
