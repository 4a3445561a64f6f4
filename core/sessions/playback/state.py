"""What the player tells its GUI: its state, and the measured playback rate."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

from framelens.core.errors import error_message as error_message  # re-exported
from framelens.core.sessions.playback.ab_loop import NO_LOOP, ABLoop
from framelens.core.types import SourceInfo


@dataclass(frozen=True)
class PlayerState:
    """A snapshot of the player, sent on every change and periodically while playing."""

    status: str = "empty"  # "empty" | "paused" | "playing" | "ended"
    index: int = -1  # source index of the frame last shown, -1 before the first
    frame_count: int | None = None
    fps: float = 0.0  # measured rate of results while playing
    reconnecting: bool = False  # a live stream is down and being reconnected (backoff)
    dropped: int = 0  # frames dropped unprocessed since the source opened (real time, late)
    source: SourceInfo | None = None
    model: str = ""
    backend: str = ""
    device: str = ""
    precision: str = ""
    speed: float = 1.0
    realtime: bool = True
    loading_model: bool = False
    decoder: str = ""  # what decodes the source: "cpu", "nvdec (PyNvVideoCodec)", ...
    plan: tuple[str, ...] = ()  # the model's plan, a choice and why a line (build.plan)
    loop: ABLoop = NO_LOOP  # the A-B loop (core/sessions/playback/ab_loop.py)

    @property
    def playing(self) -> bool:
        return self.status == "playing"


class RateMeter:
    """Results per second over the last few seconds."""

    def __init__(self, window: int = 60) -> None:
        self._stamps: deque[float] = deque(maxlen=window)

    def tick(self) -> None:
        self._stamps.append(time.perf_counter())

    def reset(self) -> None:
        self._stamps.clear()

    @property
    def fps(self) -> float:
        if len(self._stamps) < 2:
            return 0.0
        span = self._stamps[-1] - self._stamps[0]
        return (len(self._stamps) - 1) / span if span > 0 else 0.0
