"""Tracks and detections as files: MOT Challenge text and the FrameLens detections JSON
read, written and refused (core/stages/tracking/mot.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from framelens.core.errors import TrackFileError
from framelens.core.stages.sinks.detections import (
    DetectionsWriter,
    frame_detections,
    load_detections_json,
)
from framelens.core.stages.tracking.mot import (
    MotTracksWriter,
    read_detections_file,
    read_ground_truth,
    read_mot_text,
    read_tracks_file,
    write_mot,
)
from framelens.core.types import Detections
from mot_data import motmetrics_data


def _rows(path: Path) -> np.ndarray:
    """The file's rows as numbers, read the plainest way (the reference)."""
    return np.loadtxt(path, delimiter=",", ndmin=2)


def _tracked(boxes: list[list[float]], ids: list[int], scores: list[float]) -> Detections:
    n = len(boxes)
    return Detections(
        np.array(boxes, np.float32).reshape(n, 4),
        np.array(scores, np.float32),
        np.zeros(n, np.int32),
        track_ids=np.array(ids, np.int64),
    )


def test_reads_tud_campus_as_the_file_holds_it() -> None:
    folder = motmetrics_data()
    for name in ("gt.txt", "test.txt"):
        rows = _rows(folder / name)
        seq = read_mot_text(folder / name)
        assert len(seq.frames) == int(rows[:, 0].max())
        assert [f.number for f in seq.frames] == list(range(1, len(seq.frames) + 1))
        assert seq.num_boxes == len(rows)
        assert seq.track_ids == sorted({int(i) for i in rows[:, 1]})
        for frame in seq.frames:
            want = rows[rows[:, 0] == frame.number]
            np.testing.assert_array_equal(frame.ids, want[:, 1])
            np.testing.assert_allclose(frame.boxes, want[:, 2:6])
            np.testing.assert_allclose(frame.scores, want[:, 6])


def test_mot_round_trip(tmp_path: Path) -> None:
    source = motmetrics_data() / "test.txt"
    first = read_tracks_file(source)
    out = write_mot(tmp_path / "tracks.txt", first.frames)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tracks.txt"]  # no temporary left
    again = read_tracks_file(out)
    assert len(again.frames) == len(first.frames)
    for a, b in zip(first.frames, again.frames, strict=True):
        order = np.argsort(a.ids)
        np.testing.assert_array_equal(a.ids[order], b.ids)  # written in ID order
        np.testing.assert_allclose(a.boxes[order], b.boxes, atol=0.005)  # 2 decimals
        np.testing.assert_allclose(a.scores[order], b.scores)
    line = out.read_text().splitlines()[0].split(",")
    assert len(line) == 10 and line[7:] == ["-1", "-1", "-1"]


