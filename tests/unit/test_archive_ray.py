"""Archives on a real local Ray cluster (2 CPUs, started once for this module): real
clips of the person sample and a corrupt file on Ray actors; a worker's process killed
mid-file; a cancelled batch resumed; long files split at keyframes and merged; a model
the actors cannot see at the driver's path shipped to them. Every result is compared
with single runs of the same files (run_to_outputs) or a local batch."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from archive_media import corrupt_clip, json_rows, leftovers, parquet_rows, sample_clip, sorted_rows
from framelens.core.api import InputProgress, read_manifest, run_batch
from framelens.core.cache import CACHE_ENV, MODEL_FILE, read_entry
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.archive.segments import keyframes, plan
from framelens.core.sessions.runs import run_to_outputs

FRAMES = 40


@pytest.fixture(scope="module")
def worker_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The FrameLens cache of the cluster's workers (not the driver's: another node's)."""
    return tmp_path_factory.mktemp("worker-cache")


@pytest.fixture(scope="module")
def cluster(worker_cache: Path) -> Iterator[Any]:
    import logging

    import ray

    # the workers inherit the environment Ray's processes start with; the driver (this
    # process) keeps its own
    with pytest.MonkeyPatch.context() as env:
        env.setenv(CACHE_ENV, str(worker_cache))
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
            object_store_memory=256 * 1024**2,  # small results: /dev/shm kept free
        )
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def settings() -> PipelineSettings:
    return PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("footage")
    for name, start in (("a", 290), ("b", 600), ("c", 320)):
        sample_clip(folder / f"{name}.mp4", start, FRAMES)
    corrupt_clip(folder / "broken.mp4")
    return folder


