"""Events in archives: ``framelens batch --track --zones`` writes each input's events as
Parquet in DIR/events/ (real YOLOX-Nano, real ByteTrack, real clips of the person
sample) with the counts in the manifest and the summary, and ``framelens query --event``
lists them with each filter (on a dataset of events made here, row by row, so every
expected line is known). Ray is tests/unit/test_archive_ray.py."""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from archive_media import leftovers, sample_clip
from framelens.cli import main
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.archive import EventRow, query_events, run_batch
from framelens.core.sessions.archive.events import ParquetEvents
from framelens.core.sessions.runs import run_to_outputs
from framelens.core.stages.analytics import Event, parse_zones
from framelens.core.stages.tracking.settings import TrackerSettings

FRAMES = 50
# one-by-one-person-detection.mp4 (768x432): a person crosses x = 600 left to right
# around frame 190, the next around 440 (tests/unit/test_cli_analytics.py): each clip
# starts 25 frames before one crossing
STARTS = {"a": 165, "b": 415}
ZONES = {
    "lines": [{"name": "door", "points": [[600, 432], [600, 200]], "classes": ["person"]}],
    "zones": [{"name": "right", "polygon": [[600, 200], [768, 200], [768, 432], [600, 432]]}],
}


@pytest.fixture(scope="module")
def settings() -> PipelineSettings:
    return PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("crossings")
    return {n: sample_clip(folder / f"{n}.mp4", s, FRAMES) for n, s in STARTS.items()}


@pytest.fixture(scope="module")
def zones_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("zones") / "zones.json"
    path.write_text(json.dumps(ZONES))
    return path


@pytest.fixture(scope="module")
def single(
    clips: dict[str, str], settings: PipelineSettings, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[list[dict[str, str]], dict[str, Any]]]:
    """Each clip's events CSV rows and counts from its own `framelens run --zones`."""
    folder = tmp_path_factory.mktemp("single")
    spec = parse_zones(ZONES, labels=settings.model.labels)
    out = {}
    for name, clip in clips.items():
        events = folder / f"{name}.events.csv"
        summary = run_to_outputs(clip, settings, tracker=TrackerSettings(), zones=spec,
                                 events=str(events))  # fmt: skip
        with events.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        analytics = summary.sources[0].analytics
        assert analytics is not None
        out[clip] = (rows, analytics)
    return out


@pytest.fixture(scope="module")
def batched(
    clips: dict[str, str], zones_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, str]:
    """The clips batched by the command line with --track --zones, and its stderr."""
    out = tmp_path_factory.mktemp("batch") / "results"
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["batch", *clips.values(), "--output", str(out), "--threads", "1",
                     "--quiet", "--track", "--zones", str(zones_file)])  # fmt: skip
    assert code == 0, err.getvalue()
    return out, err.getvalue()


def event_rows(out: Path) -> list[dict[str, Any]]:
    import pyarrow.dataset as pads

    table = pads.dataset(str(out / "events"), format="parquet").to_table()
    return sorted(table.to_pylist(), key=lambda r: (r["source"], r["frame"], r["kind"]))


def test_a_batch_with_zones_writes_each_inputs_events_as_parquet_as_single_runs_do(
    batched: tuple[Path, str], clips: dict[str, str], single: dict[str, Any]
) -> None:
    out, _ = batched
    assert sorted(p.name for p in (out / "events").iterdir()) == ["a.parquet", "b.parquet"]
    rows = event_rows(out)
    assert list(rows[0]) == ["source", "frame", "time_s", "track_id", "class", "kind", "name",
                             "direction"]  # the events CSV's columns and the source  # fmt: skip
    expected = [
        {"source": clip, **r, "frame": int(r["frame"]), "track_id": int(r["track_id"])}
        for clip in clips.values()
        for r in single[clip][0]
    ]
    got = [{**r, "time_s": f"{r['time_s']:.3f}"} for r in rows]  # the CSV's 3 decimals
    assert got == sorted(expected, key=lambda r: (r["source"], r["frame"], r["kind"]))
    # each clip: the person crosses the door inwards and enters the zone, on the same frame
    for clip in clips.values():
        mine = [(r["kind"], r["name"], r["direction"], r["class"]) for r in rows
                if r["source"] == clip]  # fmt: skip
        assert mine == [("cross", "door", "in", "person"), ("enter", "right", "", "person")]
        frames = {r["frame"] for r in rows if r["source"] == clip}
        assert len(frames) == 1 and abs(frames.pop() - 25) <= 10
    assert leftovers(out) == []


