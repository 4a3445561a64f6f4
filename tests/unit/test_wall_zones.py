"""Lines and zones per tile of the wall (core/sessions/wall_zones.py) and the picture
that draws them with their counts (core/stages/analytics/picture.py): each video's own
``<video>.zones.json`` (the window's), or one file for all; each source's stage counts
only its own tracks; the picture's counts are the tally's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from framelens.core.sessions.tracks import TrackStages
from framelens.core.sessions.wall_zones import WallZones, wall_stages, wall_zones, zones_of
from framelens.core.stages.analytics.picture import LiveCounts, ZonesPicture, shape_colour
from framelens.core.stages.analytics.stage import AnalyticsStage
from framelens.core.stages.source_stages import ChainedStages, SourceStages
from framelens.core.types import Detections, Frame, FrameResult, StageTimes

LINE = {"lines": [{"name": "door", "points": [[100, 200], [100, 0]]}]}
ZONE = {"zones": [{"name": "bay", "polygon": [[0, 0], [80, 0], [80, 200], [0, 200]]}]}


def _result(source: int, index: int, x: float, track: int = 1) -> FrameResult:
    """A tracked box whose bottom centre is at (x, 100)."""
    dets = Detections(
        np.array([[x - 5, 80, x + 5, 100]], np.float32), np.ones(1, np.float32),
        np.zeros(1, np.int32), track_ids=np.array([track], np.int64),
    )  # fmt: skip
    frame = Frame(np.zeros((200, 300, 3), np.uint8), index, index / 10, source_id=source)
    return FrameResult(frame, dets, StageTimes())


def test_a_video_has_its_own_zones_beside_it_or_one_file_is_given_for_all(
    tmp_path: Path,
) -> None:
    a, b, c = tmp_path / "a.mp4", tmp_path / "b.mp4", tmp_path / "c.mp4"
    for video in (a, b, c):
        video.write_bytes(b"")
    (tmp_path / "a.mp4.zones.json").write_text(json.dumps(LINE))
    (tmp_path / "b.mp4.zones.json").write_text(json.dumps(ZONE))
    assert zones_of(str(a)) == tmp_path / "a.mp4.zones.json"
    assert zones_of(str(c)) is None and zones_of("rtsp://cam/1") is None
    own, problems = wall_zones([str(a), str(b), str(c)])
    assert problems == []
    assert own[0] is not None and [s.name for s in own[0].lines] == ["door"]
    assert own[1] is not None and [s.name for s in own[1].zones] == ["bay"]
    assert own[2] is None
    shared, _ = wall_zones([str(a), str(b), str(c)], str(tmp_path / "b.mp4.zones.json"))
    assert all(z is not None and [s.name for s in z.zones] == ["bay"] for z in shared)
    (tmp_path / "c.mp4.zones.json").write_text('{"zones": [{"name": "z", "polygon": [[0, 0]]}]}')
    some, problems = wall_zones([str(a), str(c)])
    assert some[0] is not None and some[1] is None  # the bad file's tile counts nothing
    assert problems == [f"{tmp_path / 'c.mp4.zones.json'}: zone 'z': a polygon needs at least 3 "
                        "points, has 1"]  # fmt: skip


def _picture(result: FrameResult) -> ZonesPicture:
    return next(m for m in result.marks if isinstance(m, ZonesPicture))


def test_each_source_counts_its_own_tracks_into_its_own_picture(tmp_path: Path) -> None:
    (tmp_path / "a.mp4").write_bytes(b"")
    (tmp_path / "a.mp4.zones.json").write_text(json.dumps(LINE))
    zones, _ = wall_zones([str(tmp_path / "a.mp4"), str(tmp_path / "a.mp4")])
    stages = SourceStages(WallZones(zones))
    # source 0's track 1 walks right across the door; source 1's track 1 stays left
    for k, x in enumerate((60, 80, 120, 140, 160)):
        for source, at in ((0, x), (1, 60 + k)):
            result = _result(source, k, at)
            stages(result)
            counts = _picture(result).counts
            assert counts is not None
            counted = counts.lines[0]
    assert counted == ("door", 0, 0)  # source 1's, last
    last0 = _result(0, 5, 170)
    stages(last0)
    counts0 = _picture(last0).counts
    assert counts0 is not None and counts0.lines == (("door", 1, 0),)  # crossed once: in


def test_a_zones_picture_counts_who_is_inside_now_and_who_entered() -> None:
    from framelens.core.stages.analytics.zones import parse_zones

    stage = AnalyticsStage(parse_zones(ZONE), draw=True)
    for k in range(3):  # track 1 walks into the bay
        result = _result(0, k, 40, track=1)
        stage(result)
    assert stage.counts(2, 0.2).zones == (("bay", 1, 1),)  # inside now, entered
    later = FrameResult(
        Frame(np.zeros((200, 300, 3), np.uint8), 3, 0.3), Detections.empty(), StageTimes()
    )
    stage(later)  # nobody seen on frame 3: nobody inside now, one entered
    counts = _picture(later).counts
    assert counts is not None and counts.zones == (("bay", 0, 1),)


def test_the_picture_paints_the_line_and_its_counts_into_the_frame() -> None:
    from framelens.core.stages.analytics.zones import parse_zones

    picture = ZonesPicture(parse_zones(LINE), LiveCounts(0, 0.0, (("door", 3, 1),)))
    assert picture.texts() == ("door in 3 out 1",)
    image = np.zeros((200, 300, 3), np.uint8)
    picture.paint(image)
    assert (image[20:180, 100] == shape_colour(0)).all(axis=1).mean() > 0.5
    assert image[150:, 140:].sum() == 0  # nothing away from the line, its arrow and tag


def test_a_wall_with_zones_but_no_tracker_tracks_with_bytetrack() -> None:
    zones = WallZones((None,))
    assert wall_stages(None, zones) is None  # no tile has zones: nothing to track for
    from framelens.core.stages.analytics.zones import parse_zones

    some = WallZones((parse_zones(LINE), None))
    made = wall_stages(None, some)
    assert isinstance(made, ChainedStages) and isinstance(made.first, TrackStages)
    assert made.first.settings.kind == "bytetrack"
    assert len(made(1)) == 1  # tile 1: the tracker only


@pytest.mark.parametrize("ids", [[1], [1, 2]])
def test_counter_inside_counts_only_tracks_seen_at_that_frame(ids: list[int]) -> None:
    from framelens.core.stages.analytics.counting import Counter
    from framelens.core.stages.analytics.zones import parse_zones

    counter = Counter(parse_zones(ZONE))
    boxes = np.array([[35, 80, 45, 100]] * len(ids), np.float32)
    for k in range(3):
        counter.update(k, k / 10, boxes, np.array(ids), np.zeros(len(ids), np.int32))
    assert counter.inside(2) == [len(ids)] and counter.inside(3) == [0]


def test_tags_of_a_line_and_a_zone_sharing_a_corner_are_stacked_not_on_top() -> None:
    """A door line whose top end is the zone's top corner (as users draw them): both
    tags readable, one under the other, in the player's picture as on the wall."""
    from framelens.core.stages.analytics.zones import parse_zones

    spec = parse_zones({
        "lines": [{"name": "door", "points": [[200, 200], [200, 60]]}],
        "zones": [{"name": "bay", "polygon": [[200, 60], [290, 60], [290, 200], [200, 200]]}],
    })  # fmt: skip
    picture = ZonesPicture(spec, LiveCounts(0, 0.0, (("door", 1, 0),), (("bay", 0, 1),)))
    first, second = (m.box for m in picture.overlay(300, 200).boxes)
    apart = first.y2 < second.y1 or second.y2 < first.y1 or first.x2 < second.x1
    assert apart, (first, second)
