"""Finding what matters in an archive: the detections of DIR/detections filtered by
class, score, source, time and track, the tracks of a tracked batch listed, and the
events of DIR/events (a batch that counted lines and zones) filtered by kind, line or
zone, direction, class, time and source; read with pyarrow (only the rows that match
are materialised)."""

from __future__ import annotations

import fnmatch
import os
from typing import TYPE_CHECKING, Literal

from framelens.core.errors import ConfigError
from framelens.core.sessions.archive.events import events_dataset
from framelens.core.sessions.archive.parquet import COLUMNS, dataset
from framelens.core.sessions.archive.types import DetectionHit, EventRow, TrackRow

if TYPE_CHECKING:  # pyarrow is loaded by a query, not by opening the window
    import pyarrow.compute as pc
    import pyarrow.dataset as pads


def archive_labels(output_dir: str | os.PathLike[str]) -> list[str]:
    """The labels present in the archive's detections, sorted."""
    import pyarrow.compute as pc

    data = dataset(output_dir)
    if data is None:
        return []
    labels = data.to_table(columns=["label"]).column("label")
    return sorted(str(v) for v in pc.unique(labels).to_pylist() if v is not None)


def query_detections(
    output_dir: str | os.PathLike[str],
    *,
    label: str | None = None,
    min_score: float = 0.0,
    source_glob: str | None = None,
    between: tuple[float, float] | None = None,
    limit: int | None = None,
    track_id: int | None = None,
) -> list[DetectionHit]:
    """The detections of the archive in ``output_dir`` of class ``label``, scoring at
    least ``min_score``, from sources matching ``source_glob`` (fnmatch, against the
    source's path as given to the batch), at pts between ``between`` (seconds, both
    ends included), of track ``track_id`` (a tracked batch's; IDs are per input, so
    each input's track of that number); ordered by source, frame and score (highest
    first); at most ``limit``."""
    hits, _total = search_detections(
        output_dir, label=label, min_score=min_score, source_glob=source_glob,
        between=between, limit=limit, track_id=track_id,
    )  # fmt: skip
    return hits


def search_detections(
    output_dir: str | os.PathLike[str],
    *,
    label: str | None = None,
    min_score: float = 0.0,
    source_glob: str | None = None,
    between: tuple[float, float] | None = None,
    limit: int | None = None,
    order: Literal["place", "score"] = "place",
    track_id: int | None = None,
) -> tuple[list[DetectionHit], int]:
    """``query_detections``' first ``limit`` hits in ``order`` ("place": by source, frame
    and score; "score": best first) and how many match in all. Filtering, counting,
    sorting and cutting happen in Arrow: only the hits returned become Python objects,
    so a class with millions of hits in an archive costs its rows' columns, not an
    object each."""
    _check_filters(between, limit, track_id)
    import pyarrow.dataset as pads

    data = dataset(output_dir)
    if data is None:
        return [], 0
    condition = pads.field("score") >= min_score
    if label is not None:
        condition &= pads.field("label") == label
    if between is not None:
        condition &= (pads.field("pts") >= between[0]) & (pads.field("pts") <= between[1])
    if source_glob is not None:
        condition &= _from_sources(data, source_glob)
    if track_id is not None:
        condition &= pads.field("track_id") == track_id
    table = data.to_table(columns=list(COLUMNS), filter=condition)
    place = [("source", "ascending"), ("frame", "ascending"), ("score", "descending")]
    keys = place if order == "place" else [("score", "descending"), *place[:2]]
    table = table.sort_by(keys)
    total = table.num_rows
    if limit is not None:
        table = table.slice(0, limit)
    return [DetectionHit(**row) for row in table.to_pylist()], total


