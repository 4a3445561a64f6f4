"""Counts and events in compare (core/pipeline/compare/events.py): every pane's tracks
counted against the same lines and zones, its events matched against the reference's,
and the report saying, per line and zone, whether another precision or threshold
changes the counts, and which events a pane lacks or adds.

Frames 160..219 of the sample hold one person walking right across x = 600 around frame
190 (tests/unit/test_cli_analytics.py), scored high enough for a pane at conf 0.25 and
too low for one at conf 0.85, which never tracks them."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from framelens.cli import sample_video
from framelens.core.models.catalog import resolve_model
from framelens.core.pipeline.compare.events import (
    PaneFrame,
    count_events,
    events_summary,
    match_events,
)
from framelens.core.pipeline.compare.panes import PaneSpec
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.compare.to_report import compare_to_report
from framelens.core.stages.analytics import Event, parse_zones
from framelens.core.stages.tasks import DetectParams
from framelens.core.stages.tracking import TrackerSettings
from framelens.core.stages.tracking.mot import MotFrame

SAMPLE = str(sample_video())
MODEL = resolve_model("yolox-nano")
LOW = PipelineSettings(model=MODEL, params=DetectParams(conf=0.25), threads=1)
STRICT = replace(LOW, params=DetectParams(conf=0.85))
ZONES_JSON = {
    "lines": [{"name": "door", "points": [[600, 432], [600, 200]], "classes": ["person"]}],
    "zones": [{"name": "right", "polygon": [[600, 200], [768, 200], [768, 432], [600, 432]]}],
}
ZONES = parse_zones(ZONES_JSON, labels=MODEL.labels)


# ---- matching, on events made here -------------------------------------------------------


def test_events_match_by_kind_name_direction_and_class_within_the_tolerance() -> None:
    ref = [
        Event(100, 10.0, 1, 0, "cross", "gate", "in"),
        Event(102, 10.2, 2, 0, "cross", "gate", "in"),
        Event(150, 15.0, 3, 0, "cross", "gate", "out"),
        Event(200, 20.0, 1, 0, "enter", "bay"),
    ]
    pane = [
        Event(101, 10.1, 7, 0, "cross", "gate", "in"),  # track IDs need not agree
        Event(103, 10.3, 8, 0, "cross", "gate", "in"),
        Event(150, 15.0, 9, 0, "cross", "gate", "in"),  # the other way: not the same
        Event(200, 20.0, 7, 2, "enter", "bay"),  # another class
        Event(209, 20.9, 7, 0, "exit", "bay"),
    ]
    diff = match_events(ref, pane, tolerance=5)
    assert diff.matched == 2  # each event once
    assert diff.missing == (ref[2], ref[3])
    assert diff.extra == (pane[2], pane[3], pane[4])
    later = [replace(e, frame=e.frame + 6) for e in ref]  # 106, 108, 156, 206
    assert match_events(ref, later, tolerance=5).missing == (ref[0], ref[2], ref[3])
    # 102 could pair with 106 or 108: it takes 106 only where 100 is not left out
    assert match_events(ref, later, tolerance=6).matched == 4
    assert match_events(ref, later, tolerance=4).matched == 1


def _walk(ids: int, start: int, frames: int, step: float) -> list[PaneFrame]:
    """A 20x40 box whose bottom centre walks right along y = 300 from x = 565, ``step``
    px a frame, tracked as ``ids`` from frame ``start`` (10 fps)."""
    out = []
    for k in range(frames):
        index = start + k
        x = 565 + step * k
        box = np.array([[x - 10, 260, 20, 40]], np.float64)  # left, top, width, height
        track = MotFrame(index + 1, np.array([ids]), box, np.array([0.9]), np.array([0]))
        out.append(PaneFrame(index, index / 10, track))
    return out


def test_each_panes_events_and_counts_come_from_its_tracks_with_exact_frames() -> None:
    # bottom centres 565, 575, ... 595 at frame 13, 605 at frame 14: the crossing and the
    # entering are frame 14's, both confirmed on frame 15 (min_frames 2)
    events, counts = count_events(_walk(3, 10, 12, 10.0), ZONES, {0: "person"})
    assert [(e.frame, e.time_s, e.track_id, e.kind, e.name, e.direction) for e in events] == [
        (14, 1.4, 3, "cross", "door", "in"),
        (14, 1.4, 3, "enter", "right", ""),
    ]
    door = {"in": 1, "out": 0, "by_class": {"person": {"in": 1, "out": 0}}}
    assert counts["lines"]["door"] == door
    # three panes: the reference; one whose tracker crosses two frames later; one that
    # never sees the person
    late = _walk(9, 12, 12, 10.0)
    none = [PaneFrame(f.index, f.pts, MotFrame(f.index + 1)) for f in late]
    names = {0: "person"}
    entries, made = events_summary([_walk(3, 10, 12, 10.0), late, none], 0, ZONES,
                                   [names, names, names], tolerance=5)  # fmt: skip
    assert [len(m) for m in made] == [2, 2, 0]
    assert entries[1]["vs_reference"] == {
        "matched": 2, "missing": [], "extra": [],
        "count_changes": {"door": {"in": 0, "out": 0},
                          "right": {"enter": 0, "exit": 0, "loiter": 0}},
    }  # fmt: skip
    lacks = entries[2]["vs_reference"]
    assert lacks["matched"] == 0 and lacks["extra"] == []
    assert lacks["missing"] == [
        {"frame": 14, "time_s": 1.4, "track_id": 3, "class": "person", "kind": "cross",
         "name": "door", "direction": "in"},
        {"frame": 14, "time_s": 1.4, "track_id": 3, "class": "person", "kind": "enter",
         "name": "right", "direction": ""},
    ]  # fmt: skip
    assert lacks["count_changes"]["door"]["in"] == -1
    assert lacks["count_changes"]["right"]["enter"] == -1


# ---- a real comparison -------------------------------------------------------------------


@pytest.fixture(scope="module")
def counted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The reference (conf 0.25), the same settings again, and conf 0.85, tracked and
    counted on frames 160..219."""
    panes = [PaneSpec("conf 0.25", LOW), PaneSpec("again", LOW), PaneSpec("conf 0.85", STRICT)]
    report = tmp_path_factory.mktemp("counts") / "report"
    return compare_to_report(SAMPLE, panes, report, start=160, frames=60,
                             tracking=TrackerSettings(), zones=ZONES)  # fmt: skip


