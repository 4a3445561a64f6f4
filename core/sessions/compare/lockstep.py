"""Compare panes stepping through a source on the session's drive: compare's one loop.

The CLI's comparison runs a range once (``run_lockstep``, core/sessions/compare/to_report.py);
the compare view plays, pauses and restarts (core/sessions/compare_view.py); a kept
report computes its gaps (core/sessions/compare/saved.py). Each steps through a
LockstepFeed: the drive (core/sessions/drive.py, the executor every consumer uses)
decodes ahead while the panes run each frame in turn (never side by side) on its one
worker (core/pipeline/compare/panes.py ``LockstepWorker``), and hands the steps out in
frame order. A pane whose GPU fails moves as every session's sources do (another GPU
of the comparison, else the CPU, from the frame it reached: ``CompareRunner``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from framelens.core.errors import Cancelled
from framelens.core.pipeline.compare.panes import (
    CompareRunner,
    CompareStep,
    LockstepWorker,
    PaneSpec,
)
from framelens.core.pipeline.decode_ahead import End, Failed
from framelens.core.pipeline.ranges import RunRange, seek_to_start
from framelens.core.sessions.drive import Drive
from framelens.core.sessions.failover import Failover
from framelens.core.sessions.opening import SourceOpener
from framelens.core.stages.source_stages import StageFactory
from framelens.core.stages.sources import Source

if TYPE_CHECKING:
    from framelens.core.stages.tracking.settings import TrackerSettings

__all__ = ["LockstepFeed", "open_for_panes", "pane_failover", "pane_trackers", "run_lockstep"]


def open_for_panes(spec: str) -> Source:
    """``spec`` opened for a comparison's panes, as every session opens its sources
    (core/sessions/opening.py), by the plan's rule for frames shared by several
    pipelines: on the host (each pane takes each frame in turn, on whichever device it
    runs, and the view keeps them)."""
    return SourceOpener(None, shared=True).open(spec).source


def pane_failover(panes: Sequence[PaneSpec], say: Callable[[str], None]) -> Failover:
    """The session's failover policy for a comparison's panes: a pane whose GPU fails
    goes on on another GPU the comparison uses, else the CPU (``say``: a GPU that
    cannot take it either)."""
    return Failover([p.settings.device for p in panes], None, say, spinning=False)


def pane_trackers(tracking: TrackerSettings, fps: float | None) -> StageFactory:
    """A tracker of ``tracking``'s kind for every pane, at the source's frame rate
    (``fps``, when known: a lost track is kept ``track_buffer`` frames at 30 fps)."""
    from framelens.core.stages.tracking.stage import tracking_stages

    if fps is not None and fps > 0:
        tracking = replace(tracking, frame_rate=fps)
    return tracking_stages(tracking)


class LockstepFeed:
    """Steps of ``runner``'s panes over ``source``, from where the source stands.

    ``depth`` bounds the steps computed ahead of the consumer (a paused view holds at
    most that many). Not thread-safe: one consumer thread calls ``next`` and
    ``restart``. The source and the runner stay the caller's.
    """

    def __init__(
        self, source: Source, runner: CompareRunner, *, depth: int = 2, limit: int | None = None
    ) -> None:
        self._source = source
        self._runner = runner
        self._depth = depth
        self._limit = limit  # frames in all (a report's range): none decoded into work past it
        self._drive: Drive[CompareStep] = Drive(source, decode_depth=2)
        try:
            self._start()
        except BaseException:
            self._drive.stop_decoding()
            raise

    def _start(self) -> None:
        self._drive.start([LockstepWorker(self._runner)], depth=self._depth, limit=self._limit)

    def next(self, timeout: float) -> CompareStep | End | None:
        """The next frame's step, End at the end of the source, None after ``timeout``.

        A pane's failure is raised here.
        """
        item = self._drive.get(timeout)
        if item is None or isinstance(item, End):
            return item
        if isinstance(item, Failed):
            raise item.error
        return item.value

    def restart(self) -> None:
        """From the first frame again, with fresh agreement totals (nothing computed
        before is handed out after)."""
        self._drive.stop()
        if self._source.info.seekable:
            self._drive.seek(0)
        self._runner.reset_totals()  # no worker runs now: the totals are ours
        self._runner.reset_stages()
        self._start()

    def close(self) -> None:
        self._drive.stop_decoding()


def run_lockstep(
    source: Source,
    runner: CompareRunner,
    rng: RunRange,
    on_step: Callable[[CompareStep], None],
    cancel: threading.Event | None,
) -> int:
    """The range through the panes (a LockstepFeed, decoding ahead); frames handed to
    ``on_step`` in order. Raises Cancelled once ``cancel`` is set."""
    seek_to_start(source, rng)
    feed = LockstepFeed(source, runner, limit=rng.count)
    done = 0
    try:
        while rng.count is None or done < rng.count:
            if cancel is not None and cancel.is_set():
                raise Cancelled("cancelled")
            step = feed.next(0.1)
            if step is None:
                continue
            if isinstance(step, End):
                break
            on_step(step)
            done += 1
    finally:
        feed.close()
    return done
