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
    assert (report / "index.html").is_file()
    assert err.strip().splitlines()[-1] == f"framelens: wrote {report}/"


def test_evaluate_a_framelens_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gt = motmetrics_data() / "gt.txt"
    tracks = _tracks_json(tmp_path / "run.json", gt)
    code, out, _ = _cli(capsys, "evaluate", str(tracks), "--gt", str(gt))
    assert code == 0
    metrics = json.loads(out)["metrics"]
    assert metrics["hota"] == 1.0
    assert metrics["idf1"] == 1.0 and metrics["mota"] == 1.0 and metrics["id_switches"] == 0


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
    code, out, err = _cli(
        capsys, "evaluate", str(folder / "test.txt"), "--gt", str(folder / "gt.txt"),
        "--report", str(taken),
    )  # fmt: skip
    assert code == 2 and out == "" and "holds other files" in err
    assert [p.name for p in taken.iterdir()] == ["mine.txt"]
