"""Archives at scale, in this process (no Ray): real clips of the person sample and a
corrupt file through the real YOLOX-Nano; the per-file detections and the Parquet
dataset against single runs of the same files; resume, cancel and query."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import av
import pytest
from archive_media import corrupt_clip, json_rows, leftovers, parquet_rows, sample_clip, sorted_rows
from framelens.core.api import (
    InputProgress,
    archive_labels,
    discover_inputs,
    query_detections,
    read_manifest,
    run_batch,
    search_detections,
)
from framelens.core.errors import ConfigError
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.archive.batch import DirLock
from framelens.core.sessions.runs import run_to_outputs
from framelens.core.stages.tasks import DetectParams
from media_factory import write_clip

FRAMES = 20


@pytest.fixture(scope="module")
def settings() -> PipelineSettings:
    return PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """cams/north/a.mp4, cams/south/b.mkv... as an analyst's folder: three clips of the
    sample at different places and a corrupt file."""
    root = tmp_path_factory.mktemp("archive") / "cams"
    (root / "north").mkdir(parents=True)
    (root / "south").mkdir()
    sample_clip(root / "north" / "a.mp4", 290, FRAMES)
    sample_clip(root / "north" / "b.mp4", 600, FRAMES)
    sample_clip(root / "south" / "c.mkv", 320, FRAMES)
    corrupt_clip(root / "south" / "broken.mp4")
    (root / "south" / "notes.txt").write_text("not a video")
    return root


@pytest.fixture(scope="module")
def done(
    archive: Path, settings: PipelineSettings, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, list[InputProgress], object]:
    """One batch over the archive: its folder, the events it sent and its summary."""
    out = tmp_path_factory.mktemp("results")
    events: list[InputProgress] = []
    summary = run_batch([str(archive)], out, settings, on_progress=events.append, progress=False)
    return out, events, summary


def test_inputs_are_found_in_folders_recursively_by_extension_and_in_globs(
    archive: Path, tmp_path: Path
) -> None:
    found = discover_inputs([str(archive)])
    assert [Path(p).name for p in found] == ["a.mp4", "b.mp4", "broken.mp4", "c.mkv"]
    hidden = archive / "north" / ".a.partial-0123abcd.mp4"  # a writer's temporary
    hidden.write_bytes(b"")
    try:
        glob = discover_inputs([f"{archive}/north/*.mp4", str(archive / "north" / "a.mp4")])
    finally:
        hidden.unlink()
    assert glob == [str(archive / "north" / "a.mp4"), str(archive / "north" / "b.mp4")]
    assert discover_inputs([f"{archive}/**/c.*"]) == [str(archive / "south" / "c.mkv")]
    with pytest.raises(ConfigError, match="no such file or folder"):
        discover_inputs([str(tmp_path / "missing")])
    with pytest.raises(ConfigError, match="no videos found"):
        discover_inputs([str(tmp_path)])


def test_a_batch_writes_what_single_runs_write_and_records_the_corrupt_file(
    done: tuple[Path, list[InputProgress], object], archive: Path, settings: PipelineSettings,
    tmp_path: Path,
) -> None:  # fmt: skip
    out, events, summary = done
    assert (summary.done, summary.failed, summary.skipped) == (3, 1, 0)  # type: ignore[attr-defined]
    assert summary.frames == 3 * FRAMES and not summary.cancelled  # type: ignore[attr-defined]
    states = {Path(p.path).name: p for p in read_manifest(out)}
    assert {n: s.state for n, s in states.items()} == {
        "a.mp4": "done", "b.mp4": "done", "c.mkv": "done", "broken.mp4": "failed",
    }  # fmt: skip
    error = states["broken.mp4"].error
    assert error and "\n" not in error and "broken.mp4 is not a readable video" in error
    manifest = json.loads((out / "manifest.json").read_text())
    assert all(len(e["sha256"]) == 64 for e in manifest["inputs"])
    # the events a Batch window lists: each input running on "local" with its
    # progress and fps, then done; the corrupt one failed with its reason
    running = [e for e in events if e.state == "running" and e.frames_done > 0]
    assert {Path(e.path).name for e in running} == {"a.mp4", "b.mp4", "c.mkv"}
    assert all(e.worker == "local" and e.frames_total == FRAMES and e.fps > 0 for e in running)
    last = {Path(e.path).name: e for e in events}
    assert last["a.mp4"].state == "done" and last["a.mp4"].frames_done == FRAMES
    assert last["broken.mp4"].state == "failed" and last["broken.mp4"].error == error
    # each input's detections JSON is, byte for byte, what `framelens run --detections`
    # writes for it; its Parquet rows are the same detections
    rows = []
    for path in discover_inputs([str(archive)]):
        if "broken" in path:
            continue
        alone = tmp_path / f"{Path(path).stem}.json"
        run_to_outputs(path, settings, detections=str(alone), progress=False)
        assert (out / alone.name).read_bytes() == alone.read_bytes()
        assert (out / f"{Path(path).stem}.csv").read_text().startswith("index,pts,class_id")
        rows += json_rows(alone, path)
    assert len(rows) > 3 * FRAMES  # people in every clip
    assert parquet_rows(out) == sorted_rows(rows)
    assert leftovers(out) == []


def test_a_rerun_skips_what_is_done_and_redoes_what_changed(
    done: tuple[Path, list[InputProgress], object], archive: Path, settings: PipelineSettings,
    tmp_path: Path,
) -> None:  # fmt: skip
    out = tmp_path / "results"
    shutil.copytree(done[0], out)
    again = run_batch([str(archive)], out, settings, progress=False)
    assert (again.done, again.failed, again.skipped, again.frames) == (0, 1, 3, 0)
    # a manifest of yesterday's FrameLens (no layout nor labels recorded) is not redone
    manifest = json.loads((out / "manifest.json").read_text())
    removed = [
        entry["settings"].pop(key)
        for entry in manifest["inputs"]
        if entry["state"] == "done"
        for key in ("layout", "labels_sha256")
    ]
    assert len(removed) == 6
    (out / "manifest.json").write_text(json.dumps(manifest))
    older = run_batch([str(archive)], out, settings, progress=False)
    assert (older.done, older.skipped) == (0, 3)
    before = parquet_rows(out)
    # a changed setting redoes every file; the rows are those of the new threshold
    stricter = run_batch(
        [str(archive)], out, PipelineSettings(settings.model, DetectParams(conf=0.6)),
        progress=False,
    )  # fmt: skip
    assert (stricter.done, stricter.skipped) == (3, 0)
    after = parquet_rows(out)
    assert after and min(r["score"] for r in after) > 0.6
    assert len(after) < len(before)
    # a file whose content changed is done again, the others are skipped
    b = archive / "north" / "b.mp4"
    original = b.read_bytes()
    try:
        sample_clip(b, 700, FRAMES)
        changed = run_batch(
            [str(archive)],
            out,
            PipelineSettings(settings.model, DetectParams(conf=0.6)),
            progress=False,
        )
    finally:
        b.write_bytes(original)
    redone = [p for p in changed.inputs if p.state == "done"]
    assert [Path(p.path).name for p in redone] == ["b.mp4"]
    assert changed.skipped == 2


def test_a_rerun_naming_the_files_another_way_skips_them_and_adds_nothing(
    done: tuple[Path, list[InputProgress], object], archive: Path, settings: PipelineSettings,
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The first batch named the archive by its absolute path; run again from its parent
    folder with a relative one (or the other way round), the same files are skipped,
    not done a second time under new names into the same results."""
    out = tmp_path / "results"
    shutil.copytree(done[0], out)
    before = parquet_rows(out)
    monkeypatch.chdir(archive.parent)
    again = run_batch([archive.name], out, settings, progress=False)
    assert (again.done, again.failed, again.skipped, again.frames) == (0, 1, 3, 0)
    assert parquet_rows(out) == before
    recorded = json.loads((out / "manifest.json").read_text())["inputs"]
    assert sorted(e["path"] for e in recorded) == sorted(  # the latest spelling of each
        str(Path(p).relative_to(archive.parent)) for p in discover_inputs([str(archive)])
    )
    assert sorted(p.name for p in (out / "detections").iterdir()) == sorted(
        p.name for p in (done[0] / "detections").iterdir()
    )


