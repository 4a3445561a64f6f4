"""Tracks and detections as files: MOT Challenge text and FrameLens detections JSON.

MOT Challenge text: one box a line, fields separated by commas (or spaces)::

    frame, id, left, top, width, height[, conf[, class, visibility | x, y, z]]

``frame`` counts from 1, ``id`` is -1 for a detection that belongs to no track (a
detections file: MOT17's det.txt) and >= 0 for a track or a ground-truth object. The
7th field is the score (detections, tracks) or, in ground truth, the flag "considered"
(0: not counted when evaluating). With 8 or 9 fields the 8th is MOT16/17/20's class
(1 pedestrian, 2 person on vehicle, 3 car, ..., 7 static person, 8 distractor, 12
reflection: see core/stages/tracking/evaluation.py) and the 9th the visibility; with 10
(MOT15, tracker output) the last three are world coordinates, unused here (-1). Lines
may come in any order (a tracker may write its output track by track); a track's ID
twice in one frame is an error.

FrameLens detections JSON (core/stages/sinks/detections.py): frames in the run's order
(``index`` from 0, so MOT frame = index + 1), boxes x1, y1, x2, y2, and ``track_id`` on
each detection when the run tracked (-1: a box of no confirmed track).

Whatever is wrong with a file is one line naming the file and the line:
``TrackFileError("cannot read det.txt, line 12: width is negative (-3)")``. Tracks are
written through a temporary file renamed when complete (``MotTracksWriter``,
``write_mot``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from framelens.core.errors import TrackFileError
from framelens.core.stages.sinks.atomic import AtomicTextWriter, StrPath, _reason
from framelens.core.types import Detections

__all__ = [
    "MotFrame",
    "MotSequence",
    "MotTracksWriter",
    "TrackFileKind",
    "mot_lines",
    "read_detections_file",
    "read_ground_truth",
    "read_mot_text",
    "read_tracks_file",
    "sequence_from_detections",
    "write_mot",
]

TrackFileKind = Literal["mot", "json"]

MOT_FIELDS = ("frame", "id", "left", "top", "width", "height", "conf", "class", "visibility")
_MOT_SHAPE = "frame, id, left, top, width, height[, conf, ...]"
_SEPARATOR = re.compile(r"\s*,\s*|\s+")

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

MAX_FRAMES = 3_000_000
"""The highest frame number read (over 27 hours at 30 fps): every frame up to the last
is held, so a mistyped number must not ask for billions of them."""

_NO_IDS = np.zeros(0, np.int64)
_NO_BOXES = np.zeros((0, 4), np.float64)
_NO_VALUES = np.zeros(0, np.float64)
for _empty in (_NO_IDS, _NO_BOXES, _NO_VALUES):
    _empty.flags.writeable = False


def _f64(values: Sequence[float] | Sequence[Sequence[float]], *shape: int) -> F64:
    return np.asarray(values, np.float64).reshape(*shape)


@dataclass(frozen=True, slots=True)
class MotFrame:
    """One frame's boxes, as parallel arrays.

    number: the frame, counted from 1 (a FrameLens frame index + 1).
    ids: (N,) int64 track or object IDs; -1 for a box of no track (detections).
    boxes: (N, 4) float64 left, top, width, height in pixels.
    scores: (N,) float64 (ground truth: the "considered" flag; 1.0 when not given).
    class_ids: (N,) int64, -1 when the file gives none.
    visibility: (N,) float64, -1 when the file gives none.
    """

    number: int
    ids: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    boxes: F64 = field(default_factory=lambda: np.zeros((0, 4), np.float64))
    scores: F64 = field(default_factory=lambda: np.zeros(0, np.float64))
    class_ids: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    visibility: F64 = field(default_factory=lambda: np.zeros(0, np.float64))

    def __len__(self) -> int:
        return len(self.ids)

    @staticmethod
    def empty(number: int) -> MotFrame:
        """Frame ``number`` with no box (its arrays shared, read-only: long files hold
        many such frames)."""
        return MotFrame(number, _NO_IDS, _NO_BOXES, _NO_VALUES, _NO_IDS, _NO_VALUES)

    def select(self, mask: npt.NDArray[np.bool_]) -> MotFrame:
        return MotFrame(
            self.number,
            self.ids[mask],
            self.boxes[mask],
            self.scores[mask],
            self.class_ids[mask],
            self.visibility[mask],
        )

    def detections(self) -> Detections:
        """These boxes as a tracker's input: x1, y1, x2, y2, scores, class IDs (a class
        the file does not give reads as 0); no track IDs."""
        xyxy = self.boxes.copy()
        xyxy[:, 2:] += xyxy[:, :2]
        return Detections(
            xyxy.astype(np.float32),
            self.scores.astype(np.float32),
            np.maximum(self.class_ids, 0).astype(np.int32),
        )

    @staticmethod
    def from_detections(number: int, detections: Detections) -> MotFrame:
        """A tracker's output for frame ``number`` (from 1): the boxes with a track
        (track_id >= 1), in the order of their IDs. A frame with no box needs none."""
        if detections.track_ids is None:
            if not len(detections):
                return MotFrame.empty(number)
            raise ValueError("these detections carry no track IDs (no tracker ran)")
        keep = detections.track_ids >= 1
        order = np.argsort(detections.track_ids[keep], kind="stable")
        boxes = detections.boxes[keep][order].astype(np.float64)
        boxes[:, 2:] -= boxes[:, :2]
        n = len(order)
        return MotFrame(
            number,
            detections.track_ids[keep][order].astype(np.int64),
            boxes.reshape(n, 4),
            detections.scores[keep][order].astype(np.float64),
            detections.class_ids[keep][order].astype(np.int64),
            np.full(n, -1.0),
        )


@dataclass(frozen=True, slots=True)
class MotSequence:
    """A file's boxes frame by frame: ``frames[k]`` is frame k + 1, every frame from the
    first to the last the file names (frames with no box are empty).

    width, height, fps: the source's, when the file says (a FrameLens JSON's meta).
    labels: class ID -> name, when the file says (a FrameLens JSON).
    has_classes: the file's lines carry a class (MOT text of 8 or 9 fields: MOT16/17/20).
    ground_truth: read by ``read_ground_truth``: every row kept, ``scores`` hold the
    "considered" flag, and evaluation decides which rows count.
    """

    path: str
    kind: TrackFileKind
    frames: tuple[MotFrame, ...]
    width: int | None = None
    height: int | None = None
    fps: float | None = None
    labels: Mapping[int, str] = field(default_factory=dict)
    has_classes: bool = False
    ground_truth: bool = False

    @property
    def num_boxes(self) -> int:
        return sum(len(f) for f in self.frames)

    @property
    def track_ids(self) -> list[int]:
        """Every track or object ID (>= 0), ascending."""
        ids = [f.ids for f in self.frames if len(f)]
        found = np.unique(np.concatenate(ids)) if ids else np.zeros(0, np.int64)
        return [int(i) for i in found if i >= 0]

    def only_tracked(self) -> MotSequence:
        """The boxes that belong to a track (ID >= 0)."""
        return self._select(lambda f: f.ids >= 0)

    def class_counts(self) -> dict[int, int]:
        """Tracks per class ID (a track counted in every class it was given), -1 for
        boxes of a file that gives no class."""
        pairs = [np.stack([f.class_ids, f.ids], 1) for f in self.frames if len(f)]
        if not pairs:
            return {}
        unique = np.unique(np.concatenate(pairs), axis=0)
        classes, counts = np.unique(unique[:, 0], return_counts=True)
        return {int(c): int(n) for c, n in zip(classes, counts, strict=True)}

    def class_name(self, class_id: int) -> str:
        """``class_id`` by the file's name for it, else its number."""
        return self.labels.get(class_id, str(class_id))

    def only_classes(self, names: Sequence[str]) -> MotSequence:
        """The boxes of the classes ``names`` (the file's class names, or class IDs as
        numbers); TrackFileError, one line, for a class the file does not know or a file
        that gives no classes."""
        known = {name: cid for cid, name in self.labels.items()}
        if not any((f.class_ids >= 0).any() for f in self.frames):
            raise _fail(self.path, None, "gives no class for its boxes: --classes cannot pick")
        wanted: set[int] = set()
        for name in names:
            if name in known:
                wanted.add(known[name])
            elif name.isdigit():
                wanted.add(int(name))
            else:
                names_known = ", ".join(sorted(known)) or "none named: use numbers"
                raise _fail(self.path, None, f"no class {name!r} ({names_known})")
        ids = np.array(sorted(wanted), np.int64)
        return self._select(lambda f: np.isin(f.class_ids, ids))

    def only_considered(self) -> MotSequence:
        """Ground truth without the rows marked 0 ("not considered", MOT Challenge's
        7th field): what evaluation counts."""
        return self._select(lambda f: f.scores != 0)

    def _select(self, which: Any) -> MotSequence:
        return replace(self, frames=tuple(f.select(which(f)) for f in self.frames))