def test_the_manifest_and_the_summary_hold_each_inputs_counts(
    batched: tuple[Path, str], clips: dict[str, str], single: dict[str, Any]
) -> None:
    out, said = batched
    manifest = json.loads((out / "manifest.json").read_text())
    for entry in manifest["inputs"]:
        assert entry["analytics"] == single[entry["path"]][1]  # a single run's counts
        assert entry["analytics"]["lines"]["door"]["by_class"] == {"person": {"in": 1, "out": 0}}
        assert entry["settings"]["zones"]["lines"][0]["name"] == "door"
        assert "events/" + Path(entry["path"]).stem + ".parquet" in entry["outputs"]
    assert "framelens: counts: door in 2, out 0; right enter 2, exit 0, loiter 0" in said


def test_a_batch_again_skips_its_inputs_with_their_counts_and_other_zones_redo_them(
    clips: dict[str, str], settings: PipelineSettings, tmp_path: Path
) -> None:
    clip = clips["a"]
    out = tmp_path / "results"
    spec = parse_zones(ZONES, labels=settings.model.labels)
    first = run_batch([clip], out, settings, tracker=TrackerSettings(), zones=spec)
    stale = out / "events" / ".a.partial-0123abcd.parquet"  # what a killed writer leaves
    stale.write_bytes(b"PAR1")
    again = run_batch([clip], out, settings, tracker=TrackerSettings(), zones=spec)
    assert not stale.exists()  # swept at the batch's end
    assert (again.skipped, again.frames) == (1, 0)
    assert again.inputs[0].analytics == first.inputs[0].analytics
    counts = again.counts
    assert counts is not None and counts.lines == {"door": {"in": 1, "out": 0}}
    # the line drawn the other way round: the crossing is now "out", and the input is redone
    turned = {"lines": [{**ZONES["lines"][0], "points": [[600, 200], [600, 432]]}]}
    other = run_batch([clip], out, settings, tracker=TrackerSettings(),
                      zones=parse_zones(turned, labels=settings.model.labels))  # fmt: skip
    assert (other.skipped, other.frames) == (0, FRAMES)
    assert [(r["kind"], r["direction"]) for r in event_rows(out)] == [("cross", "out")]
    assert other.counts is not None and other.counts.lines == {"door": {"in": 0, "out": 1}}
    # without zones: no events, none counted, and the events of before are gone
    plain = run_batch([clip], out, settings, tracker=TrackerSettings())
    assert plain.inputs[0].analytics is None and plain.counts is None
    assert list((out / "events").glob("*.parquet")) == []


