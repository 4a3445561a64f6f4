"""Counts and events in a comparison: does another precision (or model) change my counts?

When a comparison tracks and is given lines and zones (``--track --zones``), each pane's
tracks over the frames compared are counted as a run counts them
(core/stages/analytics: the same Counter, the same definitions, docs/analytics.md),
from the tracked boxes records.py keeps per frame. Each pane's events are then held
against the reference pane's: an event of the pane and one of the reference are the
same when their kind, line or zone, direction and class agree and their frames are at
most ``tolerance`` frames apart (a tracker may confirm a crossing a frame later on
slightly other boxes); each event is matched at most once, as many pairs made as can
be. What is left are the events the pane lacks (``missing``: the reference has
them) and those it has in addition (``extra``).

Each pane's "analytics" entry of summary.json::

    {"counts": {"lines": {...}, "zones": {...}, "events": n},   # stage.py Tally.as_json
     "vs_reference": {"matched": n, "missing": [event, ...], "extra": [event, ...],
                      "count_changes": {"gate": {"in": +1, "out": 0}, "bay": {...}}}}

an event being ``{"frame", "time_s", "track_id", "class", "kind", "name", "direction"}``
and ``count_changes`` the pane's count minus the reference's, per line (in, out) and
zone (enter, exit, loiter).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from framelens.core.stages.analytics.counting import Counter, Event
from framelens.core.stages.analytics.stage import Tally
from framelens.core.stages.analytics.zones import ZonesFile

if TYPE_CHECKING:
    from framelens.core.stages.tracking.mot import MotFrame

__all__ = [
    "EVENT_TOLERANCE",
    "EventDifferences",
    "PaneFrame",
    "count_events",
    "event_json",
    "events_summary",
    "match_events",
]

EVENT_TOLERANCE = 5
"""Frames apart two panes' events may be and still be the same event (the default)."""

LINE_KEYS = ("in", "out")
ZONE_KEYS = ("enter", "exit", "loiter")


@dataclass(frozen=True)
class PaneFrame:
    """One frame of one pane: its index in the source, its time, its tracked boxes."""

    index: int
    pts: float
    tracks: MotFrame | None


def count_events(
    frames: Sequence[PaneFrame], zones: ZonesFile, labels: Mapping[int, str]
) -> tuple[list[Event], dict[str, Any]]:
    """One pane's events over ``frames`` (in order) and its counts (Tally.as_json)."""
    counter, tally = Counter(zones), Tally(zones, labels)
    events: list[Event] = []
    for f in frames:
        if f.tracks is None:
            continue
        t = f.tracks
        boxes = t.boxes.copy()
        boxes[:, 2:] += boxes[:, :2]  # left, top, width, height -> corners
        events += counter.update(f.index, f.pts, boxes, t.ids, t.class_ids)
    tally.add(events)
    return events, tally.as_json()


@dataclass(frozen=True)
class EventDifferences:
    """A pane's events against the reference's (see the module's docstring)."""

    matched: int
    missing: tuple[Event, ...]  # the reference's, not the pane's
    extra: tuple[Event, ...]  # the pane's, not the reference's


def match_events(
    reference: Sequence[Event],
    pane: Sequence[Event],
    tolerance: int = EVENT_TOLERANCE,
    labels: tuple[Mapping[int, str], Mapping[int, str]] = ({}, {}),
) -> EventDifferences:
    """``pane``'s events matched against ``reference``'s (see the module's docstring);
    ``labels``: the reference's and the pane's class names (classes match by name)."""

    def key(e: Event, names: Mapping[int, str]) -> tuple[str, str, str, str]:
        return (e.kind, e.name, e.direction, names.get(e.class_id, str(e.class_id)))

    groups: dict[tuple[str, str, str, str], tuple[list[int], list[int]]] = {}
    for i, r in enumerate(reference):
        groups.setdefault(key(r, labels[0]), ([], []))[0].append(i)
    for j, p in enumerate(pane):
        groups.setdefault(key(p, labels[1]), ([], []))[1].append(j)
    used_r: set[int] = set()
    used_p: set[int] = set()
    for refs, mine in groups.values():
        # in frame order, each reference event takes the pane's earliest one still free
        # within reach: as many pairs as can be made (each one's reach is an interval)
        refs.sort(key=lambda i: reference[i].frame)
        mine.sort(key=lambda j: pane[j].frame)
        k = 0
        for i in refs:
            frame = reference[i].frame
            while k < len(mine) and pane[mine[k]].frame < frame - tolerance:
                k += 1
            if k < len(mine) and pane[mine[k]].frame <= frame + tolerance:
                used_r.add(i)
                used_p.add(mine[k])
                k += 1
    return EventDifferences(
        matched=len(used_r),
        missing=tuple(e for i, e in enumerate(reference) if i not in used_r),
        extra=tuple(e for j, e in enumerate(pane) if j not in used_p),
    )


def event_json(e: Event, labels: Mapping[int, str]) -> dict[str, Any]:
    """An event as the report writes it (the events CSV's columns)."""
    return {
        "frame": e.frame,
        "time_s": round(e.time_s, 3),
        "track_id": e.track_id,
        "class": labels.get(e.class_id, str(e.class_id)),
        "kind": e.kind,
        "name": e.name,
        "direction": e.direction,
    }


def _flat(counts: dict[str, Any]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for table, keys in (("lines", LINE_KEYS), ("zones", ZONE_KEYS)):
        for name, entry in counts.get(table, {}).items():
            out[name] = {k: int(entry.get(k, 0)) for k in keys}
    return out


def events_summary(
    frames: Sequence[Sequence[PaneFrame]],
    reference: int,
    zones: ZonesFile,
    labels: Sequence[Mapping[int, str]],
    tolerance: int = EVENT_TOLERANCE,
) -> tuple[list[dict[str, Any]], list[list[Event]]]:
    """Each pane's "analytics" entry of summary.json (``frames[pane]``: its frames in
    order; ``labels[pane]``: its model's class names) and each pane's events."""
    counted = [count_events(f, zones, lab) for f, lab in zip(frames, labels, strict=True)]
    ref_events, ref_counts = counted[reference]
    ref_flat = _flat(ref_counts)
    names = labels[reference]
    out: list[dict[str, Any]] = []
    for (events, counts), mine_labels in zip(counted, labels, strict=True):
        diff = match_events(ref_events, events, tolerance, (names, mine_labels))
        mine = _flat(counts)
        changes = {
            name: {k: mine[name][k] - v for k, v in keys.items()} for name, keys in ref_flat.items()
        }
        out.append(
            {
                "counts": counts,
                "vs_reference": {
                    "matched": diff.matched,
                    "missing": [event_json(e, names) for e in diff.missing],
                    "extra": [event_json(e, mine_labels) for e in diff.extra],
                    "count_changes": changes,
                },
            }
        )
    return out, [events for events, _ in counted]
