"""`framelens evaluate` on MOT16/17/20 ground truth (classes, distractors) equals the MOT
Challenge's official evaluation: TrackEval's MotChallenge2DBox run on files laid out as
the benchmark's (its Evaluator, not its parts), for a small synthetic sequence whose
tracker has boxes on pedestrians, on distractors (a static person, a person on a
vehicle), on a car, on a pedestrian marked "not considered", on nothing, and one ID
switch."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from framelens.cli import main

SEQ = "MOT17-90-SYN"
FRAMES = 12

# ground truth: id, class, considered flag, visibility, box at frame 1 (l, t, w, h), step/frame
# (1 pedestrian, 2 person on vehicle, 3 car, 6 non-MOT vehicle, 7 static person)
OBJECTS = (
    (1, 1, 1, 1.0, (100, 200, 40, 100), (6, 0)),
    (2, 1, 1, 0.6, (400, 220, 42, 110), (-4, 1)),
    (3, 1, 1, 0.9, (700, 180, 38, 96), (0, 2)),
    (4, 7, 0, 1.0, (900, 300, 40, 100), (0, 0)),  # static person
    (5, 2, 0, 0.8, (1100, 250, 45, 90), (8, 0)),  # person on a vehicle
    (6, 3, 0, 1.0, (1300, 400, 160, 90), (-5, 0)),  # car
    (7, 1, 0, 0.1, (1600, 200, 40, 100), (0, 0)),  # a pedestrian not considered
    (8, 6, 0, 1.0, (200, 600, 120, 80), (3, 0)),  # non-MOT vehicle: a distractor on MOT20
)
DISTRACTOR_BOXES = {"MOT17": 2 * FRAMES, "MOT20": 3 * FRAMES}  # the tracker's boxes on them


def _box(obj: tuple[Any, ...], frame: int) -> tuple[float, float, float, float]:
    (left, top, width, height), (dx, dy) = obj[4], obj[5]
    return left + dx * (frame - 1), top + dy * (frame - 1), width, height


def _gt_lines() -> list[str]:
    return [
        f"{frame},{obj[0]},{','.join(f'{v:g}' for v in _box(obj, frame))},{obj[2]},{obj[1]},"
        f"{obj[3]}"
        for frame in range(1, FRAMES + 1)
        for obj in OBJECTS
    ]


def _tracker_lines() -> list[str]:
    """A tracker's output (MOT text, 10 fields): every object followed with a few pixels
    of error, object 2 under a new ID from frame 7 (an ID switch), object 3 missed in its
    last three frames, and a box on nothing in frame 5."""
    rng = np.random.default_rng(3)
    lines = []
    for frame in range(1, FRAMES + 1):
        for obj in OBJECTS:
            oid = obj[0]
            if oid == 3 and frame > FRAMES - 3:
                continue
            track = 22 if oid == 2 and frame >= 7 else 10 + oid
            left, top, width, height = _box(obj, frame)
            jitter = rng.uniform(-3, 3, 4)
            box = (left + jitter[0], top + jitter[1], width + jitter[2], height + jitter[3])
            lines.append(f"{frame},{track},{','.join(f'{v:.2f}' for v in box)},0.9,-1,-1,-1")
        if frame == 5:
            lines.append(f"{frame},40,1700,900,50,120,0.5,-1,-1,-1")
    return lines


def _layout(root: Path, benchmark: str) -> tuple[Path, Path]:
    """The sequence as TrackEval's MotChallenge2DBox reads it: gt/mot_challenge/
    <BENCH>-train/<SEQ>/{gt/gt.txt, seqinfo.ini}, the seqmap, and trackers/mot_challenge/
    <BENCH>-train/<TRACKER>/data/<SEQ>.txt; returns (gt.txt, the tracker's file)."""
    seq = SEQ.replace("MOT17", benchmark)
    folder = root / "gt" / "mot_challenge" / f"{benchmark}-train" / seq
    (folder / "gt").mkdir(parents=True)
    gt = folder / "gt" / "gt.txt"
    gt.write_text("\n".join(_gt_lines()) + "\n")
    (folder / "seqinfo.ini").write_text(
        f"[Sequence]\nname={seq}\nimDir=img1\nframeRate=30\nseqLength={FRAMES}\n"
        "imWidth=1920\nimHeight=1080\nimExt=.jpg\n"
    )
    seqmaps = root / "gt" / "mot_challenge" / "seqmaps"
    seqmaps.mkdir()
    (seqmaps / f"{benchmark}-train.txt").write_text(f"name\n{seq}\n")
    data = root / "trackers" / "mot_challenge" / f"{benchmark}-train" / "SYN" / "data"
    data.mkdir(parents=True)
    tracks = data / f"{seq}.txt"
    tracks.write_text("\n".join(_tracker_lines()) + "\n")
    return gt, tracks


def _official(root: Path, benchmark: str, preprocess: bool) -> dict[str, float]:
    """TrackEval's own file-based evaluation of the layout (scripts/run_mot_challenge.py's
    way): HOTA, CLEAR and Identity, one sequence, nothing printed or written."""
    with contextlib.redirect_stdout(io.StringIO()):
        import trackeval

        evaluator = trackeval.Evaluator(
            {
                "USE_PARALLEL": False,
                "PRINT_RESULTS": False,
                "PRINT_CONFIG": False,
                "TIME_PROGRESS": False,
                "OUTPUT_SUMMARY": False,
                "OUTPUT_DETAILED": False,
                "PLOT_CURVES": False,
                "LOG_ON_ERROR": None,
            }
        )
        dataset = trackeval.datasets.MotChallenge2DBox(
            {
                "GT_FOLDER": str(root / "gt" / "mot_challenge"),
                "TRACKERS_FOLDER": str(root / "trackers" / "mot_challenge"),
                "SEQMAP_FILE": str(root / "gt" / "mot_challenge" / "seqmaps"
                                   / f"{benchmark}-train.txt"),
                "BENCHMARK": benchmark,
                "SPLIT_TO_EVAL": "train",
                "TRACKERS_TO_EVAL": ["SYN"],
                "DO_PREPROC": preprocess,
                "PRINT_CONFIG": False,
            }
        )  # fmt: skip
        metrics = [
            trackeval.metrics.HOTA({"PRINT_CONFIG": False}),
            trackeval.metrics.CLEAR({"PRINT_CONFIG": False, "THRESHOLD": 0.5}),
            trackeval.metrics.Identity({"PRINT_CONFIG": False, "THRESHOLD": 0.5}),
        ]
        results, messages = evaluator.evaluate([dataset], metrics)
    assert messages["MotChallenge2DBox"]["SYN"] == "Success"
    res = results["MotChallenge2DBox"]["SYN"][SEQ.replace("MOT17", benchmark)]["pedestrian"]
    return {
        "hota": float(np.mean(res["HOTA"]["HOTA"])),
        "deta": float(np.mean(res["HOTA"]["DetA"])),
        "assa": float(np.mean(res["HOTA"]["AssA"])),
        "mota": float(res["CLEAR"]["MOTA"]),
        "idf1": float(res["Identity"]["IDF1"]),
        "false_positives": int(res["CLEAR"]["CLR_FP"]),
        "false_negatives": int(res["CLEAR"]["CLR_FN"]),
        "id_switches": int(res["CLEAR"]["IDSW"]),
        "gt_boxes": int(res["Count"]["GT_Dets"]),
        "gt_objects": int(res["Count"]["GT_IDs"]),
        "track_boxes": int(res["Count"]["Dets"]),
        "tracks": int(res["Count"]["IDs"]),
    }


def _framelens(
    capsys: pytest.CaptureFixture[str], tracks: Path, gt: Path, *options: str
) -> dict[str, Any]:
    code = main(["evaluate", str(tracks), "--gt", str(gt), *options])
    out, err = capsys.readouterr()
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def _same(ours: dict[str, Any], official: dict[str, float]) -> None:
    for key, value in official.items():
        if isinstance(value, int):
            assert ours[key] == value, key
        else:
            assert ours[key] == pytest.approx(value, abs=1e-6), key


@pytest.mark.parametrize("benchmark", ["MOT17", "MOT20"])
def test_equals_trackeval_official_mot_challenge_evaluation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], benchmark: str
) -> None:
    gt, tracks = _layout(tmp_path, benchmark)
    official = _official(tmp_path, benchmark, preprocess=True)
    printed = _framelens(capsys, tracks, gt)  # the benchmark from the path
    _same(printed["metrics"], official)
    assert official["id_switches"] == 1 and official["false_negatives"] == 3
    assert official["gt_objects"] == 3  # only the considered pedestrians
    removed = "distractors and non-MOT vehicles" if benchmark == "MOT20" else "distractors"
    assert printed["protocol"] == f"{benchmark}: {removed} removed, pedestrians only"


