"""One way to open a source for the workers that take its frames, for every consumer, and
the plan of a run whose device failed says where its sources went.

Where NVDEC cannot be set up (here: no pycuda, so no CUDA stream), a run, a failover to
another GPU, playback and compare all decode on the host for the workers they have,
GPU pipelines included (they upload host frames as they do a camera's): nothing is
rebuilt. GPU pipelines are stood in for by real CPU pipelines that declare device frames
(they take host frames too, as the real one does); tests/gpu runs the real ones.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from framelens.core.errors import GpuError
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline import build
from framelens.core.pipeline.build import Workers
from framelens.core.pipeline.frame_pipeline import FramePipeline
from framelens.core.pipeline.plan import Plan
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.compare.lockstep import open_for_panes
from framelens.core.sessions.opening import SourceOpener
from framelens.core.sessions.runs import run_many, run_to_outputs
from framelens.core.types import Frame, FrameResult, StageTimes
from media_factory import sample_clips

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
FRAMES = 20
FAIL_AT = 7


class StandIn(FramePipeline):
    """A GPU pipeline's stand-in: a real CPU pipeline (raising GpuError on ``fail_at``)."""

    def __init__(self, settings: PipelineSettings, fail_at: int | None = None) -> None:
        cpu = build.host_pipeline(replace(settings, device="cpu", threads=1))
        super().__init__(settings, cpu.engine, cpu.task)
        self._fail_at = fail_at

    def infer_batch(self, frames: list[Frame], times: list[StageTimes]) -> list[FrameResult]:
        if any(f.index == self._fail_at for f in frames):
            raise GpuError(f"frame {self._fail_at}: out of memory (injected)")
        return super().infer_batch(frames, times)


class TakesDeviceFrames(StandIn):
    """... that asks for NVDEC frames, as the GPU pipeline does."""

    takes_device_frames = True


def gpu_stand_ins(
    monkeypatch: pytest.MonkeyPatch, fail_at: dict[str, int | None], *, nvdec: bool = True
) -> list[str]:
    """build.workers on the devices of ``fail_at`` gives stand-in GPU pipelines (failing
    on that frame, None: never; ``nvdec``: asking for device frames); returns the
    devices workers were asked of."""
    real = build.workers
    asked: list[str] = []

    def workers(settings: PipelineSettings, **kw: Any) -> Workers:
        planned = kw.get("planned")
        asked.append(settings.device)
        if settings.device not in fail_at:
            return real(settings, **kw)
        kind = TakesDeviceFrames if nvdec else StandIn
        pipes = [kind(settings, fail_at[settings.device])]
        return Workers(pipes, "gpu pipeline (stand-in)", planned)  # type: ignore[list-item]

    real_unavailable = build.gpu_unavailable

    def gpu_unavailable(settings: PipelineSettings) -> str | None:  # the plan's GPU path there
        return None if settings.device in fail_at else real_unavailable(settings)

    monkeypatch.setattr(build, "workers", workers)
    monkeypatch.setattr(build, "gpu_unavailable", gpu_unavailable)
    return asked


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return sample_clips(tmp_path_factory.mktemp("clips"), SAMPLE, (290, 330), FRAMES)


def settings_on(device: str) -> PipelineSettings:
    return PipelineSettings(resolve_model(DEFAULT_MODEL), device=device, threads=1)


