"""The one executor on real frames and real pipelines: batches, order, range, seek."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline import build
from framelens.core.pipeline.decode_ahead import End
from framelens.core.pipeline.execute import Done, Executor, PipelineWorker
from framelens.core.pipeline.processor import FrameProcessor
from framelens.core.pipeline.runner import PipelineRunner, RunRange
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.stages.sources import open_source
from framelens.core.types import Frame, FrameResult, StageTimes

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4")


def counting(pipeline: FrameProcessor, sizes: list[int]) -> FrameProcessor:
    """The pipeline, recording the size of every batch it is given."""
    real = pipeline.infer_batch

    def infer_batch(frames: list[Frame], times: list[StageTimes]) -> list[FrameResult]:
        sizes.append(len(frames))
        return real(frames, times)

    pipeline.infer_batch = infer_batch  # type: ignore[method-assign]
    return pipeline


def test_a_run_in_batches_delivers_the_range_in_order_and_decodes_no_work_beyond_it() -> None:
    settings = build.resolve(
        replace(PipelineSettings(resolve_model(DEFAULT_MODEL)), threads=1, batch=4)
    )
    sizes: list[int] = []
    pipelines = [counting(build.host_pipeline(settings), sizes) for _ in range(2)]
    seen: list[int] = []
    try:
        with open_source(SAMPLE) as source:
            runner = PipelineRunner(
                source,
                pipelines[0],
                observers=[lambda r: seen.append(r.frame.index)],
                draw=False,
                extra_pipelines=pipelines[1:],
            )
            assert runner.run(RunRange(40, 22)) == 22
    finally:
        for p in pipelines:
            p.close()
    assert seen == list(range(40, 62))
    assert sum(sizes) == 22, sizes  # no frame past the range went through a pipeline
    assert max(sizes) <= 4 and max(sizes) > 1, sizes  # batches, none over the batch size


def test_a_seek_hands_out_nothing_decoded_before_it() -> None:
    settings = replace(PipelineSettings(resolve_model(DEFAULT_MODEL)), threads=1)
    pipeline = build.host_pipeline(settings)
    executor: Executor[FrameResult] = Executor.open(
        open_source(SAMPLE), [PipelineWorker(pipeline, "none")]
    )
    try:
        first = [executor.get(10.0) for _ in range(3)]
        assert [i.frame.index for i in first if isinstance(i, Done)] == [0, 1, 2]
        executor.seek(300)
        after = executor.get(10.0)
        assert isinstance(after, Done) and after.frame.index == 300
        assert not isinstance(after, End)
        assert after.value.frame.index == 300 and after.value.times.e2e > 0
    finally:
        executor.close(close_workers=True, close_source=True)