def sequence_from_detections(
    name: str, frames: Iterable[tuple[int, Detections]], *, kind: TrackFileKind = "json"
) -> MotSequence:
    """A tracker's output held in memory (a compare pane's, a run's) as a MotSequence to
    evaluate: ``frames`` are (source frame index from 0, Detections with track_ids); the
    boxes with a track (ID >= 1) are kept, frames not given are empty. ``name`` stands
    for the path in what evaluation reports."""
    by_number = {index + 1: MotFrame.from_detections(index + 1, dets) for index, dets in frames}
    last = max(by_number, default=0)
    frames_out = (by_number.get(n) or MotFrame.empty(n) for n in range(1, last + 1))
    return MotSequence(name, kind, tuple(frames_out))


def _fail(path: StrPath, line: int | None, what: str) -> TrackFileError:
    where = f", line {line}" if line is not None else ""
    return TrackFileError(f"cannot read {path}{where}: {what}")


def _read_text(path: StrPath) -> str:
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise _fail(path, None, "no such file") from None
    except IsADirectoryError:
        raise _fail(path, None, "it is a directory") from None
    except OSError as exc:
        raise _fail(path, None, _reason(exc)) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise _fail(
            path, line, "not a text file (neither MOT Challenge text nor FrameLens JSON)"
        ) from None


