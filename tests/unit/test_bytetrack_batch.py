"""ByteTrack of many sources at once (core/stages/tracking/bytetrack_batch.py) gives each
source exactly the IDs its own ByteTrack gives, however the frames are grouped."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import numpy.typing as npt
import pytest
from framelens.core.stages.source_stages import SourceStages
from framelens.core.stages.tracking import TrackerSettings, bytetrack_batch, tracking_stages
from framelens.core.stages.tracking.bytetrack import ByteTrack
from framelens.core.stages.tracking.bytetrack_batch import ByteTrackBatch, update_trackers
from framelens.core.types import Detections, Frame, FrameResult, StageTimes
from track_scenes import crowd


class StepResult(FrameResult):
    """A result that knows its place in its source's timeline (the test's seeks)."""

    step: int


def step_result(
    source: int,
    step: int,
    timeline: dict[int, list[int]],
    scenes: list[list[Detections]],
    pixels: npt.NDArray[np.uint8],
) -> StepResult:
    index = timeline[source][step]
    frame = Frame(pixels, index, index / 30, source_id=source)
    out = StepResult(frame, scenes[source][index], StageTimes())
    out.step = step
    return out


def groupings(
    rng: np.random.Generator, frames: int, sources: int, resets: set[tuple[int, int]]
) -> list[list[tuple[int, int]]]:
    """(source, frame) items in batches of random size, every source's frames in order,
    sources interleaved at random (a batch may hold several frames of one source)."""
    cursor = [0] * sources
    order = []
    while any(c < frames for c in cursor):
        s = int(rng.choice([i for i in range(sources) if cursor[i] < frames]))
        take = min(frames - cursor[s], int(rng.integers(1, 4)))
        order += [(s, cursor[s] + f) for f in range(take)]
        cursor[s] += take
    batches, at = [], 0
    while at < len(order):
        size = int(rng.integers(1, 2 * sources + 2))
        batch = order[at : at + size]
        # a reset falls between batches, as a seek does: cut the batch before it
        cut = next((i for i, item in enumerate(batch) if item in resets and i > 0), len(batch))
        batches.append(batch[:cut])
        at += cut
    return batches


SETTINGS = [
    TrackerSettings.for_kind("bytetrack"),
    TrackerSettings.for_kind("bytetrack", min_hits=3, track_buffer=6),
    TrackerSettings.for_kind("bytetrack", min_hits=1, new_track_threshold=0.5),
]


@pytest.mark.parametrize("sources", [1, 4, 16])
@pytest.mark.parametrize("settings", SETTINGS, ids=["published", "min3-buffer6", "min1"])
@pytest.mark.parametrize("pairs", [bytetrack_batch.PAIRS_PER_ROUND, 60])
def test_batched_ids_equal_per_source_trackers(
    sources: int, settings: TrackerSettings, pairs: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bytetrack_batch, "PAIRS_PER_ROUND", pairs)  # rounds in parts too
    frames = 120 if sources < 16 else 60
    rng = np.random.default_rng(sources)
    scenes = [
        crowd(int(rng.integers(0, 14)), frames, seed=100 * sources + s) for s in range(sources)
    ]
    # seeks: some sources restart at some frames (the next frame does not follow)
    resets = {(s, int(f)) for s in range(sources) for f in rng.integers(1, frames, 1) if s % 3 == 0}
    own = [ByteTrack(settings) for _ in range(sources)]
    expected: dict[tuple[int, int], npt.NDArray[np.int64]] = {}
    for s in range(sources):
        for f in range(frames):
            if (s, f) in resets:
                own[s].reset()
            expected[(s, f)] = own[s].update(scenes[s][f])
    batch = ByteTrackBatch(settings)
    got: dict[tuple[int, int], npt.NDArray[np.int64]] = {}
    for group in groupings(rng, frames, sources, resets):
        for item in group:
            if item in resets and item == group[0]:
                batch.reset(item[0])
        ids = batch.update_many([(s, scenes[s][f]) for s, f in group])
        got.update(zip(group, ids, strict=True))
    assert got.keys() == expected.keys()
    for key, want in expected.items():
        assert got[key].dtype == np.int64
        np.testing.assert_array_equal(got[key], want, err_msg=f"source, frame {key}")
    assert sum(len(np.unique(v[v > 0])) for v in expected.values()) > 0  # tracks were made
    # and the tracks left are the same to the last bit, in the same order
    for s in range(sources):
        mine, theirs = batch.tracks(s), own[s]._tracks
        for name in ("mean", "cov", "ids", "state", "confirmed", "hits", "start", "end"):
            np.testing.assert_array_equal(getattr(mine, name), getattr(theirs, name), err_msg=name)


def test_one_sources_bytetracks_updated_together_give_their_own_ids() -> None:
    """update_trackers: each source keeps its own ByteTrack (reset alone, frame rates
    apart), tracked a round at a time with the others: the same IDs and tracks."""
    sources, frames = 6, 90
    settings = TrackerSettings.for_kind("bytetrack", track_buffer=8)
    scenes = [crowd(3 + 2 * s, frames, seed=7 + s) for s in range(sources)]
    rates = [30.0, 30.0, 15.0, 30.0, 60.0, 30.0]
    own = [ByteTrack(replace(settings, frame_rate=r)) for r in rates]
    together = [ByteTrack(replace(settings, frame_rate=r)) for r in rates]
    rng = np.random.default_rng(3)
    for f in range(frames):
        present = [s for s in range(sources) if rng.random() < 0.7 or f == 0]
        if f == 40:
            own[2].reset()
            together[2].reset()
        want = [own[s].update(scenes[s][f]) for s in present]
        got = update_trackers([together[s] for s in present], [scenes[s][f] for s in present])
        for s, a, b in zip(present, got, want, strict=True):
            np.testing.assert_array_equal(a, b, err_msg=f"source {s}, frame {f}")
    for mine, theirs in zip(together, own, strict=True):
        assert (mine._frame, mine._next_id) == (theirs._frame, theirs._next_id)
        for name in ("mean", "cov", "ids", "state", "confirmed", "hits", "start", "end"):
            np.testing.assert_array_equal(
                getattr(mine._tracks, name), getattr(theirs._tracks, name)
            )


def test_stages_given_a_batch_give_every_result_what_one_at_a_time_gives() -> None:
    """SourceStages.many (the tracking stages of 8 sources, results delivered in groups,
    seeks resetting one source: replayed frames, restarts) gives every box the ID and
    trail that the stages given one result at a time give."""
    sources, frames = 8, 80
    scenes = [crowd(2 + s, frames, seed=50 + s) for s in range(sources)]
    factory = tracking_stages(TrackerSettings.for_kind("bytetrack", trail_length=5))
    rng = np.random.default_rng(11)
    # each source's timeline: forward, a step back to frame 20 (replayed), on, a jump
    timeline = {s: [*range(0, 40), *range(20, 50), *range(65, 80)] for s in range(sources)}
    seeks = {(s, 40) for s in range(0, sources, 2)} | {(s, 70) for s in range(0, sources, 3)}
    pixels = np.zeros((4, 4, 3), np.uint8)
    one, batched = SourceStages(factory), SourceStages(factory)
    cursor = dict.fromkeys(range(sources), 0)
    outputs: list[tuple[Detections, Detections]] = []
    while any(cursor[s] < len(timeline[s]) for s in range(sources)):
        group: list[StepResult] = []
        for _ in range(int(rng.integers(1, 12))):
            left = [s for s in range(sources) if cursor[s] < len(timeline[s])]
            if not left:
                break
            s = int(rng.choice(left))
            step = cursor[s]
            if (s, step) in seeks and any(r.frame.source_id == s for r in group):
                break  # a seek falls between deliveries
            group.append(step_result(s, step, timeline, scenes, pixels))
            cursor[s] += 1
        for stages in (one, batched):
            for r in group:
                if (r.frame.source_id, r.step) in seeks:
                    stages.reset(r.frame.source_id)
                    break
        copies = [step_result(r.frame.source_id, r.step, timeline, scenes, pixels) for r in group]
        for r in copies:
            one(r)
        batched.many(group)
        for alone, grouped in zip(copies, group, strict=True):
            assert isinstance(alone.output, Detections)
            assert isinstance(grouped.output, Detections)
            outputs.append((alone.output, grouped.output))
    tracked = 0
    for want, got in outputs:
        assert want.track_ids is not None and got.track_ids is not None
        np.testing.assert_array_equal(got.track_ids, want.track_ids)
        assert want.trails is not None and got.trails is not None
        for trail_want, trail_got in zip(want.trails, got.trails, strict=True):
            np.testing.assert_array_equal(trail_got, trail_want)
        tracked += int(np.count_nonzero(want.track_ids > 0))
    assert tracked > 0