def test_a_cancelled_batch_keeps_nothing_half_written_and_the_next_one_resumes(
    archive: Path, settings: PipelineSettings, tmp_path: Path
) -> None:
    cancel = threading.Event()
    seen: list[InputProgress] = []

    def on_progress(event: InputProgress) -> None:
        seen.append(event)
        if event.state == "running" and event.frames_done >= 5 and "b.mp4" in event.path:
            cancel.set()  # mid-file: the second input, 5 of its 20 frames done

    out = tmp_path / "results"
    summary = run_batch([str(archive)], out, settings, on_progress=on_progress, cancel=cancel,
                        progress=False)  # fmt: skip
    assert summary.cancelled
    states = {Path(p.path).name: p.state for p in summary.inputs}
    assert states == {"a.mp4": "done", "b.mp4": "pending", "c.mkv": "pending",
                      "broken.mp4": "failed"}  # fmt: skip
    assert sorted(p.name for p in out.iterdir() if p.suffix in (".json", ".csv")) == [
        "a.csv", "a.json", "manifest.json",
    ]  # fmt: skip
    assert [p.name for p in (out / "detections").iterdir()] == ["a.parquet"]
    assert leftovers(out) == [] and not (out / ".batch.lock").exists()
    resumed = run_batch([str(archive)], out, settings, progress=False)
    assert (resumed.done, resumed.skipped, resumed.failed) == (2, 1, 1)
    assert {Path(r["source"]).name for r in parquet_rows(out)} == {"a.mp4", "b.mp4", "c.mkv"}


