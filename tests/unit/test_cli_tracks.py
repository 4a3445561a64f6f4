"""`framelens evaluate` and `framelens track` (app/cli_tracks.py): metrics as JSON on
stdout, a report folder, and bad input refused as one line with exit code 2, nothing
written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from framelens.cli import main
from framelens.core.stages.sinks.detections import DetectionsWriter
from framelens.core.stages.tracking.evaluation import evaluate_tracks
from framelens.core.stages.tracking.mot import read_ground_truth, read_tracks_file
from framelens.core.types import Detections
from mot_data import motmetrics_data


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _tracks_json(path: Path, gt_txt: Path) -> Path:
    """A FrameLens detections JSON of a run that tracked, holding the ground truth's own
    boxes and IDs (a perfect tracker), as DetectionsWriter writes it."""
    gt = read_ground_truth(gt_txt)
    meta = {"model": "test", "source_fps": 25.0}  # no frame size: boxes kept unclipped
    with DetectionsWriter(path, meta, ["person"]) as writer:
        for frame in gt.frames:
            xyxy = frame.boxes.copy()
            xyxy[:, 2:] += xyxy[:, :2]
            n = len(frame)
            dets = Detections(
                xyxy.astype(np.float32),
                np.ones(n, np.float32),
                np.zeros(n, np.int32),
                track_ids=frame.ids.astype(np.int64),
            )
            writer.add(frame.number - 1, (frame.number - 1) / 25.0, dets)
    return path


def test_evaluate_prints_trackeval_metrics_and_writes_a_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = motmetrics_data()
    report = tmp_path / "report"
    code, out, err = _cli(
        capsys, "evaluate", str(folder / "test.txt"), "--gt", str(folder / "gt.txt"),
        "--report", str(report),
    )  # fmt: skip
    assert code == 0
    printed = json.loads(out)
    want = evaluate_tracks(
        read_tracks_file(folder / "test.txt"), read_ground_truth(folder / "gt.txt")
    )
    assert printed == json.loads(json.dumps(want.as_json()))
    assert set(printed["metrics"]) >= {"hota", "deta", "assa", "idf1", "mota", "id_switches",
                                       "false_positives", "false_negatives"}  # fmt: skip
    assert json.loads((report / "summary.json").read_text()) == printed
    assert printed["protocol"] == "MOT15: all considered rows"  # no classes in TUD-Campus
    assert (
        "ground-truth rows counted: MOT15: all considered rows"
        in (report / "index.html").read_text()
    )
    assert err.strip().splitlines()[-1] == f"framelens: wrote {report}/"


def test_evaluate_a_framelens_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gt = motmetrics_data() / "gt.txt"
    tracks = _tracks_json(tmp_path / "run.json", gt)
    code, out, _ = _cli(capsys, "evaluate", str(tracks), "--gt", str(gt))
    assert code == 0
    metrics = json.loads(out)["metrics"]
    assert metrics["hota"] == 1.0
    assert metrics["idf1"] == 1.0 and metrics["mota"] == 1.0 and metrics["id_switches"] == 0


def _tracks_with_cars(path: Path, gt_txt: Path) -> Path:
    """The ground truth's own person tracks (class 0) and, on the same frames, a car track
    (class 2) for every person, shifted away: a run of a COCO model that tracked all."""
    gt = read_ground_truth(gt_txt)
    with DetectionsWriter(path, {"model": "test", "source_fps": 25.0},
                          ["person", "bicycle", "car"]) as writer:  # fmt: skip
        for frame in gt.frames:
            xyxy = frame.boxes.copy()
            xyxy[:, 2:] += xyxy[:, :2]
            cars = xyxy + np.array([400.0, 300.0, 400.0, 300.0])
            n = len(frame)
            dets = Detections(
                np.concatenate([xyxy, cars]).astype(np.float32),
                np.ones(2 * n, np.float32),
                np.repeat(np.array([0, 2], np.int32), n),
                track_ids=np.concatenate([frame.ids, frame.ids + 1000]).astype(np.int64),
            )
            writer.add(frame.number - 1, (frame.number - 1) / 25.0, dets)
    return path


def test_evaluate_classes_scores_only_the_classes_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """MOT ground truth holds pedestrians: a run's cars scored against it are false
    positives. Without --classes a warning says so (the classes and their tracks);
    --classes person (or its ID) scores the person tracks alone."""
    gt = motmetrics_data() / "gt.txt"
    tracks = _tracks_with_cars(tmp_path / "run.json", gt)
    people = len(read_ground_truth(gt).track_ids)
    code, out, err = _cli(capsys, "evaluate", str(tracks), "--gt", str(gt))
    assert code == 0
    every = json.loads(out)["metrics"]
    assert every["false_positives"] > 0 and every["hota"] < 1.0
    assert err.strip() == (  # the most tracks first, then by name
        f"framelens: warning: {tracks} holds tracks of 2 classes (car {people}, "
        f"person {people}), each scored against the ground truth: --classes picks"
    )
    for pick in ("person", "0"):
        code, out, err = _cli(capsys, "evaluate", str(tracks), "--gt", str(gt), "--classes", pick)
        assert code == 0 and err == ""
        printed = json.loads(out)
        assert printed["metrics"]["hota"] == 1.0 and printed["metrics"]["false_positives"] == 0
        assert printed["tracks_classes"] == [pick]  # what was scored is kept with the scores
    assert "tracks_classes" not in json.loads(
        _cli(capsys, "evaluate", str(tracks), "--gt", str(gt))[1]
    )
    code, out, err = _cli(capsys, "evaluate", str(tracks), "--gt", str(gt), "--classes", "unicorn")
    assert code == 2 and out == ""
    assert err.strip() == (
        f"framelens: error: cannot read {tracks}: no class 'unicorn' (car, person)"
    )
    text = motmetrics_data() / "test.txt"  # MOT text: no class on its lines
    code, out, err = _cli(capsys, "evaluate", str(text), "--gt", str(gt), "--classes", "person")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "gives no class for its boxes" in err


def test_evaluate_in_a_fresh_process_prints_only_json(tmp_path: Path) -> None:
    """TrackEval's import-time note (BURST needs pycocotools) must not reach stdout."""
    folder = motmetrics_data()
    proc = subprocess.run(
        [sys.executable, "-m", "framelens", "evaluate", str(folder / "test.txt"),
         "--gt", str(folder / "gt.txt")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["metrics"]["frames"] > 0
    assert proc.stderr == ""


BAD = {
    "not MOT text nor JSON": ("index,pts,class_id\n0,0.0,1\n", 1),
    "negative size": ("1,1,10,10,20,20,1\n2,1,10,10,20,-4,1\n", 2),
    "non-numeric field": ("1,1,10,10,20,20,1\n1,2,x,10,20,20,1\n", 2),
    "missing fields": ("1,1,10,10,20,20,1\n2,1,10,10\n", 2),
    "frames out of order": (
        '{"frames": [\n{"index": 3, "detections": []},\n{"index": 1, "detections": []}]}',
        3,
    ),
    "JSON detection without its box": (
        '{"frames": [\n{"index": 0, "detections": [\n{"score": 1, "class_id": 0}]}]}',
        2,
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
@pytest.mark.parametrize("role", ["tracks", "gt"])
def test_bad_input_is_one_line_exit_2_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, role: str
) -> None:
    text, line = BAD[case]
    if role == "gt" and text.startswith("{"):
        line = 1  # ground truth is MOT text only: a JSON is refused on its first line
    folder = motmetrics_data()
    bad = tmp_path / ("bad.json" if text.startswith("{") else "bad.txt")
    bad.write_text(text)
    tracks, gt = (bad, folder / "gt.txt") if role == "tracks" else (folder / "test.txt", bad)
    report = tmp_path / "report"
    code, out, err = _cli(capsys, "evaluate", str(tracks), "--gt", str(gt), "--report", str(report))
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("framelens: error: ")
    assert f"{bad}, line {line}: " in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == [bad.name]  # no report, no temporary


def test_missing_file_and_bad_report_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = motmetrics_data()
    code, _, err = _cli(
        capsys, "evaluate", str(tmp_path / "nope.txt"), "--gt", str(folder / "gt.txt")
    )
    assert code == 2 and "nope.txt: no such file" in err
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "mine.txt").write_text("keep")
    report_args = ("evaluate", str(folder / "test.txt"), "--gt", str(folder / "gt.txt"),
                   "--report", str(taken))  # fmt: skip
    code, out, err = _cli(capsys, *report_args)
    assert code == 2 and out == "" and "holds other files" in err
    assert [p.name for p in taken.iterdir()] == ["mine.txt"]
    # a name a report uses, but no report: the analyst's own summary is kept
    (taken / "mine.txt").unlink()
    (taken / "summary.json").write_text('{"mine": true}')
    code, out, err = _cli(capsys, *report_args)
    assert code == 2 and out == "" and "no earlier output of this kind" in err
    assert (taken / "summary.json").read_text() == '{"mine": true}'


# -- framelens track ---------------------------------------------------------------------


def _detections_from_gt(path: Path, gt_txt: Path, seed: int = 7) -> Path:
    """Detections made from a ground truth, as a detector would give them: IDs gone (-1),
    boxes jittered by a few pixels, scores spread over 0.7..1, one box in 50 missed."""
    rng = np.random.default_rng(seed)
    lines = []
    for frame in read_ground_truth(gt_txt).frames:
        for box in frame.boxes:
            if rng.random() < 0.02:
                continue
            left, top, width, height = box + rng.normal(0.0, 2.0, 4)
            score = rng.uniform(0.7, 1.0)
            lines.append(f"{frame.number},-1,{left:.2f},{top:.2f},{width:.2f},{height:.2f},"
                         f"{score:.3f},-1,-1,-1")  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return path


def _new_id_per_box(detections: Path, out: Path) -> Path:
    """The baseline of no tracking at all: every detection its own track."""
    rows = [line.split(",") for line in detections.read_text().splitlines()]
    out.write_text("".join(",".join([r[0], str(k + 1), *r[2:]]) + "\n" for k, r in enumerate(rows)))
    return out


@pytest.mark.parametrize("tracker", ["bytetrack", "ocsort", "botsort"])
def test_track_then_evaluate_on_tud_campus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tracker: str
) -> None:
    gt = motmetrics_data() / "gt.txt"
    dets = _detections_from_gt(tmp_path / "det.txt", gt)
    tracks = tmp_path / "tracks.txt"
    code, out, err = _cli(
        capsys, "track", str(dets), "--output", str(tracks), "--tracker", tracker, "--fps", "25"
    )
    assert code == 0, err
    summary = json.loads(out)
    assert summary["tracker"] == tracker and summary["settings"]["frame_rate"] == 25.0
    assert summary["frames"] == len(read_ground_truth(gt).frames)
    assert err.strip().splitlines()[-1] == f"framelens: wrote {tracks}"
    written = read_tracks_file(tracks)
    assert (
        written.num_boxes == summary["track_boxes"] and len(written.track_ids) == summary["tracks"]
    )
    assert min(written.track_ids) >= 1

    code, out, _ = _cli(capsys, "evaluate", str(tracks), "--gt", str(gt))
    scores = json.loads(out)["metrics"]
    baseline = evaluate_tracks(
        read_tracks_file(_new_id_per_box(dets, tmp_path / "none.txt")), read_ground_truth(gt)
    ).scores
    # a sane tracker on clean detections of 8 walking people: most boxes kept, one ID each
    assert scores["hota"] > 0.75 and scores["idf1"] > 0.85 and scores["mota"] > 0.85
    assert scores["assa"] > 2 * baseline.assa  # the tracker, not the boxes, earns this
    assert scores["false_positives"] == 0  # the tracker keeps the detector's boxes


def test_frames_without_detections_advance_the_tracker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One person walks, unseen in frames 6 to 8 (no line at all), then seen again."""
    dets = tmp_path / "det.txt"
    dets.write_text(
        "".join(f"{f},-1,{100 + 4 * f},50,40,100,0.9\n" for f in (*range(1, 6), *range(9, 13)))
    )

    def ids(*options: str) -> list[list[int]]:
        out = tmp_path / "t.txt"
        code, _, err = _cli(capsys, "track", str(dets), "--output", str(out), *options)
        assert code == 0, err
        return [f.ids.tolist() for f in read_tracks_file(out).frames]

    kept = ids("--fps", "30")  # 30 frames of buffer: the same track after the gap
    assert len(kept) == 12 and kept[5:8] == [[], [], []]
    assert {i for f in kept for i in f} == {1}
    lost = ids("--fps", "30", "--track-buffer", "1")  # lost after 1 frame without it
    assert {i for f in lost[:5] for i in f} != {i for f in lost[8:] for i in f}


def test_track_a_framelens_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gt = read_ground_truth(motmetrics_data() / "gt.txt")
    path = tmp_path / "run.json"
    with DetectionsWriter(path, {"model": "m", "source_fps": 12.5}, ["person"]) as writer:
        for frame in gt.frames:
            xyxy = frame.boxes.copy()
            xyxy[:, 2:] += xyxy[:, :2]
            n = len(frame)
            found = Detections(xyxy.astype(np.float32), np.full(n, 0.9, np.float32),
                               np.zeros(n, np.int32))  # fmt: skip
            writer.add(frame.number - 1, 0.0, found)
    out = tmp_path / "t.txt"
    code, printed, err = _cli(capsys, "track", str(path), "--output", str(out), "--min-hits", "1")
    assert code == 0, err
    summary = json.loads(printed)
    assert summary["settings"]["frame_rate"] == 12.5  # from the JSON's meta
    assert summary["settings"]["min_hits"] == 1
    scores = evaluate_tracks(read_tracks_file(out), gt).scores
    assert scores.idf1 > 0.95 and scores.id_switches == 0


TRACK_BAD_OPTIONS = [
    (["--frame-size", "640by480"], "--frame-size"),
    (["--fps", "0"], "--fps"),
    (["--high-threshold", "2"], "tracker parameters"),
    (["--min-hits", "0"], "tracker parameters"),
]


@pytest.mark.parametrize(("options", "what"), TRACK_BAD_OPTIONS)
def test_track_bad_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], what: str
) -> None:
    dets = tmp_path / "det.txt"
    dets.write_text("1,-1,1,1,5,5,0.9\n")
    code, out, err = _cli(capsys, "track", str(dets), "--output", str(tmp_path / "t.txt"), *options)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and what in lines[0]
    assert [p.name for p in tmp_path.iterdir()] == ["det.txt"]


@pytest.mark.parametrize("case", sorted(BAD))
def test_track_bad_detections_one_line_exit_2_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    text, line = BAD[case]
    bad = tmp_path / ("bad.json" if text.startswith("{") else "bad.txt")
    bad.write_text(text)
    code, out, err = _cli(capsys, "track", str(bad), "--output", str(tmp_path / "t.txt"))
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"framelens: error: cannot read {bad}, line {line}: " in lines[0]
    assert [p.name for p in tmp_path.iterdir()] == [bad.name]


def test_tracker_options_default_to_each_trackers_published_values() -> None:
    from framelens.cli import build_parser
    from framelens.cli_options import tracker_settings_from_args
    from framelens.core.stages.tracking.settings import TRACKER_KINDS, TrackerSettings

    parser = build_parser()
    for kind in TRACKER_KINDS:
        args = parser.parse_args(["track", "d.txt", "--output", "t.txt", "--tracker", kind])
        assert tracker_settings_from_args(args, kind) == TrackerSettings.for_kind(kind)
    args = parser.parse_args(
        ["track", "d.txt", "--output", "t.txt", "--track-buffer", "90", "--ocsort-use-byte"]
    )
    chosen = tracker_settings_from_args(args, "ocsort")
    assert chosen.track_buffer == 90 and chosen.ocsort_use_byte is True
    assert chosen.min_hits == TrackerSettings.for_kind("ocsort").min_hits


# serial: the track must still run when its partial file is seen; a test process
# slowed by tests beside it looked after the track had finished
@pytest.mark.serial
def test_a_killed_track_leaves_nothing(tmp_path: Path) -> None:
    """SIGTERM while the tracks are being written: neither the tracks file nor its
    temporary stays, exit 128 + 15, one line."""
    import signal

    from child_signals import signalled

    rng = np.random.default_rng(3)
    frames, boxes = 6_000, 20  # seconds of tracking here: the signal comes well before the end
    rows = np.column_stack([
        np.repeat(np.arange(1, frames + 1), boxes), np.full(frames * boxes, -1),
        rng.uniform(0, 1800, (frames * boxes, 2)), rng.uniform(20, 80, (frames * boxes, 2)),
        rng.uniform(0.2, 1.0, frames * boxes),
    ])  # fmt: skip
    dets = tmp_path / "det.txt"
    np.savetxt(dets, rows, fmt=["%d", "%d", "%.1f", "%.1f", "%.1f", "%.1f", "%.2f"], delimiter=",")
    out = tmp_path / "out"
    out.mkdir()
    code, stdout, err = signalled(
        ["track", str(dets), "--output", str(out / "t.txt")],
        lambda: any(".partial-" in p.name for p in out.iterdir()), signal.SIGTERM,
        "track did not start writing",
    )  # fmt: skip
    assert code == 128 + signal.SIGTERM, err
    assert stdout == "" and err.strip().splitlines() == ["framelens: interrupted"]
    assert list(out.iterdir()) == []


def test_frame_size_clips_detections_as_a_run_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dets = tmp_path / "det.txt"  # one person walking out of a 200x100 frame on the right
    dets.write_text("".join(f"{f},-1,{150 + 10 * f},20,40,60,0.9\n" for f in range(1, 8)))
    out = tmp_path / "t.txt"
    code, _, err = _cli(capsys, "track", str(dets), "--output", str(out), "--frame-size", "200x100",
                        "--min-hits", "1")  # fmt: skip
    assert code == 0, err
    frames = read_tracks_file(out).frames
    right = [float(f.boxes[0, 0] + f.boxes[0, 2]) for f in frames if len(f)]
    assert right and max(right) == 200.0  # clipped at the frame's edge
    assert len(frames) == 4  # from frame 5 on wholly outside the frame: no rows
    code, _, _ = _cli(capsys, "track", str(dets), "--output", str(out), "--min-hits", "1")
    unclipped = read_tracks_file(out).frames
    assert max(float(f.boxes[0, 0] + f.boxes[0, 2]) for f in unclipped if len(f)) > 200


def test_track_help_describes_zones_and_events_as_track_takes_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``framelens track`` always tracks and reads one source: its help asks for no
    ``--track`` (it has none) and offers no several sources' DIR/<name>.events.csv."""
    with pytest.raises(SystemExit) as exit_:
        main(["track", "--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--zones ZONES.json count crossings of its lines" in text
    assert "with --track" not in text and "several sources" not in text


@pytest.mark.parametrize("option", ["--output", "--events"])
def test_track_refuses_to_write_over_its_detections(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    """``framelens track det.txt --output det.txt`` would replace the detections with the
    tracks: one line, exit code 2, the detections as they were."""
    dets = tmp_path / "det.txt"
    dets.write_text("1,-1,1,1,5,5,0.9\n")
    zones = tmp_path / "zones.json"
    zones.write_text('{"lines": [{"name": "gate", "points": [[0, 3], [9, 3]]}]}')
    outputs = {"--output": str(tmp_path / "t.txt"), "--events": str(tmp_path / "e.csv")}
    outputs[option] = str(dets)
    argv = ["track", str(dets), "--zones", str(zones)]
    code, out, err = _cli(capsys, *argv, *(x for kv in outputs.items() for x in kv))
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        f"framelens: error: cannot write {dets}: it is the input {dets}, which it would "
        "replace; choose another name"
    ]
    assert dets.read_text() == "1,-1,1,1,5,5,0.9\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["det.txt", "zones.json"]


@pytest.mark.parametrize("tracker", ["bytetrack", "botsort"])
def test_track_refuses_oc_sorts_parameters_for_another_tracker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tracker: str
) -> None:
    """``--ocsort-delta-t`` given to ByteTrack would be taken and do nothing: the analyst
    would believe it tuned the tracks. One line, exit 2, nothing written."""
    dets = tmp_path / "det.txt"
    dets.write_text("1,-1,1,1,5,5,0.9\n")
    code, out, err = _cli(capsys, "track", str(dets), "--output", str(tmp_path / "t.txt"),
                          "--tracker", tracker, "--ocsort-delta-t", "5")  # fmt: skip
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        "framelens: error: --ocsort-delta-t: OC-SORT's parameters: add --tracker ocsort"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["det.txt"]
