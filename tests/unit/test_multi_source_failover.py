"""A device failing in the middle of a run of several sources: its sources go on on
another GPU of the run, or on the CPU, each from the frame it had reached; nothing lost,
nothing written twice, one message (issue: two GPUs, the GPU-failure path).

This machine has no GPU, so each "GPU" is stood in for by real CPU pipelines, the failing
one raising GpuError on one frame as a GPU out of memory would (tests/gpu injects the
fault into the real GPU pipeline on the H200). What is tested is the move.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import av
import pytest
from framelens.core.errors import GpuError
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline import build
from framelens.core.pipeline.build import Workers
from framelens.core.pipeline.multi_run import run_many
from framelens.core.pipeline.processor import FrameProcessor
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.types import Frame, FrameResult, StageTimes
from media_factory import encode_frames, sample_frames

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
FRAMES = 30
FAIL_AT = 11  # the failing device's pipeline raises on this frame of any of its sources


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Three 30-frame clips of the sample where the person is in view, each its own."""
    folder = tmp_path_factory.mktemp("clips")
    return [
        str(encode_frames(folder / f"clip{n}.mp4", sample_frames(SAMPLE, range(s, s + FRAMES))))
        for n, s in enumerate((290, 330, 600))
    ]


def failing(settings: PipelineSettings, at: int | None) -> FrameProcessor:
    """A real CPU pipeline that raises GpuError on frame ``at`` of any source."""
    pipeline = build.host_pipeline(settings)
    real = pipeline.infer_batch

    def infer_batch(frames: list[Frame], times: list[StageTimes]) -> list[FrameResult]:
        if any(f.index == at for f in frames):
            raise GpuError(f"frame {at}: out of memory (injected)")
        return real(frames, times)

    pipeline.infer_batch = infer_batch  # type: ignore[method-assign]
    return pipeline


def stand_ins(monkeypatch: pytest.MonkeyPatch, fail_at: dict[str, int | None]) -> list[str]:
    """Stand-in GPUs (CPU pipelines in fact), device -> the frame it fails on (None:
    works). Returns the devices workers were built for, in order."""
    real = build.workers
    built: list[str] = []

    def workers(settings: PipelineSettings, **kw: Any) -> Workers:
        built.append(settings.device)
        if settings.device not in fail_at:
            return real(settings, **kw)
        cpu = replace(settings, device="cpu", threads=1)
        at = fail_at[settings.device]
        return Workers([failing(cpu, at)], f"gpu pipeline (stand-in {settings.device})")

    monkeypatch.setattr(build, "workers", workers)
    return built


@pytest.fixture
def stand_in_gpus(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """cuda:0 fails at FAIL_AT, cuda:1 works."""
    return stand_ins(monkeypatch, {"cuda:0": FAIL_AT, "cuda:1": None})


def frames_of(path: Path) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = json.loads(path.read_text())["frames"]
    return frames


def video_frames(path: Path) -> int:
    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


def assert_same(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> None:
    assert [f["index"] for f in a] == [f["index"] for f in b]
    for fa, fb in zip(a, b, strict=True):
        assert [d["label"] for d in fa["detections"]] == [d["label"] for d in fb["detections"]]
        for x, y in zip(fa["detections"], fb["detections"], strict=True):
            assert max(abs(p - q) for p, q in zip(x["box"], y["box"], strict=True)) < 0.05


@pytest.mark.parametrize(
    ("devices", "goes_to"),
    [(["cuda:0", "cuda:1"], "cuda:1 with 2 sources"), (["cuda:0"], "the CPU with 3 sources")],
)
def test_a_failing_device_hands_its_sources_on_from_where_each_stopped(
    clips: list[str],
    tmp_path: Path,
    stand_in_gpus: list[str],
    devices: list[str],
    goes_to: str,
) -> None:
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)
    messages: list[str] = []
    summary = run_many(
        clips, settings, str(tmp_path / "moved"), devices=devices, progress=False,
        on_message=messages.append,
    )  # fmt: skip
    moves = [m for m in messages if m.startswith("cuda:0 failed")]
    assert len(moves) == 1 and "\n" not in moves[0], messages
    assert f"frame {FAIL_AT}: out of memory" in moves[0]
    assert f"going on on {goes_to}, each from the frame it had reached" in moves[0]
    assert stand_in_gpus.count("cuda:0") == 1  # built once, then its sources moved
    assert [s["frames"] for s in summary["sources"]] == [FRAMES] * 3
    assert not any("error" in s for s in summary["sources"])
    reference = run_many(clips, settings, str(tmp_path / "cpu"), progress=False)
    found = 0
    for entry in reference["sources"]:
        name = entry["name"]
        moved = frames_of(tmp_path / "moved" / f"{name}.json")
        assert [f["index"] for f in moved] == list(range(FRAMES))  # none lost, none twice
        assert_same(moved, frames_of(tmp_path / "cpu" / f"{name}.json"))
        assert video_frames(tmp_path / "moved" / f"{name}.mp4") == FRAMES
        found += sum(len(f["detections"]) for f in moved)
    assert found > 30  # the person is in view: the comparison compared boxes
    assert not list((tmp_path / "moved").glob(".*"))  # no staging files left


def test_a_source_moved_to_a_gpu_that_fails_too_goes_on_on_the_cpu_not_back(
    clips: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cuda:0 fails at frame 11 and hands its sources to cuda:1, which fails at frame 20:
    they go on on the CPU, not back to cuda:0 (cuda:1's own sources do go to cuda:0,
    which they have not seen fail, and finish there)."""
    built = stand_ins(monkeypatch, {"cuda:0": FAIL_AT, "cuda:1": 20})
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)
    messages: list[str] = []
    summary = run_many(
        clips, settings, str(tmp_path / "out"), devices=["cuda:0", "cuda:1"], progress=False,
        on_message=messages.append,
    )  # fmt: skip
    moves = [m for m in messages if " failed (frame " in m]
    assert sorted(m.split(" failed")[0] for m in moves) == ["cuda:0", "cuda:1", "cuda:1"]
    assert [d["moved_to"] for d in summary["devices"]] == [["cuda:1", "cpu"], ["cuda:0"]]
    assert built.count("cuda:0") == 2 and built.count("cuda:1") == 2 and "cpu" in built
    for entry in summary["sources"]:
        moved = frames_of(tmp_path / "out" / f"{entry['name']}.json")
        assert [f["index"] for f in moved] == list(range(FRAMES))