def _number(text: str, name: str, path: StrPath, line: int) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise _fail(path, line, f"{name} is not a number: {text!r}")
    return value


def _integer(text: str, name: str, path: StrPath, line: int) -> int:
    value = _number(text, name, path, line)
    if value != int(value):
        raise _fail(path, line, f"{name} is not a whole number: {text!r}")
    return int(value)


@dataclass(slots=True)
class _Rows:
    """Boxes collected per frame while reading."""

    ids: dict[int, list[int]] = field(default_factory=dict)
    boxes: dict[int, list[tuple[float, float, float, float]]] = field(default_factory=dict)
    scores: dict[int, list[float]] = field(default_factory=dict)
    classes: dict[int, list[int]] = field(default_factory=dict)
    visibility: dict[int, list[float]] = field(default_factory=dict)
    seen: dict[tuple[int, int], int] = field(default_factory=dict)  # (frame, id) -> line

    def add(
        self,
        frame: int,
        track: int,
        box: tuple[float, float, float, float],
        score: float,
        cls: int,
        vis: float,
    ) -> None:
        self.ids.setdefault(frame, []).append(track)
        self.boxes.setdefault(frame, []).append(box)
        self.scores.setdefault(frame, []).append(score)
        self.classes.setdefault(frame, []).append(cls)
        self.visibility.setdefault(frame, []).append(vis)

    def frames(self, last: int) -> tuple[MotFrame, ...]:
        out = []
        for number in range(1, last + 1):
            ids = self.ids.get(number, [])
            n = len(ids)
            if not n:
                out.append(MotFrame.empty(number))
                continue
            out.append(
                MotFrame(
                    number,
                    np.asarray(ids, np.int64).reshape(n),
                    _f64(self.boxes.get(number, []), n, 4),
                    _f64(self.scores.get(number, []), n),
                    np.asarray(self.classes.get(number, []), np.int64).reshape(n),
                    _f64(self.visibility.get(number, []), n),
                )
            )
        return tuple(out)


