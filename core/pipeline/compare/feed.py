"""Compare panes stepping through a source on the executor: compare's one driver.

The CLI's comparison runs a range once (core/pipeline/compare/session.py ``run_lockstep``);
the compare view plays, pauses and restarts (core/sessions/compare_view.py). Both step
through a LockstepFeed: the executor (core/pipeline/execute.py) decodes ahead while the
panes run each frame in turn (never side by side) on its worker thread, and hands the
steps out in frame order.
"""

from __future__ import annotations

from framelens.core.pipeline.compare.panes import CompareRunner, CompareStep, LockstepWorker
from framelens.core.pipeline.decode_ahead import End, Failed
from framelens.core.pipeline.execute import Executor
from framelens.core.stages.sources import Source

__all__ = ["LockstepFeed"]


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
        self._executor = self._open()

    def _open(self) -> Executor[CompareStep]:
        return Executor.open(
            self._source, [LockstepWorker(self._runner)], depth=self._depth, decode_depth=2,
            limit=self._limit,
        )  # fmt: skip

    def next(self, timeout: float) -> CompareStep | End | None:
        """The next frame's step, End at the end of the source, None after ``timeout``.

        A pane's failure is raised here.
        """
        item = self._executor.get(timeout)
        if item is None or isinstance(item, End):
            return item
        if isinstance(item, Failed):
            raise item.error
        return item.value

    def restart(self) -> None:
        """From the first frame again, with fresh agreement totals (nothing computed
        before is handed out after)."""
        self._stop()
        if self._source.info.seekable:
            self._source.seek(0)
        self._runner.reset_totals()  # no worker runs now: the totals are ours
        self._runner.reset_stages()
        self._executor = self._open()

    def _stop(self) -> None:
        self._executor.close()

    def close(self) -> None:
        self._stop()
