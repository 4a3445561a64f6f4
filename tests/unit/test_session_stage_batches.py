"""A run of several sources hands the results that are ready together to the stages
with a batched form in one call (core/sessions/session.py, SourceStages.many): what
lets the trackers of several sources track in one round. Each source's stage still
sees its own results once, in frame order, and what the stage leaves is what is written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.runs import run_many
from framelens.core.stages.source_stages import SourceStage
from framelens.core.types import Detections, FrameResult
from media_factory import sample_clips

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
FRAMES = 12
CALLS: list[list[tuple[int, int]]] = []  # (source, frame index) of each batched call


class Batched:
    """A stage with a batched form: logs which results each call took, and empties the
    detections of odd frames (what a stage changes must be what is written)."""

    def __init__(self, source: int) -> None:
        self.source = source
        self.seen: list[int] = []

    def __call__(self, result: FrameResult) -> None:
        Batched.many([(self, result)])

    @staticmethod
    def many(pairs: Sequence[tuple[Batched, FrameResult]]) -> None:
        CALLS.append([(stage.source, r.frame.index) for stage, r in pairs])
        for stage, result in pairs:
            stage.seen.append(result.frame.index)
            if result.frame.index % 2:
                result.output = Detections.empty()

    def reset(self) -> None:
        self.seen.append(-1)


class BatchedStages:
    def __init__(self) -> None:
        self.made: dict[int, Batched] = {}

    def __call__(self, source: int) -> list[SourceStage]:
        stage = self.made[source] = Batched(source)
        return [stage]


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return sample_clips(
        tmp_path_factory.mktemp("batch_clips"), SAMPLE, (290, 320, 600, 640), FRAMES
    )


def test_four_sources_results_reach_a_batched_stage_together_each_in_order(
    clips: list[str], tmp_path: Path
) -> None:
    CALLS.clear()
    stages = BatchedStages()
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)
    summary = run_many(clips, settings, str(tmp_path / "four"), videos=False, progress=False,
                       stages=stages)  # fmt: skip
    assert summary.mean_batch > 1
    # some calls took results of several sources at once
    assert max(len({source for source, _ in call}) for call in CALLS) > 1
    for source in range(4):
        assert stages.made[source].seen == list(range(FRAMES))  # once each, in order
        frames = json.loads((tmp_path / "four" / f"clip{source}.json").read_text())["frames"]
        assert {int(f["index"]) for f in frames} == set(range(FRAMES))
        for f in frames:
            if int(f["index"]) % 2:
                assert f["detections"] == []  # written after the stage
        assert any(f["detections"] for f in frames if int(f["index"]) % 2 == 0)