def test_the_report_gives_each_panes_counts_and_what_a_stricter_pane_lacks(
    counted: dict[str, Any],
) -> None:
    variants = counted["variants"]
    ref, again, strict = (variants[k]["analytics"] for k in ("conf 0.25", "again", "conf 0.85"))
    assert ref["counts"]["lines"]["door"]["in"] == 1
    assert ref["counts"]["zones"]["right"]["enter"] == 1
    assert again == ref  # the same settings: the same events, nothing missing or extra
    assert again["vs_reference"]["matched"] == 2
    assert strict["counts"]["lines"]["door"]["in"] == 0 and strict["counts"]["events"] == 0
    vs = strict["vs_reference"]
    assert vs["count_changes"] == {"door": {"in": -1, "out": 0},
                                   "right": {"enter": -1, "exit": 0, "loiter": 0}}  # fmt: skip
    assert [(e["kind"], e["name"], e["direction"], e["class"]) for e in vs["missing"]] == [
        ("cross", "door", "in", "person"), ("enter", "right", "", "person")
    ]  # fmt: skip
    assert all(abs(e["frame"] - 190) <= 10 for e in vs["missing"]) and vs["extra"] == []
    assert counted["event_tolerance_frames"] == 5 and counted["zones"] == ["door", "right"]
    report = Path(counted["report"])
    assert json.loads((report / "summary.json").read_text())["variants"]["conf 0.85"][
        "analytics"] == strict  # fmt: skip
    with (report / "events.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["pane"], r["kind"], r["name"]) for r in rows] == [
        ("conf 0.25", "cross", "door"), ("conf 0.25", "enter", "right"),
        ("again", "cross", "door"), ("again", "enter", "right"),
    ]  # fmt: skip
    page = (report / "index.html").read_text()
    assert "<h2>Counts (lines and zones)</h2>" in page
    assert '<td style="background:#fdd">0 (-1)</td>' in page  # conf 0.85's door in
    missed = vs["missing"][0]
    assert f"lacks frame {missed['frame']} ({missed['time_s']:.3f} s): cross door in" in page