def test_query_finds_detections_by_class_score_source_and_time(
    done: tuple[Path, list[InputProgress], object], archive: Path
) -> None:
    out = done[0]
    rows = parquet_rows(out)
    labels = archive_labels(out)
    assert "person" in labels and labels == sorted({r["label"] for r in rows})
    people = query_detections(out, label="person", min_score=0.5)
    expected = [r for r in rows if r["label"] == "person" and r["score"] >= 0.5]
    assert len(people) == len(expected) > 0
    assert all(h.label == "person" and h.score >= 0.5 for h in people)
    north = query_detections(out, label="person", source_glob="*/north/*")
    assert {Path(h.source).name for h in north} == {"a.mp4", "b.mp4"}
    window = query_detections(out, between=(0.5, 1.0))  # 10 fps: frames 5 to 10
    assert window and {h.frame for h in window} == {5, 6, 7, 8, 9, 10}
    assert all(0.5 <= h.pts <= 1.0 for h in window)
    assert len(query_detections(out, limit=3)) == 3
    ordered = [(h.source, h.frame) for h in query_detections(out)]
    assert ordered == sorted(ordered)
    assert query_detections(out, label="giraffe") == []
    with pytest.raises(ConfigError):
        query_detections(out, between=(2.0, 1.0))
    # the results browser's search: the best few and how many in all, counted in Arrow
    best, total = search_detections(out, label="person", limit=5, order="score")
    everyone = query_detections(out, label="person")
    assert total == len(everyone) > 5
    assert best == sorted(everyone, key=lambda h: (-h.score, h.source, h.frame))[:5]
    first, same_total = search_detections(out, label="person", limit=5)
    assert first == everyone[:5] and same_total == total


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "framelens", *args], capture_output=True, text=True, timeout=600
    )


def test_a_batch_removes_its_lock_when_it_ends_and_a_second_one_meanwhile_is_refused(
    done: tuple[Path, list[InputProgress], object], archive: Path, settings: PipelineSettings,
    tmp_path: Path,
) -> None:  # fmt: skip
    out, _, _ = done
    assert not (out / ".batch.lock").exists()  # a batch that ended leaves only its outputs
    # a batch that stopped with an error removes it too
    with pytest.raises(ConfigError):  # nothing to do: the folder holds no videos
        run_batch([str(out)], out, settings, progress=False)
    assert not (out / ".batch.lock").exists()
    # while one batch holds the folder, another (a second process) is refused in one line
    held = DirLock(tmp_path)
    try:
        proc = _cli("batch", f"{archive}/north", "--output", str(tmp_path), "--device", "cpu",
                    "--quiet")  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip() == f"framelens: error: another batch is writing to {tmp_path}"
        assert not (tmp_path / "manifest.json").exists()
    finally:
        held.release()
    assert not (tmp_path / ".batch.lock").exists()
    # the lock file removed, the next holder locks a new one, and still only one at a time
    again = DirLock(tmp_path)
    try:
        with pytest.raises(ConfigError, match="another batch"):
            DirLock(tmp_path)
    finally:
        again.release()
    assert not (tmp_path / ".batch.lock").exists()


