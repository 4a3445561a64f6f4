"""Lines and zones in playback (core/sessions/playback/analytics.py): a real video played
through the detector and a real tracker is counted on every frame played, its counts
drawn next to the line in the picture the window shows, the events kept once per frame
across a seek back, and the lines and zones saved beside the video and read again."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from framelens.core.errors import ConfigError
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.playback.analytics import PlaybackAnalytics
from framelens.core.sessions.playback.player import Player, PlayerState
from framelens.core.sessions.playback.tracking import PlaybackTracking
from framelens.core.sessions.runs import run_to_outputs
from framelens.core.stages.analytics.picture import LiveCounts, ZonesPicture, shape_colour
from framelens.core.stages.analytics.zones import parse_zones, zones_as_json, zones_beside
from framelens.core.stages.sources import open_source
from framelens.core.stages.tracking.settings import TrackerSettings
from framelens.core.types import FrameResult
from media_factory import sample_clips

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
LABELS = resolve_model(DEFAULT_MODEL).labels

# The sample's first walker crosses x = 600 left to right around frame 190 (counted by
# hand: tests/unit/test_cli_analytics.py); the clip holds frames 150..239.
START, FRAMES = 150, 90
DOOR = {"name": "door", "points": [[600, 432], [600, 200]], "classes": ["person"]}
RIGHT = {"name": "right", "polygon": [[610, 200], [767, 200], [767, 431], [610, 431]]}
SPEC = parse_zones({"lines": [DOOR], "zones": [RIGHT]}, labels=LABELS)


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> str:
    return sample_clips(tmp_path_factory.mktemp("zones_clip"), SAMPLE, (START,), FRAMES)[0]


class Shown:
    """What the player showed: each frame's index, counts (from its mark) and picture."""

    def __init__(self) -> None:
        self.frames: list[tuple[int, LiveCounts | None, np.ndarray]] = []
        self.states: list[PlayerState] = []
        self.errors: list[str] = []
        self.cond = threading.Condition()

    def on_result(self, result: FrameResult) -> None:
        marks = [m for m in result.marks if isinstance(m, ZonesPicture)]
        assert result.annotated is not None
        with self.cond:
            counts = marks[0].counts if marks else None
            self.frames.append((result.frame.index, counts, result.annotated.copy()))
            self.cond.notify_all()

    def on_state(self, state: PlayerState) -> None:
        with self.cond:
            self.states.append(state)
            self.cond.notify_all()

    def wait(self, predicate: Callable[[], bool], timeout: float = 120.0) -> None:
        with self.cond:
            assert self.cond.wait_for(predicate, timeout), "timed out"


def _play_to_end(player: Player, shown: Shown) -> None:
    ended = sum(s.status == "ended" for s in shown.states)
    player.play()
    shown.wait(lambda: sum(s.status == "ended" for s in shown.states) > ended)


def test_a_played_video_is_counted_drawn_and_kept_once_across_a_seek(clip: str) -> None:
    tracking = PlaybackTracking()
    analytics = tracking.analytics
    analytics.set_labels(LABELS)
    analytics.set_zones(SPEC)
    shown = Shown()
    player = Player(shown.on_result, shown.on_state, shown.errors.append, drop_late=False)
    try:
        player.set_realtime(False)
        player.open(clip, PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1))
        shown.wait(lambda: len(shown.frames) >= 1)
        player.set_stages(tracking.stages(TrackerSettings.for_kind("bytetrack", frame_rate=10)))
        _play_to_end(player, shown)
        events = analytics.events()
        crossed = [e for e in events if e.kind == "cross"]
        assert [(e.name, e.direction, LABELS[e.class_id]) for e in crossed] == [
            ("door", "in", "person")
        ]
        assert abs(crossed[0].frame + START - 190) <= 10
        assert [e.kind for e in events if e.name == "right"] == ["enter"]
        index, counts, picture = shown.frames[-1]
        assert index == FRAMES - 1 and counts is not None
        assert counts.lines == (("door", 1, 0),)
        assert counts.zones[0][2] == 1  # entered once
        by_frame = {i: c for i, c, _ in shown.frames if c is not None}
        before = by_frame[crossed[0].frame - 1]
        assert before.lines == (("door", 0, 0),) and before.zones == (("right", 0, 0),)
        entered = next(e.frame for e in events if e.kind == "enter")
        assert by_frame[entered + 2].zones == (("right", 1, 1),)  # inside now: the walker
        # the line is in the picture, in its colour, where no box covers it
        assert tuple(int(v) for v in picture[215, 600]) == shape_colour(0)

        player.seek(0)  # played again from the start: nothing counted twice
        _play_to_end(player, shown)
        assert analytics.events() == events
        assert shown.frames[-1][1] == counts

        # another tracker (IDs numbered afresh): the counts start again
        generation = analytics.generation
        player.set_stages(tracking.stages(TrackerSettings.for_kind("ocsort", frame_rate=10)))
        shown.wait(lambda: analytics.generation > generation)
        assert analytics.events() == []
    finally:
        player.close()
    assert not shown.errors


