"""ByteTrack of many sources at once (core/stages/tracking/bytetrack_batch.py) gives each
source exactly the IDs its own ByteTrack gives, however the frames are grouped."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from framelens.core.stages.tracking import TrackerSettings
from framelens.core.stages.tracking.bytetrack import ByteTrack
from framelens.core.stages.tracking.bytetrack_batch import ByteTrackBatch
from framelens.core.types import Detections

WIDTH, HEIGHT = 640.0, 360.0


def crowd(objects: int, frames: int, seed: int) -> list[Detections]:
    """People walking over a small frame (so they cross and occlude one another): boxes
    missed (tracks lost and found again), low scores (the second matching), boxes
    doubled (unconfirmed tracks, duplicates), people leaving and coming, empty frames."""
    rng = np.random.default_rng(seed)

    def spawn() -> list[float]:
        w = rng.uniform(20, 60)
        return [
            rng.uniform(0, WIDTH),
            rng.uniform(0, HEIGHT),
            *rng.uniform(-5, 5, 2),
            w,
            w * rng.uniform(1.5, 2.5),
        ]

    people = [spawn() for _ in range(objects)]
    out = []
    for _ in range(frames):
        boxes, scores = [], []
        blank = rng.random() < 0.03
        for i, p in enumerate(people):
            p[0] += p[2]
            p[1] += p[3]
            if not (0 <= p[0] <= WIDTH and 0 <= p[1] <= HEIGHT):
                people[i] = p = spawn()
            if blank or rng.random() < 0.1:
                continue
            for _copy in range(2 if rng.random() < 0.05 else 1):
                j = rng.normal(0, 2.0, 4)
                cx, cy, w, h = p[0] + j[0], p[1] + j[1], p[4] + j[2], p[5] + j[3]
                boxes.append([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2])
                scores.append(
                    rng.uniform(0.15, 0.5) if rng.random() < 0.15 else rng.uniform(0.5, 0.95)
                )
        order = rng.permutation(len(boxes))
        b = np.array(boxes, np.float32).reshape(-1, 4)[order]
        s = np.array(scores, np.float32)[order]
        out.append(Detections(b, s, np.zeros(len(b), np.int32)))
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
def test_batched_ids_equal_per_source_trackers(sources: int, settings: TrackerSettings) -> None:
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
