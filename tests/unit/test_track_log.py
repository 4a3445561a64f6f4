"""The track log (the window's track list) and following one ID, without Qt."""

from __future__ import annotations

import numpy as np
from framelens.core.sessions.playback.follow import TrackFollow
from framelens.core.sessions.playback.tracking import PlaybackTracking
from framelens.core.stages.draw.style import OverlayStyle, mark_region
from framelens.core.stages.source_stages import SourceStages
from framelens.core.stages.tracking.settings import TrackerSettings
from framelens.core.stages.tracking.track_log import TrackLog
from framelens.core.types import Detections, Frame, FrameResult, StageTimes

LABELS = ("person", "bicycle", "car")
FPS = 25.0


def dets(*boxes: tuple[int, int]) -> Detections:
    """Boxes given as (track ID, class); -1: a box of no track."""
    n = len(boxes)
    return Detections(
        np.tile(np.array([[10, 20, 50, 90]], np.float32), (n, 1)) + np.arange(n)[:, None] * 60,
        np.full(n, 0.8, np.float32),
        np.array([c for _t, c in boxes], np.int32),
        track_ids=np.array([t for t, _c in boxes], np.int64),
    )


def result(index: int, detections: Detections, source: int = 0) -> FrameResult:
    frame = Frame(np.zeros((8, 8, 3), np.uint8), index, index / FPS, source_id=source)
    return FrameResult(frame, detections, StageTimes())


def test_each_track_has_its_class_span_duration_and_observations() -> None:
    log = TrackLog()
    frames = {
        0: dets((1, 0), (-1, 2)),
        1: dets((1, 0), (2, 2)),
        2: dets((2, 2)),
        3: dets((1, 0), (2, 1)),  # one box of track 2 called a bicycle: a car still
        4: dets((2, 2)),
    }
    for index, d in frames.items():
        log.add(index, index / FPS, d)
    one, two = log.tracks()
    assert (one.track_id, one.class_id, one.first_frame, one.last_frame) == (1, 0, 0, 3)
    assert one.observations == 3 and one.duration == 3 / FPS
    assert (two.track_id, two.class_id, two.first_frame, two.last_frame) == (2, 2, 1, 4)
    assert two.observations == 4 and abs(two.duration - 3 / FPS) < 1e-9
    assert len(log) == 2  # the box of no track (-1) is in none


def test_frames_seen_again_add_nothing_and_earlier_frames_extend_the_start() -> None:
    log = TrackLog()
    for index in (5, 6, 7):
        log.add(index, index / FPS, dets((3, 0)))
    version = log.version
    log.add(6, 6 / FPS, dets((3, 0)))  # stepped back: the same frame again
    assert log.version == version and log.tracks()[0].observations == 3
    log.add(2, 2 / FPS, dets((3, 0)))  # a seek back
    record = log.get(3)
    assert record is not None
    assert (record.first_frame, record.last_frame, record.observations) == (2, 7, 4)
    log.add(9, 9 / FPS, Detections.empty())  # no tracker output: nothing
    log.add(9, 9 / FPS, Detections(np.zeros((1, 4), np.float32), np.ones(1, np.float32),
                                   np.zeros(1, np.int32)))  # fmt: skip
    assert log.version == version + 1 and log.get(99) is None


def test_the_log_is_fed_by_its_stage_after_the_tracker_and_cleared_for_a_new_video() -> None:
    """Through the player's stages: the stand-in tracker gives IDs, the log stage after
    it records them; a new video (chains made afresh) or tracking off clears the log."""

    class Ids:
        def __call__(self, r: FrameResult) -> None:
            out = r.output
            assert isinstance(out, Detections)
            r.output = Detections(out.boxes, out.scores, out.class_ids,
                                  track_ids=np.arange(1, len(out) + 1, dtype=np.int64))  # fmt: skip

        def reset(self) -> None:
            pass

    asked: list[TrackerSettings] = []

    def make(settings: TrackerSettings) -> object:
        asked.append(settings)
        return lambda _source: [Ids()]

    tracking = PlaybackTracking(make)  # type: ignore[arg-type]
    factory = tracking.stages(TrackerSettings(kind="ocsort"))
    assert factory is not None and asked[-1].kind == "ocsort"
    stages = SourceStages(factory)
    plain = Detections(np.zeros((2, 4), np.float32), np.ones(2, np.float32),
                       np.array([0, 2], np.int32))  # fmt: skip
    for index in range(4):
        stages(result(index, plain))
    assert [(t.track_id, t.class_id, t.last_frame) for t in tracking.log.tracks()] == [
        (1, 0, 3),
        (2, 2, 3),
    ]
    stages.reset()  # a seek: the tracks seen stay listed
    assert len(tracking.log) == 2
    assert tracking.stages(None) is None  # tracking off: the list empties, and a frame
    stages(result(4, plain))  # of the old tracker still in flight adds nothing to it
    assert len(tracking.log) == 0
    factory = tracking.stages(TrackerSettings(kind="ocsort"))
    assert factory is not None
    stages = SourceStages(factory)
    stages.clear()  # another video: its first result makes the chain, and the log, anew
    stages(result(0, Detections.empty()))
    assert len(tracking.log) == 0
    export = tracking.export_stages()
    assert export is not None and not any(
        type(s).__name__ == "TrackLogStage" for s in export(0)
    )  # an export tracks without feeding the window's list
    assert tracking.stages(None) is None and tracking.export_stages() is None


def test_following_an_id_says_when_it_is_lost_and_found_again() -> None:
    follow = TrackFollow(12, 0, LABELS)
    assert follow.name == "person #12"
    seen = [
        follow.see(0, dets((12, 0), (4, 2))),
        follow.see(1, dets((4, 2), (12, 0))),
        follow.see(2, dets((4, 2))),
        follow.see(3, dets((4, 2))),
        follow.see(4, dets((12, 0))),
        follow.see(5, Detections.empty()),
    ]
    assert [s.event for s in seen] == [None, None, "lost", None, "found", "lost"]
    assert seen[2].message == "person #12 lost at frame 3"  # numbered as the window counts
    assert seen[4].message == "person #12 found again at frame 5"
    assert seen[0].box == (10.0, 20.0, 50.0, 90.0)
    assert seen[1].box == (70.0, 80.0, 110.0, 150.0)  # the track's box, wherever it is listed
    assert seen[3].box is None and not follow.present
    # absent from the very first frame: nothing to say yet
    assert TrackFollow(7, 2, LABELS).see(0, dets((4, 2))).event is None


def test_the_followed_track_is_marked_around_its_box_and_tag() -> None:
    """The region to mark is what the overlay draws of the followed box on the frame:
    its tag above it included, so the mark leaves the tag readable."""
    follow = TrackFollow(12, 0, LABELS)
    shown = dets((4, 2), (12, 0))
    step = follow.see(0, shown, (320, 240), OverlayStyle())
    assert step.box == (70.0, 80.0, 110.0, 150.0)
    assert step.region == mark_region(shown, 1, LABELS, OverlayStyle(), 320, 240)
    assert step.region is not None and step.region[1] < 80 - 10  # its tag, above the box
    assert follow.see(1, shown).region == step.box  # no image size: the box alone
    gone = follow.see(2, dets((4, 2)), (320, 240), OverlayStyle())
    assert gone.box is None and gone.region is None
