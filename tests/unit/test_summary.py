"""A run's summary is built from its devices' typed parts, each fact held once: what a
device did (its sources' outcomes, frames, speed, engine calls, how it ran and the plan
it followed) lives in its DeviceSummary, and the run reads it from there, so the JSON a
user gets and the parts cannot disagree."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.runs import run_many, run_to_outputs
from framelens.core.sessions.summary import DeviceSummary, RunSummary
from media_factory import sample_clips

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
FRAMES = 8


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return sample_clips(tmp_path_factory.mktemp("clips"), SAMPLE, (290, 330, 600), FRAMES)


def test_no_fact_of_a_device_is_copied_into_the_run_summary() -> None:
    """The run holds its parts and what only the run knows (what was asked, the whole
    call's time, the variant); nothing a device part holds is a field of the run too."""
    run_fields = {f.name for f in fields(RunSummary)}
    asked = {"model", "precision", "device", "variant", "tracker"}
    assert run_fields == {"devices", "wall_s", *asked}
    part_fields = {f.name for f in fields(DeviceSummary)}
    assert not (run_fields - {"device"}) & part_fields


def test_a_run_on_two_device_slots_reads_everything_from_its_parts(
    clips: list[str], tmp_path: Path
) -> None:
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)
    summary = run_many(
        clips, settings, str(tmp_path / "out"), devices=["cpu", "cpu"], videos=False,
        progress=False,
    )  # fmt: skip
    first, second = summary.devices
    assert (first.ids, second.ids) == ((0, 2), (1,))
    assert [s.name for s in summary.sources] == ["clip0", "clip1", "clip2"]  # the run's order
    assert summary.frames == first.frames + second.frames == 3 * FRAMES
    assert first.ran.plan is not None and second.ran.plan is not None
    assert summary.plan is not None and summary.plan["path"] == first.ran.plan["path"]
    both = first.ran.plan["decoders"] + second.ran.plan["decoders"]
    assert summary.plan["decoders"] == both  # every device's sources
    assert summary.path == first.ran.path == "cpu pipeline"
    assert summary.inference_workers == first.ran.workers + second.ran.workers
    calls = first.calls.calls + second.calls.calls
    assert summary.mean_batch == round((first.calls.frames + second.calls.frames) / calls, 2)
    data = json.loads(json.dumps(summary.as_json()))
    assert [d["sources"] for d in data["devices"]] == [["clip0", "clip2"], ["clip1"]]
    assert data["frames"] == 3 * FRAMES and data["plan"] == summary.plan
    assert [d["plan"] for d in data["devices"]] == [first.ran.plan, second.ran.plan]


def test_a_one_source_run_is_one_part_and_its_json_has_no_device_list(tmp_path: Path) -> None:
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)
    out = tmp_path / "dets.json"
    summary = run_to_outputs(
        str(SAMPLE), settings, detections=str(out), frames=FRAMES, progress=False
    )
    (part,) = summary.devices
    assert part.ids == (0,) and part.outcomes == summary.sources
    assert summary.fps == part.fps and summary.frames == FRAMES
    data = summary.as_json()
    assert "devices" not in data
    assert data["source"] == str(SAMPLE) and data["outputs"] == [str(out)]


def test_a_one_source_run_says_how_long_the_whole_call_took(tmp_path: Path) -> None:
    """``wall_s`` read 0.0 for every one-source run (only several-source runs set it):
    the whole call, engine and outputs included, is at least the frames' own time."""
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL))
    summary = run_to_outputs(str(SAMPLE), settings, frames=FRAMES,
                             detections=str(tmp_path / "d.json"))  # fmt: skip
    assert summary.frames == FRAMES and summary.fps > 0
    assert summary.frames / summary.fps <= summary.wall_s
    assert json.loads(json.dumps(summary.as_json()))["wall_s"] == summary.wall_s