def test_no_preprocess_counts_boxes_on_distractors_as_false_positives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gt, tracks = _layout(tmp_path, "MOT17")
    official = _official(tmp_path, "MOT17", preprocess=True)
    plain = _framelens(capsys, tracks, gt, "--no-preprocess")
    _same(plain["metrics"], _official(tmp_path, "MOT17", preprocess=False))
    assert plain["protocol"] == "no preprocessing: all considered rows, every class"
    # the boxes on the static person and the person on a vehicle were not false positives
    fp = plain["metrics"]["false_positives"]
    assert fp == official["false_positives"] + DISTRACTOR_BOXES["MOT17"]
    assert plain["metrics"]["mota"] < official["mota"]


def test_the_benchmark_given_wins_over_the_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gt, tracks = _layout(tmp_path, "MOT17")
    as_mot20 = _framelens(capsys, tracks, gt, "--benchmark", "MOT20")
    mot17 = _framelens(capsys, tracks, gt)
    extra = DISTRACTOR_BOXES["MOT20"] - DISTRACTOR_BOXES["MOT17"]
    assert as_mot20["metrics"]["false_positives"] == mot17["metrics"]["false_positives"] - extra
    assert as_mot20["protocol"].startswith("MOT20: ")


def test_report_names_the_protocol(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gt, tracks = _layout(tmp_path, "MOT17")
    report = tmp_path / "report"
    printed = _framelens(capsys, tracks, gt, "--report", str(report))
    assert json.loads((report / "summary.json").read_text())["protocol"] == printed["protocol"]
    page = (report / "index.html").read_text()
    assert "ground-truth rows counted: MOT17: distractors removed, pedestrians only" in page


def test_a_class_outside_mot_challenges_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gt, tracks = _layout(tmp_path, "MOT17")
    gt.write_text(gt.read_text() + f"{FRAMES},9,10,10,40,100,1,14,1.0\n")
    code = main(["evaluate", str(tracks), "--gt", str(gt)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.strip() == (
        f"framelens: error: cannot evaluate against {gt}: frame {FRAMES}, object 9 has class "
        "14, not a MOT "
        "Challenge class (1 to 13); without preprocessing (framelens evaluate "
        "--no-preprocess) classes are not looked at"
    )
    assert main(["evaluate", str(tracks), "--gt", str(gt), "--no-preprocess"]) == 0