def test_zones_without_a_tracker_are_one_line_exit_2_and_nothing_written(
    clips: dict[str, str], zones_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results"
    code = main(["batch", clips["a"], "--output", str(out), "--quiet", "--zones",
                 str(zones_file)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and err.strip() == "framelens: error: --zones counts tracks: add --track"
    assert not out.exists()


# ---- query --event, on events made here -------------------------------------------------


def _archive(folder: Path) -> Path:
    """An archive of two inputs' events (the batch's writer, the batch's manifest file)."""
    labels = ["person", "car"]
    made = {
        "cam1/north.mp4": [
            Event(10, 1.0, 1, 1, "cross", "gate", "in"),
            Event(12, 1.2, 2, 0, "cross", "gate", "out"),
            Event(12, 1.2, 2, 0, "enter", "bay"),
            Event(40, 4.0, 2, 0, "loiter", "bay", "", 2.8),
            Event(55, 5.5, 2, 0, "exit", "bay", "", 4.3),
        ],
        "cam2/south.mp4": [
            Event(3, 0.1, 1, 1, "cross", "gate", "in"),
            Event(90, 3.0, 4, 1, "cross", "fence", "out"),
        ],
    }
    (folder / "events").mkdir(parents=True)
    for source, events in made.items():
        writer = ParquetEvents(folder / "events" / f"{Path(source).stem}.parquet",
                               {"source": source}, labels)  # fmt: skip
        writer.add_events(events)
        writer.close()
    (folder / "manifest.json").write_text('{"version": 1, "inputs": []}')
    return folder


def _lines(rows: list[EventRow]) -> list[tuple[str, int, str, str, str, str]]:
    return [(r.source, r.frame, r.label, r.kind, r.name, r.direction) for r in rows]


NORTH, SOUTH = "cam1/north.mp4", "cam2/south.mp4"


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({}, [(NORTH, 10, "car", "cross", "gate", "in"), (NORTH, 12, "person", "cross", "gate",
          "out"), (NORTH, 12, "person", "enter", "bay", ""), (NORTH, 40, "person", "loiter",
          "bay", ""), (NORTH, 55, "person", "exit", "bay", ""), (SOUTH, 3, "car", "cross",
          "gate", "in"), (SOUTH, 90, "car", "cross", "fence", "out")]),
        ({"kind": "cross", "name": "gate", "direction": "in"},
         [(NORTH, 10, "car", "cross", "gate", "in"), (SOUTH, 3, "car", "cross", "gate", "in")]),
        ({"kind": "cross", "direction": "out"}, [(NORTH, 12, "person", "cross", "gate", "out"),
                                                 (SOUTH, 90, "car", "cross", "fence", "out")]),
        ({"kind": "enter"}, [(NORTH, 12, "person", "enter", "bay", "")]),
        ({"kind": "exit"}, [(NORTH, 55, "person", "exit", "bay", "")]),
        ({"kind": "loiter", "name": "bay"}, [(NORTH, 40, "person", "loiter", "bay", "")]),
        ({"kind": "cross", "label": "person"}, [(NORTH, 12, "person", "cross", "gate", "out")]),
        ({"kind": "cross", "between": (1.0, 3.0)},
         [(NORTH, 10, "car", "cross", "gate", "in"), (NORTH, 12, "person", "cross", "gate",
          "out"), (SOUTH, 90, "car", "cross", "fence", "out")]),
        ({"source_glob": "cam2/*"}, [(SOUTH, 3, "car", "cross", "gate", "in"),
                                     (SOUTH, 90, "car", "cross", "fence", "out")]),
        ({"name": "gate", "track_id": 2}, [(NORTH, 12, "person", "cross", "gate", "out")]),
        ({"name": "nowhere"}, []),
    ],
)  # fmt: skip
def test_query_events_filters_by_kind_name_direction_class_time_source_and_track(
    tmp_path: Path, filters: dict[str, Any], expected: list[tuple[str, ...]]
) -> None:
    assert _lines(query_events(_archive(tmp_path), **filters)) == expected


def test_cli_query_event_lists_the_events_one_line_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _archive(tmp_path)
    code = main(["query", str(folder), "--event", "cross", "--name", "gate", "--direction",
                 "in", "--class", "car", "--between", "0", "2", "--source", "cam1/*"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0
    assert out.splitlines() == [f"{NORTH}\tframe 10\t1.000 s\tcar #1\tcross gate in"]
    assert err.strip() == "framelens: 1 event"
    code = main(["query", str(folder), "--event", "any", "--limit", "2"])
    out, _ = capsys.readouterr()
    assert code == 0 and len(out.splitlines()) == 2
    assert main(["query", str(folder), "--event", "cross", "--name", "bey"]) == 0
    _, err = capsys.readouterr()
    assert err.strip() == (
        "framelens: no events at bey (the archive's lines and zones with events: bay, fence, gate)"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--event", "crossing"], "--event crossing: one of cross, enter, exit, loiter, any"),
        (["--event", "cross", "--direction", "up"], "--direction up: in or out"),
        (["--event", "enter", "--direction", "in"], "--direction is a crossing's: add --event "
                                                    "cross"),
        (["--name", "gate"], "--name and --direction select events: add --event "
                             "cross|enter|exit|loiter|any"),
        (["--event", "cross", "--between", "5", "1"], "between 5 and 1: the start is after the "
                                                      "end"),
        (["--event", "cross", "--tracks"], "--event lists events: --tracks and --min-score are "
                                           "for detections"),
    ],
)  # fmt: skip
def test_bad_event_filters_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code = main(["query", str(_archive(tmp_path)), *args])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.strip() == f"framelens: error: {message}"


def test_an_archive_batched_without_zones_says_it_holds_no_events(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "manifest.json").write_text('{"version": 1, "inputs": []}')
    for _ in range(2):  # no events folder; then one emptied by a batch without --zones
        assert main(["query", str(tmp_path), "--event", "cross"]) == 0
        assert capsys.readouterr().err.strip() == (
            "framelens: the archive holds no events (batch it with --track --zones ZONES.json)"
        )
        (tmp_path / "events").mkdir(exist_ok=True)


def test_a_source_pattern_that_matches_no_input_finds_nothing_instead_of_failing(
    batched: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Arrow could not type an empty list of sources: a query naming no input's path
    ended in a traceback (detections, tracks and events alike)."""
    from framelens.core.sessions.archive import archive_tracks, query_detections

    out, _ = batched
    assert query_events(out, source_glob="*/nowhere/*") == []
    assert query_detections(out, source_glob="*/nowhere/*") == []
    assert archive_tracks(out, source_glob="*/nowhere/*") == []
    assert main(["query", str(out), "--source", "*/nowhere/*"]) == 0
    assert capsys.readouterr().err.strip() == "framelens: no detections match"