def test_zones_changed_while_tracking_keep_the_tracker(clip: str) -> None:
    """Editing the lines and zones restarts the counts, not the tracker (its IDs go on)."""
    tracking = PlaybackTracking()
    tracking.analytics.set_labels(LABELS)
    shown = Shown()
    player = Player(shown.on_result, shown.on_state, shown.errors.append, drop_late=False)
    try:
        player.open(clip, PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1))
        shown.wait(lambda: len(shown.frames) >= 1)
        # (the paused frame is shown again through the new stages: waits go by the
        # frame shown, not by how many came, or one falls a step behind)
        player.set_stages(tracking.stages(TrackerSettings.for_kind("bytetrack", frame_rate=10)))
        for n in range(1, 5):
            player.step(1)
            shown.wait(lambda n=n: shown.frames[-1][0] == n)  # type: ignore[misc]
        assert shown.frames[-1][1] is None  # no lines yet: nothing drawn
        tracks_before = len(tracking.log.tracks())
        tracking.analytics.set_zones(SPEC)
        player.step(1)
        shown.wait(lambda: shown.frames[-1][0] == 5)
        assert shown.frames[-1][1] is not None
        assert len(tracking.log.tracks()) == tracks_before >= 1  # the same tracks
    finally:
        player.close()
    assert not shown.errors


def test_an_export_counts_and_draws_the_lines_as_the_window(clip: str, tmp_path: Path) -> None:
    tracking = PlaybackTracking()
    tracking.analytics.set_labels(LABELS)
    tracking.analytics.set_zones(SPEC)
    tracking.stages(TrackerSettings.for_kind("bytetrack", frame_rate=10))
    out = tmp_path / "export.mp4"
    run_to_outputs(clip, PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1),
                   export=str(out), progress=False,
                   stages=tracking.export_stages(zones=True))  # fmt: skip
    assert tracking.export_stages() is not None  # the wall's: tracking only
    source = open_source(str(out))
    try:
        frame = source.read()
        assert frame is not None
        b, g, r = (int(v) for v in frame.image[215, 600])
    finally:
        source.close()
    want = shape_colour(0)
    assert max(abs(b - want[0]), abs(g - want[1]), abs(r - want[2])) < 60  # H.264's colours


def test_zones_are_saved_beside_the_video_and_read_when_it_opens_again(
    clip: str, tmp_path: Path
) -> None:
    video = tmp_path / "clip.mp4"
    video.write_bytes(Path(clip).read_bytes())
    first = PlaybackAnalytics()
    first.set_labels(LABELS)
    assert first.use_video(str(video), (768, 432)) is None  # nothing beside it yet
    first.set_zones(SPEC)
    saved = first.save()
    assert saved == zones_beside(video) == Path(f"{video}.zones.json")
    data = json.loads(saved.read_text())
    assert data == {"lines": [{**DOOR}], "zones": [RIGHT]}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left

    again = PlaybackAnalytics()
    again.set_labels(LABELS)
    said = again.use_video(str(video), (768, 432))
    assert said is not None and str(saved) in said
    assert again.spec == SPEC

    saved.write_text('{"zones": [{"name": "bay", "polygon": [[0, 0], [9, 9], [9, 0], [0, 9]]}]}')
    third = PlaybackAnalytics()
    said = third.use_video(str(video), (768, 432))
    assert said == f"{saved}: zone 'bay': the polygon crosses itself"
    assert not third.spec


def test_saving_where_it_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    analytics = PlaybackAnalytics()
    analytics.set_zones(SPEC)
    with pytest.raises(ConfigError, match=r"^cannot write .*does not exist$"):
        analytics.save(tmp_path / "missing" / "z.json")
    with pytest.raises(ConfigError, match="no video file open"):
        analytics.save()


def test_zones_as_json_reads_back_the_same() -> None:
    spec = parse_zones(
        {"lines": [{"name": "gate", "points": [[1.5, 2], [30, 40]], "anchor": "center",
                    "min_frames": 3}],
         "zones": [{"name": "bay", "polygon": [[0, 0], [10, 0], [10, 10]], "loiter_s": 2.5,
                    "classes": [0, 2]}]},
        labels=LABELS,
    )  # fmt: skip
    assert parse_zones(zones_as_json(spec, LABELS), labels=LABELS) == spec
    assert zones_as_json(spec, LABELS)["zones"][0]["classes"] == ["person", "car"]
