"""Aggregate per-frame StageTimes into the medians and rates that reports print."""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field

from framelens.core.types import STAGES, FrameResult, StageTimes


@dataclass
class RunStats:
    """Collects the stage times of every frame of a run. Use as a runner observer."""

    times: list[StageTimes] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    finished: float | None = None

    def __call__(self, result: FrameResult) -> None:
        self.times.append(result.times)

    def stop(self) -> None:
        self.finished = time.perf_counter()

    @property
    def frames(self) -> int:
        return len(self.times)

    @property
    def wall_s(self) -> float:
        end = self.finished if self.finished is not None else time.perf_counter()
        return end - self.started

    @property
    def fps(self) -> float:
        return self.frames / self.wall_s if self.wall_s > 0 else 0.0

    def medians(self, skip: int = 0) -> dict[str, float]:
        """Median ms per stage over frames[skip:], stages that never ran left out."""
        out: dict[str, float] = {}
        for name in STAGES:
            vals = [getattr(t, name) for t in self.times[skip:]]
            vals = [v for v in vals if not math.isnan(v)]
            if vals:
                out[name] = round(statistics.median(vals), 3)
        return out