def _from_sources(data: pads.Dataset, source_glob: str) -> pc.Expression:
    """The rows whose source matches ``source_glob`` (none: an empty list of sources,
    typed, which Arrow cannot infer)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as pads

    sources = data.to_table(columns=["source"]).column("source")
    names = [str(s) for s in pc.unique(sources).to_pylist()]
    matching = [s for s in names if fnmatch.fnmatchcase(s, source_glob)]
    return pads.field("source").isin(pa.array(matching, type=pa.string()))


def archive_tracks(
    output_dir: str | os.PathLike[str],
    *,
    label: str | None = None,
    source_glob: str | None = None,
    track_id: int | None = None,
) -> list[TrackRow]:
    """The tracks of a tracked archive (``framelens batch --track``), per input and
    track ID: its class (most of its boxes'), first and last frame and time, boxes;
    ordered by source and ID. ``label``: tracks of that class; ``source_glob``: of the
    inputs matching it; ``track_id``: that ID's track in each input. Boxes of no
    confirmed track (-1) and untracked inputs (null) are not tracks."""
    import pyarrow.dataset as pads

    data = dataset(output_dir)
    if data is None:
        return []
    condition = pads.field("track_id") >= 1
    if source_glob is not None:
        condition &= _from_sources(data, source_glob)
    if track_id is not None:
        condition &= pads.field("track_id") == track_id
    table = data.to_table(columns=["source", "track_id", "label", "frame", "pts"],
                          filter=condition)  # fmt: skip
    keys = ["source", "track_id"]
    spans = table.group_by(keys).aggregate(
        [("frame", "min"), ("frame", "max"), ("pts", "min"), ("pts", "max"), ("frame", "count")]
    )
    by_label = table.group_by([*keys, "label"]).aggregate([("frame", "count")])
    most: dict[tuple[str, int], tuple[int, str]] = {}
    for row in by_label.to_pylist():
        key, count = (row["source"], row["track_id"]), row["frame_count"]
        best = most.get(key)
        if best is None or (count, row["label"]) > best:  # ties: the same label each time
            most[key] = (count, row["label"])
    rows = [
        TrackRow(
            source=row["source"],
            track_id=row["track_id"],
            label=most[(row["source"], row["track_id"])][1],
            first_frame=row["frame_min"],
            last_frame=row["frame_max"],
            first_pts=row["pts_min"],
            last_pts=row["pts_max"],
            boxes=row["frame_count"],
        )
        for row in spans.to_pylist()
    ]
    if label is not None:
        rows = [r for r in rows if r.label == label]
    return sorted(rows, key=lambda r: (r.source, r.track_id))


EVENT_KINDS = ("cross", "enter", "exit", "loiter")
DIRECTIONS = ("in", "out")


def query_events(
    output_dir: str | os.PathLike[str],
    *,
    kind: str | None = None,
    name: str | None = None,
    direction: str | None = None,
    label: str | None = None,
    between: tuple[float, float] | None = None,
    source_glob: str | None = None,
    limit: int | None = None,
    track_id: int | None = None,
) -> list[EventRow]:
    """The events of the archive in ``output_dir`` (``DIR/events/``) of ``kind`` (cross,
    enter, exit, loiter), at the line or zone ``name``, in ``direction`` (in, out: a
    crossing's), of class ``label``, at times between ``between`` (seconds of the
    source, both ends included), from sources matching ``source_glob`` (fnmatch), of
    track ``track_id`` (each input's track of that number); ordered by source, frame
    and track; at most ``limit``. ConfigError (one line) for a value that cannot match."""
    if kind is not None and kind not in EVENT_KINDS:
        raise ConfigError(f"event kind {kind!r}: one of {', '.join(EVENT_KINDS)}")
    if direction is not None and direction not in DIRECTIONS:
        raise ConfigError(f"direction {direction!r}: in or out (a crossing's)")
    if direction is not None and kind not in (None, "cross"):
        raise ConfigError(f"a direction is a crossing's: {kind} events have none")
    _check_filters(between, limit, track_id)
    import pyarrow.dataset as pads

    data = events_dataset(output_dir)
    if data is None:
        return []
    condition = pads.field("frame") >= 0
    for column, value in (("kind", kind), ("name", name), ("direction", direction),
                          ("class", label), ("track_id", track_id)):  # fmt: skip
        if value is not None:
            condition &= pads.field(column) == value
    if between is not None:
        condition &= (pads.field("time_s") >= between[0]) & (pads.field("time_s") <= between[1])
    if source_glob is not None:
        condition &= _from_sources(data, source_glob)
    table = data.to_table(filter=condition)
    order = ["source", "frame", "track_id", "kind", "name"]
    table = table.sort_by([(c, "ascending") for c in order])
    if limit is not None:
        table = table.slice(0, limit)
    return [
        EventRow(r["source"], r["frame"], r["time_s"], r["track_id"], r["class"], r["kind"],
                 r["name"], r["direction"])
        for r in table.to_pylist()
    ]  # fmt: skip


def archive_event_names(output_dir: str | os.PathLike[str]) -> list[str]:
    """The lines and zones the archive's events name, sorted."""
    import pyarrow.compute as pc

    data = events_dataset(output_dir)
    if data is None:
        return []
    names = data.to_table(columns=["name"]).column("name")
    return sorted(str(v) for v in pc.unique(names).to_pylist() if v is not None)


def _check_filters(
    between: tuple[float, float] | None, limit: int | None, track_id: int | None
) -> None:
    """The filters detections and events share: ConfigError naming a bad one."""
    if between is not None and between[0] > between[1]:
        raise ConfigError(f"between {between[0]:g} and {between[1]:g}: the start is after the end")
    if limit is not None and limit < 0:
        raise ConfigError("limit must not be negative")
    if track_id is not None and track_id < 1:
        raise ConfigError(f"track {track_id}: track IDs start at 1")
