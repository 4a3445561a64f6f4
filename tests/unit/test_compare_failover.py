"""Compare's panes under a GPU failure: the pane goes on on another GPU of the comparison,
else the CPU, from the frame it reached, as every session's sources do (one failover
policy, core/sessions/failover.py), and the report says so."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from framelens.core.errors import GpuError
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.types import FrameResult
from media_factory import sample_clips

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return sample_clips(tmp_path_factory.mktemp("failover_clips"), SAMPLE, (320, 600), 12)


@pytest.fixture(scope="module")
def settings() -> PipelineSettings:
    return PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)


class FailsOnTheGpu:
    """A pane's pipeline as a GPU that runs out of memory at ``fail_at``: a real CPU
    pipeline underneath, its settings those of cuda:0."""

    def __init__(self, inner: Any, fail_at: int) -> None:
        self.inner, self.fail_at = inner, fail_at
        self.settings = replace(inner.settings, device="cuda:0")

    def infer(self, frame: Any, times: Any) -> FrameResult:
        if frame.index == self.fail_at:
            raise GpuError(f"frame {frame.index}: out of memory (injected)")
        result: FrameResult = self.inner.infer(frame, times)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.parametrize("fail_at", [3, 0])
def test_a_compare_pane_whose_gpu_fails_goes_on_on_the_cpu_from_that_frame(
    clips: list[str],
    settings: PipelineSettings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fail_at: int,
) -> None:
    """At frame 3, or at frame 0: the pane's first call at the video's size (its untimed
    warm-up), where an engine that builds its kernels per input size (a heavy
    super-resolution model's, which makes no warm-up call when built) fails."""
    from framelens.core.pipeline import build
    from framelens.core.pipeline.compare.panes import PaneSpec
    from framelens.core.sessions.compare.to_report import compare_to_report

    real = build.pane_pipeline

    def pane_pipeline(pane_settings: PipelineSettings) -> Any:
        if pane_settings.device == "cuda:0":
            return FailsOnTheGpu(real(replace(pane_settings, device="cpu")), fail_at=fail_at)
        return real(pane_settings)

    monkeypatch.setattr(build, "pane_pipeline", pane_pipeline)
    panes = [PaneSpec("cpu", settings), PaneSpec("gpu", replace(settings, device="cuda:0"))]
    summary = compare_to_report(clips[1], panes, tmp_path / "report", frames=8, progress=False)
    assert summary["frames"] == 8  # every frame compared, none lost to the failure
    assert summary["notes"] == [
        f"gpu: cuda:0 failed (frame {fail_at}: out of memory (injected)); going on on the CPU "
        f"from frame {fail_at}"
    ]
    assert summary["variants"]["gpu"]["f1"] == 1.0  # the same model on the CPU: the same boxes


class RunsOnAnotherGpu:
    """A pane's pipeline on a second GPU that works: a real CPU pipeline underneath, its
    settings those of ``device``."""

    def __init__(self, inner: Any, device: str) -> None:
        self.inner = inner
        self.settings = replace(inner.settings, device=device)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_compare_pane_whose_gpu_fails_moves_to_another_gpu_of_the_comparison(
    clips: list[str], settings: PipelineSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session's one failover policy: another GPU the comparison uses before the CPU
    (its panes stand on cuda:0, which fails at frame 3, and on cuda:1)."""
    from framelens.core.pipeline import build
    from framelens.core.pipeline.compare.panes import PaneSpec
    from framelens.core.sessions.compare.to_report import compare_to_report

    real = build.pane_pipeline
    made: list[str] = []

    def pane_pipeline(pane_settings: PipelineSettings) -> Any:
        made.append(pane_settings.device)
        cpu = real(replace(pane_settings, device="cpu", backend="onnxruntime"))
        if pane_settings.device == "cuda:0":
            return FailsOnTheGpu(cpu, fail_at=3)
        if pane_settings.device == "cuda:1":
            return RunsOnAnotherGpu(cpu, "cuda:1")
        return cpu

    monkeypatch.setattr(build, "pane_pipeline", pane_pipeline)
    panes = [
        PaneSpec("cpu", settings),
        PaneSpec("gpu0", replace(settings, device="cuda:0")),
        PaneSpec("gpu1", replace(settings, device="cuda:1")),
    ]
    summary = compare_to_report(clips[1], panes, tmp_path / "report", frames=8, progress=False)
    assert summary["frames"] == 8
    assert summary["notes"] == [
        "gpu0: cuda:0 failed (frame 3: out of memory (injected)); going on on cuda:1 from frame 3"
    ]
    assert made == ["cpu", "cuda:0", "cuda:1", "cuda:1"]  # no CPU pipeline for the move
    assert summary["variants"]["gpu0"]["f1"] == 1.0
