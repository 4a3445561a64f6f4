"""Detections of a run as JSON or CSV, streamed to a temporary file frame by frame.

JSON layout (one object)::

    {"source", "model", "precision", "backend",          # as in meta, for quick reading
     "meta": {"app_version", "model", "model_sha256", "precision", "backend", "device",
              "conf", "iou", "source", "source_fps", "width", "height", ...extra keys},
     "frames": [{"index", "pts", "detections": [
         {"box": [x1, y1, x2, y2], "score", "class_id", "label", "landmarks"?,
          "track_id"?}]}]}

Every processed frame is listed, with an empty list when nothing was found. Boxes are
source pixels, clipped to the frame (when meta gives width and height), 2 decimals.
Face detections add "landmarks": five [x, y] pairs. A run that tracked adds "track_id"
(core/stages/tracking): the box's track, from 1, or -1 for a box of no confirmed track.

CSV: ``index,pts,class_id,label,score,x1,y1,x2,y2`` and, for faces,
``lm0_x,lm0_y,...,lm4_x,lm4_y``, and last ``track_id`` when the run tracked (decided by
the first frame, as faces are); one row per detection, so empty frames have no row.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from framelens.core.errors import ExportError
from framelens.core.stages.sinks.atomic import AtomicTextWriter, StrPath, _reason
from framelens.core.types import Detections

META_KEYS = (
    "app_version",
    "model",
    "model_sha256",
    "precision",
    "backend",
    "device",
    "conf",
    "iou",
    "source",
    "source_fps",
    "width",
    "height",
)
TOP_KEYS = ("source", "model", "precision", "backend")
CSV_HEADER = ("index", "pts", "class_id", "label", "score", "x1", "y1", "x2", "y2")
CSV_LANDMARKS = tuple(f"lm{i}_{axis}" for i in range(5) for axis in ("x", "y"))


class DetectionsWriter(AtomicTextWriter):
    """Write detections to ``path`` (.json or .csv); the file appears on close()."""

    def __init__(self, path: StrPath, meta: Mapping[str, Any], labels: Sequence[str]) -> None:
        target = Path(path)
        self.kind = target.suffix.lower().lstrip(".")
        if self.kind not in ("json", "csv"):
            raise ExportError(f"cannot write {target}: detections go to .json or .csv")
        self.labels = tuple(labels)
        self.frames_written = 0
        self._limits = box_limits(meta)
        self._csv_header: bool | None = None  # faces or not, decided by the first frame
        self._csv_tracks = False  # a track_id column, decided by the first frame
        super().__init__(target, newline="")
        try:
            if self.kind == "json":
                self._write_json_head(meta)
            else:
                self._csv = csv.writer(self._fh, lineterminator="\n")
        except OSError as exc:
            self.abort()
            raise ExportError(f"cannot write {self.path}: {_reason(exc)}") from None

    def _write_json_head(self, meta: Mapping[str, Any]) -> None:
        meta_out = {k: _plain(meta.get(k)) for k in META_KEYS}
        meta_out.update({k: _plain(v) for k, v in meta.items() if k not in meta_out})
        head = {k: meta_out[k] for k in TOP_KEYS}
        head["meta"] = meta_out
        text = json.dumps(head, ensure_ascii=False)
        # Leave the object open after "frames": [ so frames can be streamed in.
        self._fh.write(text[:-1] + ', "frames": [')

    def add(self, index: int, pts: float, detections: Detections) -> None:
        """Record the detections of one processed frame (call for every frame)."""
        self._check_open()
        box_list, scores, cids, lms = plain_detections(detections, self._limits)
        tids = None if detections.track_ids is None else detections.track_ids.tolist()
        try:
            if self.kind == "json":
                self._add_json(index, pts, box_list, scores, cids, lms, tids)
            else:
                self._add_csv(index, pts, box_list, scores, cids, lms, tids)
        except OSError as exc:
            self.abort()
            raise ExportError(f"cannot write {self.path}: {_reason(exc)}") from None
        self.frames_written += 1

    def _label(self, cid: int) -> str:
        return label_of(self.labels, cid)

    def _add_json(
        self,
        index: int,
        pts: float,
        boxes: list[list[float]],
        scores: list[float],
        cids: list[int],
        lms: list[list[list[float]]] | None,
        tids: list[int] | None = None,
    ) -> None:
        dets: list[dict[str, Any]] = []
        for i, box in enumerate(boxes):
            det: dict[str, Any] = {
                "box": box,
                "score": scores[i],
                "class_id": cids[i],
                "label": self._label(cids[i]),
            }
            if lms is not None:
                det["landmarks"] = lms[i]
            if tids is not None:
                det["track_id"] = tids[i]
            dets.append(det)
        frame = {"index": int(index), "pts": round(float(pts), 6), "detections": dets}
        sep = ", " if self.frames_written else ""
        self._fh.write(sep + json.dumps(frame, ensure_ascii=False))

    def _add_csv(
        self,
        index: int,
        pts: float,
        boxes: list[list[float]],
        scores: list[float],
        cids: list[int],
        lms: list[list[list[float]]] | None,
        tids: list[int] | None = None,
    ) -> None:
        if self._csv_header is None:
            self._write_csv_header(faces=lms is not None, tracks=tids is not None)
        pts_r = round(float(pts), 6)
        for i, box in enumerate(boxes):
            row: list[object] = [int(index), pts_r, cids[i], self._label(cids[i]), scores[i], *box]
            if self._csv_header:
                row.extend(c for point in (lms[i] if lms else [[None, None]] * 5) for c in point)
            if self._csv_tracks:
                row.append(tids[i] if tids is not None else None)
            self._csv.writerow(row)

    def _write_csv_header(self, faces: bool, tracks: bool = False) -> None:
        self._csv_header = faces
        self._csv_tracks = tracks
        extra = (CSV_LANDMARKS if faces else ()) + (("track_id",) if tracks else ())
        self._csv.writerow(CSV_HEADER + extra)

    def _finish(self) -> None:
        if self.kind == "json":
            self._fh.write("]}\n")
        elif self._csv_header is None:
            self._write_csv_header(faces=False)


Limits = npt.NDArray[np.float32] | None


def box_limits(meta: Mapping[str, Any]) -> Limits:
    """The (width, height, width, height) boxes are clipped to, from a run's meta; None
    when the meta gives no frame size."""
    width, height = meta.get("width"), meta.get("height")
    if isinstance(width, int | float) and isinstance(height, int | float):
        return np.array([width, height, width, height], np.float32)
    return None


def plain_detections(
    detections: Detections, limits: Limits
) -> tuple[list[list[float]], list[float], list[int], list[list[list[float]]] | None]:
    """One frame's detections as written: boxes clipped to ``limits`` and rounded to 2
    decimals, scores to 4, class ids, landmarks (faces) to 2. Every writer of detections
    (JSON, CSV, a batch's Parquet rows) writes these same numbers."""
    boxes = detections.boxes
    if limits is not None and len(boxes):
        boxes = np.clip(boxes, 0.0, limits)
    box_list = np.round(boxes.astype(np.float64), 2).tolist()
    scores = np.round(detections.scores.astype(np.float64), 4).tolist()
    cids = detections.class_ids.tolist()
    lms = (
        None
        if detections.landmarks is None
        else np.round(detections.landmarks.astype(np.float64), 2).tolist()
    )
    return box_list, scores, cids, lms


def label_of(labels: Sequence[str], class_id: int) -> str:
    """A class id's label as written: its name, or the id itself when the model names
    no such class."""
    return labels[class_id] if 0 <= class_id < len(labels) else str(class_id)


def _plain(value: Any) -> Any:
    """JSON-safe: numpy scalars to Python, paths and other objects to str."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return str(value)


def load_detections_json(path: StrPath) -> dict[str, Any]:
    """Read a detections JSON written by DetectionsWriter."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise ExportError(f"cannot read detections {path}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("frames"), list):
        raise ExportError(f"cannot read detections {path}: not a FrameLens detections file")
    return data


def frame_detections(frame: Mapping[str, Any], *, faces: bool = False) -> Detections:
    """One frame of a detections JSON (``load_detections_json``'s ``frames``) as
    Detections again; ``faces``: with its landmarks. Track IDs come back when the frame's
    detections carry them (a run that tracked)."""
    dets = frame["detections"]
    lms = np.array([d["landmarks"] for d in dets], np.float32).reshape(-1, 5, 2) if faces else None
    tracked = bool(dets) and all("track_id" in d for d in dets)
    return Detections(
        np.array([d["box"] for d in dets], np.float32).reshape(-1, 4),
        np.array([d["score"] for d in dets], np.float32),
        np.array([d["class_id"] for d in dets], np.int32),
        lms,
        np.array([d["track_id"] for d in dets], np.int64) if tracked else None,
    )
