"""Each tracker against Roboflow's independent implementation of the same tracker, on
the same detections: synthetic scenes with crossings, occlusions, missed boxes and score
noise, and TUD-Campus' ground truth turned into noisy detections. IDs are numbered
differently, so tracks are compared by association (IDF1 of one labelling against the
other); the thresholds are ones a tracker that loses identity fails (checked below)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest
from framelens.core.stages.tracking import TRACKER_KINDS, TrackerSettings, make_tracker
from framelens.core.types import Detections
from track_scenes import (
    SceneFrame,
    id_f1,
    id_precision,
    moving_objects,
    panning_scene,
    run_ours,
    run_roboflow,
    track_count,
    tud_campus,
)

trackers = pytest.importorskip("trackers")


def roboflow(kind: str) -> object:
    """Roboflow's tracker of ``kind``, set to our published defaults where they differ."""
    if kind == "bytetrack":
        return trackers.ByteTrackTracker(
            minimum_iou_threshold=0.2, high_conf_det_threshold=0.5, track_activation_threshold=0.6
        )
    if kind == "ocsort":
        return trackers.OCSORTTracker()  # its defaults are OC-SORT's published ones
    if kind == "botsort":  # scenes without pictures: no camera-motion compensation
        return trackers.BoTSORTTracker(enable_cmc=False)
    raise AssertionError(kind)


KINDS = list(TRACKER_KINDS)


def crossing_scene(seed: int) -> list[SceneFrame]:
    """Six people: two pairs cross (boxes overlapping by half), one is hidden for ten
    frames, 8% of boxes missed, 15% scored low (as when partly occluded)."""
    rng = np.random.default_rng(seed)
    return moving_objects(
        rng,
        starts=[(100, 200), (600, 230), (150, 500), (650, 470), (300, 80), (900, 650)],
        velocities=[(5, 0), (-5, 0), (4, 0), (-4, 0), (1, 2), (-3, -1)],
        frames=120,
        drop=0.08,
        low_score=0.15,
        occluded={4: range(50, 60)},
    )


def settings_for(kind: str, **changes: object) -> TrackerSettings:
    return TrackerSettings.for_kind(kind, **changes)  # type: ignore[arg-type]


def truth(scene: list[SceneFrame]) -> list[npt.NDArray[np.int64]]:
    return [f.truth for f in scene]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_tracks_agree_with_roboflow_on_crossing_people(kind: str, seed: int) -> None:
    scene = crossing_scene(seed)
    ours = run_ours(make_tracker(TrackerSettings.for_kind(kind)), scene)  # type: ignore[arg-type]
    theirs = run_roboflow(roboflow(kind), scene)
    assert id_f1(ours, theirs) >= 0.9
    assert id_precision(ours, truth(scene)) >= 0.95
    assert abs(track_count(ours) - track_count(theirs)) <= 1
    assert track_count(ours) <= 7  # six people, at most one track broken


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", [1, 2])
def test_tracks_agree_with_roboflow_on_tud_campus(kind: str, seed: int) -> None:
    scene = tud_campus(np.random.default_rng(seed))
    ours = run_ours(make_tracker(TrackerSettings.for_kind(kind)), scene)  # type: ignore[arg-type]
    theirs = run_roboflow(roboflow(kind), scene)
    assert id_f1(ours, theirs) >= 0.9
    assert id_precision(ours, truth(scene)) >= 0.95
    assert abs(track_count(ours) - track_count(theirs)) <= 1


def _fresh_each_frame(ids: list[npt.NDArray[np.int64]]) -> list[npt.NDArray[np.int64]]:
    out, n = [], 1
    for frame in ids:
        out.append(np.arange(n, n + len(frame), dtype=np.int64))
        n += len(frame)
    return out