def test_cli_batch_ends_with_a_summary_and_query_prints_one_line_per_detection(
    done: tuple[Path, list[InputProgress], object], archive: Path, tmp_path: Path
) -> None:
    out = tmp_path / "cli"
    proc = _cli("batch", f"{archive}/north", str(archive / "south" / "broken.mp4"),
                "--output", str(out), "--device", "cpu", "--quiet")  # fmt: skip
    assert proc.returncode == 1, proc.stderr  # one input failed
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("framelens: batch: 2 done, 1 failed, 0 skipped;")
    assert f"{2 * FRAMES} frames" in lines[-1] and str(out) in lines[-1]
    assert any(line.startswith("framelens: failed: ") and "broken.mp4" in line for line in lines)
    again = _cli("batch", f"{archive}/north", "--output", str(out), "--device", "cpu", "--quiet")
    assert again.returncode == 0 and "0 done, 0 failed, 2 skipped" in again.stderr
    query = _cli("query", str(out), "--class", "person", "--min-score", "0.5",
                 "--source", "*/a.mp4", "--between", "0", "1")  # fmt: skip
    assert query.returncode == 0, query.stderr
    hits = query_detections(out, label="person", min_score=0.5, source_glob="*/a.mp4",
                            between=(0.0, 1.0))  # fmt: skip
    assert query.stdout.splitlines() == [h.line() for h in hits] and hits
    first = query.stdout.splitlines()[0].split("\t")
    assert first[0].endswith("a.mp4") and first[3] == "person" and len(first[5].split(",")) == 4
    none = _cli("query", str(out), "--class", "giraffe")
    assert none.returncode == 0 and none.stdout == "" and "the archive has: " in none.stderr
    for bad in (
        ["query", str(tmp_path / "nowhere")],
        ["query", str(out), "--min-score", "2"],
        ["batch", str(tmp_path / "missing.mp4"), "--output", str(out)],
        ["batch", str(archive), "--output", str(out), "--workers", "2"],
    ):
        proc = _cli(*bad)
        assert proc.returncode == 2, (bad, proc.stderr)
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_a_superres_batch_writes_the_upscaled_videos_and_no_rows(tmp_path: Path) -> None:
    clip = write_clip(tmp_path / "small.mp4", frames=6, size=(64, 48))
    settings = PipelineSettings(resolve_model("espcn-x2"), threads=1)
    summary = run_batch([str(clip)], tmp_path / "sr", settings, progress=False)
    assert summary.done == 1
    with av.open(str(tmp_path / "sr" / "small.mp4")) as video:
        stream = video.streams.video[0]
        assert (stream.codec_context.width, stream.codec_context.height) == (128, 96)
        assert sum(1 for _ in video.decode(stream)) == 6
    assert list((tmp_path / "sr" / "detections").iterdir()) == []
    assert query_detections(tmp_path / "sr") == []


def test_with_nothing_to_submit_ray_is_not_started_and_run_never_loads_it(
    archive: Path, tmp_path: Path
) -> None:
    code = (
        "import sys\n"
        "from framelens.core.api import PipelineSettings, resolve_model, run_batch\n"
        "import framelens.cli, framelens.gui.player.main_window\n"
        "assert 'ray' not in sys.modules, 'the app loaded ray'\n"
        f"s = run_batch([{str(archive / 'south' / 'broken.mp4')!r}], {str(tmp_path / 'o')!r},"
        " PipelineSettings(resolve_model('yolox-nano')), ray='local', progress=False)\n"
        "print(s.failed, 'ray' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1", "False"]


def test_segments_of_a_file_merge_into_the_detections_of_one_run(tmp_path: Path) -> None:
    """The merge a split input gets (faces: landmarks too), without Ray: two ranges of
    one file, run separately, give the JSON and CSV of the run over the whole file."""
    from framelens.core.sessions.archive.segments import keyframes, merge_parts, plan

    clip = sample_clip(tmp_path / "clip.mp4", 280, 30, gop=10)
    faces = PipelineSettings(resolve_model("yunet"), threads=1)
    segments = plan(30, keyframes(clip), 12)
    assert [(s.start, s.frames) for s in segments] == [(0, 20), (20, None)]
    parts = []
    for s in segments:
        part = tmp_path / f"part{s.index}.json"
        run_to_outputs(clip, faces, detections=str(part), start=s.start, frames=s.frames,
                       progress=False)  # fmt: skip
        parts.append(part)
    whole = [tmp_path / "whole.json", tmp_path / "whole.csv"]
    for target in whole:
        run_to_outputs(clip, faces, detections=str(target), progress=False)
    merged = [tmp_path / "merged.json", tmp_path / "merged.csv"]
    merge_parts(parts, [s.stop for s in segments], merged, faces.model.labels, faces=True)
    assert json.loads(whole[0].read_text())["frames"][0]["detections"][0]["landmarks"]
    assert merged[0].read_bytes() == whole[0].read_bytes()
    assert merged[1].read_bytes() == whole[1].read_bytes()


