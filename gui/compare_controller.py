"""The compare view's bridge to core: a Qt-free worker and the QObject that drives it.

CompareWorker (no Qt) runs on its own thread: it prepares the panes' variants,
decodes each frame of the source once and hands it to core's CompareRunner, which
runs the 2 to 4 panes in lock-step; it also draws the difference overlays so the
GUI thread only shows images. CompareSession owns a worker and turns its callbacks
into queued Qt signals (with the same back-pressure as the main controller), and
runs "Save report" (core's compare_to_report) on a thread of its own.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from framelens.core.errors import Cancelled, ConfigError, ExportError
from framelens.core.models.spec import ModelSpec
from framelens.core.pipeline.compare.panes import (
    MAX_PANES,
    MIN_PANES,
    CompareRunner,
    CompareStep,
    PaneSpec,
)
from framelens.core.pipeline.compare.report import REPORT_FILES
from framelens.core.pipeline.compare.session import compare_to_report
from framelens.core.pipeline.compare.variants import prepare_pane
from framelens.core.pipeline.devices import resolve_device
from framelens.core.pipeline.player import error_message
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.precision import CalibrationSettings
from framelens.core.stages.sinks.atomic_dir import check_dir_target
from framelens.core.stages.sources import Source, open_source
from framelens.core.stages.tasks.detect.diff import draw_difference
from framelens.core.stages.timing import now_ms
from framelens.core.types import Image
from PySide6.QtCore import QObject, Signal, Slot

__all__ = [
    "CompareFrame",
    "CompareSession",
    "CompareWorker",
    "PaneRequest",
    "pane_labels",
    "report_target",
]

_IN_FLIGHT = 2  # frames emitted but not yet taken by the GUI thread

Resolve = Callable[[str], ModelSpec]


@dataclass(frozen=True)
class PaneRequest:
    """What the user chose for one pane; None = as in the main window."""

    precision: str = "fp32"
    model: str | None = None  # catalogue name or ONNX path
    device: str | None = None  # "auto" | "cpu" | "cuda:N"


@dataclass(frozen=True)
class CompareFrame:
    """One lock-step frame for the view: core's step and the difference overlays.

    ``differences[i]``: the reference's detections that pane i missed and pane i's
    that the reference lacks, drawn on the plain frame (None for the reference); they
    are drawn for every frame (a millisecond each) so the view's toggle is instant.
    ``diff_counts[i]``: how many of each. ``run`` counts restarts from the
    beginning, so the view knows when to clear its history.
    """

    step: CompareStep
    differences: tuple[Image | None, ...]
    run: int
    diff_counts: tuple[tuple[int, int] | None, ...] = ()  # (only in reference, only in pane)


def pane_labels(requests: Sequence[PaneRequest], model_names: Sequence[str]) -> list[str]:
    """Short unique labels: the precision, with the model and device where panes differ."""
    show_model = len(set(model_names)) > 1
    show_device = len({r.device for r in requests}) > 1
    labels: list[str] = []
    for r, model in zip(requests, model_names, strict=True):
        parts = [r.precision.upper()]
        if show_model:
            parts.insert(0, model)
        if show_device and r.device:
            parts.append(r.device.upper() if r.device == "cpu" else r.device)
        label = " ".join(parts)
        n = 2
        while label in labels:
            label = f"{' '.join(parts)} #{n}"
            n += 1
        labels.append(label)
    return labels


def report_target(folder: str, stem: str) -> Path:
    """``folder`` itself when it is empty or an earlier report, else a new subfolder in it."""
    try:
        return check_dir_target(folder, REPORT_FILES)
    except ExportError:
        base = Path(folder) / f"{stem or 'video'}_compare"
        target, n = base, 2
        while target.exists():
            try:
                return check_dir_target(target, REPORT_FILES)
            except ExportError:
                target = base.with_name(f"{base.name}_{n}")
                n += 1
        return check_dir_target(target, REPORT_FILES)


def prepare_panes(
    base: PipelineSettings,
    requests: Sequence[PaneRequest],
    source: str,
    resolve: Resolve,
    *,
    calibration: CalibrationSettings | None = None,
    on_prepare: Callable[[str, float], None] | None = None,
    cancel: threading.Event | None = None,
) -> list[PaneSpec]:
    """One PaneSpec per request, its variant taken from the cache or prepared now."""
    if not MIN_PANES <= len(requests) <= MAX_PANES:
        raise ConfigError(f"a comparison needs {MIN_PANES} to {MAX_PANES} panes")
    models = [base.model if r.model is None else resolve(r.model) for r in requests]
    labels = pane_labels(requests, [m.name for m in models])
    panes: list[PaneSpec] = []
    n = len(requests)
    for i, (r, model, label) in enumerate(zip(requests, models, labels, strict=True)):
        device = base.device if r.device is None else resolve_device(r.device)
        params = base.params if model == base.model else replace(base.params, classes=None)
        settings = replace(base, model=model, device=device, precision=r.precision, params=params)

        def report(text: str, fraction: float, i: int = i) -> None:
            if on_prepare is not None:  # the pane's share of the whole preparation
                on_prepare(text, (i + fraction) / n)

        panes.append(
            prepare_pane(
                label,
                settings,
                source=source,
                progress=False,
                on_prepare=report,
                cancel=cancel,
                calibration=calibration,
            )
        )
    return panes


class CompareWorker:
    """Prepares the panes, then steps them through the source in lock-step; no Qt.

    Commands (play, pause, stop) may come from any thread. The callbacks run on the
    worker's thread: ``on_ready(panes)`` once prepared, ``on_frame(CompareFrame)``
    per frame, ``on_state(text)`` ("playing", "paused", "ended", "stopped"),
    ``on_progress(text, 0..1)`` while preparing, ``on_error(one line)``.
    """

    def __init__(
        self,
        source: str,
        start: int,
        make_panes: Callable[[Callable[[str, float], None], threading.Event], list[PaneSpec]],
        *,
        on_ready: Callable[[list[PaneSpec]], None],
        on_frame: Callable[[CompareFrame], None],
        on_state: Callable[[str], None],
        on_progress: Callable[[str, float], None],
        on_error: Callable[[str], None],
    ) -> None:
        self.source = source
        self.start_index = max(0, start)
        self._make_panes = make_panes
        self._on_ready, self._on_frame, self._on_state = on_ready, on_frame, on_state
        self._on_progress, self._on_error = on_progress, on_error
        self._commands: queue.Queue[str] = queue.Queue()
        self._cancel = threading.Event()
        self._playing = True
        self._run = 0
        self.first_index = -1
        self.last_index = -1
        self._thread = threading.Thread(target=self._main, name="fl-compare", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def play(self) -> None:
        self._commands.put("play")

    def pause(self) -> None:
        self._commands.put("pause")

    def stop(self, timeout: float = 10.0) -> None:
        """Stop (cancelling a preparation) and wait for the thread to end."""
        self._cancel.set()
        self._commands.put("stop")
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _main(self) -> None:
        try:
            panes = self._make_panes(self._on_progress, self._cancel)
            if self._cancel.is_set():
                raise Cancelled("cancelled")
            with open_source(self.source) as source, CompareRunner(panes, draw=True) as runner:
                self._on_ready(panes)
                self._seek(source, self.start_index)
                self._on_state("playing")
                self._loop(source, runner, panes)
        except Cancelled:
            pass
        except BaseException as exc:
            self._on_error(error_message(exc))
        finally:
            self._on_state("stopped")

    def _seek(self, source: Source, index: int) -> None:
        count = source.info.frame_count
        if count:
            index = min(index, count - 1)
        if index > 0 and source.info.seekable:
            source.seek(index)

    def _loop(self, source: Source, runner: CompareRunner, panes: list[PaneSpec]) -> None:
        ended = False
        while not self._cancel.is_set():
            try:
                command = self._commands.get_nowait() if self._playing else self._commands.get()
            except queue.Empty:
                command = ""
            if command == "stop":
                return
            if command == "pause" and self._playing:
                self._playing = False
                self._on_state("paused")
            elif command == "play" and not self._playing:
                if ended:  # from the top again, with fresh totals
                    ended = False
                    if source.info.seekable:
                        source.seek(0)
                    runner.reset_totals()
                    self._run += 1
                self._playing = True
                self._on_state("playing")
            if not self._playing:
                continue
            t0 = now_ms()
            frame = source.read()
            decode_ms = now_ms() - t0
            if frame is None:
                ended, self._playing = True, False
                self._on_state("ended")
                continue
            step = runner.step(frame, decode_ms)
            if self.first_index < 0 or frame.index < self.first_index:
                self.first_index = frame.index
            self.last_index = max(self.last_index, frame.index)
            images, counts = self._draw_differences(step, panes)
            self._on_frame(CompareFrame(step, images, self._run, counts))

    def _draw_differences(
        self, step: CompareStep, panes: list[PaneSpec]
    ) -> tuple[tuple[Image | None, ...], tuple[tuple[int, int] | None, ...]]:
        """Each pane's difference overlay and (only in reference, only in pane) counts."""
        ref = step.panes[step.reference].label
        images: list[Image | None] = []
        counts: list[tuple[int, int] | None] = []
        for i, pane in enumerate(step.panes):
            if i == step.reference:
                images.append(None)
                counts.append(None)
                continue
            diff = step.difference(i)
            labels = panes[i].settings.model.labels
            images.append(draw_difference(step.frame.image, diff, labels, (ref, pane.label)))
            counts.append((len(diff.ref_only), len(diff.test_only)))
        return tuple(images), tuple(counts)