def _swap_after_crossing(
    scene: list[SceneFrame], ids: list[npt.NDArray[np.int64]]
) -> list[npt.NDArray[np.int64]]:
    """The IDs of people 0 and 1 (and 2 and 3) exchanged from the crossing on."""
    out = []
    for f, (frame, got) in enumerate(zip(scene, ids, strict=True)):
        got = got.copy()
        if f >= 50:
            for a, b in ((0, 1), (2, 3)):
                ia, ib = frame.truth == a, frame.truth == b
                ida = ids[f - 1][scene[f - 1].truth == a]
                idb = ids[f - 1][scene[f - 1].truth == b]
                if len(ida) and len(idb):
                    got[ia], got[ib] = idb[0], ida[0]
        out.append(got)
    return out


@pytest.mark.parametrize("broken", [_fresh_each_frame, "swap"])
def test_the_agreement_thresholds_fail_a_tracker_that_loses_identity(
    broken: Callable[[list[npt.NDArray[np.int64]]], list[npt.NDArray[np.int64]]] | str,
) -> None:
    scene = crossing_scene(1)
    theirs = run_roboflow(roboflow("bytetrack"), scene)
    ours = run_ours(make_tracker(TrackerSettings()), scene)
    bad = _swap_after_crossing(scene, ours) if broken == "swap" else broken(ours)  # type: ignore[operator]
    assert id_f1(bad, theirs) < 0.9
    assert id_precision(bad, truth(scene)) < 0.95


def _one(box: tuple[float, float, float, float], score: float = 0.9) -> Detections:
    return Detections(
        np.array([box], dtype=np.float32),
        np.array([score], dtype=np.float32),
        np.zeros(1, dtype=np.int32),
    )


def _walk(x: float) -> tuple[float, float, float, float]:
    return (x, 100.0, x + 40.0, 180.0)


@pytest.mark.parametrize("kind", KINDS)
def test_an_id_survives_an_occlusion_within_the_track_buffer(kind: str) -> None:
    tracker = make_tracker(TrackerSettings.for_kind(kind, track_buffer=30))  # type: ignore[arg-type]
    seen = [int(tracker.update(_one(_walk(10.0 + 3 * f)))[0]) for f in range(10)]
    for _ in range(20):  # hidden for 20 frames, walking on
        assert len(tracker.update(Detections.empty())) == 0
    back = [int(tracker.update(_one(_walk(10.0 + 3 * f)))[0]) for f in range(30, 35)]
    assert seen[-1] >= 1
    assert back[-1] == seen[-1]  # (OC-SORT shows it again after min_hits observations)
    assert set(back) <= {seen[-1], -1}


@pytest.mark.parametrize("kind", KINDS)
def test_after_the_track_buffer_an_object_gets_a_new_id_never_an_old_one(kind: str) -> None:
    tracker = make_tracker(TrackerSettings.for_kind(kind, track_buffer=5))  # type: ignore[arg-type]
    first = [int(tracker.update(_one(_walk(10.0 + 3 * f)))[0]) for f in range(10)][-1]
    for _ in range(10):
        tracker.update(Detections.empty())
    later = [int(tracker.update(_one(_walk(10.0 + 3 * (20 + f))))[0]) for f in range(5)]
    assert later[-1] >= 1
    assert later[-1] != first
    tracker.reset()
    again = [int(tracker.update(_one(_walk(10.0 + 3 * f)))[0]) for f in range(5)][-1]
    assert again > max(first, later[-1])  # numbering goes on after a reset


def test_bytetrack_low_scores_keep_a_track_but_never_start_one() -> None:
    tracker = make_tracker(TrackerSettings())
    ids = [int(tracker.update(_one(_walk(10.0 + 3 * f)))[0]) for f in range(5)]
    ids += [int(tracker.update(_one(_walk(10.0 + 3 * f), score=0.3))[0]) for f in range(5, 10)]
    assert ids[4] >= 1
    assert ids[5:] == [ids[4]] * 5  # occluded (low score): the same track
    stranger = [
        int(tracker.update(_one((600.0, 400.0, 640.0, 480.0), score=0.3))[0]) for _ in range(5)
    ]
    assert stranger == [-1] * 5


