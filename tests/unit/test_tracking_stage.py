"""The tracking stage: IDs and trails on each source's detections, and playback's
semantics (a step back shows the IDs given before; a jump starts new tracks, numbered
above every ID already shown), per source."""

from __future__ import annotations

import numpy as np
import pytest
from framelens.core.stages.source_stages import SourceStages
from framelens.core.stages.tasks.superres.output import Upscaled
from framelens.core.stages.tracking import (
    TrackerSettings,
    TrackingStage,
    make_tracker,
    tracking_stages,
)
from framelens.core.types import Detections, Frame, FrameResult, PixelsNotKept, StageTimes
from track_scenes import panning_scene, run_ours, track_count


def people(index: int, shift: float = 0.0) -> Detections:
    """Two people walking apart, one a box of low score (never a track) in between."""
    x = 100.0 + 4 * index + shift
    boxes = np.array(
        [[x, 100, x + 40, 180], [600 - 4 * index, 300, 640 - 4 * index, 380], [400, 600, 420, 620]],
        dtype=np.float32,
    )
    return Detections(
        boxes, np.array([0.9, 0.85, 0.3], dtype=np.float32), np.zeros(3, dtype=np.int32)
    )


def result(index: int, output: object, source: int = 0) -> FrameResult:
    frame = Frame(np.zeros((8, 8, 3), np.uint8), index, index / 30, source_id=source)
    return FrameResult(frame, output, StageTimes())


def tracked(stage: TrackingStage, index: int, shift: float = 0.0) -> Detections:
    r = result(index, people(index, shift))
    stage(r)
    assert isinstance(r.output, Detections)
    return r.output


def new_stage(trail_length: int = 5, **kw: int) -> TrackingStage:
    return TrackingStage(make_tracker(TrackerSettings()), trail_length, **kw)


def ids(d: Detections) -> list[int]:
    assert d.track_ids is not None
    return [int(i) for i in d.track_ids]


def test_boxes_keep_the_detector_s_values_and_get_ids_and_trails() -> None:
    stage = new_stage(trail_length=5)
    out = [tracked(stage, f) for f in range(8)]
    assert ids(out[-1]) == [1, 2, -1]
    np.testing.assert_array_equal(out[-1].boxes, people(7).boxes)
    trails = out[-1].trails
    assert trails is not None
    first = trails[0]
    assert first.shape == (5, 2)  # the last five centres, oldest first, ending at this box
    np.testing.assert_allclose(first[-1], [100 + 28 + 20, 140])
    np.testing.assert_allclose(first[0], [100 + 12 + 20, 140])
    assert trails[2].shape == (0, 2)  # no track: no trail


@pytest.mark.parametrize("kind", ["bytetrack", "ocsort", "botsort"])
def test_a_box_that_is_not_a_number_gets_no_id_and_leaves_the_tracks_as_they_were(
    kind: str,
) -> None:
    """A broken model's box (a NaN or infinite coordinate or score) is kept from the
    tracker: it gets no ID, the run goes on, and the people around it keep the IDs a
    run without it gives them."""
    settings = TrackerSettings.for_kind(kind, cmc="none") if kind == "botsort" else (
        TrackerSettings.for_kind(kind))  # fmt: skip
    plain, poisoned = (TrackingStage(make_tracker(settings), 3) for _ in range(2))
    for f in range(10):
        clean = people(f)
        r = result(f, clean)
        plain(r)
        assert isinstance(r.output, Detections)
        want = ids(r.output)
        bad = np.array([[np.nan, 10, 50, 90], [5, 5, np.inf, 60]], np.float32)
        boxes = np.concatenate([clean.boxes, bad, clean.boxes[:1] + 200])
        scores = np.concatenate([clean.scores, [0.9, 0.9], [np.nan]]).astype(np.float32)
        r = result(f, Detections(boxes, scores, np.zeros(len(boxes), np.int32)))
        poisoned(r)
        assert isinstance(r.output, Detections)
        assert ids(r.output) == [*want, -1, -1, -1], f"frame {f}"
    assert want[:2] == [1, 2]


def test_no_trails_when_their_length_is_zero() -> None:
    out = tracked(new_stage(trail_length=0), 0)
    assert out.trails is None
    assert ids(out) == [1, 2, -1]


def test_stepping_back_shows_the_ids_and_trails_given_before_and_tracking_goes_on() -> None:
    stage = new_stage()
    first = [tracked(stage, f) for f in range(30)]
    stage.reset()  # the user steps back ten frames and plays forward again
    again = [tracked(stage, f) for f in range(20, 30)]
    for before, now in zip(first[20:], again, strict=True):
        assert ids(now) == ids(before)
        assert before.trails is not None and now.trails is not None
        for a, b in zip(before.trails, now.trails, strict=True):
            np.testing.assert_array_equal(a, b)
    on = tracked(stage, 30)
    assert ids(on) == [1, 2, -1]  # frame 30 follows frame 29: the same tracks go on
    assert on.trails is not None and len(on.trails[0]) == 5


