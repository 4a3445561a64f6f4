"""Tracking on the H200: the GPU pipeline's results tracked as the CPU's are (the same
track IDs on the same boxes, within the small box differences the GPU-vs-CPU detection
tests allow), and several sources on the GPU, batched together, each with tracks of its
own equal to its single CPU run's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from framelens.core.gpu.context import GpuContext
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.runs import run_many
from framelens.core.sessions.session import Session, SessionOptions
from framelens.core.sessions.tracks import TrackStages
from framelens.core.stages.tasks import DetectParams
from framelens.core.stages.tasks.detect.agreement import AgreementTotals
from framelens.core.stages.tracking.settings import TrackerSettings
from framelens.core.types import Detections

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
START, FRAMES = 150, 300  # two people, one after the other, each followed for a while


def tracked(device: str, specs: list[str], frames: int = FRAMES, start: int = 0) -> dict[
    int, dict[int, Detections]
]:  # fmt: skip
    """Each source's tracked detections by frame, from the product's session on
    ``device`` (the GPU pipeline on CUDA)."""
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), device=device,
                                params=DetectParams(conf=0.3))  # fmt: skip
    options = SessionOptions(draw="none", pixels=False, start=start, frames=frames)
    got: dict[int, dict[int, Detections]] = {}
    with Session(specs, settings, options=options,
                 stages=TrackStages(TrackerSettings())) as session:  # fmt: skip
        for result in session.results():
            assert isinstance(result.output, Detections)
            got.setdefault(result.frame.source_id, {})[result.frame.index] = result.output
        path = session.path
    if device.startswith("cuda"):
        assert path.startswith("gpu pipeline"), path
    return got


def assert_same_tracks(cpu: dict[int, Detections], gpu: dict[int, Detections]) -> None:
    """The boxes agree as the detection tests require (F1 >= 0.99, mean IoU >= 0.97),
    and the boxes matched carry the same track IDs (at least 99% of them: a box on the
    score threshold may start its track a frame later on one side)."""
    assert sorted(cpu) == sorted(gpu)
    totals = AgreementTotals()
    same = pairs = 0
    for index in sorted(cpu):
        c, g = cpu[index], gpu[index]
        assert c.track_ids is not None and g.track_ids is not None
        match = totals.add_frame(c, g)
        for t, r, _iou in match.pairs:
            pairs += 1
            same += int(g.track_ids[t] == c.track_ids[r])
            if g.track_ids[t] != c.track_ids[r]:
                print(f"frame {index}: GPU #{g.track_ids[t]}, CPU #{c.track_ids[r]}")
    ids = {int(i) for d in cpu.values() for i in d.track_ids if i >= 1}  # type: ignore[union-attr]
    print(f"{pairs} boxes matched, {same} with the same ID; tracks {sorted(ids)}; "
          f"{totals.as_dict()}")  # fmt: skip
    assert pairs > 100 and len(ids) >= 2  # people were followed, more than one
    assert totals.f1 >= 0.99 and totals.mean_iou >= 0.97
    assert same >= 0.99 * pairs


def test_the_gpu_pipeline_tracks_what_the_cpu_path_tracks(gpu_ctx: GpuContext) -> None:
    cpu = tracked("cpu", [str(SAMPLE)], start=START)[0]
    gpu = tracked("cuda:0", [str(SAMPLE)], start=START)[0]
    assert_same_tracks(cpu, gpu)


def test_several_sources_on_the_gpu_keep_tracks_of_their_own(
    gpu_ctx: GpuContext, tmp_path: Path
) -> None:
    """Four copies batched together on the GPU: each source's tracks start at 1 and
    equal the one CPU run's of the same file (sources never share a tracker)."""
    copies = []
    for i in range(4):
        copies.append(tmp_path / f"cam{i}.mp4")
        copies[-1].write_bytes(SAMPLE.read_bytes())
    cpu = tracked("cpu", [str(copies[0])])[0]
    gpu = tracked("cuda:0", [str(c) for c in copies])
    assert sorted(gpu) == [0, 1, 2, 3]
    for source in range(4):
        assert_same_tracks(cpu, gpu[source])
    # and through the run's outputs: each source's MOT file, numbered from 1
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), device="cuda:0")
    summary = run_many([str(c) for c in copies], settings, str(tmp_path / "out"), videos=False,
                       frames=FRAMES, tracker=TrackerSettings(), tracks=True)  # fmt: skip
    assert summary.path.startswith("gpu pipeline") and summary.mean_batch > 1
    for n in range(4):
        lines = (tmp_path / "out" / f"cam{n}.tracks.txt").read_text().splitlines()
        ids = {int(line.split(",")[1]) for line in lines}
        assert lines and min(ids) == 1 and summary.sources[n].tracks == len(ids)


def test_botsort_on_the_gpu_sees_the_frames_of_a_run_that_writes_only_detections(
    gpu_ctx: GpuContext, tmp_path: Path
) -> None:
    """A detections-only run on the GPU pipeline carries no pixels (PixelsNotKept); with
    BoT-SORT, whose camera-motion compensation needs them, every frame keeps them."""
    from framelens.core.sessions.runs import run_to_outputs
    from framelens.core.types import FrameResult, PixelsNotKept

    seen: list[bool] = []

    def looks(source: int) -> list[Any]:
        class Look:
            def __call__(self, result: FrameResult) -> None:
                seen.append(not isinstance(result.frame.device, PixelsNotKept))

            def reset(self) -> None:
                pass

        return [Look()]

    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), device="cuda:0")
    summary = run_to_outputs(str(SAMPLE), settings, detections=str(tmp_path / "d.json"),
                             start=START, frames=60, stages=looks,
                             tracker=TrackerSettings.for_kind("botsort"))  # fmt: skip
    assert summary.path.startswith("gpu pipeline")
    assert len(seen) == 60 and all(seen)
