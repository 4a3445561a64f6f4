"""Tracked archives, in this process: ``framelens batch --track`` over real clips of the
person sample (real YOLOX-Nano, real ByteTrack), the Parquet dataset's ``track_id``
against single tracked runs of the same files, ``framelens query --track-id`` and
``--tracks`` read back through pyarrow, and a tracked batch over an untracked archive
doing its inputs again. (Ray, where long files are split, is tests/unit/test_archive_ray.py:
a tracked file is never split.)"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from archive_media import json_rows, parquet_rows, sample_clip, sorted_rows
from framelens.cli import main
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.archive import archive_tracks, query_detections, run_batch
from framelens.core.sessions.runs import run_to_outputs
from framelens.core.stages.tracking.settings import TrackerSettings

FRAMES = 24


@pytest.fixture(scope="module")
def settings() -> PipelineSettings:
    return PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    folder = tmp_path_factory.mktemp("tracked_archive")
    return [sample_clip(folder / "a.mp4", 290, FRAMES), sample_clip(folder / "b.mp4", 600, FRAMES)]


@pytest.fixture(scope="module")
def single(
    clips: list[str], settings: PipelineSettings, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """Each clip's detections JSON from a tracked single run."""
    folder = tmp_path_factory.mktemp("tracked_single")
    out = {}
    for clip in clips:
        out[clip] = folder / f"{Path(clip).stem}.json"
        run_to_outputs(clip, settings, detections=str(out[clip]), tracker=TrackerSettings())
    return out


@pytest.fixture(scope="module")
def tracked(clips: list[str], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The clips batched with --track by the command line, and what it said."""
    out = tmp_path_factory.mktemp("batch") / "results"
    code = main(["batch", *clips, "--output", str(out), "--threads", "1", "--quiet", "--track"])
    assert code == 0
    return out, clips


def test_a_tracked_batch_records_each_boxs_track_id_in_parquet_as_single_runs_do(
    tracked: tuple[Path, list[str]], single: dict[str, Path]
) -> None:
    out, clips = tracked
    rows = parquet_rows(out)
    expected = sorted_rows([r for clip in clips for r in json_rows(single[clip], clip)])
    assert rows == expected  # the same boxes with the same track IDs, through pyarrow
    for clip in clips:  # IDs from 1 in each input
        ids = {r["track_id"] for r in rows if r["source"] == clip and r["track_id"] >= 1}
        assert ids and min(ids) == 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert all(e["settings"]["tracker"]["kind"] == "bytetrack" for e in manifest["inputs"])


def test_query_selects_a_track_and_lists_the_tracks_per_input(
    tracked: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    out, clips = tracked
    rows = parquet_rows(out)
    tracks = archive_tracks(out)
    # every (input, ID) of the rows, once, with its span, class and boxes
    per_track = Counter((r["source"], r["track_id"]) for r in rows if r["track_id"] >= 1)
    assert {(t.source, t.track_id): t.boxes for t in tracks} == dict(per_track)
    for t in tracks:
        mine = [r for r in rows if (r["source"], r["track_id"]) == (t.source, t.track_id)]
        assert (t.first_frame, t.last_frame) == (min(r["frame"] for r in mine),
                                                 max(r["frame"] for r in mine))  # fmt: skip
        assert t.duration_s == pytest.approx(
            max(r["pts"] for r in mine) - min(r["pts"] for r in mine)
        )
        assert t.label == Counter(r["label"] for r in mine).most_common(1)[0][0]

    hits = query_detections(out, track_id=1)
    assert {h.source for h in hits} == set(clips)  # each input's track 1, named by its source
    assert sorted((h.source, h.frame) for h in hits) == sorted(
        (r["source"], r["frame"]) for r in rows if r["track_id"] == 1
    )
    assert main(["query", str(out), "--track-id", "1", "--source", f"*{Path(clips[1]).name}"]) == 0
    printed, err = capsys.readouterr()
    lines = printed.splitlines()
    assert lines and all(line.startswith(clips[1] + "\t") and " #1\t" in line for line in lines)
    assert len(lines) == sum(1 for h in hits if h.source == clips[1])
    assert err.strip() == f"framelens: {len(lines)} detection{'s' if len(lines) > 1 else ''}"

    assert main(["query", str(out), "--tracks"]) == 0
    printed, err = capsys.readouterr()
    assert printed.splitlines() == [t.line() for t in tracks]
    assert f"\t#1\t{tracks[0].label}\tframes {tracks[0].first_frame}-" in printed
    assert err.strip() == f"framelens: {len(tracks)} tracks"


def test_an_untracked_archive_has_null_track_ids_and_a_tracked_batch_does_it_again(
    clips: list[str], settings: PipelineSettings, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    out = tmp_path / "plain"
    run_batch(clips[:1], out, settings)
    assert {r["track_id"] for r in parquet_rows(out)} == {None}
    assert main(["query", str(out), "--tracks"]) == 0
    assert "the archive holds no tracks (batch it with --track)" in capsys.readouterr().err
    assert main(["query", str(out), "--track-id", "1"]) == 0
    assert "the archive was not tracked" in capsys.readouterr().err
    again = run_batch(clips[:1], out, settings, tracker=TrackerSettings())
    assert again.done == 1 and again.skipped == 0  # other results: not "done already"
    assert {r["track_id"] for r in parquet_rows(out)} - {None, -1}


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["batch", "IN", "--output", "OUT", "--new-track-threshold", "0.5"],
         "--new-track-threshold: options of the tracker: add --track"),
        (["query", "OUT", "--track-id", "0"], "--track-id: track IDs start at 1"),
        (["query", "OUT", "--tracks", "--min-score", "0.5"], "--tracks lists whole tracks"),
    ],
)  # fmt: skip
def test_bad_archive_tracking_options_are_refused_in_one_line(
    tracked: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str],
    args: list[str], says: str,
) -> None:  # fmt: skip
    out, clips = tracked
    args = [str(out) if a == "OUT" else clips[0] if a == "IN" else a for a in args]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err, err


def test_an_archive_written_before_track_ids_reads_back_with_them_null(tmp_path: Path) -> None:
    """A Parquet file of the columns before ``track_id`` (an archive batched by an
    earlier FrameLens) is still queried, its rows untracked."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from framelens.core.sessions.archive.parquet import DETECTIONS_DIR, schema

    before = schema().remove(schema().get_field_index("track_id"))
    row = {"source": "old.mp4", "frame": 3, "pts": 0.3, "class_id": 0, "label": "person",
           "score": 0.9, "x1": 1.0, "y1": 2.0, "x2": 3.0, "y2": 4.0, "model": "yolox-nano",
           "precision": "fp32"}  # fmt: skip
    (tmp_path / DETECTIONS_DIR).mkdir()
    table = pa.table({name: [row[name]] for name in before.names}, schema=before)
    pq.write_table(table, tmp_path / DETECTIONS_DIR / "old.parquet")
    hits = query_detections(tmp_path)
    assert len(hits) == 1 and hits[0].track_id is None and hits[0].frame == 3
    assert "#" not in hits[0].line()
    assert archive_tracks(tmp_path) == [] and query_detections(tmp_path, track_id=1) == []