def test_a_jump_forward_starts_new_tracks_numbered_above_the_old_ones() -> None:
    stage = new_stage()
    for f in range(30):
        tracked(stage, f)
    stage.reset()
    jumped = tracked(stage, 100)
    assert ids(jumped) == [3, 4, -1]
    assert jumped.trails is not None and len(jumped.trails[0]) == 1
    stage.reset()  # and back to where the first record was: it was forgotten, new IDs
    assert ids(tracked(stage, 10)) == [5, 6, -1]


def test_frames_in_order_without_a_reset_are_tracked_even_when_some_are_skipped() -> None:
    stage = new_stage()
    for f in (0, 1, 2, 4, 5, 7):  # a live stream dropping frames
        got = tracked(stage, f)
    assert ids(got) == [1, 2, -1]


def test_a_recorded_frame_with_other_boxes_is_tracked_again_not_replayed() -> None:
    stage = new_stage()
    for f in range(10):
        tracked(stage, f)
    stage.reset()  # the same frame again after the detector's settings changed
    assert ids(tracked(stage, 5, shift=300.0)) == [3, 4, -1]


def test_the_record_is_bounded_and_a_step_back_beyond_it_starts_new_tracks() -> None:
    stage = new_stage(record_frames=10)
    for f in range(30):
        tracked(stage, f)
    stage.reset()
    assert ids(tracked(stage, 25)) == [1, 2, -1]  # inside the last ten frames
    stage.reset()
    assert ids(tracked(stage, 5)) == [3, 4, -1]


def test_a_run_s_stage_keeps_no_record_and_gives_the_same_ids_and_trails() -> None:
    """A run never steps back: its stages (core/sessions/tracks.py) keep no record, and
    track exactly as playback's recording stages do."""
    from framelens.core.sessions.tracks import TrackStages

    for trail_length in (0, 5):
        settings = TrackerSettings(trail_length=trail_length)
        (run_stage,) = TrackStages(settings)(0)
        (recording,) = tracking_stages(settings)(0)
        assert isinstance(run_stage, TrackingStage) and isinstance(recording, TrackingStage)
        for f in range(40):
            got, want = tracked(run_stage, f), tracked(recording, f)
            assert ids(got) == ids(want)
            if trail_length:
                assert got.trails is not None and want.trails is not None
                for a, b in zip(got.trails, want.trails, strict=True):
                    np.testing.assert_array_equal(a, b)
            else:
                assert got.trails is None and want.trails is None
        assert len(run_stage._record) == 0 and len(recording._record) == 40
        run_stage.reset()  # nothing to replay: a step back starts new tracks
        assert ids(tracked(run_stage, 20)) == [3, 4, -1]


def test_super_resolution_output_passes_untouched() -> None:
    stage = new_stage()
    up = Upscaled(np.zeros((16, 16, 3), np.uint8), 2)
    r = result(0, up)
    stage(r)
    assert r.output is up


def _source_ids(outputs: list[Detections]) -> list[list[int]]:
    return [ids(d) for d in outputs]


@pytest.mark.parametrize("kind", ["bytetrack", "ocsort", "botsort"])
def test_each_source_has_its_own_tracks_equal_to_a_run_of_that_source_alone(kind: str) -> None:
    settings = TrackerSettings.for_kind(kind)  # type: ignore[arg-type]
    stages = SourceStages(tracking_stages(settings))
    shifts = {0: 0.0, 1: 50.0, 2: 200.0}
    together: dict[int, list[Detections]] = {s: [] for s in shifts}
    for f in range(20):
        for source, shift in shifts.items():
            r = result(f, people(f, shift), source)
            stages(r)
            together[source].append(r.output)
    for source, shift in shifts.items():
        alone = TrackingStage(make_tracker(settings), settings.trail_length)
        by_itself = [tracked(alone, f, shift) for f in range(20)]
        assert _source_ids(together[source]) == _source_ids(by_itself)
        assert ids(together[source][-1])[:2] == [1, 2]  # numbered from 1 in every source


def test_the_stage_factory_travels_to_another_process_and_tracks_there_alike() -> None:
    """``run --processes`` and Ray archives pickle the stage factory to their workers:
    the copy must make trackers of the same kind and settings, each its own."""
    import pickle

    settings = TrackerSettings.for_kind("ocsort", track_buffer=12)
    copy = pickle.loads(pickle.dumps(tracking_stages(settings)))
    here, there = tracking_stages(settings)(0)[0], copy(0)[0]
    assert isinstance(there, TrackingStage)
    assert [ids(tracked(there, f)) for f in range(6)] == [ids(tracked(here, f)) for f in range(6)]


