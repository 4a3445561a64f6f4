"""The A-B loop (core/sessions/playback/ab_loop.py): its policy, and the Qt-free Player
holding playback in it frame-exact on the bundled sample video."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from framelens.core.sessions.playback.ab_loop import ABLoop
from framelens.core.sessions.playback.player import Player, PlayerState
from framelens.core.types import FrameResult

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4")
SAMPLE_FRAMES = 1394


def test_l_sets_a_then_b_then_clears_as_mpv_does() -> None:
    loop = ABLoop().press(10)
    assert (loop.a, loop.b, loop.active) == (10, None, False)
    loop = loop.press(20)
    assert (loop.a, loop.b, loop.active) == (10, 20, True)
    assert loop.press(30) == ABLoop()


def test_b_before_a_swaps() -> None:
    assert ABLoop().press(20).press(10) == ABLoop(10, 20)


def test_playing_wraps_after_b_only_from_inside_the_loop() -> None:
    loop = ABLoop(10, 20)
    assert loop.wrap(19, 20) == 10  # B shown: A next
    assert [loop.wrap(i - 1, i) for i in range(11, 20)] == [None] * 9
    assert loop.wrap(5, 6) is None  # before A: plays on into the loop
    assert loop.wrap(18, 22) == 10  # B dropped late: back to A all the same
    assert loop.wrap(None, 30) is None  # a seek past B plays on from there
    assert loop.wrap(30, 31) is None
    assert loop.wrap(None, 20) == 10  # a seek onto B (or play pressed there): A next
    assert loop.wrap(None, 15) is None
    assert ABLoop(10).wrap(19, 20) is None  # A alone: no loop


class Recorder:
    def __init__(self) -> None:
        self.indices: list[int] = []
        self.times: list[float] = []  # when each result came (perf_counter s)
        self.states: list[PlayerState] = []
        self.errors: list[str] = []
        self._cond = threading.Condition()

    def on_result(self, result: FrameResult) -> None:
        with self._cond:
            self.indices.append(result.frame.index)
            self.times.append(time.perf_counter())
            self._cond.notify_all()

    def on_state(self, state: PlayerState) -> None:
        with self._cond:
            self.states.append(state)
            self._cond.notify_all()

    def on_error(self, message: str) -> None:
        with self._cond:
            self.errors.append(message)
            self._cond.notify_all()

    def wait(self, predicate: Callable[[], bool], timeout: float = 60.0) -> None:
        with self._cond:
            assert self._cond.wait_for(predicate, timeout), "timed out"

    @property
    def state(self) -> PlayerState:
        return self.states[-1] if self.states else PlayerState()


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


@pytest.fixture
def player(rec: Recorder) -> Iterator[Player]:
    p = Player(rec.on_result, rec.on_state, rec.on_error)
    p.open(SAMPLE)  # no model: the frames as decoded
    rec.wait(lambda: rec.state.index == 0)
    p.set_realtime(False)  # every frame, as fast as they come: none dropped
    yield p
    p.close()


def seek(player: Player, rec: Recorder, frame: int) -> int:
    """Show ``frame``; where it is in the frames shown."""
    start = len(rec.indices)
    player.seek(frame)
    rec.wait(lambda: frame in rec.indices[start:])
    return start + rec.indices[start:].index(frame)


def set_loop(player: Player, rec: Recorder, a: int, b: int) -> None:
    for frame in (a, b):
        player.seek(frame)
        rec.wait(lambda f=frame: rec.state.index == f)  # type: ignore[misc]
        player.press_loop()
    rec.wait(lambda: rec.state.loop.active)


def test_a_loop_10_20_plays_10_to_20_then_10_again(player: Player, rec: Recorder) -> None:
    set_loop(player, rec, 20, 10)  # B pressed first: swapped
    assert rec.state.loop == ABLoop(10, 20)
    start = seek(player, rec, 10)
    player.play()
    rec.wait(lambda: len(rec.indices) >= start + 3 * 11)
    player.pause()
    assert rec.indices[start : start + 3 * 11] == list(range(10, 21)) * 3


def test_playing_into_the_loop_from_before_a_is_held_in_it(player: Player, rec: Recorder) -> None:
    set_loop(player, rec, 10, 20)
    start = seek(player, rec, 3)
    player.play()
    rec.wait(lambda: len(rec.indices) >= start + 30)
    player.pause()
    assert rec.indices[start : start + 30] == [*range(3, 21), *range(10, 21), 10]


def test_a_seek_past_b_plays_on_and_stepping_goes_where_told(player: Player, rec: Recorder) -> None:
    set_loop(player, rec, 10, 20)
    player.step(1)  # paused on B: a step goes past it
    rec.wait(lambda: rec.state.index == 21)
    start = seek(player, rec, 100)
    player.play()
    rec.wait(lambda: len(rec.indices) >= start + 20)
    player.pause()
    assert rec.indices[start : start + 20] == list(range(100, 120))


def test_play_on_b_goes_to_a_and_a_third_press_clears(player: Player, rec: Recorder) -> None:
    set_loop(player, rec, 10, 20)  # paused on B
    start = seek(player, rec, 20)
    player.play()
    rec.wait(lambda: len(rec.indices) >= start + 4)
    player.pause()
    assert rec.indices[start : start + 4] == [20, 10, 11, 12]
    rec.wait(lambda: not rec.state.playing)
    player.press_loop()
    rec.wait(lambda: rec.state.loop == ABLoop())


def test_another_video_clears_the_loop(player: Player, rec: Recorder) -> None:
    set_loop(player, rec, 10, 20)
    player.open(SAMPLE)
    rec.wait(lambda: rec.state.index == 0 and rec.state.status == "paused")
    assert rec.state.loop == ABLoop()
    assert not rec.errors


def test_a_loop_ending_on_the_last_frame_loops_instead_of_ending(
    player: Player, rec: Recorder
) -> None:
    last = SAMPLE_FRAMES - 1
    set_loop(player, rec, last - 5, last)
    start = seek(player, rec, last - 2)
    player.play()
    rec.wait(lambda: len(rec.indices) >= start + 10)
    player.pause()
    assert rec.indices[start : start + 10] == [
        *range(last - 2, last + 1),
        *range(last - 5, last + 1),
        last - 5,
    ]
    assert "ended" not in {s.status for s in rec.states[-20:]}


def test_in_real_time_b_stays_on_screen_its_frame_time_before_a_comes(
    player: Player, rec: Recorder
) -> None:
    """Played in real time (the sample: 10 fps), B is shown as long as every other frame
    (100 ms), not only until A is decoded, so the loop plays 10 ... 20 at the file's pace
    and B is not replaced before the screen shows it."""
    set_loop(player, rec, 10, 14)
    player.set_realtime(True)
    start = seek(player, rec, 10)
    player.play()
    rec.wait(lambda: len(rec.indices) >= start + 3 * 5 + 1)
    player.pause()
    shown = rec.indices[start : start + 3 * 5 + 1]
    assert shown == [*range(10, 15)] * 3 + [10]
    times = rec.times[start : start + len(shown)]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    after_b = [gap for index, gap in zip(shown, gaps, strict=False) if index == 14]
    # every frame waits for its due time; late ones only come later, never sooner
    assert min(after_b) >= 0.09, after_b