def test_bytetrack_confirms_a_track_after_min_hits_and_a_one_frame_blip_gets_no_id() -> None:
    tracker = make_tracker(TrackerSettings(min_hits=2))
    assert int(tracker.update(_one(_walk(10.0)))[0]) == 1  # the first frame: at once
    blip = tracker.update(
        Detections(
            np.array([_walk(13.0), (500, 500, 540, 580)], dtype=np.float32),
            np.array([0.9, 0.9], dtype=np.float32),
            np.zeros(2, dtype=np.int32),
        )
    )
    assert blip.tolist() == [1, -1]
    late = [int(tracker.update(_one((800.0, 100.0, 840.0, 180.0)))[0]) for _ in range(2)]
    assert late == [-1, 2]  # new after the first frame: an ID at the second hit, no gap


def test_ocsort_finds_an_object_that_stopped_while_hidden_by_its_last_observation() -> None:
    """Observation-centric recovery: the filter drifted on at the old speed, the object
    came back where it was lost; ByteTrack (no recovery) gives it a new ID."""
    got = {}
    for kind in ("ocsort", "bytetrack"):
        tracker = make_tracker(TrackerSettings.for_kind(kind))  # type: ignore[arg-type]
        seen = [int(tracker.update(_one(_walk(10.0 + 10 * f)))[0]) for f in range(10)]
        for _ in range(15):
            tracker.update(Detections.empty())
        back = [int(tracker.update(_one(_walk(10.0 + 10 * 9)))[0]) for _ in range(5)]
        got[kind] = (seen[-1], back[-1])
    assert got["ocsort"][1] == got["ocsort"][0]
    assert got["bytetrack"][1] not in (got["bytetrack"][0], -1)


@pytest.mark.parametrize(("cmc", "theirs"), [("sparse", "sparseOptFlow"), ("ecc", "ecc")])
@pytest.mark.parametrize("seed", [1, 2])
def test_botsort_keeps_ids_through_a_jerky_camera_pan_as_roboflows_does(
    cmc: str, theirs: str, seed: int
) -> None:
    scene = panning_scene(np.random.default_rng(seed))
    ours = run_ours(make_tracker(settings_for("botsort", cmc=cmc)), scene)
    rf = run_roboflow(trackers.BoTSORTTracker(cmc_method=theirs), scene)
    assert id_f1(ours, rf) >= 0.9
    assert id_precision(ours, truth(scene)) >= 0.95
    assert track_count(ours) == track_count(rf) == 5  # five people, one track each
    # the pan is one that breaks tracks without compensation
    blind = run_ours(make_tracker(settings_for("botsort", cmc="none")), scene)
    assert track_count(blind) >= 10
    assert id_precision(blind, truth(scene)) < 0.8


@pytest.mark.parametrize("method", ["sparse", "ecc"])
@pytest.mark.parametrize(("dx", "dy"), [(0, 0), (6, -3), (30, 8)])
def test_camera_motion_is_measured_in_source_pixels(method: str, dx: int, dy: int) -> None:
    from framelens.core.stages.tracking.cmc import CameraMotion

    street = panning_scene(np.random.default_rng(0), frames=1, size=(900, 600))[0].image
    assert street is not None
    motion = CameraMotion(method, downscale=2)  # type: ignore[arg-type]
    first = motion.apply(street[50:410, 50:690])
    warp = motion.apply(street[50 + dy : 410 + dy, 50 + dx : 690 + dx])
    np.testing.assert_allclose(first, np.eye(2, 3))
    # the view moved by (dx, dy): what was at p is now at p - (dx, dy)
    np.testing.assert_allclose(warp[:, :2], np.eye(2), atol=0.01)
    np.testing.assert_allclose(warp[:, 2], [-dx, -dy], atol=0.75)
