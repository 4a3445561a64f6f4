"""A GPU failure in the middle of a run: the run goes on from the same frame on the CPU.

This machine has no GPU, so the failing GPU pipeline is stood in for by a real CPU
pipeline with an injected GpuError (the H200 test tests/gpu/test_gpu_pipeline.py
injects the fault into the real GPU pipeline). What is tested here is the switch:
no frame lost or repeated, outputs complete, one clear message.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from framelens.core.errors import GpuError
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline import build
from framelens.core.pipeline.build import Workers
from framelens.core.pipeline.processor import FrameProcessor
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.runs import run_to_outputs
from framelens.core.types import Frame, FrameResult, StageTimes

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4")
FAIL_AT = 12


def fails_at(settings: PipelineSettings) -> FrameProcessor:
    """A real CPU pipeline that raises GpuError on one frame, as a GPU running out of
    memory would."""
    pipeline = build.host_pipeline(settings)
    real = pipeline.infer_batch

    def infer_batch(frames: list[Frame], times: list[StageTimes]) -> list[FrameResult]:
        for frame in frames:
            if frame.index == FAIL_AT:
                raise GpuError(f"frame {frame.index}: out of memory (injected)")
        return real(frames, times)

    pipeline.infer_batch = infer_batch  # type: ignore[method-assign]
    return pipeline


def test_gpu_failure_mid_run_continues_on_the_cpu(monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    opened: list[str] = []
    real_workers = build.workers

    def workers(settings: PipelineSettings, **kw: Any) -> Workers:
        opened.append(settings.device)
        if settings.device.startswith("cuda"):
            cpu = replace(settings, device="cpu", threads=1)
            return Workers([fails_at(cpu), fails_at(cpu)], "gpu pipeline (stand-in)")
        return real_workers(settings, **kw)

    monkeypatch.setattr(build, "workers", workers)
    messages: list[str] = []
    out = tmp_path / "dets.json"
    video = tmp_path / "annotated.mp4"
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), device="cuda:0")
    summary = run_to_outputs(
        SAMPLE,
        settings,
        detections=str(out),
        export=str(video),
        start=5,
        frames=30,
        progress=False,
        on_message=messages.append,
    )
    assert opened == ["cuda:0", "cpu"]
    assert summary.frames == 30
    assert summary.path == "cpu pipeline"
    assert len(messages) == 1 and "\n" not in messages[0]
    assert messages[0].startswith(f"cuda:0 failed (frame {FAIL_AT}: out of memory")
    assert f"going on on the CPU from frame {FAIL_AT}" in messages[0]
    indices = [f["index"] for f in json.loads(out.read_text())["frames"]]
    assert indices == list(range(5, 35))  # nothing lost, nothing twice
    import av

    with av.open(str(video)) as c:
        assert sum(1 for _ in c.decode(video=0)) == 30
