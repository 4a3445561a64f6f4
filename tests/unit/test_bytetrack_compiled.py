"""ByteTrack compiled (core/stages/tracking/bytetrack_compiled.py) is the reference
ByteTrack (core/stages/tracking/bytetrack.py) in machine code: on crowded scenes (people
crossing, boxes missed, low scores, doubled boxes, empty frames, seeks) every frame's
IDs are the reference's and the tracks left are the same; its assignment is scipy's,
ties included; and the product's "bytetrack" is the compiled one."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from framelens.core.stages.tracking import TrackerSettings, make_tracker
from framelens.core.stages.tracking.bytetrack import ByteTrack
from framelens.core.stages.tracking.bytetrack_compiled import CompiledByteTrack, solve_assignment
from framelens.core.types import Detections
from scipy.optimize import linear_sum_assignment
from track_scenes import crowd

SETTINGS = [
    TrackerSettings.for_kind("bytetrack"),
    TrackerSettings.for_kind("bytetrack", min_hits=3, track_buffer=6),
    TrackerSettings.for_kind("bytetrack", min_hits=1, new_track_threshold=0.5, frame_rate=15.0),
    TrackerSettings.for_kind("bytetrack", high_threshold=0.7, low_threshold=0.3, match_iou=0.5),
]


IDS = ["published", "min3-buffer6", "min1-15fps", "strict"]


@pytest.mark.parametrize("settings", SETTINGS, ids=IDS)
@pytest.mark.parametrize("objects", [0, 3, 14, 40])
def test_every_frame_gets_the_reference_ids_and_tracks(
    settings: TrackerSettings, objects: int
) -> None:
    frames = crowd(objects, 200, seed=objects * 7 + SETTINGS.index(settings))
    reference, compiled = ByteTrack(settings), CompiledByteTrack(settings)
    seeks = {70, 140}  # a seek: both forget their tracks, numbering goes on
    tracked = 0
    for k, detections in enumerate(frames):
        if k in seeks:
            reference.reset()
            compiled.reset()
        want = reference.update(detections)
        got = compiled.update(detections)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, want, err_msg=f"frame {k}")
        mean, cov = compiled.state()
        np.testing.assert_allclose(mean, reference._tracks.mean, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(cov, reference._tracks.cov, rtol=1e-12, atol=1e-9)
        tracked += int(np.count_nonzero(want > 0))
    assert (tracked > 0) == (objects > 0)
    if objects:  # the scene made IDs again after the seeks: numbering went on
        assert compiled._next_id == reference._next_id > 1


def test_a_frame_of_no_boxes_and_a_frame_of_only_low_scores() -> None:
    settings = TrackerSettings.for_kind("bytetrack")
    box = np.array([[100.0, 100.0, 140.0, 180.0]], np.float32)
    frames = [
        Detections(box, np.array([0.9], np.float32), np.zeros(1, np.int32)),
        Detections(box[:0], np.zeros(0, np.float32), np.zeros(0, np.int32)),
        Detections(box + 1, np.array([0.3], np.float32), np.zeros(1, np.int32)),
        Detections(box + 2, np.array([0.9], np.float32), np.zeros(1, np.int32)),
    ]
    reference, compiled = ByteTrack(settings), CompiledByteTrack(settings)
    got = [compiled.update(d).tolist() for d in frames]
    assert got == [reference.update(d).tolist() for d in frames]
    # lost in the empty frame, so its low-score box is not matched (the second matching
    # takes only tracks tracked last frame); the next high score finds it: its first ID
    assert got == [[1], [], [-1], [1]]


def test_boxes_of_no_height_at_zero_thresholds_track_as_the_reference_does() -> None:
    """A box of zero height (clipped at the frame's edge) starts a track whose filter
    divides by zero; with every IoU threshold at 0 it is matched again: the compiled
    steps carry the inf and nan on as numpy does (no exception), with the same IDs."""
    settings = TrackerSettings.for_kind(
        "bytetrack", match_iou=0.0, second_match_iou=0.0, unconfirmed_match_iou=0.0
    )
    flat = np.array([[10.0, 50.0, 60.0, 50.0], [200.0, 80.0, 240.0, 160.0]], np.float32)
    reference, compiled = ByteTrack(settings), CompiledByteTrack(settings)
    for k in range(8):
        boxes = flat + np.float32(k)
        detections = Detections(boxes, np.full(2, 0.9, np.float32), np.zeros(2, np.int32))
        with np.errstate(all="ignore"):
            want = reference.update(detections)
        got = compiled.update(detections)
        np.testing.assert_array_equal(got, want, err_msg=f"frame {k}")
        mean, _ = compiled.state()
        np.testing.assert_allclose(mean, reference._tracks.mean, rtol=1e-12, atol=1e-9)
    assert compiled._next_id == reference._next_id > 1


@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (2, 5), (6, 2), (7, 7)])
def test_the_assignment_is_scipys_ties_and_forbidden_pairs_included(
    shape: tuple[int, int],
) -> None:
    rng = np.random.default_rng(sum(shape))
    for trial in range(300):
        cost = rng.random(shape)
        if trial % 3 == 0:
            cost = np.round(cost * 3) / 3  # ties: which of equal pairs is taken
        if trial % 4 == 0:
            cost[rng.random(shape) < 0.5] = 1e5  # gated pairs, as the tracker forbids them
        want = linear_sum_assignment(cost)
        got = solve_assignment(cost)
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a, b, err_msg=f"trial {trial}:\n{cost}")


def test_the_products_bytetrack_is_the_compiled_one_at_the_sources_frame_rate() -> None:
    tracker = make_tracker(replace(TrackerSettings.for_kind("bytetrack"), frame_rate=60.0))
    assert isinstance(tracker, CompiledByteTrack)
    assert tracker._max_lost == 60  # track_buffer 30 at 60 fps: two seconds


def test_without_numba_bytetrack_is_the_reference_and_doctor_says_so() -> None:
    """numba missing (or not built for this numpy): "bytetrack" still tracks, as the
    numpy reference (the same IDs), and ``framelens doctor`` names why."""
    script = (
        "import sys; sys.modules['numba'] = None\n"
        "from framelens.core.stages.tracking import TrackerSettings, make_tracker\n"
        "from framelens.core.tools.doctor import diagnose\n"
        "print(type(make_tracker(TrackerSettings())).__name__)\n"
        "print(diagnose()['trackers'])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    ).stdout.splitlines()
    assert out[0] == "ByteTrack"
    assert out[1].startswith("numpy references, the same IDs at 10-40x the time: numba not")
