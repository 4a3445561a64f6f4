"""`framelens run --track --zones --events` and `framelens track --zones --events`
(app/cli.py, app/cli_tracks.py, core/stages/analytics): events as CSV, counts in the
JSON summary, bad zones files refused as one line (exit 2) with nothing written."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from framelens.cli import sample_video

SAMPLE = str(sample_video())

# one-by-one-person-detection.mp4 (768x432, 10 fps): six people walk in turn from the
# table to the right edge. Looked at frame by frame (a vertical line at x = 600 drawn on
# frames 100..1358): each crosses x = 600 once, left to right, the first around frame
# 190, then 440, 690, 860, 1190, 1350; nobody walks back.
CROSSED_NEAR = [190, 440, 690, 860, 1190, 1350]
ZONES = {
    # drawn bottom to top: walking p1 -> p2, the right-hand side is the frame's right
    "lines": [{"name": "door", "points": [[600, 432], [600, 200]], "classes": ["person"]}],
    "zones": [{"name": "right", "polygon": [[600, 200], [768, 200], [768, 432], [600, 432]]}],
}


def framelens(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "framelens", *args], capture_output=True, text=True, timeout=300
    )


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_run_counts_each_person_crossing_the_line_in_the_sample(tmp_path: Path) -> None:
    zones, events = tmp_path / "zones.json", tmp_path / "events.csv"
    zones.write_text(json.dumps(ZONES))
    proc = framelens("run", SAMPLE, "--track", "--quiet", "--zones", str(zones),
                     "--events", str(events))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    crossed = [r for r in _rows(events) if r["kind"] == "cross"]
    assert [(r["name"], r["direction"], r["class"]) for r in crossed] == [
        ("door", "in", "person")
    ] * 6
    assert len({r["track_id"] for r in crossed}) == 6
    for row, near in zip(crossed, CROSSED_NEAR, strict=True):
        assert abs(int(row["frame"]) - near) <= 10
        assert float(row["time_s"]) == pytest.approx(int(row["frame"]) / 10.0)
    summary = json.loads(proc.stdout)["sources"][0]["analytics"]
    assert summary["lines"]["door"] == {
        "in": 6,
        "out": 0,
        "by_class": {"person": {"in": 6, "out": 0}},
    }
    assert summary["zones"]["right"]["enter"] == 6
    assert summary["events"] == len(_rows(events))


def _mot_detections(path: Path) -> None:
    """Three people: one walks down across y = 100 (stepping on it at frame 3), one up
    to it and stops there, one flickers across it for one frame."""
    lines = []
    for f in range(1, 7):
        lines.append(f"{f},-1,80,{-60 + 30 * (f - 1)},40,100,0.9")  # bottom 40, 70, 100, 130..
        lines.append(f"{f},-1,280,{150 - 30 * (f - 1)},40,100,0.9")  # bottom 250, 220, .. 100
        lines.append(f"{f},-1,480,{-10 if f != 3 else 15},40,100,0.9")  # bottom 90, once 115
    path.write_text("\n".join(lines) + "\n")


def test_track_writes_events_and_counts_from_detections(tmp_path: Path) -> None:
    dets, zones, events = tmp_path / "det.txt", tmp_path / "zones.json", tmp_path / "ev.csv"
    _mot_detections(dets)
    zones.write_text(json.dumps({"lines": [{"name": "gate", "points": [[0, 100], [600, 100]]}]}))
    proc = framelens("track", str(dets), "--output", str(tmp_path / "t.txt"), "--fps", "5",
                     "--min-hits", "1", "--zones", str(zones), "--events", str(events))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = [(r["frame"], r["time_s"], r["kind"], r["name"], r["direction"]) for r in _rows(events)]
    # frame 4 is the first below the line; the others never get past it for 2 frames
    assert rows == [("4", "0.600", "cross", "gate", "in")]
    assert json.loads(proc.stdout)["analytics"]["lines"]["gate"]["in"] == 1


@pytest.mark.parametrize(
    ("content", "extra", "message"),
    [
        ("{nope", [], "bad JSON"),
        ('{"lines": [{"name": "a", "points": [[0, 0]]}]}', [], "needs 2 points"),
        ('{"zones": [{"name": "z", "polygon": [[0, 0], [9, 9], [9, 0], [0, 9]]}]}', [],
         "crosses itself"),
        ('{"lines": [{"name": "a", "points": [[0, 0], [9, 9]], "classes": ["unicorn"]}]}', [],
         "unknown class 'unicorn'"),
        ('{"lines": []}', ["--no-track"], "--zones counts tracks: add --track"),
        ('{"lines": [], "zones": []}', [], "holds no lines or zones, so there is nothing to count"),
        ("{}", [], "holds no lines or zones"),
    ],
)  # fmt: skip
def test_a_bad_zones_file_is_one_line_exit_2_and_nothing_written(
    tmp_path: Path, content: str, extra: list[str], message: str
) -> None:
    zones, events, dets = tmp_path / "zones.json", tmp_path / "ev.csv", tmp_path / "d.json"
    zones.write_text(content)
    track = [] if extra else ["--track"]
    proc = framelens("run", SAMPLE, *track, "--frames", "2", "--quiet", "--detections",
                     str(dets), "--zones", str(zones), "--events", str(events))  # fmt: skip
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    if "JSON" in message or "points" in message or "no lines" in message:
        assert str(zones) in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["zones.json"]


@pytest.mark.parametrize(
    "command",
    [["run", SAMPLE, "--track", "--frames", "2", "--quiet", "--events"],
     ["run", SAMPLE, "--track", "--frames", "2", "--quiet", "--export-tracks"],
     ["track", "DETS", "--output", "t.txt", "--events"],
     ["track", "DETS", "--output"]],
    ids=["run-events", "run-tracks", "track-events", "track-output"],
)  # fmt: skip
def test_an_output_named_as_the_zones_file_is_refused_and_the_zones_kept(
    tmp_path: Path, command: list[str]
) -> None:
    """``--events zones.json`` beside ``--zones zones.json`` would replace the analyst's
    drawn lines with a CSV of events: one line, exit 2, the zones file as it was."""
    zones, dets = tmp_path / "zones.json", tmp_path / "det.txt"
    zones.write_text(json.dumps(ZONES))
    _mot_detections(dets)
    before = zones.read_bytes()
    args = [str(dets) if a == "DETS" else str(tmp_path / a) if a == "t.txt" else a
            for a in command]  # fmt: skip
    proc = framelens(*args, str(zones), "--zones", str(zones))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"framelens: error: cannot write {zones}: it is the input {zones}, which it would "
        "replace; choose another name"
    ]
    assert zones.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["det.txt", "zones.json"]


def test_events_without_zones_is_one_line() -> None:
    proc = framelens("run", SAMPLE, "--track", "--frames", "1", "--events", "ev.csv")
    assert proc.returncode == 2 and "add --zones" in proc.stderr


def test_several_sources_each_get_their_events_and_counts(tmp_path: Path) -> None:
    zones, out = tmp_path / "zones.json", tmp_path / "out"
    zones.write_text(json.dumps(ZONES))
    sources = []
    for name in ("a", "b"):
        (tmp_path / f"{name}.mp4").write_bytes(Path(SAMPLE).read_bytes())
        sources.append(str(tmp_path / f"{name}.mp4"))
    # the first 230 frames: the first person crosses (around frame 190), nobody else
    proc = framelens("run", *sources, "--export-dir", str(out), "--track", "--frames", "230",
                     "--quiet", "--zones", str(zones), "--events")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    for name, source in zip(("a", "b"), json.loads(proc.stdout)["sources"], strict=True):
        crossed = [r for r in _rows(out / f"{name}.events.csv") if r["kind"] == "cross"]
        assert [(r["track_id"], r["direction"]) for r in crossed] == [("1", "in")]
        assert abs(int(crossed[0]["frame"]) - CROSSED_NEAR[0]) <= 10
        assert source["analytics"]["lines"]["door"]["in"] == 1


def test_a_point_outside_the_frame_is_a_warning_and_the_run_goes_on(tmp_path: Path) -> None:
    zones, events = tmp_path / "zones.json", tmp_path / "ev.csv"
    zones.write_text(json.dumps({"lines": [{"name": "far", "points": [[0, 0], [900, 100]]}]}))
    proc = framelens("run", SAMPLE, "--track", "--frames", "2", "--quiet", "--zones", str(zones),
                     "--events", str(events))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"warning: {zones}: line 'far': point (900, 100) is outside the 768x432 frame" in (
        proc.stderr
    )
    assert _rows(events) == []  # the header alone: no event in two frames
    assert events.read_text().startswith("frame,time_s,track_id,class,kind,name,direction")


def test_the_annotated_video_of_a_run_shows_the_lines_with_their_counts(tmp_path: Path) -> None:
    from framelens.core.stages.analytics.picture import shape_colour
    from framelens.core.stages.sources import open_source

    zones, out = tmp_path / "zones.json", tmp_path / "annotated.mp4"
    zones.write_text(json.dumps({"lines": ZONES["lines"]}))  # the zone's edge is on the line
    proc = framelens("run", SAMPLE, "--track", "--quiet", "--zones", str(zones),
                     "--export", str(out), "--frames", "5")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    source = open_source(str(out))
    try:
        frame = source.read()
        assert frame is not None
        b, g, r = (int(v) for v in frame.image[300, 600])  # on the line 'door' (x = 600)
    finally:
        source.close()
    want = shape_colour(0)
    assert max(abs(b - want[0]), abs(g - want[1]), abs(r - want[2])) < 60  # H.264's colours