def _check_box(
    path: StrPath, line: int | None, width: float, height: float, where: str = ""
) -> None:
    for name, value in (("width", width), ("height", height)):
        if value < 0:
            raise _fail(path, line, f"{where}{name} is negative ({value:g})")


def _not_either(path: StrPath, line: int, why: str) -> TrackFileError:
    return _fail(
        path,
        line,
        f"neither MOT Challenge text ({_MOT_SHAPE}) nor a FrameLens detections JSON: {why}",
    )


def read_mot_text(path: StrPath, text: str | None = None) -> MotSequence:
    """Read a MOT Challenge text file (detections, tracks or ground truth); see the
    module doc. TrackFileError, naming the file and line, on anything malformed."""
    text = _read_text(path) if text is None else text
    rows = _Rows()
    last = 0
    has_classes = False
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip().rstrip(",").rstrip()  # a trailing comma ends some writers' lines
        if not line:
            continue
        parts = _SEPARATOR.split(line)
        if len(parts) < 6 or len(parts) > 10:
            why = f"{len(parts)} field{'s' if len(parts) != 1 else ''}, a line has 6 to 10"
            if line_no == 1 or last == 0:
                raise _not_either(path, line_no, why)
            raise _fail(path, line_no, f"{why} ({_MOT_SHAPE})")
        try:
            frame = _integer(parts[0], "frame", path, line_no)
        except TrackFileError:
            if last == 0:
                raise _not_either(path, line_no, f"the frame is {parts[0]!r}") from None
            raise
        track = _integer(parts[1], "id", path, line_no)
        left, top, width, height = (
            _number(parts[i], MOT_FIELDS[i], path, line_no) for i in range(2, 6)
        )
        score = _number(parts[6], "conf", path, line_no) if len(parts) > 6 else 1.0
        cls, vis = -1, -1.0
        if len(parts) in (8, 9):
            cls = _integer(parts[7], "class", path, line_no)
            has_classes = True
        if len(parts) == 9:
            vis = _number(parts[8], "visibility", path, line_no)
        if frame < 1:
            raise _fail(path, line_no, f"frame {frame}: MOT Challenge frames count from 1")
        if frame > MAX_FRAMES:
            raise _fail(path, line_no, f"frame {frame} is past the last one read ({MAX_FRAMES})")
        if track < -1:
            raise _fail(path, line_no, f"id {track}: an ID is >= 0, or -1 for no track")
        _check_box(path, line_no, width, height)
        if track >= 0:
            first = rows.seen.setdefault((frame, track), line_no)
            if first != line_no:
                raise _fail(path, line_no, f"ID {track} twice in frame {frame} (also line {first})")
        rows.add(frame, track, (left, top, width, height), score, cls, vis)
        last = max(last, frame)
    return MotSequence(str(path), "mot", rows.frames(last), has_classes=has_classes)


def _frame_lines(text: str, count: int) -> list[int] | None:
    """The line each element of the top-level "frames" array starts on, or None when
    they cannot be told (hand-written JSON in another shape)."""
    found = re.search(r'"frames"\s*:\s*\[', text)
    if found is None:
        return None
    decoder = json.JSONDecoder()
    pos, starts = found.end(), []
    space = re.compile(r"\s*")
    try:
        while True:
            pos = space.match(text, pos).end()  # type: ignore[union-attr]
            if text[pos] == "]":
                break
            starts.append(pos)
            _, pos = decoder.raw_decode(text, pos)
            pos = space.match(text, pos).end()  # type: ignore[union-attr]
            if text[pos] == ",":
                pos += 1
    except (ValueError, IndexError):
        return None
    if len(starts) != count:
        return None
    lines, line, at = [], 1, 0
    for start in starts:
        line += text.count("\n", at, start)
        at = start
        lines.append(line)
    return lines


def _json_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _json_int(value: Any) -> bool:
    return _json_number(value) and float(value) == int(value)


