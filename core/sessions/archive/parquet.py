"""The archive's detections as one Parquet dataset: ``DIR/detections/``, one file per
input (or per segment of a long input), one row per detection.

A file is written to a hidden temporary sibling and renamed when complete (the atomic
writers of core/stages/sinks), so a reader of the dataset, which skips names starting
with ``.``, sees an input's rows all or not at all. The numbers are those of the
detections JSON of the same run (``plain_detections``: boxes clipped and rounded to 2
decimals, scores to 4). ``track_id`` is the box's track when the batch tracked
(``--track``: IDs from 1 per input; -1 for a box of no confirmed track), null when not.
Files written before the column existed read back with it null.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from framelens.core.errors import ExportError
from framelens.core.stages.sinks.atomic import AtomicFile, StrPath, error_text
from framelens.core.stages.sinks.detections import box_limits, label_of, plain_detections
from framelens.core.types import Detections

if TYPE_CHECKING:  # pyarrow is loaded by a batch or a query, not by opening the window
    import pyarrow as pa
    import pyarrow.dataset as pads

DETECTIONS_DIR = "detections"

COLUMNS = ("source", "frame", "pts", "class_id", "label", "score",
           "x1", "y1", "x2", "y2", "model", "precision", "track_id")  # fmt: skip


@cache
def schema() -> pa.Schema:
    """The dataset's columns and their types."""
    import pyarrow as pa

    text, f64 = pa.string(), pa.float64()
    types = (text, pa.int64(), f64, pa.int32(), text, f64, f64, f64, f64, f64, text, text,
             pa.int64())  # fmt: skip
    return pa.schema(list(zip(COLUMNS, types, strict=True)))


ROW_GROUP = 65536  # rows buffered before a row group is written


class ParquetRows:
    """One input's (or segment's) detections as a Parquet file; it appears on close().

    Frames at or past ``stop`` are left out: a segment holds its own frames only.
    Implements the task writers' protocol (add, close, abort), so a run commits it
    together with its other outputs.
    """

    def __init__(
        self,
        path: StrPath,
        meta: Mapping[str, Any],
        labels: Sequence[str],
        *,
        stop: int | None = None,
    ) -> None:
        self._file = AtomicFile(path)
        self.path = self._file.target
        self._finalizer = weakref.finalize(self, self._file.discard)
        self._labels = tuple(labels)
        self._limits = box_limits(meta)
        self._constant = {
            "source": str(meta.get("source", "")),
            "model": str(meta.get("model", "")),
            "precision": str(meta.get("precision", "")),
        }
        self._stop = stop
        self._columns: dict[str, list[Any]] = {name: [] for name in COLUMNS}
        self.rows = 0
        self._closed = False
        import pyarrow as pa
        import pyarrow.parquet as pq

        self._pa = pa
        try:
            self._writer = pq.ParquetWriter(str(self._file.tmp), schema())
        except (OSError, pa.ArrowException) as exc:
            self.abort()
            raise ExportError(f"cannot write {self.path}: {error_text(exc)}") from None

    def add(self, index: int, pts: float, output: Detections) -> None:
        if self._stop is not None and index >= self._stop:
            return
        boxes, scores, cids, _ = plain_detections(output, self._limits)
        cols = self._columns
        tracks = output.track_ids
        cols["track_id"].extend([None] * len(boxes) if tracks is None else tracks.tolist())
        for box, score, cid in zip(boxes, scores, cids, strict=True):
            cols["frame"].append(int(index))
            cols["pts"].append(round(float(pts), 6))
            cols["class_id"].append(int(cid))
            cols["label"].append(label_of(self._labels, cid))
            cols["score"].append(score)
            for name, value in zip(("x1", "y1", "x2", "y2"), box, strict=True):
                cols[name].append(value)
        if len(cols["frame"]) >= ROW_GROUP:
            self._flush()

    def _flush(self) -> None:
        n = len(self._columns["frame"])
        if not n:
            return
        for key, value in self._constant.items():
            self._columns[key] = [value] * n
        pa = self._pa
        try:
            self._writer.write_table(pa.table(self._columns, schema=schema()))
        except (OSError, pa.ArrowException) as exc:
            self.abort()
            raise ExportError(f"cannot write {self.path}: {error_text(exc)}") from None
        self.rows += n
        self._columns = {name: [] for name in COLUMNS}

    def close(self) -> Path:
        if self._closed:
            return self.path
        self._flush()
        try:
            self._writer.close()
        except (OSError, self._pa.ArrowException) as exc:
            self.abort()
            raise ExportError(f"cannot write {self.path}: {error_text(exc)}") from None
        self._closed = True
        self._finalizer.detach()
        return self._file.commit()

    def abort(self) -> None:
        self._closed = True
        writer = getattr(self, "_writer", None)
        if writer is not None:
            with contextlib.suppress(Exception):  # a full disk: thrown away anyway
                writer.close()
        self._finalizer.detach()
        self._file.discard()


def dataset(output_dir: StrPath) -> pads.Dataset | None:
    """The archive's detections (``pyarrow.dataset``), or None when it has none yet."""
    import pyarrow as pa
    import pyarrow.dataset as pads

    folder = Path(output_dir) / DETECTIONS_DIR
    if not folder.is_dir() or not any(folder.glob("*.parquet")):
        return None
    try:
        return pads.dataset(str(folder), format="parquet", schema=schema())
    except (OSError, pa.ArrowException) as exc:
        raise ExportError(f"cannot read {folder}: {error_text(exc)}") from None
