"""Playback with per-source stages: the overlay of a host frame is drawn after them, so a
tracker's IDs and trails are in the picture; stages change while a video is open; an
overlay change on a paused frame redraws it without restarting the stages."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.playback.player import Player
from framelens.core.stages.draw.style import OverlayStyle, class_colour, track_colour
from framelens.core.stages.source_stages import SourceStage
from framelens.core.types import Detections, FrameResult
from media_factory import sample_clips

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
TRACK = 7  # the ID the stage gives every box


class Labelling:
    """A stand-in tracker: every box becomes track 7, with a trail from the frame's
    top-left corner to its centre; resets are counted."""

    def __init__(self, resets: list[int]) -> None:
        self.resets = resets

    def __call__(self, result: FrameResult) -> None:
        dets = result.output
        assert isinstance(dets, Detections)
        n = len(dets)
        centres = (dets.boxes[:, :2] + dets.boxes[:, 2:]) / 2
        trails = tuple(np.array([[2.0, 2.0], c], np.float32) for c in centres)
        result.output = Detections(
            dets.boxes, dets.scores, dets.class_ids, dets.landmarks,
            np.full(n, TRACK, np.int64), trails,
        )  # fmt: skip

    def reset(self) -> None:
        self.resets.append(1)


class Shown:
    """What the player showed: (frame index, annotated picture, output)."""

    def __init__(self) -> None:
        self.results: list[tuple[int, np.ndarray, Detections]] = []
        self.errors: list[str] = []
        self.cond = threading.Condition()

    def on_result(self, result: FrameResult) -> None:
        assert result.annotated is not None
        with self.cond:
            dets = result.output
            assert isinstance(dets, Detections)
            self.results.append((result.frame.index, result.annotated.copy(), dets))
            self.cond.notify_all()

    def wait(self, predicate: Callable[[], bool], timeout: float = 60.0) -> None:
        with self.cond:
            assert self.cond.wait_for(predicate, timeout), "timed out"


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("tracks_clip")
    return sample_clips(folder, SAMPLE, (300,), 8)[0]


def _edge_colour(picture: np.ndarray, dets: Detections) -> tuple[int, int, int]:
    """The colour in the middle of the first box's left edge."""
    x1, y1, _x2, y2 = (round(float(v)) for v in dets.boxes[0])
    b, g, r = picture[(y1 + y2) // 2, x1]
    return int(b), int(g), int(r)


def test_ids_are_drawn_after_the_stages_and_stages_change_while_open(clip: str) -> None:
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)
    resets: list[int] = []
    shown = Shown()
    player = Player(shown.on_result, lambda _s: None, shown.errors.append)
    try:
        player.open(clip, settings)
        shown.wait(lambda: len(shown.results) >= 1)
        _, plain, dets = shown.results[-1]
        assert len(dets) > 0 and dets.track_ids is None
        assert _edge_colour(plain, dets) == class_colour(int(dets.class_ids[0]))

        def stages(_source: int) -> list[SourceStage]:
            return [Labelling(resets)]

        player.set_stages(stages)  # the paused frame again, through the stage
        shown.wait(lambda: len(shown.results) >= 2)
        _, tracked, dets = shown.results[-1]
        assert dets.track_ids is not None and set(dets.track_ids.tolist()) == {TRACK}
        assert _edge_colour(tracked, dets) == track_colour(TRACK)  # drawn after the stage
        cx = round(float(dets.boxes[0, 0] + dets.boxes[0, 2]) / 2)
        cy = round(float(dets.boxes[0, 1] + dets.boxes[0, 3]) / 2)
        mid = ((2 + cx) // 2, (2 + cy) // 2)  # half way along the trail
        near = tracked[mid[1] - 2 : mid[1] + 3, mid[0] - 2 : mid[0] + 3].reshape(-1, 3)
        assert any(tuple(int(v) for v in p) == track_colour(TRACK) for p in near)

        for n in (3, 4, 5):  # playing on: every frame drawn after its stage
            player.step(1)
            shown.wait(lambda n=n: len(shown.results) >= n)  # type: ignore[misc]
        for _index, picture, dets in shown.results[2:]:
            if len(dets):
                assert _edge_colour(picture, dets) == track_colour(TRACK)

        resets_before = len(resets)
        player.update(overlay=OverlayStyle(trails=False))  # paused: redrawn, not redone
        shown.wait(lambda: len(shown.results) >= 6)
        index, redrawn, dets = shown.results[-1]
        assert index == shown.results[-2][0]
        assert len(resets) == resets_before  # the stage was not restarted
        assert _edge_colour(redrawn, dets) == track_colour(TRACK)
        assert dets.track_ids is not None and dets.trails is not None

        player.set_stages(None)  # tracking off: the boxes as before
        shown.wait(lambda: len(shown.results) >= 7)
        _, untracked, dets = shown.results[-1]
        assert dets.track_ids is None
        assert _edge_colour(untracked, dets) == class_colour(int(dets.class_ids[0]))
    finally:
        player.close()
    assert not shown.errors


def test_stages_set_while_playing_apply_to_the_next_frames(clip: str) -> None:
    """Tracking turned on while the video plays: the frames after it come through the
    stage and are drawn with its IDs, without the video being opened again."""
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)
    resets: list[int] = []
    shown = Shown()
    states: list[str] = []
    player = Player(shown.on_result, lambda s: states.append(s.status), shown.errors.append,
                    drop_late=False)  # fmt: skip
    try:
        player.set_speed(0.25)  # slow enough to be playing when the stage comes
        player.open(clip, settings, play=True)
        shown.wait(lambda: len(shown.results) >= 2)
        opened = states.count("paused")  # an open publishes paused before it plays

        def stages(_source: int) -> list[SourceStage]:
            return [Labelling(resets)]

        player.set_stages(stages)
        shown.wait(lambda: any(d.track_ids is not None for _, _, d in shown.results))
        first = next(i for i, (_, _, d) in enumerate(shown.results) if d.track_ids is not None)
        shown.wait(lambda: len(shown.results) >= first + 2)
        for _index, picture, dets in shown.results[first:]:
            assert dets.track_ids is not None  # every frame after it
            if len(dets):
                assert _edge_colour(picture, dets) == track_colour(TRACK)
        assert [i for i, _, _ in shown.results] == sorted(i for i, _, _ in shown.results)
        assert states.count("paused") == opened  # it played on: no new open, no pause
    finally:
        player.close()
    assert not shown.errors