def read_detections_json(path: StrPath, text: str | None = None) -> MotSequence:
    """Read a FrameLens detections JSON (core/stages/sinks/detections.py) as MOT
    frames: frame = index + 1, boxes as left, top, width, height, IDs from ``track_id``
    (-1 when the run did not track). Frames must come in ascending order."""
    text = _read_text(path) if text is None else text
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(path, exc.lineno, f"not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("frames"), list):
        raise _not_either(path, 1, 'a JSON without a "frames" list')
    frames: list[Any] = data["frames"]
    lines = _frame_lines(text, len(frames))
    meta: dict[str, Any] = data["meta"] if isinstance(data.get("meta"), dict) else {}
    rows, labels = _Rows(), {}
    last = 0
    for k, frame in enumerate(frames):
        line = lines[k] if lines is not None else None
        if not isinstance(frame, dict):
            raise _fail(path, line, f"frame {k + 1} of the list is not an object")
        given: Any = frame.get("index")
        if not _json_int(given) or given < 0:
            what = "has no" if given is None else "has a bad"
            raise _fail(path, line, f'frame {k + 1} of the list {what} "index" ({given!r})')
        index = int(given)
        where = f"frame index {index}: "
        if index >= MAX_FRAMES:
            raise _fail(path, line, f"{where}past the last frame read ({MAX_FRAMES - 1})")
        if index + 1 <= last:
            raise _fail(
                path, line, f"{where}frames out of order or repeated (after frame index {last - 1})"
            )
        dets = frame.get("detections")
        if not isinstance(dets, list):
            raise _fail(path, line, f'{where}no "detections" list')
        for j, det in enumerate(dets):
            _json_detection(path, line, f"{where}detection {j + 1}: ", det, rows, index + 1)
            if isinstance(det.get("label"), str):
                labels[int(det["class_id"])] = det["label"]
        last = index + 1
    return MotSequence(
        str(path),
        "json",
        rows.frames(last),
        width=int(meta["width"]) if _json_int(meta.get("width")) else None,
        height=int(meta["height"]) if _json_int(meta.get("height")) else None,
        fps=float(meta["source_fps"]) if _json_number(meta.get("source_fps")) else None,
        labels=labels,
    )


def _json_detection(
    path: StrPath, line: int | None, where: str, det: Any, rows: _Rows, number: int
) -> None:
    if not isinstance(det, dict):
        raise _fail(path, line, f"{where}not an object")
    for key in ("box", "score", "class_id"):
        if key not in det:
            raise _fail(path, line, f'{where}no "{key}"')
    box = det["box"]
    if not isinstance(box, list) or len(box) != 4 or not all(_json_number(v) for v in box):
        raise _fail(path, line, f'{where}"box" is not four numbers: {box!r}')
    if not _json_number(det["score"]):
        raise _fail(path, line, f'{where}"score" is not a number: {det["score"]!r}')
    if not _json_int(det["class_id"]):
        raise _fail(path, line, f'{where}"class_id" is not a whole number: {det["class_id"]!r}')
    track = det.get("track_id", -1)
    if not _json_int(track) or track < -1:
        raise _fail(path, line, f'{where}"track_id" is not an ID (>= 1, or -1): {track!r}')
    x1, y1, x2, y2 = (float(v) for v in box)
    _check_box(path, line, x2 - x1, y2 - y1, f"{where}box ")
    track = int(track)
    if track >= 0 and track in rows.ids.get(number, ()):
        raise _fail(path, line, f"{where}track {track} twice in the frame")
    box_ltwh = (x1, y1, x2 - x1, y2 - y1)
    rows.add(number, track, box_ltwh, float(det["score"]), int(det["class_id"]), -1.0)


def _read_any(path: StrPath) -> MotSequence:
    text = _read_text(path)
    if text.lstrip().startswith(("{", "[")):
        return read_detections_json(path, text)
    return read_mot_text(path, text)


def read_detections_file(path: StrPath) -> MotSequence:
    """Detections for a tracker: MOT Challenge text (id -1, or any IDs: they are not
    used) or a FrameLens detections JSON. MOT text whose scores are all -1 ("not
    given", as in many trackers' output) or absent reads as score 1 throughout."""
    sequence = _read_any(path)
    scores = [f.scores for f in sequence.frames if len(f)]
    if sequence.kind == "mot" and scores and all((s == -1).all() for s in scores):
        frames = tuple(
            MotFrame(f.number, f.ids, f.boxes, np.ones(len(f)), f.class_ids, f.visibility)
            for f in sequence.frames
        )
        sequence = MotSequence(sequence.path, sequence.kind, frames)
    return sequence


def read_tracks_file(path: StrPath) -> MotSequence:
    """A tracker's output: MOT Challenge text or a FrameLens detections JSON of a run
    that tracked. Boxes of no track (ID -1) are left out; a file with none but such
    boxes is an error (detections, not tracks)."""
    sequence = _read_any(path)
    if sequence.num_boxes and not sequence.track_ids:
        what = (
            "a detections JSON of a run without --track"
            if sequence.kind == "json"
            else ("every ID is -1 (detections, not tracks)")
        )
        raise _fail(path, None, f"holds no track IDs: {what}")
    return sequence.only_tracked()


def read_ground_truth(path: StrPath) -> MotSequence:
    """Ground truth in MOT Challenge text, every row kept (``ground_truth`` set):
    evaluation leaves out the rows marked "not considered" (7th field 0) and, for
    MOT16/17/20 ground truth (a class on each line), uses the distractors' rows to drop
    the track boxes on them before counting only pedestrians (core/stages/tracking/
    evaluation.py). A file with no row to count (none considered) is an error."""
    text = _read_text(path)
    if text.lstrip().startswith(("{", "[")):
        raise _fail(path, 1, "ground truth is MOT Challenge text, not JSON")
    sequence = read_mot_text(path, text)
    if any((f.ids < 0).any() for f in sequence.frames):
        line = _first_line_with_id(text, -1)
        raise _fail(path, line, "a ground-truth box without an object ID (-1): detections?")
    if not sequence.only_considered().num_boxes:
        raise _fail(path, None, "holds no ground-truth boxes to evaluate against")
    return replace(sequence, ground_truth=True)


def _first_line_with_id(text: str, track: int) -> int | None:
    for line_no, raw in enumerate(text.splitlines(), start=1):
        parts = _SEPARATOR.split(raw.strip())
        if len(parts) >= 2 and parts[1].strip() and float(parts[1]) == track:
            return line_no
    return None


def _num(value: float, digits: int) -> str:
    text = f"{value:.{digits}f}"
    text = text.rstrip("0").rstrip(".") if "." in text else text
    return "0" if text == "-0" else text


def mot_lines(frame: MotFrame) -> list[str]:
    """One frame's boxes as MOT Challenge lines (no newline): frame, id, left, top,
    width, height (2 decimals), conf (4), -1, -1, -1."""
    return [
        f"{frame.number},{int(frame.ids[i])},"
        + ",".join(_num(float(v), 2) for v in frame.boxes[i])
        + f",{_num(float(frame.scores[i]), 4)},-1,-1,-1"
        for i in range(len(frame))
    ]


class MotTracksWriter(AtomicTextWriter):
    """Tracks to ``path`` as MOT Challenge text, frame by frame; the file appears on
    close() (abort() or an exception in a ``with`` block leaves nothing)."""

    def __init__(self, path: StrPath) -> None:
        self.frames_written = 0
        self.boxes_written = 0
        super().__init__(path)

    def add(self, index: int, detections: Detections) -> None:
        """The tracker's output for source frame ``index`` (from 0; written as frame
        index + 1): its boxes with a track ID >= 1."""
        self.add_frame(MotFrame.from_detections(index + 1, detections))

    def add_frame(self, frame: MotFrame) -> None:
        self._check_open()
        lines = mot_lines(frame)
        if lines:
            self._write("\n".join(lines) + "\n")
        self.frames_written += 1
        self.boxes_written += len(lines)


def write_mot(path: StrPath, frames: Iterable[MotFrame]) -> Path:
    """Write ``frames`` (a MotSequence's, or a tracker's) as MOT Challenge text,
    complete or not at all."""
    with MotTracksWriter(path) as writer:
        for frame in frames:
            writer.add_frame(frame)
    return writer.path
