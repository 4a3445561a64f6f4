"""Lines, zones and events (core/stages/analytics, docs/analytics.md): synthetic
trajectories with exact expected counts, one per way counting is known to go wrong."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from framelens.core.errors import ConfigError
from framelens.core.stages.analytics import (
    AnalyticsStage,
    Counter,
    Event,
    EventsWriter,
    LineSpec,
    ZonesFile,
    ZoneSpec,
    load_zones,
    parse_zones,
)
from framelens.core.types import Detections

GATE = LineSpec("gate", (0.0, 100.0), (200.0, 100.0))  # walking +x: down is "in"


def box(x: float, y: float) -> list[float]:
    """A box whose bottom centre is (x, y)."""
    return [x - 5, y - 20, x + 5, y]


def run(
    spec: ZonesFile, frames: list[dict[int, tuple[float, float]]], fps: float = 10.0
) -> list[Event]:
    """Each frame: track ID -> bottom centre; the events, in order."""
    counter = Counter(spec)
    events: list[Event] = []
    for index, tracks in enumerate(frames):
        ids = np.array(list(tracks), np.int64)
        boxes = np.array([box(*p) for p in tracks.values()], np.float32).reshape(-1, 4)
        events += counter.update(index, index / fps, boxes, ids, np.zeros(len(ids), np.int32))
    return events


def crossings(events: list[Event]) -> list[tuple[int, int, str]]:
    return [(e.frame, e.track_id, e.direction) for e in events if e.kind == "cross"]


def path(ys: list[float], x: float = 100.0, track: int = 1) -> list[dict[int, tuple[float, float]]]:
    return [{track: (x, y)} for y in ys]


LINE = ZonesFile(lines=(GATE,))


def test_a_one_frame_flicker_across_the_line_is_no_crossing() -> None:
    assert crossings(run(LINE, path([90, 90, 110, 90, 90, 110, 90]))) == []


def test_a_crossing_held_for_min_frames_counts_once_at_its_first_frame() -> None:
    assert crossings(run(LINE, path([80, 90, 110, 120, 130, 140]))) == [(2, 1, "in")]
    assert crossings(run(LINE, path([120, 110, 90, 80]))) == [(2, 1, "out")]


def test_objects_moving_60_px_per_frame_are_all_counted() -> None:
    # 25 objects, none ever seen on the line (ultralytics PR#25492 counted 6 of 25)
    frames = [{t: (8.0 * t, -20.0 + 60 * i + t) for t in range(1, 26)} for i in range(5)]
    got = crossings(run(LINE, frames))
    assert len(got) == 25 and {d for _, _, d in got} == {"in"}


def test_an_object_already_on_the_line_when_first_seen_is_not_counted() -> None:
    assert crossings(run(LINE, path([100, 110, 120, 130]))) == []
    # ... until it crosses back: then it did cross
    assert crossings(run(LINE, path([100, 110, 120, 90, 80]))) == [(3, 1, "out")]


def test_a_line_ending_at_the_frame_edge_counts_boxes_clipped_to_the_frame() -> None:
    edge = ZonesFile(lines=(LineSpec("edge", (0.0, 470.0), (640.0, 470.0)),))
    # bottom centre clipped to the frame's bottom (480) as the object leaves, at x = 639
    assert crossings(run(edge, path([440, 460, 480, 480], x=639.0))) == [(2, 1, "in")]


def test_two_objects_crossing_at_once_in_opposite_directions_both_count() -> None:
    frames = [{1: (100, 90), 2: (100, 110)}, {1: (100, 110), 2: (100, 90)},
              {1: (100, 120), 2: (100, 80)}]  # fmt: skip
    assert sorted(crossings(run(LINE, frames))) == [(1, 1, "in"), (1, 2, "out")]


def test_a_crossing_beside_a_short_segment_is_not_counted() -> None:
    short = ZonesFile(lines=(LineSpec("short", (100.0, 100.0), (200.0, 100.0)),))
    assert crossings(run(short, path([80, 90, 110, 120], x=250.0))) == []
    # going round the end changed its side: crossing back through the segment is "out"
    back = path([80, 90, 110, 120], x=250.0) + path([110, 90, 80], x=150.0)
    assert crossings(run(short, back)) == [(5, 1, "out")]


def test_an_id_switch_on_the_line_counts_nothing_and_nothing_twice() -> None:
    frames = path([80, 90, 100]) + path([100, 110, 120, 130], track=2)
    assert crossings(run(LINE, frames)) == []


def test_a_stop_on_the_line_then_a_reversal_is_no_crossing() -> None:
    assert crossings(run(LINE, path([80, 90, 100, 100, 100, 90, 80]))) == []
    # a stop on the line then on across: one crossing, at the first frame past it
    assert crossings(run(LINE, path([80, 90, 100, 100, 110, 120]))) == [(4, 1, "in")]


def test_a_track_counts_once_per_direction_until_it_has_been_on_the_other_side() -> None:
    ys = [90, 110, 120, 95, 110, 120, 90, 80, 110, 120]  # in, flicker back, out, in
    assert crossings(run(LINE, path(ys))) == [(1, 1, "in"), (6, 1, "out"), (8, 1, "in")]


def test_min_frames_one_counts_the_first_frame_past_the_line() -> None:
    quick = ZonesFile(lines=(LineSpec("q", (0.0, 100.0), (200.0, 100.0), min_frames=1),))
    assert crossings(run(quick, path([90, 110, 90]))) == [(1, 1, "in"), (2, 1, "out")]


def test_a_line_sees_only_its_classes() -> None:
    cars = ZonesFile(lines=(LineSpec("gate", (0.0, 100.0), (200.0, 100.0), classes=(2,)),))
    counter = Counter(cars)
    got: list[Event] = []
    for i, y in enumerate([90, 110, 120]):
        boxes = np.array([box(100, y), box(50, y)], np.float32)
        got += counter.update(i, i / 10, boxes, np.array([1, 2]), np.array([0, 2]))
    assert [(e.track_id, e.class_id) for e in got] == [(2, 2)]


SQUARE = ZoneSpec("bay", ((0.0, 0.0), (100.0, 0.0), (100.0, 100.0), (0.0, 100.0)), loiter_s=1.0)


def test_zone_enter_exit_dwell_and_loiter_at_exact_frames() -> None:
    xs = [-50.0] * 3 + [50.0] * 18 + [150.0] * 3  # inside frames 3..20 at 10 fps
    xs[8] = 150.0  # a one-frame step outside: no exit
    events = run(ZonesFile(zones=(SQUARE,)), [{7: (x, 50.0)} for x in xs])
    got = [(e.kind, e.frame, e.dwell_s) for e in events]
    assert got == [("enter", 3, None), ("loiter", 13, 1.0), ("exit", 21, 1.8)]


def test_a_one_frame_visit_is_no_stay() -> None:
    xs = [-50.0, 50.0, -50.0, -50.0]
    assert run(ZonesFile(zones=(SQUARE,)), [{1: (x, 50.0)} for x in xs]) == []


def _tracked(y: float) -> Detections:
    return Detections(np.array([box(100, y)], np.float32), np.ones(1, np.float32),
                      np.zeros(1, np.int32), track_ids=np.array([1]))  # fmt: skip


def test_a_seek_back_forgets_tracks_but_does_not_count_again() -> None:
    stage = AnalyticsStage(LINE)
    ys = [80, 90, 110, 120, 130]
    for i, y in enumerate(ys):
        stage.update(i, i / 10, _tracked(y))
    stage.reset()  # seek back to frame 0 and play again
    again = [stage.update(i, i / 10, _tracked(y)) for i, y in enumerate(ys)]
    assert stage.tally.count("gate", "in") == 1 and again == [[]] * 5
    stage.reset()  # later frames count as usual
    later = [
        stage.update(i, i / 10, _tracked(y))
        for i, y in zip(range(5, 9), [120, 90, 80, 70], strict=True)
    ]
    assert stage.tally.count("gate", "out") == 1 and sum(map(len, later)) == 1
    # frames after the last counted count again, from where the track is seen anew
    assert stage.tally.as_json()["lines"]["gate"] == {
        "in": 1, "out": 1, "by_class": {"0": {"in": 1, "out": 1}}}  # fmt: skip


def test_the_events_file_has_one_row_per_event_and_appears_on_close(tmp_path: Path) -> None:
    target = tmp_path / "events.csv"
    with EventsWriter(target, {0: "person"}) as writer:
        writer.add_events([Event(3, 0.3, 1, 0, "cross", "gate", "in"),
                           Event(5, 0.5, 2, 0, "enter", "bay")])  # fmt: skip
        assert not target.exists()
    assert target.read_text().splitlines() == [
        "frame,time_s,track_id,class,kind,name,direction",
        "3,0.300,1,person,cross,gate,in",
        "5,0.500,2,person,enter,bay,",
    ]
    broken = EventsWriter(tmp_path / "aborted.csv")
    broken.abort()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.csv"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{", "bad JSON at line 1"),
        ('{"lines": [{"name": "a", "points": [[0, 0]]}]}', "line 'a': needs 2 points, has 1"),
        ('{"zones": [{"name": "z", "polygon": [[0, 0], [10, 10], [10, 0], [0, 10]]}]}',
         "zone 'z': the polygon crosses itself"),
        ('{"zones": [{"name": "z", "polygon": [[0, 0], [10, 10]]}]}', "at least 3 points"),
        ('{"zones": [{"name": "z", "polygon": [[0, 0], [100, 0], [100, 0]]}]}',
         "zone 'z': the polygon has no area"),
        ('{"zones": [{"name": "z", "polygon": [[0, 0], [50, 50], [100, 100]]}]}',
         "zone 'z': the polygon has no area"),
        ('{"lines": [{"name": "a", "points": [[0, 0], [9, 9]], "classes": ["dragon"]}]}',
         "line 'a': unknown class 'dragon'"),
        ('{"lines": [{"name": "a", "points": [[0, 0], [9, 9]], "anchor": "feet"}]}',
         "unknown anchor 'feet'"),
        ('{"lines": [{"name": "a", "points": [[0, 0], [9, 9]]}], '
         '"zones": [{"name": "a", "polygon": [[0, 0], [9, 0], [9, 9]]}]}', "used twice"),
    ],
)  # fmt: skip
def test_a_bad_zones_file_is_one_line_naming_the_file_and_the_problem(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = tmp_path / "zones.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_zones(path, {0: "person", 2: "car"})
    message = str(caught.value)
    assert str(path) in message and problem in message and "\n" not in message


def test_a_zones_file_saved_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    """Windows' Notepad starts a UTF-8 file with a byte-order mark; JSON does not allow
    one, but the file is the analyst's and means the same."""
    path = tmp_path / "zones.json"
    path.write_text('{"lines": [{"name": "gate", "points": [[0, 100], [200, 100]]}]}',
                    encoding="utf-8-sig")  # fmt: skip
    zones = load_zones(path)
    assert [line.name for line in zones.lines] == ["gate"]