def test_without_nvdec_a_run_keeps_its_gpu_pipelines_and_decodes_on_the_host(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The run's GPU pipelines are kept (not rebuilt as host pipelines with CUDA
    inference): the file is decoded on the host for them, one note says so."""
    asked = gpu_stand_ins(monkeypatch, {"cuda:0": None})
    messages: list[str] = []
    out = tmp_path / "dets.json"
    summary = run_to_outputs(
        str(SAMPLE), settings_on("cuda:0"), detections=str(out), frames=FRAMES,
        progress=False, on_message=messages.append,
    )  # fmt: skip
    assert asked == ["cuda:0"]  # built once, as planned
    assert summary.path == "gpu pipeline (stand-in), decoder cpu"
    assert len(messages) == 1 and messages[0].startswith("NVDEC not used ("), messages
    assert "the GPU pipeline uploads the frames" in messages[0]
    assert summary.plan is not None
    assert summary.plan["decoders"][0]["value"] == "nvdec"  # the plan; the note departs from it
    frames = json.loads(out.read_text())["frames"]
    assert [f["index"] for f in frames] == list(range(FRAMES))


def test_a_gpu_taking_moved_sources_without_nvdec_decodes_them_on_the_host(
    clips: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """cuda:0 fails; cuda:1 has no NVDEC: the sources go on on cuda:1's pipelines,
    decoded on the host (the same policy as at the start), not passed over for the CPU."""
    asked = gpu_stand_ins(monkeypatch, {"cuda:0": FAIL_AT, "cuda:1": None})
    messages: list[str] = []
    summary = run_many(
        clips, settings_on("cuda:0"), str(tmp_path / "out"), devices=["cuda:0", "cuda:1"],
        videos=False, progress=False, on_message=messages.append,
    )  # fmt: skip
    assert "cpu" not in asked, (asked, messages)
    assert any("going on on cuda:1" in m for m in messages), messages
    assert all(s.frames == FRAMES and s.error is None for s in summary.sources)


def test_the_plan_after_a_move_says_where_the_sources_went_and_why(
    clips: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The run's plan (framelens run -v, the summary's plan) is made again for the device
    the sources moved to: its path and decoders, and the move with its reason."""
    gpu_stand_ins(monkeypatch, {"cuda:0": FAIL_AT}, nvdec=False)
    plans: list[Plan] = []
    summary = run_many(
        clips, settings_on("cuda:0"), str(tmp_path / "out"), videos=False, progress=False,
        on_plan=lambda _slot, plan: plans.append(plan),
    )  # fmt: skip
    assert [p.settings.device for p in plans] == ["cuda:0", "cpu"]
    moved = plans[-1]
    assert moved.path.value == "cpu pipeline"
    assert [c.value for _, c in moved.decoders] == ["cpu", "cpu"]
    line = moved.lines()[-1]
    assert line.startswith("moved to: the CPU (cuda:0 failed (frame 7: out of memory")
    assert line.endswith("each source from the frame it had reached)")
    assert moved.batch.value == plans[0].batch.value  # the run's batch, kept
    assert summary.plan is not None
    assert summary.plan["path"]["value"] == "cpu pipeline"
    assert [m["value"] for m in summary.plan["moves"]] == ["the CPU"]
    assert "moves" not in plans[0].as_json()


def test_compare_opens_on_the_host_by_the_plans_rule_for_shared_frames() -> None:
    """Compare's panes share each frame: the opener decodes it on the host even for GPU
    pipelines, and the plan's rule says why."""
    choice = SourceOpener(None, shared=True).choice(str(SAMPLE))
    assert choice.value == "cpu" and "every pane takes each frame" in choice.why
    with open_for_panes(str(SAMPLE)) as source:
        assert source.read() is not None
        assert source.info.kind == "file"


def test_playback_moved_off_a_failed_gpu_shows_the_move_in_its_plan() -> None:
    """The player's move takes the session's policy and its plan (the status bar's
    tooltip) says where it went and why, as a run's does."""
    import threading

    from framelens.core.sessions.playback.player import Player, PlayerState

    states: list[PlayerState] = []
    errors: list[str] = []
    changed = threading.Condition()

    def on_state(state: PlayerState) -> None:
        with changed:
            states.append(state)
            changed.notify_all()

    def wait(test: Any) -> None:
        with changed:
            assert changed.wait_for(lambda: bool(states) and test(states[-1]), timeout=60)

    player = Player(lambda _: None, on_state, errors.append)
    real_build = player._build_pipelines

    def stand_ins(s: PipelineSettings) -> Any:
        if s.device.startswith("cuda"):
            return StandIn(s, FAIL_AT), [StandIn(s, FAIL_AT)]
        return real_build(s)

    player._build_pipelines = stand_ins  # type: ignore[method-assign]
    try:
        player.open(str(SAMPLE), settings_on("cuda:0"))
        wait(lambda s: s.index >= 0)
        player.set_realtime(False)
        player.play()
        wait(lambda s: s.device == "cpu" and s.index > FAIL_AT + 2)
    finally:
        player.close()
    plan = states[-1].plan
    assert any(line.startswith("path: cpu pipeline") for line in plan), plan
    assert plan[-1].startswith(f"moved to: the CPU (cuda:0 failed (frame {FAIL_AT}: out of"), plan
    assert errors[0].startswith(f"GPU failed (frame {FAIL_AT}")
