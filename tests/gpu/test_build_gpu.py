"""The builder on a GPU: compare panes on CUDA run the GPU pipeline that playback runs,
and agree with a CPU pane; batches of N on the GPU pipeline equal batch 1."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline import build
from framelens.core.pipeline.compare.panes import CompareRunner, PaneSpec
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.stages.sources import open_source
from framelens.core.stages.tasks import DetectParams
from framelens.core.stages.tasks.detect.agreement import AgreementTotals

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4")


def test_a_compare_pane_on_cuda_runs_the_gpu_pipeline(gpu_ctx: object) -> None:
    cpu = PipelineSettings(resolve_model(DEFAULT_MODEL), params=DetectParams(conf=0.3), threads=1)
    cuda = replace(cpu, device="cuda:0", threads=None)
    runner = CompareRunner([PaneSpec("cpu", cpu), PaneSpec("cuda", cuda)])
    try:
        pipelines = [p.pipeline for p in runner._panes]
        assert not pipelines[0].takes_device_frames
        assert pipelines[1].takes_device_frames, "the CUDA pane did not get the GPU pipeline"
        assert type(pipelines[1]).__name__ == "GpuFramePipeline"
        totals = AgreementTotals()
        with open_source(SAMPLE) as source:
            source.seek(300)  # the person is in view
            for _ in range(40):
                frame = source.read()
                assert frame is not None
                step = runner.step(frame)
                totals.add(step.panes[1].match)
                # the GPU pane measured its device stages with CUDA events
                assert step.panes[1].times.inference > 0 and step.panes[1].times.display > 0
        assert totals.f1 >= 0.99, totals
        assert totals.tp > 0
    finally:
        runner.close()


@pytest.mark.parametrize("batch", [3, 8])
def test_gpu_pipeline_batches_equal_batch_one(gpu_ctx: object, batch: int) -> None:
    from framelens.core.types import StageTimes

    one = PipelineSettings(resolve_model(DEFAULT_MODEL), device="cuda:0")
    single = build.gpu_pipelines(build.resolve(one), 1)[0]
    batched = build.gpu_pipelines(build.resolve(replace(one, batch=batch)), 1)[0]
    try:
        with open_source(SAMPLE) as source:
            source.seek(290)
            frames = [source.read() for _ in range(2 * batch)]
        assert all(f is not None for f in frames)
        expected = [single.infer(f, StageTimes()).output for f in frames]  # type: ignore[arg-type]
        got = []
        for i in range(0, len(frames), batch):
            chunk = frames[i : i + batch]
            got += [r.output for r in batched.infer_batch(chunk, [StageTimes() for _ in chunk])]  # type: ignore[arg-type]
        assert len(got) == len(expected)
        for e, g in zip(expected, got, strict=True):
            assert len(e) == len(g)
            assert (abs(e.boxes - g.boxes) < 1e-2).all()
            assert (e.class_ids == g.class_ids).all()
    finally:
        single.close()
        batched.close()