def test_points_outside_the_frame_are_a_warning_not_an_error() -> None:
    data = {"lines": [{"name": "a", "points": [[0, 0], [700, 10]]}]}
    zones = parse_zones(data, "z.json", size=(640, 480))
    assert zones.warnings == ("z.json: line 'a': point (700, 10) is outside the 640x480 frame",)
    assert parse_zones(json.loads(json.dumps(data)), "z.json", size=(800, 480)).warnings == ()


def test_zones_of_any_shape_and_anchor_are_told_apart() -> None:
    ell = ZoneSpec("ell", ((0.0, 0.0), (100.0, 0.0), (100.0, 40.0), (40.0, 40.0), (40.0, 100.0),
                           (0.0, 100.0)))  # fmt: skip
    tri = ZoneSpec("tri", ((200.0, 0.0), (300.0, 100.0), (200.0, 100.0)), anchor="center")
    spec = ZonesFile(zones=(ell, tri))
    # track 1 waits in the ell's notch (outside it), track 2's centre sits in the triangle
    # (the triangle tests centres), track 3 in the ell's arm
    frames = [{1: (70.0, 70.0), 2: (240.0, 100.0), 3: (20.0, 80.0)}] * 3
    got = sorted((e.track_id, e.name, e.kind) for e in run(spec, frames))
    assert got == [(2, "tri", "enter"), (3, "ell", "enter")]


