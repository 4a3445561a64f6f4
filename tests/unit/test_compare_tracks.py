"""Tracking in compare: every pane tracks its own boxes, and the report says, with
numbers, whether another precision or threshold changes the tracks (against the
reference pane's tracks, and against ground truth).

Frames 540.. of the sample hold one person scored 0.82-0.87, walking: a pane at conf
0.85 loses them on some frames, so its tracks break where the reference's do not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from framelens.cli import sample_video
from framelens.core.models.catalog import resolve_model
from framelens.core.pipeline import build
from framelens.core.pipeline.compare.panes import PaneSpec
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.compare.to_report import compare_to_report
from framelens.core.stages.sources import open_source
from framelens.core.stages.tasks import DetectParams
from framelens.core.stages.tracking import TrackerSettings, TrackingStage, make_tracker
from framelens.core.stages.tracking.mot import MotFrame, read_ground_truth, write_mot
from framelens.core.types import StageTimes

SAMPLE = str(sample_video())
START, FRAMES = 540, 40
MODEL = resolve_model("yolox-nano")
LOW = PipelineSettings(model=MODEL, params=DetectParams(conf=0.25), threads=1)
STRICT = replace(LOW, params=DetectParams(conf=0.85))
PANES = [PaneSpec("conf 0.25", LOW), PaneSpec("again", LOW), PaneSpec("conf 0.85", STRICT)]


@pytest.fixture(scope="module")
def tracked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One real comparison with tracking: the reference, the same settings again, and
    a stricter threshold."""
    report = tmp_path_factory.mktemp("tracks") / "report"
    return compare_to_report(
        SAMPLE, PANES, report, start=START, frames=FRAMES, tracking=TrackerSettings()
    )


def tracking(summary: dict[str, Any], label: str) -> dict[str, Any]:
    entry = summary["variants"][label]["tracking"]
    assert isinstance(entry, dict)
    return entry


def test_the_same_settings_twice_give_the_same_tracks(tracked: dict[str, Any]) -> None:
    ref, again = tracking(tracked, "conf 0.25"), tracking(tracked, "again")
    assert tracked["tracker"] == "bytetrack" and ref["tracks"] >= 1
    assert again["tracks"] == ref["tracks"]
    assert again["id_switches"] == 0 and again["idf1"] == 1.0 and again["hota"] == 1.0
    assert ref == again  # the reference agrees with itself, as in the detection agreement
    page = (Path(tracked["report"]) / "index.html").read_text()
    assert "<h2>Tracks (bytetrack)</h2>" in page and "against conf 0.25's tracks" in page


def test_a_pane_whose_boxes_differ_agrees_less_with_the_reference(
    tracked: dict[str, Any],
) -> None:
    strict, ref = tracking(tracked, "conf 0.85"), tracking(tracked, "conf 0.25")
    assert strict["idf1"] < ref["idf1"] and strict["hota"] < ref["hota"]
    assert strict["tracks"] != ref["tracks"] or strict["id_switches"] > 0
    saved = json.loads((Path(tracked["report"]) / "summary.json").read_text())
    assert saved["variants"]["conf 0.85"]["tracking"] == strict  # the saved report says so


def test_no_tracking_rows_without_tracking(tmp_path: Path) -> None:
    summary = compare_to_report(SAMPLE, PANES[:2], tmp_path / "r", start=START, frames=2)
    assert all("tracking" not in v for v in summary["variants"].values())
    assert "tracker" not in summary
    assert "Tracks (" not in (tmp_path / "r" / "index.html").read_text()


def ground_truth(path: Path, settings: PipelineSettings, start: int, frames: int) -> Path:
    """The tracks of ``settings``'s detector as MOT ground truth, frame 1 = ``start``,
    made without the comparison: the pipeline and a tracking stage, frame by frame."""
    stage = TrackingStage(make_tracker(TrackerSettings(frame_rate=10.0)), trail_length=0)
    pipeline = build.pane_pipeline(settings)
    out: list[MotFrame] = []
    try:
        with open_source(SAMPLE) as source:
            source.seek(start)
            for frame in source:
                result = pipeline.infer(frame, StageTimes())
                stage(result)
                out.append(MotFrame.from_detections(len(out) + 1, result.output))  # type: ignore[arg-type]
                if len(out) == frames:
                    break
    finally:
        pipeline.close()
    assert read_ground_truth(write_mot(path, out)).num_boxes > 0
    return path


