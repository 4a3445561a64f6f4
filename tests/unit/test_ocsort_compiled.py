"""OC-SORT compiled (core/stages/tracking/ocsort_compiled.py) is the reference OC-SORT
(core/stages/tracking/ocsort.py) in machine code: on crowded scenes (people crossing,
boxes missed and found again after gaps, so the re-update runs; low scores, doubled
boxes, empty frames, seeks) every frame's IDs are the reference's and the tracks'
filters the same; and the product's "ocsort" is the compiled one."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from framelens.core.stages.tracking import TrackerSettings, make_tracker
from framelens.core.stages.tracking.ocsort import OCSort
from framelens.core.stages.tracking.ocsort_compiled import CompiledOCSort
from framelens.core.types import Detections
from track_scenes import crowd

SETTINGS = [
    TrackerSettings.for_kind("ocsort"),
    TrackerSettings.for_kind("ocsort", min_hits=1, track_buffer=6, ocsort_use_byte=True),
    TrackerSettings.for_kind("ocsort", ocsort_delta_t=1, ocsort_inertia=0.5, frame_rate=15.0),
    TrackerSettings.for_kind("ocsort", ocsort_delta_t=5, match_iou=0.1, high_threshold=0.7),
]
IDS = ["published", "byte-min1-buffer6", "delta1-15fps", "delta5-loose"]


def assert_same_tracks(reference: OCSort, compiled: CompiledOCSort, frame: int) -> None:
    x, p = compiled.state()
    np.testing.assert_allclose(x, reference._x, rtol=1e-12, atol=1e-9, err_msg=f"frame {frame}")
    np.testing.assert_allclose(p, reference._p, rtol=1e-12, atol=1e-9, err_msg=f"frame {frame}")
    assert len(compiled) == len(reference._tracks)


@pytest.mark.parametrize("settings", SETTINGS, ids=IDS)
@pytest.mark.parametrize("objects", [0, 3, 14, 40])
def test_every_frame_gets_the_reference_ids_and_tracks(
    settings: TrackerSettings, objects: int
) -> None:
    frames = crowd(objects, 200, seed=objects * 11 + SETTINGS.index(settings))
    reference, compiled = OCSort(settings), CompiledOCSort(settings)
    seeks = {70, 140}  # a seek: both forget their tracks, numbering goes on
    tracked = re_updates = 0
    for k, detections in enumerate(frames):
        if k in seeks:
            reference.reset()
            compiled.reset()
        frozen = {id(t) for t in reference._tracks if t.frozen is not None}
        want = reference.update(detections)
        re_updates += sum(id(t) in frozen and t.since_update == 0 for t in reference._tracks)
        got = compiled.update(detections)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, want, err_msg=f"frame {k}")
        assert_same_tracks(reference, compiled, k)
        tracked += int(np.count_nonzero(want > 0))
    assert (tracked > 0) == (objects > 0)
    if objects >= 14:  # crowds lose tracks and find them again: the re-update ran
        assert re_updates > 0
    if objects:
        assert compiled._next_id == reference._next_id > 1


def test_a_track_found_again_after_a_gap_is_re_updated_as_the_reference_does() -> None:
    """One person walking right, missed for 4 frames, then seen again further on: the
    recovery matches them by their last box, and the filter goes back to where they were
    lost and along the straight path (ORU), in both."""
    settings = TrackerSettings.for_kind("ocsort", min_hits=1)
    reference, compiled = OCSort(settings), CompiledOCSort(settings)
    box = np.array([[100.0, 100.0, 140.0, 180.0]], np.float32)
    empty = Detections(box[:0], np.zeros(0, np.float32), np.zeros(0, np.int32))
    got = []
    for k in range(14):
        seen = not 5 <= k < 9
        frame = Detections(box + np.float32([3 * k, 0, 3 * k, 0]), np.array([0.9], np.float32),
                           np.zeros(1, np.int32)) if seen else empty  # fmt: skip
        want = reference.update(frame)
        got.append(compiled.update(frame).tolist())
        assert got[-1] == want.tolist()
        assert_same_tracks(reference, compiled, k)
    assert got == [[1]] * 5 + [[]] * 4 + [[1]] * 5  # the same person throughout


def test_two_copies_of_one_box_get_the_id_on_the_same_copy() -> None:
    """A detector's box given twice (found by a review's fuzzing): the direction bonus
    decides between equal costs by its last bit, so both trackers compute arccos alike
    (the C library's; numpy's own differs in the last bit on some CPUs) and give the ID
    to the same copy."""
    a = [365.63885498046875, -0.6949067115783691, 389.674072265625, 43.14993667602539, 0.76]
    d = [363.5886535644531, 9.158411026000977, 385.0998840332031, 50.597965240478516, 0.84]
    scene = [
        [a, a], [],
        [[363.5804138183594, 0.08832784742116928, 386.3568115234375, 44.7613525390625, 0.86]],
        [[362.8973083496094, 2.4814047813415527, 384.513671875, 45.72138595581055, 0.78]],
        *[[]] * 11,
        [[365.4074401855469, 5.17693567276001, 389.803955078125, 44.80357360839844, 0.90]],
        [[364.87969970703125, 6.8709893226623535, 390.36431884765625, 51.33114242553711, 0.76],
         [329.8546447753906, -44.29569625854492, 387.1755065917969, 76.59527587890625, 0.69],
         [141.76475524902344, 191.0766143798828, 176.957763671875, 259.1092529296875, 0.89]],
        [d, [323.5198974609375, -44.50316619873047, 383.7446594238281, 77.43489074707031, 0.77],
         d],
    ]  # fmt: skip
    settings = TrackerSettings.for_kind("ocsort")
    reference, compiled = OCSort(settings), CompiledOCSort(settings)
    for k, rows in enumerate(scene):
        a5 = np.array(rows, np.float64).reshape(-1, 5)
        detections = Detections(
            a5[:, :4].astype(np.float32), a5[:, 4].astype(np.float32), np.zeros(len(a5), np.int32)
        )
        want = reference.update(detections)
        np.testing.assert_array_equal(compiled.update(detections), want, err_msg=f"frame {k}")
        assert_same_tracks(reference, compiled, k)
    assert sorted(want.tolist()) == [-1, -1, 2]  # one copy of the box continues the track


def test_frames_of_no_boxes_only_low_scores_and_boxes_of_no_height() -> None:
    settings = TrackerSettings.for_kind("ocsort", ocsort_use_byte=True, match_iou=0.0)
    flat = np.array([[10.0, 50.0, 60.0, 50.0], [200.0, 80.0, 240.0, 160.0]], np.float32)
    reference, compiled = OCSort(settings), CompiledOCSort(settings)
    scores = [0.9, 0.9, 0.2, 0.9, None, 0.9, 0.9]
    for k, score in enumerate(scores):
        n = 0 if score is None else 2
        detections = Detections(
            (flat + np.float32(k))[:n], np.full(n, score or 0, np.float32), np.zeros(n, np.int32)
        )
        with np.errstate(all="ignore"):
            want = reference.update(detections)
        np.testing.assert_array_equal(compiled.update(detections), want, err_msg=f"frame {k}")
        assert len(compiled) == len(reference._tracks)
    assert compiled._next_id == reference._next_id > 1


def test_the_products_ocsort_is_the_compiled_one_at_the_sources_frame_rate() -> None:
    tracker = make_tracker(replace(TrackerSettings.for_kind("ocsort"), frame_rate=60.0))
    assert isinstance(tracker, CompiledOCSort)
    assert tracker._max_age == 60  # track_buffer 30 at 60 fps: two seconds


def test_without_numba_ocsort_is_the_reference() -> None:
    script = (
        "import sys; sys.modules['numba'] = None\n"
        "from framelens.core.stages.tracking import TrackerSettings, make_tracker\n"
        "print(type(make_tracker(TrackerSettings.for_kind('ocsort'))).__name__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    ).stdout.splitlines()
    assert out == ["OCSort"]