def test_botsort_s_stage_hands_its_tracker_the_frame_s_pixels() -> None:
    scene = panning_scene(np.random.default_rng(1), frames=60)
    settings = TrackerSettings.for_kind("botsort")
    stage = TrackingStage(make_tracker(settings), 0)
    shown = []
    for index, f in enumerate(scene):
        assert f.image is not None
        r = FrameResult(Frame(f.image, index, index / 30), f.detections(), StageTimes())
        stage(r)
        shown.append(np.asarray(r.output.track_ids))
    assert [a.tolist() for a in shown] == [
        a.tolist() for a in run_ours(make_tracker(settings), scene)
    ]
    assert track_count(shown) == 5  # compensated: one track per person through the pan


def test_a_run_that_keeps_no_pixels_tracks_without_camera_motion() -> None:
    stage = TrackingStage(make_tracker(TrackerSettings.for_kind("botsort")), 0)
    out = []
    for index in range(5):
        frame = Frame(None, index, index / 30, device=PixelsNotKept(640, 480))
        r = FrameResult(frame, people(index), StageTimes())
        stage(r)
        out.append(ids(r.output))
    assert out[-1] == [1, 2, -1]


def test_trails_of_tracks_long_gone_are_forgotten_so_a_long_run_stays_small() -> None:
    stage = TrackingStage(make_tracker(TrackerSettings(track_buffer=5)), 5, forget_after=50)
    for f in range(1200):  # a new person every 10 frames, each seen for 10 frames
        x = 50.0 * (f // 10 % 30)
        boxes = np.array([[x, 100, x + 40, 180]], dtype=np.float32)
        out = Detections(boxes, np.array([0.9], np.float32), np.zeros(1, np.int32))
        r = result(f, out)
        stage(r)
    assert ids(r.output)[0] >= 100  # about 120 people came and went
    assert len(stage._trails) <= 12  # only those seen in the last 50-100 frames are kept


def test_a_frame_s_trails_stay_as_given_while_later_frames_are_tracked() -> None:
    """What a sink keeps of a frame (the export's queue, a paused view) shows the trails
    given then, also once the trail of a track long gone was reused for a new one."""
    stage = TrackingStage(make_tracker(TrackerSettings(track_buffer=5)), 5, forget_after=20)
    given = []
    for f in range(300):  # one person across, and a new one every 10 frames
        x = 50.0 * (f // 10 % 30)
        walker = 100.0 + 3 * f
        boxes = np.array([[x, 100, x + 40, 180], [walker, 500, walker + 40, 580]], np.float32)
        r = result(f, Detections(boxes, np.full(2, 0.9, np.float32), np.zeros(2, np.int32)))
        stage(r)
        assert isinstance(r.output, Detections) and r.output.trails is not None
        given.append((r.output.trails, [t.copy() for t in r.output.trails]))
    assert len(given[-1][0][1]) == 5
    for trails, as_given in given:
        for trail, copy in zip(trails, as_given, strict=True):
            np.testing.assert_array_equal(trail, copy)


class _OneTrack:
    """A tracker (another's, through ``tracking_stages``' ``make``) that puts every
    box on track 1."""

    needs_image = False

    def update(self, detections: Detections, image: object = None) -> np.ndarray:
        return np.ones(len(detections), dtype=np.int64)

    def reset(self) -> None:
        pass


def test_a_track_on_two_boxes_of_a_frame_gets_both_points_in_order_on_its_trail() -> None:
    stage = TrackingStage(_OneTrack(), 3)
    trails = []
    for f in range(2):
        boxes = np.array([[10 * f, 0, 10 * f + 2, 2], [10 * f + 5, 0, 10 * f + 7, 2]], np.float32)
        r = result(f, Detections(boxes, np.full(2, 0.9, np.float32), np.zeros(2, np.int32)))
        stage(r)
        assert isinstance(r.output, Detections) and r.output.trails is not None
        trails.append([t[:, 0].tolist() for t in r.output.trails])
    assert trails == [[[1], [1, 6]], [[1, 6, 11], [6, 11, 16]]]


def test_stepping_back_in_a_stream_that_skipped_frames_shows_the_trails_it_showed() -> None:
    stage = new_stage(trail_length=4)
    frames = [0, 1, 2, 4, 5, 7, 8, 9]  # a live source that dropped frames 3 and 6
    first = {f: tracked(stage, f) for f in frames}
    stage.reset()
    for f in (5, 7, 8):
        again = tracked(stage, f)
        assert again.trails is not None and first[f].trails is not None
        assert ids(again) == ids(first[f])
        for a, b in zip(again.trails, first[f].trails, strict=True):
            np.testing.assert_array_equal(a, b)
    assert first[8].trails is not None and len(first[8].trails[0]) == 4
