"""Finding what matters in an archive: the detections of DIR/detections filtered by
class, score, source and time, read with pyarrow (only the rows that match are
materialised)."""

from __future__ import annotations

import fnmatch
import os
from typing import Literal

from framelens.core.errors import ConfigError
from framelens.core.sessions.archive.parquet import COLUMNS, dataset
from framelens.core.sessions.archive.types import DetectionHit


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
) -> list[DetectionHit]:
    """The detections of the archive in ``output_dir`` of class ``label``, scoring at
    least ``min_score``, from sources matching ``source_glob`` (fnmatch, against the
    source's path as given to the batch), at pts between ``between`` (seconds, both
    ends included); ordered by source, frame and score (highest first); at most
    ``limit``."""
    hits, _total = search_detections(
        output_dir, label=label, min_score=min_score, source_glob=source_glob,
        between=between, limit=limit,
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
) -> tuple[list[DetectionHit], int]:
    """``query_detections``' first ``limit`` hits in ``order`` ("place": by source, frame
    and score; "score": best first) and how many match in all. Filtering, counting,
    sorting and cutting happen in Arrow: only the hits returned become Python objects,
    so a class with millions of hits in an archive costs its rows' columns, not an
    object each."""
    if between is not None and between[0] > between[1]:
        raise ConfigError(f"between {between[0]:g} and {between[1]:g}: the start is after the end")
    if limit is not None and limit < 0:
        raise ConfigError("limit must not be negative")
    import pyarrow.compute as pc
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
        sources = data.to_table(columns=["source"]).column("source")
        names = [str(s) for s in pc.unique(sources).to_pylist()]
        matching = [s for s in names if fnmatch.fnmatchcase(s, source_glob)]
        condition &= pads.field("source").isin(matching)
    table = data.to_table(columns=list(COLUMNS), filter=condition)
    place = [("source", "ascending"), ("frame", "ascending"), ("score", "descending")]
    keys = place if order == "place" else [("score", "descending"), *place[:2]]
    table = table.sort_by(keys)
    total = table.num_rows
    if limit is not None:
        table = table.slice(0, limit)
    return [DetectionHit(**row) for row in table.to_pylist()], total
