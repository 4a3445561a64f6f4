"""The analytics stage: one source's tracks against its lines and zones, after its tracker.

    AnalyticsStage(spec)     a SourceStage: counts each result's tracked boxes, sets
                             ``result.events`` and keeps a Tally (counts, dwell);
                             ``drawn``: each result also carries its lines and zones
                             with their counts as a layer (overlay.py: the wall's tiles)
    AnalyticsStages(spec)    its factory, picklable (``run --processes``, Ray)

``reset()`` (a seek, a restart) forgets where tracks were and keeps the counts; frames at
or before the last frame already counted make no events when they come again, so a
stretch played twice is counted once (docs/analytics.md).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from framelens.core.stages.analytics.counting import Counter, Event
from framelens.core.stages.analytics.overlay import ZonesLayer
from framelens.core.stages.analytics.zones import ZonesFile
from framelens.core.stages.source_stages import SourceStage
from framelens.core.types import Detections, FrameResult

__all__ = ["AnalyticsStage", "AnalyticsStages", "Tally"]


class Tally:
    """Counts by line and zone, direction (kind) and class, and zones' dwell times, from
    events."""

    def __init__(self, spec: ZonesFile, labels: Mapping[int, str] | None = None) -> None:
        self.labels = dict(labels or {})
        self.lines: dict[str, dict[str, dict[str, int]]] = {s.name: {} for s in spec.lines}
        self.zones: dict[str, dict[str, dict[str, int]]] = {s.name: {} for s in spec.zones}
        self.dwell: dict[str, list[float]] = {s.name: [] for s in spec.zones}
        self.events = 0

    def class_name(self, class_id: int) -> str:
        return self.labels.get(class_id, str(class_id))

    def add(self, events: Iterable[Event]) -> None:
        for e in events:
            self.events += 1
            key = e.direction if e.kind == "cross" else e.kind
            table = self.lines if e.kind == "cross" else self.zones
            by_class = table[e.name].setdefault(self.class_name(e.class_id), {})
            by_class[key] = by_class.get(key, 0) + 1
            if e.kind == "exit" and e.dwell_s is not None:
                self.dwell[e.name].append(e.dwell_s)

    def count(self, name: str, key: str) -> int:
        """How many ``key`` (in, out, enter, exit, loiter) events ``name`` had."""
        table = self.lines.get(name, self.zones.get(name, {}))
        return sum(c.get(key, 0) for c in table.values())

    def as_json(self) -> dict[str, Any]:
        lines = {
            name: {"in": self.count(name, "in"), "out": self.count(name, "out"),
                   "by_class": {c: {"in": v.get("in", 0), "out": v.get("out", 0)}
                                for c, v in sorted(t.items())}}
            for name, t in self.lines.items()
        }  # fmt: skip
        zones: dict[str, Any] = {}
        for name, t in self.zones.items():
            keys = ("enter", "exit", "loiter")
            stays = self.dwell[name]
            zones[name] = {
                **{k: self.count(name, k) for k in keys},
                "by_class": {c: {k: v.get(k, 0) for k in keys} for c, v in sorted(t.items())},
                "dwell_s": {
                    "stays": len(stays),
                    "mean": round(statistics.fmean(stays), 3) if stays else None,
                    "median": round(statistics.median(stays), 3) if stays else None,
                    "max": round(max(stays), 3) if stays else None,
                },
            }
        return {"lines": lines, "zones": zones, "events": self.events}


class AnalyticsStage:
    """One source's lines and zones as a stage (see the module's docstring)."""

    def __init__(
        self, spec: ZonesFile, labels: Mapping[int, str] | None = None, drawn: bool = False
    ) -> None:
        self.spec = spec
        self.counter = Counter(spec)
        self.tally = Tally(spec, labels)
        self.drawn = drawn
        self._layer: ZonesLayer | None = None  # the last drawn layer, its events, inside
        self._layer_events = -1
        self._inside: list[int] = []
        self._counted_upto = -1
        self._last = -1

    def reset(self) -> None:
        self.counter.clear()

    def __call__(self, result: FrameResult) -> None:
        detections = result.output
        frame = result.frame
        if isinstance(detections, Detections) and detections.track_ids is not None:
            events = self.update(frame.index, float(frame.pts), detections)
            if events:
                result.events = (*result.events, *events)
        if self.drawn:
            result.layers = (*result.layers, self.layer(frame.index))

    def layer(self, frame: int) -> ZonesLayer:
        """The lines and zones with their counts at ``frame`` (a snapshot; the last one
        again while nothing changed)."""
        tally = self.tally
        inside = self.counter.inside(frame)
        last = self._layer
        if last is not None and self._layer_events == tally.events and self._inside == inside:
            return last
        lines = tuple((tally.count(s.name, "in"), tally.count(s.name, "out"))
                      for s in self.spec.lines)  # fmt: skip
        zones = tuple(
            (inside[k], tally.count(s.name, "enter")) for k, s in enumerate(self.spec.zones)
        )
        self._layer, self._layer_events, self._inside = (
            ZonesLayer(self.spec, lines, zones),
            tally.events,
            inside,
        )
        return self._layer

    def update(self, frame: int, time_s: float, detections: Detections) -> list[Event]:
        """The events of one frame's tracked detections (also counted in ``tally``)."""
        assert detections.track_ids is not None
        events = self.counter.update(
            frame, time_s, detections.boxes, detections.track_ids, detections.class_ids
        )
        if frame <= self._counted_upto:
            return []  # counted once already (played again after a seek)
        self._counted_upto = frame
        self.tally.add(events)
        return events


@dataclass(frozen=True)
class AnalyticsStages:
    """The factory of a run's analytics stages: each source its own (picklable)."""

    spec: ZonesFile
    labels: Mapping[int, str] = field(default_factory=dict)
    drawn: bool = False  # each result carries its lines and zones with their counts

    def __call__(self, number: int) -> Sequence[SourceStage]:
        del number
        return [AnalyticsStage(self.spec, self.labels, self.drawn)]