def test_a_rerun_redoes_what_other_labels_or_layout_would_change(
    done: tuple[Path, list[InputProgress], object], archive: Path, settings: PipelineSettings,
    tmp_path: Path,
) -> None:  # fmt: skip
    """--labels renames the classes of the rows and --layout decides how the outputs are
    read: a batch with other ones is a change of settings, not a file to skip."""
    from dataclasses import replace

    from framelens.core.sessions.archive.manifest import settings_record

    out = tmp_path / "results"
    shutil.copytree(done[0], out)
    renamed = tuple("pedestrian" if n == "person" else n for n in settings.model.labels)
    relabelled = replace(settings, model=replace(settings.model, labels=renamed))
    again = run_batch([str(archive)], out, relabelled, progress=False)
    assert (again.done, again.skipped) == (3, 0)
    assert {r["label"] for r in parquet_rows(out)} >= {"pedestrian"}
    assert "person" not in archive_labels(out)
    other = replace(settings, model=replace(settings.model, layout="yolov5"))
    record = settings_record(settings, export_video=False)
    assert settings_record(other, export_video=False) != record


def test_the_manifest_on_disk_says_done_failed_or_pending(tmp_path: Path) -> None:
    """An input being processed is "pending" in DIR/manifest.json (what a batch whose
    driver was killed leaves for the next one, and for the window reading it)."""
    from framelens.core.sessions.archive.manifest import Manifest

    manifest = Manifest(tmp_path)
    for path, state in (("a.mp4", "done"), ("b.mp4", "running"), ("c.mp4", "failed")):
        manifest.entry(path).state = state  # type: ignore[assignment]
    manifest.save()
    rows = json.loads((tmp_path / "manifest.json").read_text())["inputs"]
    assert [(r["path"], r["state"]) for r in rows] == [
        ("a.mp4", "done"), ("b.mp4", "pending"), ("c.mp4", "failed"),
    ]  # fmt: skip
    assert manifest.entry("b.mp4").state == "running"  # the batch's own view is kept
    assert [p.state for p in read_manifest(tmp_path)] == ["done", "pending", "failed"]


def test_cli_batch_of_faces_takes_the_faces_model_and_ray_options_need_ray(
    archive: Path, tmp_path: Path
) -> None:
    out = tmp_path / "faces"
    proc = _cli("batch", str(archive / "north" / "a.mp4"), "--task", "faces",
                "--output", str(out), "--device", "cpu", "--quiet")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (entry,) = json.loads((out / "manifest.json").read_text())["inputs"]
    assert (entry["settings"]["model"], entry["settings"]["task"]) == ("yunet", "faces")
    assert set(archive_labels(out)) <= {"face"}
    assert json.loads((out / "a.json").read_text())["model"] == "yunet"
    for extra in (["--gpus-per-worker", "0.5"], ["--segment-frames", "100"]):
        bad = _cli("batch", str(archive / "north" / "a.mp4"), "--output", str(out), *extra)
        assert bad.returncode == 2 and "--ray" in bad.stderr, (extra, bad.stderr)
        assert bad.stderr.count("\n") == 1
    on_cpu = _cli("batch", str(archive / "north" / "a.mp4"), "--output", str(out), "--ray",
                  "local", "--device", "cpu", "--gpus-per-worker", "0.5")  # fmt: skip
    assert on_cpu.returncode == 2 and "cuda" in on_cpu.stderr, on_cpu.stderr


def test_results_folder_holding_the_inputs_is_refused_and_left_as_it_was(
    tmp_path: Path, settings: PipelineSettings
) -> None:
    """``framelens batch videos/ --output videos/``: the results folder's own files are
    never inputs, so nothing is left to run; the refusal says why in one line and leaves
    no empty detections/ or events/ folder among the analyst's videos."""
    sample_clip(tmp_path / "a.mp4", 290, 2)
    with pytest.raises(ConfigError, match=r"inside the results folder .*: choose a results"):
        run_batch([str(tmp_path)], tmp_path, settings, progress=False)
    assert [p.name for p in tmp_path.iterdir()] == ["a.mp4"]