class CompareSession(QObject):
    """One comparison for the compare view: intents in, frames and numbers out by signal."""

    ready = Signal(object)  # list[PaneSpec]
    frameReady = Signal(object)  # CompareFrame
    stateChanged = Signal(str)  # "preparing" | "playing" | "paused" | "ended" | "stopped"
    prepareProgress = Signal(str, float)
    errorOccurred = Signal(str)  # one line
    reportProgress = Signal(int, int)  # frames done, total
    reportFinished = Signal(str)  # the report's index.html
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
    ) -> None:
        super().__init__(parent)
        self.base = base
        self._resolve = resolve
        self.calibration = calibration
        self.source: str | None = None
        self.panes: list[PaneSpec] = []
        self._worker: CompareWorker | None = None
        self._generation = 0
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
        if self._current(generation):
            self.frameReady.emit(frame)

    @Slot(str)
    def _remember_state(self, state: str) -> None:
        self.state = state

    @property
    def running(self) -> bool:
        return self._worker is not None and self._worker.alive

    @property
    def compared(self) -> tuple[int, int]:
        """(first, last) source index compared so far; (-1, -1) before any frame."""
        w = self._worker
        return (w.first_index, w.last_index) if w is not None else (-1, -1)

    @Slot()
    def play(self) -> None:
        if self._worker is not None:
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
        """Write the HTML report for the frames compared so far into ``folder``."""
        if self._report_cancel is not None:
            self.reportFailed.emit("a report is already being written")
            return
        first, last = self.compared
        if not self.panes or self.source is None or first < 0:
            self.reportFailed.emit("compare a few frames first")
            return
        self.pause()
        cancel = self._report_cancel = threading.Event()
        args = (self.source, list(self.panes), folder, first, last - first + 1, cancel)
        threading.Thread(
            target=self._write_report, args=args, name="fl-report", daemon=True
        ).start()

    def _write_report(
        self,
        source: str,
        panes: list[PaneSpec],
        folder: str,
        start: int,
        frames: int,
        cancel: threading.Event,
    ) -> None:
        try:
            target = report_target(folder, Path(source).stem)
            summary = compare_to_report(
                source,
                panes,
                target,
                start=start,
                frames=frames,
                progress=False,
                on_progress=self.reportProgress.emit,
                cancel=cancel,
            )
        except Cancelled:
            self._report_cancel = None
            self.reportFailed.emit("cancelled")
        except BaseException as exc:
            self._report_cancel = None
            self.reportFailed.emit(error_message(exc))
        else:
            self._report_cancel = None
            self.reportFinished.emit(str(Path(summary["report"]) / "index.html"))

    @Slot()
    def cancel_report(self) -> None:
        if self._report_cancel is not None:
            self._report_cancel.set()

    def shutdown(self) -> None:
        self.cancel_report()
        self.stop()