def test_the_stage_factory_pickles_for_processes_and_ray() -> None:
    import pickle

    from framelens.core.sessions.tracks import with_tracking
    from framelens.core.stages.analytics import AnalyticsStages
    from framelens.core.stages.tracking.settings import TrackerSettings

    factory = with_tracking(AnalyticsStages(LINE), TrackerSettings())
    assert factory is not None
    again = pickle.loads(pickle.dumps(factory))
    stages = again(0)
    assert [type(s).__name__ for s in stages] == ["TrackingStage", "AnalyticsStage"]


def test_a_track_lost_inside_a_zone_makes_no_exit_and_no_dwell() -> None:
    stage = AnalyticsStage(ZonesFile(zones=(SQUARE,)))
    for i, x in enumerate([-50.0, 50.0, 50.0, 50.0]):  # then never seen again
        stage.update(i, i / 10, _tracked_at(x, 50.0))
    for i in range(4, 40):
        stage.update(i, i / 10, Detections(track_ids=np.zeros(0, np.int64)))
    bay = stage.tally.as_json()["zones"]["bay"]
    assert (bay["enter"], bay["exit"], bay["dwell_s"]["stays"]) == (1, 0, 0)
    assert bay["loiter"] == 0  # seen inside 0.2 s, then lost: loitering needs it seen there


def _tracked_at(x: float, y: float) -> Detections:
    return Detections(np.array([box(x, y)], np.float32), np.ones(1, np.float32),
                      np.zeros(1, np.int32), track_ids=np.array([1]))  # fmt: skip
