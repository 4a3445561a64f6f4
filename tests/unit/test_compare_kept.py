"""A live comparison's report from what it computed (KeptFrames, save_kept_report): the
frames are written as they were computed, only the frames never compared in between are
computed, and the medians a view shows while playing are the ones the report gives.

Real sample, real YOLOX-Nano at two thresholds (frames 540.. hold a person and objects
scored 0.25-0.4, so the panes disagree on some).
"""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

from framelens.cli import sample_video
from framelens.core.models.catalog import resolve_model
from framelens.core.pipeline.compare.kept import KeptFrames
from framelens.core.pipeline.compare.panes import CompareRunner, CompareStep, PaneSpec
from framelens.core.pipeline.ranges import RunRange
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.compare.lockstep import LockstepFeed
from framelens.core.sessions.compare.saved import save_kept_report
from framelens.core.stages.sources import open_source
from framelens.core.stages.tasks import DetectParams

SAMPLE = str(sample_video())
MODEL = resolve_model("yolox-nano")
PANES = [
    PaneSpec("low", PipelineSettings(model=MODEL, params=DetectParams(conf=0.25), threads=1)),
    PaneSpec("high", PipelineSettings(model=MODEL, params=DetectParams(conf=0.5), threads=1)),
]


def compute(starts_and_counts: list[tuple[int, int]]) -> list[CompareStep]:
    """The panes over each (start, frames) range, as the compare view runs them."""
    out: list[CompareStep] = []
    with open_source(SAMPLE) as source, CompareRunner(PANES) as runner:
        for start, frames in starts_and_counts:
            source.seek(start)
            feed = LockstepFeed(source, runner)
            try:
                for _ in range(frames):
                    step = feed.next(30.0)
                    assert isinstance(step, CompareStep), step
                    out.append(step)
            finally:
                feed.close()
    return out


def rows(report: Path) -> dict[int, dict[str, str]]:
    with (report / "frames.csv").open(encoding="utf-8") as fh:
        return {int(r["index"]): r for r in csv.DictReader(fh)}


def test_the_report_is_what_was_computed_and_the_median_the_view_showed(tmp_path: Path) -> None:
    steps = compute([(540, 6)])
    kept = KeptFrames(PANES)
    medians = []
    for step in steps:
        kept.add(step)
        medians.append(kept.inference_median(1))
    assert len(kept) == 6 and kept.span == (540, 545) and kept.missing() == []
    times = [s.panes[1].times.inference for s in steps]
    assert medians[-1] == statistics.median(times)
    assert medians[0] == times[0]

    calls: list[tuple[int, int]] = []
    summary = save_kept_report(
        SAMPLE, kept, tmp_path / "report", on_progress=lambda d, t: calls.append((d, t))
    )
    assert calls == []  # nothing to compute: no progress to show
    assert summary["computed_for_report"] == 0 and summary["frames"] == 6
    written = rows(tmp_path / "report")
    assert list(written) == list(range(540, 546))
    for step in steps:  # the very timings computed while playing, not a second run's
        for pane in step.panes:
            assert written[step.frame.index][f"{pane.label}_inference_ms"] == (
                f"{pane.times.inference:.3f}"
            )
    data = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert data["variants"]["high"]["latency_ms_median"] == round(medians[-1], 3)
    strict = data["variants"]["high"]
    assert strict["precision"] == 1 and strict["fn"] == sum(s.panes[1].match.fn for s in steps)


def test_only_the_frames_never_compared_are_computed(tmp_path: Path) -> None:
    # frames 540-542, then (after a jump) 550-551: 543-549 were never compared
    steps = compute([(550, 2), (540, 3)])
    kept = KeptFrames(PANES)
    for step in steps:
        kept.add(step)
    assert kept.missing() == [RunRange(543, 7)]
    calls: list[tuple[int, int]] = []
    summary = save_kept_report(
        SAMPLE, kept, tmp_path / "report", on_progress=lambda d, t: calls.append((d, t))
    )
    assert summary["computed_for_report"] == 7 and summary["frames"] == 12
    assert calls and calls[-1] == (7, 7) and all(total == 7 for _, total in calls)
    written = rows(tmp_path / "report")
    assert list(written) == list(range(540, 552))  # in frame order
    for step in steps:  # the frames compared before are written as they were
        row = written[step.frame.index]
        assert row["low_inference_ms"] == f"{step.panes[0].times.inference:.3f}"
    for index in range(543, 550):
        assert float(written[index]["high_inference_ms"]) > 0  # computed now
    # what was computed for the report is kept: saving again computes nothing
    again = save_kept_report(SAMPLE, kept, tmp_path / "again")
    assert again["computed_for_report"] == 0
    assert rows(tmp_path / "again") == written


def test_a_frame_computed_again_replaces_the_earlier_one() -> None:
    first, second = compute([(540, 2)]), compute([(540, 1)])
    kept = KeptFrames(PANES)
    for step in (*first, *second):  # Home: frame 540 comes round again
        kept.add(step)
    assert len(kept) == 2
    row = kept.row(540)
    assert row is not None and row.panes[0].inference_ms == second[0].panes[0].times.inference
    times = [second[0].panes[0].times.inference, first[1].panes[0].times.inference]
    assert kept.inference_median(0) == statistics.median(times)
    assert len(kept.log().rows) == 2
