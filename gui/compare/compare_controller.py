"""The compare view's bridge to core: the QObject that drives a CompareWorker.

CompareSession owns a worker (core/sessions/compare_view.py, no Qt) and turns its callbacks
into queued Qt signals (with the same back-pressure as the main controller), and
runs "Save report" on a thread of its own: core's save_kept_report writes what the
worker computed (its KeptFrames), computing only the frames never compared in
between (a jump such as Home leaves such a gap).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from framelens.core.api import (
    CalibrationSettings,
    Cancelled,
    CompareFrame,
    CompareWorker,
    KeptFrames,
    PaneRequest,
    PaneSpec,
    PipelineSettings,
    Resolve,
    TrackerSettings,
    ZonesFile,
    error_message,
    pane_labels,
    prepare_panes,
    report_target,
    save_kept_report,
)
from PySide6.QtCore import QObject, Signal, Slot

__all__ = [
    "CompareFrame",
    "CompareSession",
    "CompareWorker",
    "PaneRequest",
    "pane_labels",
    "report_plan",
    "report_saved",
    "report_target",
]

_IN_FLIGHT = 2  # frames emitted but not yet taken by the GUI thread


def report_plan(first: int, last: int, missing: int) -> str:
    """What Save Report is about to do, for the status line (frames counted from 1)."""
    frames = f"frames {first + 1}–{last + 1}"
    if missing:
        return f"Report of {frames}: {missing} frames in between were not compared, computing them…"
    return f"Writing the report of {frames}, as compared (nothing to compute)…"


def report_saved(computed: int) -> str:
    """How the report was made: from what was compared, and what had to be computed."""
    if computed:
        return f"Report saved ({computed} frames not compared before were computed for it)"
    return "Report saved (what was compared, nothing recomputed)"


class CompareSession(QObject):
    """One comparison for the compare view: intents in, frames and numbers out by signal."""

    ready = Signal(object)  # list[PaneSpec]
    frameReady = Signal(object)  # CompareFrame
    stateChanged = Signal(str)  # "preparing" | "playing" | "paused" | "ended" | "stopped"
    prepareProgress = Signal(str, float)
    errorOccurred = Signal(str)  # one line
    reportProgress = Signal(int, int)  # missing frames computed, how many are missing
    reportFinished = Signal(str, int)  # the report's index.html, frames computed for it
    reportFailed = Signal(str)  # one line; "cancelled" after cancel_report()

    # From the worker's thread, queued to the GUI thread; tagged with the worker's
    # generation so that whatever a stopped worker still had in flight is dropped.
    _deliver = Signal(int, object, object)  # generation, its semaphore, CompareFrame
    _readyFrom = Signal(int, object)
    _stateFrom = Signal(int, str)
    _progressFrom = Signal(int, str, float)
    _errorFrom = Signal(int, str)

    def __init__(
        self,
        base: PipelineSettings,
        resolve: Resolve,
        calibration: CalibrationSettings | None = None,
        parent: QObject | None = None,
        tracking: TrackerSettings | None = None,
        zones: ZonesFile | None = None,
    ) -> None:
        super().__init__(parent)
        self.base = base
        self.tracking = tracking  # every pane tracks with these (None: no tracking)
        self.zones = zones  # and counts its tracks against these (None: no counting)
        self._resolve = resolve
        self.calibration = calibration
        self.source: str | None = None
        self.panes: list[PaneSpec] = []
        self._worker: CompareWorker | None = None
        self._generation = 0
        self._run = 0  # frames of an earlier run (before Home) are dropped
        self._report_cancel: threading.Event | None = None
        self.state = "idle"
        self.stateChanged.connect(self._remember_state)
        self._deliver.connect(self._on_deliver)
        self._readyFrom.connect(self._on_ready)
        self._stateFrom.connect(self._on_state)
        self._progressFrom.connect(self._on_progress)
        self._errorFrom.connect(self._on_error)

    # ---- the live comparison --------------------------------------------------------

    def start(self, source: str, start: int, requests: Sequence[PaneRequest]) -> None:
        """Prepare the panes (in the background) and play from frame ``start``."""
        self.stop()
        self.source = source
        self.panes = []
        self._run = 0
        gen = self._generation
        slots = threading.Semaphore(_IN_FLIGHT)
        base, resolve, calibration = self.base, self._resolve, self.calibration
        requests = list(requests)

        def make_panes(
            on_prepare: Callable[[str, float], None], cancel: threading.Event
        ) -> list[PaneSpec]:
            return prepare_panes(
                base,
                requests,
                source,
                resolve,
                calibration=calibration,
                on_prepare=on_prepare,
                cancel=cancel,
            )

        def on_frame(frame: CompareFrame) -> None:
            if slots.acquire(timeout=0.5):  # GUI blocked: the frame is dropped
                self._deliver.emit(gen, slots, frame)

        worker = self._worker = CompareWorker(
            source,
            start,
            make_panes,
            on_ready=lambda panes: self._readyFrom.emit(gen, list(panes)),
            on_frame=on_frame,
            on_state=lambda state: self._stateFrom.emit(gen, state),
            on_progress=lambda text, f: self._progressFrom.emit(gen, text, f),
            on_error=lambda text: self._errorFrom.emit(gen, text),
            tracking=self.tracking,
            zones=self.zones,
        )
        self.stateChanged.emit("preparing")
        worker.start()

    def _current(self, generation: int) -> bool:
        return generation == self._generation

    @Slot(int, object)
    def _on_ready(self, generation: int, panes: list[PaneSpec]) -> None:
        if self._current(generation):
            self.panes = panes
            self.ready.emit(list(panes))

    @Slot(int, str)
    def _on_state(self, generation: int, state: str) -> None:
        if self._current(generation):
            self.stateChanged.emit(state)

    @Slot(int, str, float)
    def _on_progress(self, generation: int, text: str, fraction: float) -> None:
        if self._current(generation):
            self.prepareProgress.emit(text, fraction)

    @Slot(int, str)
    def _on_error(self, generation: int, message: str) -> None:
        if self._current(generation):
            self.errorOccurred.emit(message)

    @Slot(int, object, object)
    def _on_deliver(self, generation: int, slots: threading.Semaphore, frame: CompareFrame) -> None:
        slots.release()
        if self._current(generation) and frame.run >= self._run:
            self.frameReady.emit(frame)

    @Slot(str)
    def _remember_state(self, state: str) -> None:
        self.state = state

    @property
    def running(self) -> bool:
        return self._worker is not None and self._worker.alive

    @property
    def kept(self) -> KeptFrames | None:
        """The numbers of every frame compared so far (None before the panes are ready)."""
        return self._worker.kept if self._worker is not None else None

    @property
    def compared(self) -> tuple[int, int]:
        """(first, last) source index compared so far; (-1, -1) before any frame."""
        kept = self.kept
        span = kept.span if kept is not None else None
        return span if span is not None else (-1, -1)

    @property
    def missing(self) -> int:
        """Frames between the first and last compared that were never computed."""
        kept = self.kept
        return sum(g.count or 0 for g in kept.missing()) if kept is not None else 0

    @Slot()
    def play(self) -> None:
        if self.state == "ended":
            self.home(play=True)  # from the top again
        elif self._worker is not None:
            self._worker.play()

    def home(self, play: bool = False) -> None:
        """Back to the first frame: the next frame shown is frame 0 (paused, it is
        shown and the comparison stays paused unless ``play``)."""
        if self._worker is None:
            return
        self._run += 1
        self._worker.home(self._run)
        if play:
            self._worker.play()

    @Slot()
    def pause(self) -> None:
        if self._worker is not None:
            self._worker.pause()

    @Slot()
    def toggle(self) -> None:
        if self.state == "playing":
            self.pause()
        else:
            self.play()

    def stop(self) -> None:
        """Stop the worker (cancelling a preparation) and wait for it."""
        worker, self._worker = self._worker, None
        self._generation += 1  # what it still has in flight is dropped
        if worker is not None:
            worker.stop()

    # ---- the report -----------------------------------------------------------------

    @property
    def reporting(self) -> bool:
        return self._report_cancel is not None

    def save_report(self, folder: str) -> None:
        """Write the HTML report of the frames compared so far into ``folder``.

        What was computed is written as it is; only frames never compared between
        the first and the last are computed (``missing``), with reportProgress.
        """
        if self._report_cancel is not None:
            self.reportFailed.emit("a report is already being written")
            return
        kept = self.kept
        if not self.panes or self.source is None or kept is None or not len(kept):
            self.reportFailed.emit("compare a few frames first")
            return
        self.pause()
        cancel = self._report_cancel = threading.Event()
        args = (self.source, kept, folder, cancel)
        threading.Thread(
            target=self._write_report, args=args, name="fl-report", daemon=True
        ).start()

    def _write_report(
        self, source: str, kept: KeptFrames, folder: str, cancel: threading.Event
    ) -> None:
        try:
            target = report_target(folder, Path(source).stem)
            summary = save_kept_report(
                source, kept, target, on_progress=self.reportProgress.emit, cancel=cancel
            )
        except Cancelled:
            self._report_cancel = None
            self.reportFailed.emit("cancelled")
        except BaseException as exc:
            self._report_cancel = None
            self.reportFailed.emit(error_message(exc))
        else:
            self._report_cancel = None
            index = str(Path(summary["report"]) / "index.html")
            self.reportFinished.emit(index, int(summary["computed_for_report"]))

    @Slot()
    def cancel_report(self) -> None:
        if self._report_cancel is not None:
            self._report_cancel.set()

    def shutdown(self) -> None:
        self.cancel_report()
        self.stop()