@pytest.fixture(scope="module")
def single(
    clips: Path, settings: PipelineSettings, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """Each good clip's detections JSON from its own `framelens run --detections`."""
    out = tmp_path_factory.mktemp("single")
    found = {}
    for name in ("a", "b", "c"):
        path = str(clips / f"{name}.mp4")
        run_to_outputs(path, settings, detections=str(out / f"{name}.json"), progress=False)
        found[path] = out / f"{name}.json"
    return found


def expected_rows(single: dict[str, Path]) -> list[dict[str, Any]]:
    return sorted_rows([row for path, js in single.items() for row in json_rows(js, path)])


def assert_results_equal_single_runs(out: Path, single: dict[str, Path]) -> None:
    for path, alone in single.items():
        assert (out / alone.name).read_bytes() == alone.read_bytes(), path
    assert parquet_rows(out) == expected_rows(single)
    assert leftovers(out) == []


def test_a_batch_on_ray_actors_gives_the_single_runs_results_and_fails_the_corrupt_file(
    cluster: Any, clips: Path, settings: PipelineSettings, single: dict[str, Path],
    tmp_path: Path,
) -> None:  # fmt: skip
    events: list[InputProgress] = []
    out = tmp_path / "results"
    summary = run_batch([str(clips)], out, settings, ray="local", on_progress=events.append,
                        progress=False)  # fmt: skip
    assert (summary.done, summary.failed, summary.skipped) == (3, 1, 0)
    assert summary.ray == "local" and summary.frames == 3 * FRAMES
    broken = next(p for p in summary.inputs if p.state == "failed")
    assert broken.path.endswith("broken.mp4") and "not a readable video" in (broken.error or "")
    assert_results_equal_single_runs(out, single)
    # progress from inside the actors while a file is processed: frames part way, the
    # actor's name, its fps
    mid = [e for e in events if e.state == "running" and 0 < e.frames_done < e.frames_total]
    assert mid, "no progress reported by the actors mid-file"
    assert {e.worker for e in events if e.state == "running"} <= {"worker-1", "worker-2"}
    assert all(e.fps > 0 and e.frames_total == FRAMES for e in mid)
    done = {e.path: e for e in events if e.state == "done"}
    assert len(done) == 3 and all(e.frames_done == FRAMES for e in done.values())


def _kill(cluster: Any, worker: str) -> int:
    """SIGKILL the process of the Ray actor named ``worker``; returns its pid."""
    named = [a for a in cluster.util.list_named_actors(all_namespaces=True) if a["name"] == worker]
    actor = cluster.get_actor(worker, namespace=named[-1]["namespace"])
    pid = int(cluster.get(actor.pid.remote(), timeout=30))
    os.kill(pid, signal.SIGKILL)
    return pid


# serial: the kill is sent when the driver hears of frame 5; a driver slowed by tests
# beside it hears late, and the worker may have finished the file by then
@pytest.mark.serial
def test_a_worker_killed_mid_file_has_its_file_done_again_and_nothing_half_written(
    cluster: Any, clips: Path, settings: PipelineSettings, single: dict[str, Path],
    tmp_path: Path,
) -> None:  # fmt: skip
    killed: dict[str, Any] = {}
    events: list[InputProgress] = []

    def on_progress(event: InputProgress) -> None:
        events.append(event)
        if not killed and event.state == "running" and event.frames_done >= 5:
            killed.update(path=event.path, worker=event.worker, at=event.frames_done)
            killed["pid"] = _kill(cluster, event.worker)
            killed["event"] = len(events)

    out = tmp_path / "results"
    summary = run_batch([str(clips)], out, settings, ray="local", on_progress=on_progress,
                        progress=False)  # fmt: skip
    assert killed, "no worker was seen mid-file"
    assert killed["at"] < FRAMES
    assert (summary.done, summary.failed) == (3, 1)
    # the killed file started over (on the restarted actor) and went to the end
    after = [e for e in events[killed["event"] :] if e.path == killed["path"]]
    assert any(e.state == "running" and e.frames_done < killed["at"] for e in after)
    assert after[-1].state == "done" and after[-1].frames_done == FRAMES
    assert_results_equal_single_runs(out, single)


def test_a_cancelled_ray_batch_goes_back_to_pending_and_the_next_one_resumes(
    cluster: Any, clips: Path, settings: PipelineSettings, single: dict[str, Path],
    tmp_path: Path,
) -> None:  # fmt: skip
    cancel = threading.Event()

    def on_progress(event: InputProgress) -> None:
        if event.state == "running" and event.frames_done >= 5:
            cancel.set()

    out = tmp_path / "results"
    summary = run_batch([str(clips)], out, settings, ray="local", on_progress=on_progress,
                        cancel=cancel, progress=False)  # fmt: skip
    assert summary.cancelled and summary.failed == 1
    pending = [p for p in summary.inputs if p.state == "pending"]
    assert pending, summary.inputs
    assert leftovers(out) == []
    for p in pending:  # none of a cancelled input's outputs is left
        name = Path(p.path).stem
        assert not (out / f"{name}.json").exists()
        assert not (out / "detections" / f"{name}.parquet").exists()
    resumed = run_batch([str(clips)], out, settings, ray="local", progress=False)
    assert not resumed.cancelled
    assert resumed.done == len(pending) and resumed.skipped == 3 - len(pending)
    assert_results_equal_single_runs(out, single)


def test_long_files_are_split_at_keyframes_and_merged_into_the_single_runs_results(
    cluster: Any, settings: PipelineSettings, tmp_path: Path
) -> None:
    long = sample_clip(tmp_path / "long.mp4", 280, 60, gop=10)  # keyframes 0, 10, 20...
    assert keyframes(long)[:3] == [0, 10, 20]
    assert [(s.start, s.frames) for s in plan(60, keyframes(long), 25)] == [(0, 30), (30, None)]
    alone = tmp_path / "long.json"
    run_to_outputs(long, settings, detections=str(alone), progress=False)
    events: list[InputProgress] = []
    out = tmp_path / "results"
    summary = run_batch([long], out, settings, ray="local", segment_frames=20,
                        on_progress=events.append, progress=False)  # fmt: skip
    assert summary.done == 1 and summary.frames == 60
    parts = sorted(p.name for p in (out / "detections").iterdir())
    assert parts == ["long.seg0000.parquet", "long.seg0001.parquet", "long.seg0002.parquet"]
    # two workers shared the file, and the input's progress added their frames up
    assert {e.worker for e in events if e.state == "running"} == {"worker-1", "worker-2"}
    assert max(e.frames_done for e in events if e.state == "running") <= 60
    assert (out / "long.json").read_bytes() == alone.read_bytes()
    assert parquet_rows(out) == sorted_rows(json_rows(alone, long))
    assert not (out / ".segments").exists() and leftovers(out) == []


def test_a_tracked_long_file_is_not_split_and_its_tracks_go_on_across_the_boundary(
    cluster: Any, settings: PipelineSettings, tmp_path: Path
) -> None:
    """The no-split rule: a file that segments of 20 frames would cut at frames 20 and
    40 is one job when tracked (its tracks would break at the boundaries), said in the
    batch's notes; its IDs are those of a single tracked run, the person's one ID
    running across both."""
    from framelens.core.stages.tracking.settings import TrackerSettings

    long = sample_clip(tmp_path / "long.mp4", 280, 60, gop=10)
    assert [s.start for s in plan(60, keyframes(long), 20)] == [0, 20, 40]  # split untracked
    alone = tmp_path / "long.json"
    run_to_outputs(long, settings, detections=str(alone), tracker=TrackerSettings())
    out = tmp_path / "results"
    notes: list[str] = []
    summary = run_batch([long], out, settings, ray="local", segment_frames=20,
                        tracker=TrackerSettings(), on_message=notes.append)  # fmt: skip
    assert summary.done == 1 and summary.frames == 60
    assert sorted(p.name for p in (out / "detections").iterdir()) == ["long.parquet"]
    assert notes == [f"{long}: 60 frames tracked in one job, not split into segments of 20 "
                     "(tracks would break at their boundaries)"] == list(summary.notes)  # fmt: skip
    rows = parquet_rows(out)
    assert rows == sorted_rows(json_rows(alone, long))
    person = [r["track_id"] for r in rows if r["frame"] in range(15, 45)]
    assert len(person) >= 25 and set(person) == {1}  # one ID across the boundary


def test_gpu_workers_on_a_cluster_without_gpus_are_refused_in_one_line(
    cluster: Any, clips: Path, settings: PipelineSettings, tmp_path: Path
) -> None:
    from dataclasses import replace

    from framelens.core.errors import ConfigError

    on_gpu = replace(settings, device="cuda:0")  # what `--ray --device cuda` asks the workers
    with pytest.raises(ConfigError, match=r"the Ray cluster has 0 GPUs, a worker needs 0\.5"):
        run_batch([str(clips / "a.mp4")], tmp_path / "o", on_gpu, ray="local",
                  gpus_per_worker=0.5, progress=False)  # fmt: skip
    assert [p.state for p in read_manifest(tmp_path / "o")] == ["pending"]  # for a next try


def test_a_model_the_actors_cannot_see_at_the_drivers_path_travels_with_the_job(
    cluster: Any, clips: Path, settings: PipelineSettings, worker_cache: Path,
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """An FP16 variant prepared in the driver's own cache, gone (as on another node)
    by the time the cluster is reached: the actors get the model from the driver and
    give the detections of a local batch with it."""
    from dataclasses import replace

    from framelens.core.precision import prepare_variant, variant_precision
    from framelens.core.sessions.archive import ray_runner

    driver_cache = tmp_path / "driver-cache"
    variant = prepare_variant(settings.model, "fp16", cache_dir=driver_cache)
    fp16 = replace(settings, model=variant.spec, precision="fp16")
    inputs = [str(clips / "a.mp4"), str(clips / "b.mp4")]
    local = run_batch(inputs, tmp_path / "local", fp16, progress=False)
    assert (local.done, local.failed) == (2, 0)
    reach = ray_runner.connect

    def connect(address: str) -> tuple[bool, str]:
        driver_cache.rename(tmp_path / "elsewhere")  # no actor has started yet
        return reach(address)

    monkeypatch.setattr(ray_runner, "connect", connect)
    out = tmp_path / "results"
    summary = run_batch(inputs, out, fp16, ray="local", progress=False)
    assert not variant.path.exists()
    assert (summary.done, summary.failed) == (2, 0), [p.error for p in summary.inputs]
    for name in ("a", "b"):  # the same model (its hash in the JSON) and detections
        local_json = (tmp_path / "local" / f"{name}.json").read_bytes()
        assert (out / f"{name}.json").read_bytes() == local_json, name
    assert parquet_rows(out) == parquet_rows(tmp_path / "local")
    assert {r["precision"] for r in parquet_rows(out)} == {"fp16"}
    # one copy on the workers' node, keyed by its contents, still the FP16 variant
    copies = list((worker_cache / "shipped").glob(f"*/{MODEL_FILE}"))
    assert len(copies) == 1, copies
    moved = tmp_path / "elsewhere" / variant.path.relative_to(driver_cache)
    assert copies[0].read_bytes() == moved.read_bytes()
    assert variant_precision(copies[0]) == "fp16"
    assert (read_entry(copies[0].parent) or {}).get("shipped_from") == str(variant.path)


def test_a_batch_with_zones_on_ray_writes_the_local_batchs_events_and_counts(
    cluster: Any, settings: PipelineSettings, tmp_path: Path
) -> None:
    """``--track --zones`` on Ray actors: each input's events Parquet and its counts in
    the manifest are those of the same batch in this process (a person crossing the
    door around frame 190 of the sample, so each clip holds one crossing)."""
    import pyarrow.dataset as pads
    from framelens.core.stages.analytics import parse_zones
    from framelens.core.stages.tracking.settings import TrackerSettings

    zones = parse_zones(
        {"lines": [{"name": "door", "points": [[600, 432], [600, 200]]}],
         "zones": [{"name": "right", "polygon": [[600, 200], [768, 200], [768, 432],
                                                 [600, 432]]}]},
        labels=settings.model.labels,
    )  # fmt: skip
    clips = [sample_clip(tmp_path / "a.mp4", 165, 50), sample_clip(tmp_path / "b.mp4", 175, 40)]
    results = {}
    for where in ("local", None):
        out = tmp_path / f"results-{where}"
        summary = run_batch(clips, out, settings, ray=where, tracker=TrackerSettings(),
                            zones=zones)  # fmt: skip
        assert summary.done == 2
        table = pads.dataset(str(out / "events"), format="parquet").to_table()
        rows = sorted(table.to_pylist(), key=lambda r: (r["source"], r["frame"], r["kind"]))
        results[where] = (rows, [i.analytics for i in summary.inputs], read_manifest(out))
        assert leftovers(out) == []
    rows, counts, manifest = results["local"]
    assert (rows, counts) == results[None][:2]
    assert [i.analytics for i in manifest] == counts  # the manifest keeps them
    assert [(r["source"], r["kind"], r["name"], r["direction"]) for r in rows] == [
        (clip, kind, name, direction)
        for clip in clips
        for kind, name, direction in (("cross", "door", "in"), ("enter", "right", ""))
    ]
    assert [c["lines"]["door"]["in"] for c in counts if c is not None] == [1, 1]