def test_no_counts_without_zones(tmp_path: Path) -> None:
    panes = [PaneSpec("a", LOW), PaneSpec("b", LOW)]
    summary = compare_to_report(SAMPLE, panes, tmp_path / "r", start=160, frames=3,
                                tracking=TrackerSettings())  # fmt: skip
    assert all("analytics" not in v for v in summary["variants"].values())
    assert "event_tolerance_frames" not in summary
    assert not (tmp_path / "r" / "events.csv").exists()
    assert "Counts (" not in (tmp_path / "r" / "index.html").read_text()


# ---- the command line ----------------------------------------------------------------------


def framelens(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FRAMELENS_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-m", "framelens", *args], capture_output=True,
                          text=True, timeout=300, env=env)  # fmt: skip


def test_cli_compare_zones_answers_whether_fp16_changes_the_counts(tmp_path: Path) -> None:
    zones, report = tmp_path / "zones.json", tmp_path / "report"
    zones.write_text(json.dumps(ZONES_JSON))
    proc = framelens("compare", SAMPLE, "--precisions", "fp32,fp16", "--start", "160",
                     "--frames", "60", "--track", "--zones", str(zones), "--event-tolerance",
                     "3", "--quiet", "--report", str(report), cache=tmp_path / "cache")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["event_tolerance_frames"] == 3
    fp32, fp16 = (summary["variants"][k]["analytics"] for k in ("fp32", "fp16"))
    assert fp32["counts"]["lines"]["door"]["in"] == 1  # the person crossing the door
    for name, keys in (("door", ("in", "out")), ("right", ("enter", "exit", "loiter"))):
        table = "lines" if name == "door" else "zones"
        for key in keys:
            change = fp16["counts"][table][name][key] - fp32["counts"][table][name][key]
            assert fp16["vs_reference"]["count_changes"][name][key] == change
    vs = fp16["vs_reference"]
    assert vs["matched"] + len(vs["missing"]) == fp32["counts"]["events"]
    assert vs["matched"] + len(vs["extra"]) == fp16["counts"]["events"]
    assert (report / "events.csv").is_file()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--zones", "{zones}"], "--zones counts tracks: add --track"),
        (["--track", "--event-tolerance", "3"], "--event-tolerance matches the events of --zones"),
        (["--track", "--zones", "{zones}", "--event-tolerance", "-1"],
         "--event-tolerance must not be negative"),
        (["--track", "--zones", "{bad}"], "needs 2 points"),
    ],
)  # fmt: skip
def test_bad_zones_options_are_one_line_exit_2_and_leave_nothing(
    tmp_path: Path, extra: list[str], message: str
) -> None:
    zones, bad = tmp_path / "zones.json", tmp_path / "bad.json"
    zones.write_text(json.dumps(ZONES_JSON))
    bad.write_text('{"lines": [{"name": "a", "points": [[0, 0]]}]}')
    given = [a.format(zones=zones, bad=bad) for a in extra]
    report, cache = tmp_path / "report", tmp_path / "cache"
    proc = framelens("compare", SAMPLE, "--precisions", "fp32,fp16", "--frames", "2",
                     "--report", str(report), *given, cache=cache)  # fmt: skip
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json", "zones.json"]