def test_ground_truth_scores_each_pane_from_the_comparison_s_first_frame(tmp_path: Path) -> None:
    gt = ground_truth(tmp_path / "gt.txt", LOW, START, FRAMES)
    panes = [PANES[0], PANES[2]]
    summary = compare_to_report(
        SAMPLE,
        panes,
        tmp_path / "r",
        start=START,
        frames=FRAMES,
        tracking=TrackerSettings(),
        ground_truth=read_ground_truth(gt),
    )
    assert summary["ground_truth"] == str(gt)
    # a tracker's own MOT text (no class column) as ground truth: MOT15's rule
    assert summary["ground_truth_protocol"] == "MOT15: all considered rows"
    same = tracking(summary, "conf 0.25")["ground_truth"]
    strict = tracking(summary, "conf 0.85")["ground_truth"]
    assert same == {"hota": 1.0, "idf1": 1.0, "mota": 1.0, "id_switches": 0}
    assert strict["hota"] < 1.0 and strict["idf1"] < 1.0 and strict["mota"] < 1.0
    page = (tmp_path / "r" / "index.html").read_text()
    assert "against the ground truth" in page and "its frame 1 is the first frame" in page
    assert "MOT15: all considered rows" in page

    later = compare_to_report(  # the same file, the comparison a frame later: off by one
        SAMPLE,
        [panes[0], PaneSpec("b", LOW)],
        tmp_path / "r2",
        start=START + 1,
        frames=FRAMES,
        tracking=TrackerSettings(),
        ground_truth=read_ground_truth(gt),
    )
    assert tracking(later, "conf 0.25")["ground_truth"]["hota"] < 1.0


def framelens(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FRAMELENS_CACHE_DIR": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "framelens.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_cli_compare_track_with_gt_gives_each_precision_s_hota(tmp_path: Path) -> None:
    fp32 = replace(LOW, params=DetectParams(conf=0.3))
    gt = ground_truth(tmp_path / "gt.txt", fp32, START, 20)
    report = tmp_path / "report"
    proc = framelens(
        "compare", SAMPLE, "--precisions", "fp32,fp16", "--conf", "0.3", "--start", str(START),
        "--frames", "20", "--track", "--gt", str(gt), "--quiet", "--report", str(report),
        cache=tmp_path / "cache",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads((report / "summary.json").read_text())
    assert data["tracker"] == "bytetrack" and data["ground_truth"] == str(gt)
    fp32_scores = data["variants"]["fp32"]["tracking"]
    fp16_scores = data["variants"]["fp16"]["tracking"]
    assert fp32_scores["ground_truth"]["hota"] == 1.0  # the ground truth is fp32's own tracks
    assert 0.0 < fp16_scores["ground_truth"]["hota"] <= 1.0
    assert {"tracks", "id_switches", "idf1", "hota", "assa"} <= set(fp16_scores)
    assert 0.0 <= fp16_scores["idf1"] <= 1.0


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--track", "--gt", "{bad}"], "bad.txt, line 2"),
        (["--track", "--gt", "{missing}"], "missing.txt"),
        (["--gt", "{bad}"], "--gt scores tracks: add --track"),
        (["--track", "sort"], "unknown tracker 'sort'"),
    ],
)
def test_bad_tracking_options_are_one_line_exit_2_and_leave_nothing(
    tmp_path: Path, extra: list[str], message: str
) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("1,1,10,10,20,20,1\n2,1,10,10,-20,20,1\n")  # a negative width
    given = [a.format(bad=bad, missing=tmp_path / "missing.txt") for a in extra]
    report = tmp_path / "report"
    proc = framelens(
        "compare", SAMPLE, "--precisions", "fp32,fp16", "--frames", "2", "--report",
        str(report), *given, cache=tmp_path / "cache",
    )  # fmt: skip
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt"]


def test_a_live_comparison_s_report_tracks_its_gaps_with_ids_of_their_own(tmp_path: Path) -> None:
    """The compare window keeps what it tracked; Save Report computes the frames never
    compared in between with trackers of its own, whose IDs must not reuse the kept ones
    (one ID, two objects: a wrong track count and agreement)."""
    from framelens.core.pipeline.compare.kept import KeptFrames
    from framelens.core.pipeline.compare.panes import CompareRunner
    from framelens.core.pipeline.ranges import RunRange
    from framelens.core.sessions.compare.lockstep import open_for_panes, pane_trackers, run_lockstep
    from framelens.core.sessions.compare.saved import save_kept_report

    tracking, panes = TrackerSettings(), PANES[:2]
    kept = KeptFrames(panes, 0, tracking)
    with (
        open_for_panes(SAMPLE) as source,
        CompareRunner(panes, stages=pane_trackers(tracking, 10.0)) as runner,
    ):
        for run in (RunRange(START, 5), RunRange(START + 10, 5)):  # a jump: frames 5-9 left
            runner.reset_stages()
            run_lockstep(source, runner, run, kept.add, None)
    before = [
        {int(i) for f in pane if f is not None for i in f.ids} for pane in kept.track_frames()
    ]
    assert all(before)
    summary = save_kept_report(SAMPLE, kept, tmp_path / "r")
    assert summary["computed_for_report"] == 5 and summary["tracker"] == "bytetrack"
    for pane, ids in zip(kept.track_frames(), before, strict=True):
        gap = {int(i) for f in pane[5:10] if f is not None for i in f.ids}
        assert gap and not gap & ids  # the gap's tracks are new tracks
    ref, again = (summary["variants"][p.label]["tracking"] for p in panes)
    assert ref["tracks"] == len(before[0]) + 1 and again == ref  # one person, one gap track