def test_tracks_writer_writes_tracked_boxes_one_based(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    with MotTracksWriter(path) as writer:
        writer.add(0, _tracked([[10, 20, 40, 80], [0, 0, 5, 5]], [7, -1], [0.9, 0.3]))
        writer.add(1, Detections.empty())  # a frame with nothing advances the count only
        writer.add(2, _tracked([[12, 22, 42, 82]], [7], [0.75]))
        assert not path.exists()  # appears complete on close, not before
    assert path.read_text().splitlines() == [
        "1,7,10,20,30,60,0.9,-1,-1,-1",
        "3,7,12,22,30,60,0.75,-1,-1,-1",
    ]
    back = read_tracks_file(path)
    assert [len(f) for f in back.frames] == [1, 0, 1]


def test_tracks_writer_abort_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    with pytest.raises(RuntimeError), MotTracksWriter(path) as writer:
        writer.add(0, _tracked([[1, 1, 2, 2]], [1], [1.0]))
        raise RuntimeError("killed half way")
    assert list(tmp_path.iterdir()) == []


def test_detections_json_keeps_track_ids(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    meta = {"model": "m", "width": 640, "height": 360, "source_fps": 25.0}
    with DetectionsWriter(path, meta, ["person"]) as w:
        w.add(0, 0.0, _tracked([[10, 20, 40, 80], [100, 100, 150, 200]], [3, -1], [0.9, 0.2]))
        w.add(1, 0.04, Detections.empty())
        w.add(2, 0.08, _tracked([[11, 21, 41, 81]], [3], [0.8]))
    data = load_detections_json(path)
    assert [d["track_id"] for d in data["frames"][0]["detections"]] == [3, -1]
    again = frame_detections(data["frames"][0])
    assert again.track_ids is not None and again.track_ids.tolist() == [3, -1]

    tracks = read_tracks_file(path)
    assert (tracks.width, tracks.height, tracks.fps) == (640, 360, 25.0)
    assert [f.ids.tolist() for f in tracks.frames] == [[3], [], [3]]  # -1: not a track
    np.testing.assert_allclose(tracks.frames[0].boxes, [[10, 20, 30, 60]])
    assert tracks.labels == {0: "person"}


def test_detections_json_without_tracks_is_detections(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    with DetectionsWriter(path, {"model": "m"}, ["person"]) as w:
        w.add(4, 0.0, Detections(np.array([[1, 2, 3, 4]], np.float32), np.ones(1, np.float32),
                                 np.zeros(1, np.int32)))  # fmt: skip
    data = load_detections_json(path)
    assert "track_id" not in data["frames"][0]["detections"][0]
    assert frame_detections(data["frames"][0]).track_ids is None
    dets = read_detections_file(path)
    assert len(dets.frames) == 5 and dets.frames[4].ids.tolist() == [-1]
    with pytest.raises(TrackFileError, match="no track IDs"):
        read_tracks_file(path)


def test_mot17_ground_truth_columns(tmp_path: Path) -> None:
    path = tmp_path / "gt.txt"
    path.write_text("1,1,10,10,20,40,1,1,0.8\n1,2,50,10,20,40,0,7,1.0\n2,1,12,10,20,40,1,1,0.5\n")
    gt = read_ground_truth(path)  # every row: evaluation needs the distractors' too
    assert gt.ground_truth and gt.has_classes
    assert [f.ids.tolist() for f in gt.frames] == [[1, 2], [1]]
    assert gt.frames[0].class_ids.tolist() == [1, 7]
    assert gt.frames[0].visibility.tolist() == [0.8, 1.0]
    assert [f.ids.tolist() for f in gt.only_considered().frames] == [[1], [1]]


def test_detections_in_spaces_and_any_order(tmp_path: Path) -> None:
    path = tmp_path / "det.txt"
    path.write_text("3 -1 5 5 10 10 0.5\n\n1 -1 1 1 10 10 0.9\n")
    dets = read_detections_file(path)
    assert [len(f) for f in dets.frames] == [1, 0, 1]
    converted = dets.frames[2].detections()
    np.testing.assert_allclose(converted.boxes, [[5, 5, 15, 15]])
    assert converted.scores.tolist() == [0.5] and converted.track_ids is None


BAD_TEXT = [
    ("header.txt", "index,pts,class_id\n0,0.0,1\n", 1, "neither MOT Challenge text"),
    ("short.txt", "1,1,10,10\n", 1, "4 fields"),
    ("negative.txt", "1,1,10,10,20,20,1\n2,1,10,10,-5,20,1\n", 2, "width is negative"),
    ("word.txt", "1,1,10,10,20,20,1\n2,1,10,abc,5,20,1\n", 2, "top is not a number: 'abc'"),
    ("nan.txt", "1,1,10,10,20,nan,1\n", 1, "height is not a number"),
    ("frame0.txt", "0,1,10,10,20,20,1\n", 1, "count from 1"),
    ("fraction.txt", "1,1.5,10,10,20,20,1\n", 1, "id is not a whole number"),
    ("twice.txt", "1,4,1,1,9,9\n2,4,1,1,9,9\n1,4,2,2,9,9\n", 3, "ID 4 twice in frame 1"),
    ("long.txt", "1,1,1,1,1,1,1,1,1,1,1\n", 1, "11 fields"),
    ("huge.txt", "1,1,1,1,5,5\n999999999,1,1,1,5,5\n", 2, "past the last one read"),
]


@pytest.mark.parametrize(("name", "text", "line", "what"), BAD_TEXT)
def test_bad_mot_text_names_file_and_line(
    tmp_path: Path, name: str, text: str, line: int, what: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    for read in (read_detections_file, read_tracks_file, read_ground_truth):
        with pytest.raises(TrackFileError) as caught:
            read(path)
        message = str(caught.value)
        assert "\n" not in message
        assert f"{path}, line {line}: " in message and what in message


def test_binary_file_is_neither(tmp_path: Path) -> None:
    path = tmp_path / "video.mp4"
    path.write_bytes(b"1,1,1,1,1,1\n\x00\x00\xff\xfe ftyp")
    with pytest.raises(TrackFileError, match=r"video.mp4, line 2: not a text file"):
        read_tracks_file(path)


def _pretty(tmp_path: Path, frames: list[dict[str, object]]) -> Path:
    path = tmp_path / "dets.json"
    path.write_text(json.dumps({"meta": {}, "frames": frames}, indent=2))
    return path


def _frame_line(path: Path, index: int) -> int:
    """The line of the frame object with ``index`` (the reference: a text search)."""
    lines = path.read_text().splitlines()
    at = next(i for i, t in enumerate(lines) if t.strip() == f'"index": {index},')
    return at  # the object's "{" is the line before "index" (1-based: at + 1 - 1)


def _det(**fields: object) -> dict[str, object]:
    det = {"box": [1, 1, 5, 5], "score": 0.9, "class_id": 0, **fields}
    return {k: v for k, v in det.items() if v is not None}  # None: the field left out


BAD_JSON = [
    ([{"index": 5, "detections": []}, {"index": 3, "detections": []}], 1, "out of order"),
    (
        [{"index": 0, "detections": []}, {"index": 1, "detections": [_det(score=None)]}],
        1,
        'no "score"',
    ),
    ([{"index": 0, "detections": [_det(box=[10, 10, 4, 20])]}], 0, "box width is negative"),
    ([{"index": 0, "detections": [_det(score="high")]}], 0, '"score" is not a number'),
    ([{"index": 0, "detections": [_det(track_id=2), _det(track_id=2)]}], 0, "track 2 twice"),
    ([{"index": 0, "dets": []}], 0, 'no "detections" list'),
]


@pytest.mark.parametrize(("frames", "bad", "what"), BAD_JSON)
def test_bad_json_names_file_and_line(
    tmp_path: Path, frames: list[dict[str, object]], bad: int, what: str
) -> None:
    path = _pretty(tmp_path, frames)
    index = frames[bad]["index"]
    assert isinstance(index, int)
    line = _frame_line(path, index)
    with pytest.raises(TrackFileError) as caught:
        read_detections_file(path)
    message = str(caught.value)
    assert "\n" not in message
    assert f"{path}, line {line}: " in message and what in message


def test_broken_json_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    path.write_text('{"meta": {},\n "frames": [\n  {"index": 0, "detections": []},\n')
    with pytest.raises(TrackFileError, match=r"cut.json, line 4: not valid JSON"):
        read_detections_file(path)


def test_json_without_frames_is_neither(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text('{"images": []}')
    with pytest.raises(TrackFileError, match=r"other.json, line 1: neither MOT"):
        read_detections_file(path)


def test_ground_truth_needs_object_ids(tmp_path: Path) -> None:
    path = tmp_path / "gt.txt"
    path.write_text("1,1,1,1,5,5,1\n2,-1,1,1,5,5,1\n")
    with pytest.raises(TrackFileError, match=r"gt.txt, line 2: a ground-truth box without"):
        read_ground_truth(path)
    path.write_text("1,1,1,1,5,5,0\n")
    with pytest.raises(TrackFileError, match="no ground-truth boxes"):
        read_ground_truth(path)


def test_detections_without_scores_read_as_score_one(tmp_path: Path) -> None:
    """Many trackers write -1 for "no score": as a tracker's input those boxes count,
    while a file with real scores keeps them (-1 among others included)."""
    unscored = tmp_path / "unscored.txt"
    unscored.write_text("1,-1,1,1,5,5,-1\n2,-1,1,1,5,5,-1\n")
    assert [f.detections().scores.tolist() for f in read_detections_file(unscored).frames] == [
        [1.0],
        [1.0],
    ]
    scored = tmp_path / "scored.txt"
    scored.write_text("1,-1,1,1,5,5,0.3\n2,-1,1,1,5,5,-1\n")
    assert [f.scores.tolist() for f in read_detections_file(scored).frames] == [[0.3], [-1.0]]


def test_tracks_in_memory_as_a_sequence() -> None:
    """A tracker's output held in memory (a compare pane's) evaluates like its file."""
    from framelens.core.stages.tracking.mot import sequence_from_detections

    seq = sequence_from_detections(
        "pane fp16",
        [(0, _tracked([[10, 20, 40, 80], [0, 0, 5, 5]], [4, -1], [0.9, 0.3])),
         (3, _tracked([[12, 22, 42, 82]], [4], [0.7]))],
    )  # fmt: skip
    assert seq.path == "pane fp16"
    assert [f.number for f in seq.frames] == [1, 2, 3, 4]
    assert [f.ids.tolist() for f in seq.frames] == [[4], [], [], [4]]
    np.testing.assert_allclose(seq.frames[3].boxes, [[12, 22, 30, 60]])


def test_detections_csv_of_a_tracked_run_has_a_track_id_column(tmp_path: Path) -> None:
    import csv

    path = tmp_path / "run.csv"
    with DetectionsWriter(path, {"model": "m"}, ["person"]) as w:
        w.add(0, 0.0, _tracked([[10, 20, 40, 80], [0, 0, 5, 5]], [3, -1], [0.9, 0.2]))
        w.add(1, 0.1, _tracked([[11, 21, 41, 81]], [3], [0.8]))
    rows = list(csv.DictReader(path.open()))
    assert [r["track_id"] for r in rows] == ["3", "-1", "3"]
    plain = tmp_path / "plain.csv"
    with DetectionsWriter(plain, {"model": "m"}, ["person"]) as w:
        w.add(0, 0.0, Detections.empty())
    assert "track_id" not in plain.read_text().splitlines()[0]


def test_trailing_commas_and_spaces_after_commas(tmp_path: Path) -> None:
    path = tmp_path / "det.txt"
    path.write_text("1, -1, 10, 20, 30, 40, 0.5,\n2,-1,11,21,30,40,0.6,\n")
    dets = read_detections_file(path)
    assert [f.scores.tolist() for f in dets.frames] == [[0.5], [0.6]]
    np.testing.assert_allclose(dets.frames[0].boxes, [[10, 20, 30, 40]])
