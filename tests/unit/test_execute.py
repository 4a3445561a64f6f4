"""The one executor on real frames and real pipelines: batches, order, range, seek."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline import build
from framelens.core.pipeline.decode_ahead import End
from framelens.core.pipeline.execute import Done, Executor, PipelineWorker
from framelens.core.pipeline.processor import FrameProcessor
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.session import Session, SessionOptions
from framelens.core.stages.sources import open_source
from framelens.core.types import Frame, FrameResult, Image, StageTimes

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
        options = SessionOptions(draw="none", pixels=False, start=40, frames=22)
        built = build.Workers(pipelines, "cpu pipeline")
        with Session([SAMPLE], settings, options=options, built=built) as session:
            seen.extend(result.frame.index for result in session.results())
            session.release_workers()
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


class Held:
    """A pooled device image stand-in: what a GPU pipeline's result frame holds."""

    def __init__(self, width: int, height: int, image: Image) -> None:
        self.width, self.height, self._image = width, height, image

    def to_host_bgr(self) -> Image:
        return self._image


def test_back_to_back_runs_on_one_source_never_wait_for_buffers_held_past_a_range() -> None:
    """Like the GPU pipeline's display frames, each result here holds one of a few pooled
    buffers until it is dropped. Runs of a range, back to back on the same source (the
    benchmark's pattern), must never leave a worker waiting for a buffer that a result
    nobody will take still holds, nor a worker thread running into the next run."""
    import threading
    import weakref

    settings = replace(PipelineSettings(resolve_model(DEFAULT_MODEL)), threads=1)
    waits: list[bool] = []
    processed: list[int] = []

    def pooled(pipeline: FrameProcessor, buffers: int = 4) -> FrameProcessor:
        pool = threading.BoundedSemaphore(buffers)
        real = pipeline.infer_batch

        def infer_batch(frames: list[Frame], times: list[StageTimes]) -> list[FrameResult]:
            results = real(frames, times)
            processed.append(len(results))
            for result in results:
                got = pool.acquire(timeout=2.0)
                waits.append(not got)
                if got:  # the buffer goes back when the result's frame is dropped
                    f = result.frame
                    held = Held(f.width, f.height, f.image)
                    weakref.finalize(held, pool.release)
                    result.frame = Frame(f.image, f.index, f.pts, device=held)
            return results

        pipeline.infer_batch = infer_batch  # type: ignore[method-assign]
        return pipeline

    pipelines = [pooled(build.host_pipeline(settings)) for _ in range(2)]
    alive_before = threading.active_count()
    try:
        for _ in range(3):
            built = build.Workers(pipelines, "cpu pipeline")
            options = SessionOptions(frames=12)
            with Session([SAMPLE], settings, options=options, built=built) as session:
                assert sum(1 for _ in session.results()) == 12
                session.release_workers()  # kept for the next range, as an archive keeps them
            assert threading.active_count() <= alive_before  # every worker stopped
    finally:
        for p in pipelines:
            p.close()
    assert waits and not any(waits), "a worker waited for a buffer held past the range"
    assert sum(processed) == 3 * 12  # nothing decoded into work past each range


class Index:
    """The lightest worker: a frame's number (what is timed here is the executor)."""

    def run(self, batch: list[tuple[Frame, float]]) -> list[int]:
        return [frame.index for frame, _ in batch]

    def update(self, **changes: object) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.mark.serial  # times itself: runs alone (installer/test.sh)
def test_a_seek_after_the_end_of_a_file_never_waits_behind_idle_workers(tmp_path: Path) -> None:
    """Issue 26: at the end of a file the workers, with nothing to decode, took the take
    lock again and again; a lock is not fair, so a player's seek waited behind them for
    seconds (28 s was seen with 16 workers), and player tests timed out under CI's load.
    A clip of small frames, so that the seek's own decoding is a few milliseconds."""
    import time

    from media_factory import write_clip

    clip = write_clip(tmp_path / "clip.mp4", frames=30, size=(64, 48), gop=5)
    executor: Executor[int] = Executor.open(open_source(str(clip)), [Index() for _ in range(16)])
    waits: list[float] = []
    try:
        for _ in range(20):
            executor.seek(27)
            while not isinstance(executor.get(10.0), End):
                pass
            time.sleep(0.02)  # every worker idle at the end, looping for frames
            t0 = time.monotonic()
            executor.seek(27)
            waits.append(time.monotonic() - t0)
            item = executor.get(10.0)
            assert isinstance(item, Done) and item.value == 27
    finally:
        executor.close(close_source=True)
    assert max(waits) < 0.5, sorted(waits)[-3:]
