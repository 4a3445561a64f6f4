"""Which late frames real-time playback drops (core/sessions/playback/clock.py), on a
simulated timeline: the real PlaybackClock, its ``now`` stepped by a small model of the
player (a decoder filling a decode-ahead queue of two, one inference worker, each frame
shown when due). The player tests (tests/unit/test_player.py) check the same on the
real player at the speeds this machine allows; this reaches the corners: a model far
slower than the source, and decoding slower than the asked rate."""

from __future__ import annotations

import random
from collections import deque

import pytest
from framelens.core.sessions.playback import clock as player_clock
from framelens.core.sessions.playback.clock import PlaybackClock

FPS = 30.0
DEPTH = 2  # the player's decode-ahead


def simulate(
    monkeypatch: pytest.MonkeyPatch, speed: float, decode_s: float, infer_s: float
) -> tuple[float, float]:
    """(frames of the video passed per second, frames shown per second) over 10 s of
    simulated playback after 2 s of warm-up."""
    t = [0.0]
    monkeypatch.setattr(player_clock, "now", lambda: t[0])
    clock = PlaybackClock(1 / FPS)
    clock.configure(speed=speed)
    queue: deque[int] = deque()
    decoded, decoder_at = 0, 0.0  # frames decoded; when the decoder finished the last

    def fill() -> None:
        nonlocal decoded, decoder_at
        while len(queue) < DEPTH and decoder_at + decode_s <= t[0]:
            decoder_at += decode_s
            queue.append(decoded)
            decoded += 1

    shown: list[tuple[float, int]] = []
    while t[0] < 12.0:
        fill()
        if not queue:
            t[0] = decoder_at + decode_s  # wait for the next decoded frame
            continue
        if len(queue) == DEPTH:
            decoder_at = max(decoder_at, t[0])  # it was blocked on the full queue
        index = queue.popleft()
        fill()
        if clock.drop(index / FPS, newer_waiting=bool(queue)):
            continue
        t[0] += infer_s
        t[0] = max(t[0], clock.due(index / FPS))
        shown.append((t[0], index))
    window = [(s, i) for s, i in shown if s >= 2.0]
    span = window[-1][0] - window[0][0]
    return (window[-1][1] - window[0][1]) / span, len(window) / span


def test_a_model_far_slower_than_the_source_keeps_the_video_at_its_pace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """200 ms of inference on a 30 fps source decoded at twice its rate: dropping must go
    on until it has caught up, or every frame let through adds 200 ms of lag and the
    video crawls (18 of 30 frames/s with a fixed 1/30 s bound on dropping)."""
    position, shown = simulate(monkeypatch, speed=1.0, decode_s=0.016, infer_s=0.2)
    assert position >= 0.9 * FPS, position
    assert shown <= 1 / 0.2 + 0.5  # what the model can give


def test_decoding_slower_than_asked_still_shows_a_moving_picture(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """32x asked (960 frames/s) of a decoder that gives 667: every frame is late; the
    picture still moves (before: nothing shown after the first frames) at about the
    decoder's pace."""
    position, shown = simulate(monkeypatch, speed=32.0, decode_s=0.0015, infer_s=0.003)
    assert shown >= 25, shown
    assert position >= 0.8 / 0.0015, position


def test_a_live_source_steadily_late_is_not_frozen_by_dropping(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 30 fps stream whose frames all arrive 50 ms late (a camera clock drifting from
    the host's), with 5 ms of jitter: its frames advance at the clock's own pace, so
    dropping does not catch up and must not run on (a 1 s freeze, 31 frames in a row,
    when jitter alone decided)."""
    t = [0.0]
    monkeypatch.setattr(player_clock, "now", lambda: t[0])
    clock = PlaybackClock(1 / FPS)
    clock.due(0.0)  # anchored on the first frame
    jitter = random.Random(1)
    run = longest = shown = 0
    for n in range(1, 1500):
        t[0] = n / FPS + 0.05 + jitter.uniform(0.0, 0.005)
        if clock.drop(n / FPS, newer_waiting=False):
            run += 1
            longest = max(longest, run)
        else:
            run, shown = 0, shown + 1
    assert longest <= 3, longest
    assert shown / (1500 / FPS) >= 8, shown
