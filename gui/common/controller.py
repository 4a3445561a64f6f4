"""The one object between the widgets and core: intents in, results out, as Qt signals.

The Player calls back on its worker threads; emitting a signal from there queues
it to the GUI thread, so every slot connected to this controller runs on the GUI
thread. What is decided lives in core, without Qt: the model and precision
(PlaybackChoice), the current source, the frame on screen, whether a snapshot or an
export may start (PlaybackView), how many results wait for the GUI (ResultGate). This
class forwards intents to them and turns their answers into signals.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from framelens.core.api import (
    DEFAULT_MODEL,
    CalibrationSettings,
    DeviceChoice,
    ExportJob,
    ExportRequest,
    FrameLensError,
    FrameResult,
    ModelSpec,
    OverlayStyle,
    PipelineSettings,
    PlaybackAnalytics,
    PlaybackChoice,
    PlaybackHeatmap,
    PlaybackTracking,
    PlaybackView,
    Player,
    PlayerState,
    PrecisionJob,
    Region,
    ResultGate,
    SensitivityReport,
    TrackerSettings,
    TrackLog,
    VariantInfo,
    ZonesFile,
    backend_choices,
    default_outputs,
    device_choices,
    error_message,
    load_catalog,
    prepare_job,
    resolve_model,
)
from PySide6.QtCore import QObject, Signal, Slot

__all__ = ["Controller", "ExportJob", "ExportRequest", "default_outputs"]

SHUTDOWN_WAIT_S = 10.0  # at most, for cancelled export and precision threads to end


class Controller(QObject):
    """Owns the Player and the export job; the only path from widgets to core."""

    resultReady = Signal(object)  # FrameResult
    stateChanged = Signal(object)  # PlayerState
    errorOccurred = Signal(str)  # one line
    openFailed = Signal(str)  # the source asked for could not be opened (after errorOccurred)
    modelChanged = Signal(object)  # ModelSpec chosen (labels for the class filter); None: no model
    exportProgress = Signal(int, int)  # done, total (total 0 when unknown)
    exportFinished = Signal(list)  # every path written: the video, the detections
    exportFailed = Signal(str)  # one line; "cancelled" after cancel_export()
    snapshotSaved = Signal(str)
    precisionProgress = Signal(str, float)  # "INT8: calibrating …", 0..1
    # active precision, SensitivityReport | None, chosen (the user's choice: remember it)
    precisionChanged = Signal(str, object, bool)
    # precision asked for, one line ("cancelled"), restoring (the last session's choice)
    precisionFailed = Signal(str, str, bool)

    _deliver = Signal(object)
    _openFailed = Signal(str)  # from the player's thread
    _variantReady = Signal(int, object)  # job token, VariantInfo | None
    _variantFailed = Signal(int, str)  # job token, one line

    def __init__(
        self,
        parent: QObject | None = None,
        *,
        backend: str = "onnxruntime",
        device: str = "cpu",
        tracking: PlaybackTracking | None = None,
    ) -> None:
        """``tracking``: which tracker playback runs and its track log (tests hand in one
        of their own)."""
        super().__init__(parent)
        self._gate = ResultGate()  # results handed to the GUI thread, not yet taken
        self._deliver.connect(self._on_deliver)
        self.player = Player(
            self._from_worker, self.stateChanged.emit, self.errorOccurred.emit,
            on_open_failed=self._openFailed.emit,
        )  # fmt: skip
        self._openFailed.connect(self._on_open_failed)
        # what the player runs and the policy over it (precision jobs, fallbacks): core's
        self.choice = PlaybackChoice(_ChoiceSignals(self), backend=backend, device=device)
        # the current source, the frame on screen, snapshot and export: core's too
        self.view = PlaybackView(self.choice)
        self._workers: list[threading.Thread] = []  # export and precision threads
        self.tracking = tracking or PlaybackTracking()
        self.heatmap = PlaybackHeatmap()  # after the tracker (core/sessions/playback/heatmap.py)
        self.stateChanged.connect(self._remember_state)
        self._variantReady.connect(self._on_variant_ready)  # queued: on the GUI thread
        self._variantFailed.connect(self._on_variant_failed)

    # ---- what the choice holds ------------------------------------------------------

    @property
    def settings(self) -> PipelineSettings | None:
        """What the player runs: the model's variant at the active precision."""
        return self.choice.settings

    @property
    def source(self) -> str | None:
        """The source open in the player (None: none yet)."""
        return self.view.source

    @property
    def state(self) -> PlayerState:
        """The player's last reported state."""
        return self.view.state

    @property
    def last_result(self) -> FrameResult | None:
        """The result last taken by the GUI (None: none since the source opened)."""
        return self.view.last_result

    @property
    def precision(self) -> str:
        return self.choice.precision

    @property
    def report(self) -> SensitivityReport | None:
        """The active INT8 variant's sensitivity report."""
        return self.choice.report

    @property
    def calibration(self) -> CalibrationSettings | None:
        """How INT8 is calibrated (None: the defaults at the run's confidence)."""
        return self.choice.calibration

    @calibration.setter
    def calibration(self, value: CalibrationSettings | None) -> None:
        self.choice.calibration = value

    @property
    def preparing(self) -> str | None:
        """The precision being prepared in the background, None when idle."""
        return self.choice.preparing

    @property
    def superres(self) -> bool:
        """True while a super-resolution model is loaded."""
        return self.choice.superres

    def base_settings(self) -> PipelineSettings | None:
        """The current settings at FP32: the model as chosen, not its variant."""
        return self.choice.base_settings()

    # ---- results from the worker ------------------------------------------------

    def _from_worker(self, result: FrameResult) -> None:
        if self._gate.admit():  # else the GUI is blocked: the result is dropped
            self._deliver.emit(result)

    @Slot(object)
    def _on_deliver(self, result: FrameResult) -> None:
        self._gate.taken()
        self.view.shown(result)
        self.resultReady.emit(result)

    @Slot(object)
    def _remember_state(self, state: PlayerState) -> None:
        self.view.state_changed(state)

    @Slot(str)
    def _on_open_failed(self, spec: str) -> None:
        self.view.open_failed(spec)
        self.openFailed.emit(spec)

    # ---- models -----------------------------------------------------------------

    @staticmethod
    def catalog() -> dict[str, ModelSpec]:
        """The bundled models the window plays: detectors and super-resolution models."""
        return dict(load_catalog())

    @staticmethod
    def default_model() -> str:
        return str(DEFAULT_MODEL)

    @staticmethod
    def resolve(
        name_or_path: str,
        layout: str | None = None,
        labels_file: str | None = None,
        task: str | None = None,
    ) -> ModelSpec:
        """The ModelSpec for a catalogue name or an ONNX path; raises FrameLensError."""
        return resolve_model(name_or_path, layout=layout, labels_file=labels_file, task=task)

    def set_model(
        self,
        name_or_path: str,
        layout: str | None = None,
        labels_file: str | None = None,
        task: str | None = None,
    ) -> bool:
        """Resolve and switch model; False (and errorOccurred) when it cannot be used."""
        try:
            spec = self.resolve(name_or_path, layout, labels_file, task)
        except FrameLensError as exc:
            self.errorOccurred.emit(error_message(exc))
            return False
        self.use_model(spec)
        return True

    def use_model(self, spec: ModelSpec) -> None:
        """Switch model; while a source is open the new engine is built in the background
        (at FP16 or INT8 its variant first: PlaybackChoice.use_model)."""
        self.choice.use_model(spec)

    def clear_model(self) -> None:
        """Play without a model: frames as decoded (a review, an export's boxes not twice)."""
        self.choice.clear_model()
        self.player.clear_model()

    def set_device(self, device: str) -> bool:
        """Run inference on "auto", "cpu" or "cuda:N"; False (and a message) when impossible."""
        return self._said(self.choice.set_device(device))

    def set_backend(self, backend: str) -> bool:
        """Run inference with "onnxruntime" or "tensorrt"; False (and a message) when that
        backend cannot run here."""
        return self._said(self.choice.set_backend(backend))

    def _said(self, refusal: str | None) -> bool:
        if refusal is not None:
            self.errorOccurred.emit(refusal)
        return refusal is None

    @staticmethod
    def device_choices() -> list[DeviceChoice]:
        return device_choices()

    @staticmethod
    def backend_choices() -> list[DeviceChoice]:
        return backend_choices()

    # ---- precision ------------------------------------------------------------------

    def set_precision(self, precision: str, *, cached_only: bool = False) -> None:
        """Switch to the FP32, FP16 or INT8 variant of the current model, playing on.

        A variant not yet cached is prepared on a thread (FP16: a fraction of a second;
        INT8: calibrated on the open source, most of a minute on a laptop CPU), with
        precisionProgress; then precisionChanged, and the player swaps engines without
        stopping. ``cached_only``: take the variant only if it is cached (restoring a
        saved choice). Failures and cancels end in precisionFailed; nothing changes.
        """
        self.choice.set_precision(precision, cached_only=cached_only)

    def choose_precision(self, precision: str) -> None:
        """The user's choice of precision (set_precision, remembered once active:
        precisionChanged's ``chosen``)."""
        self.choice.choose_precision(precision)

    def restore_precision(self, saved: str) -> None:
        """The last session's precision: FP16 now, INT8 from the cache once a video opens."""
        self.choice.restore_precision(saved)

    @Slot()
    def cancel_precision(self) -> None:
        """Stop preparing a variant; precisionFailed(…, "cancelled") follows."""
        self.choice.cancel_precision()

    def _start_worker(self, target: Callable[..., None], args: tuple[Any, ...], name: str) -> None:
        """A worker thread of this controller's (a precision job, an export); shutdown()
        waits for it, so none outlives the controller and signals into a deleted one."""
        self._workers = [t for t in self._workers if t.is_alive()]
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._workers.append(thread)
        thread.start()

    def _prepare(
        self,
        job: PrecisionJob,
        spec: ModelSpec,
        source: str | None,
        calibration: CalibrationSettings,
    ) -> None:
        """Worker thread: the variant, from the cache or built; the result goes by signal."""

        def progress(text: str, fraction: float) -> None:
            if self.choice.is_current(job.token):  # a superseded job's progress is not shown
                self.precisionProgress.emit(text, fraction)

        prepare_job(
            job, spec, source, calibration, on_progress=progress,
            on_ready=lambda variant: self._variantReady.emit(job.token, variant),
            on_failed=lambda message: self._variantFailed.emit(job.token, message),
        )  # fmt: skip

    @Slot(int, object)
    def _on_variant_ready(self, token: int, variant: VariantInfo | None) -> None:
        self.choice.variant_ready(token, variant)

    @Slot(int, str)
    def _on_variant_failed(self, token: int, message: str) -> None:
        self.choice.variant_failed(token, message)

    # ---- thresholds and overlay ---------------------------------------------------

    def _update(self, **changes: object) -> None:
        applied = self.choice.update(**changes)
        if applied:
            self.player.update(**applied)

    @Slot(float)
    def set_conf(self, conf: float) -> None:
        self._update(conf=float(conf))

    @Slot(float)
    def set_iou(self, iou: float) -> None:
        self._update(iou=float(iou))

    def set_classes(self, classes: frozenset[int] | None) -> None:
        """None shows every class; an empty set shows none."""
        self._update(classes=classes)

    def set_overlay(self, overlay: OverlayStyle) -> None:
        self._update(overlay=overlay)

    def set_region(self, region: Region | None) -> None:
        """Super-resolution's region of interest (x, y, w, h in source pixels; None: the
        whole frame); the current frame is upscaled again. No effect on detectors."""
        self._update(region=region)

    def configure(self, *, conf: float, iou: float, overlay: OverlayStyle) -> None:
        """Initial thresholds (from saved settings) before anything is open."""
        self.choice.configure(conf=conf, iou=iou, overlay=overlay)

    # ---- tracking ---------------------------------------------------------------------

    def set_tracking(self, settings: TrackerSettings | None) -> bool:
        """Track objects with ``settings``' tracker (None: no tracking) from the frame on
        screen on, without reopening the video; the track log starts afresh. False (and
        errorOccurred) when that tracker cannot run here: nothing changes."""
        try:
            stages = self.heatmap.after(self.tracking.stages(settings))
        except FrameLensError as exc:
            self.errorOccurred.emit(error_message(exc))
            return False
        self.player.set_stages(stages)
        return True

    @property
    def tracker(self) -> TrackerSettings | None:
        """The tracker playback runs (None: tracking off)."""
        return self.tracking.settings

    @property
    def track_log(self) -> TrackLog:
        """Every track of the video seen so far (the track list's rows)."""
        return self.tracking.log

    # ---- lines and zones ----------------------------------------------------------------

    @property
    def analytics(self) -> PlaybackAnalytics:
        """The video's lines and zones, their counts and events (counted while tracking)."""
        return self.tracking.analytics

    def set_zones(self, spec: ZonesFile) -> None:
        """Count ``spec``'s lines and zones from the next frame on (the tracker goes on);
        a paused frame is shown again with them."""
        self.tracking.analytics.set_zones(spec)
        self.player.refresh()

    # ---- playback -------------------------------------------------------------------

    @Slot(str)
    def open_source(self, spec: str, *, play: bool = False) -> None:
        """Open ``spec`` paused, or playing (``play``); a failed open changes nothing."""
        self.view.opening(spec)  # current once the player lets the current source go
        self.player.open(spec, self.settings, play=play)
        self.choice.source_opening()  # the last session's INT8, if cached for it

    @Slot()
    def play(self) -> None:
        self.player.play()

    @Slot()
    def pause(self) -> None:
        self.player.pause()

    @Slot()
    def toggle_play(self) -> None:
        self.player.toggle()

    @Slot(int)
    def step(self, delta: int) -> None:
        self.player.step(delta)

    @Slot(int)
    def seek(self, index: int) -> None:
        self.player.seek(index)

    @Slot(float)
    def set_speed(self, speed: float) -> None:
        self.player.set_speed(speed)

    @Slot(bool)
    def set_realtime(self, realtime: bool) -> None:
        self.player.set_realtime(realtime)

    @Slot()
    def press_loop(self) -> None:
        """The A-B loop's key: A at the frame on screen, then B, then no loop."""
        self.player.press_loop()

    # ---- snapshot and export -----------------------------------------------------

    def seek_refusal(self) -> str | None:
        """Why Go to Frame cannot be asked for now (None: it can)."""
        return self.view.seek_refusal()

    def snapshot_refusal(self) -> str | None:
        """Why there is no frame to save (None: there is)."""
        return self.view.snapshot_refusal()

    def export_refusal(self) -> str | None:
        """Why File > Export cannot be asked for now (None: it can)."""
        return self.view.export_refusal()

    @Slot(str)
    def save_snapshot(self, path: str) -> None:
        try:
            written = self.view.save_snapshot(path)
        except FrameLensError as exc:
            self.errorOccurred.emit(error_message(exc))
            return
        self.snapshotSaved.emit(str(written or path))

    @property
    def exporting(self) -> bool:
        return self.view.exporting

    def start_export(self, request: ExportRequest) -> None:
        """An export tracks as playback does (the tracker chosen, if any), counts and
        draws the video's lines and zones, and its heatmap when shown."""
        stages = self.heatmap.after_export(self.tracking.export_stages(zones=True))
        request = replace(request, stages=stages)
        try:
            job = self.view.start_export(request)
        except FrameLensError as exc:
            self.exportFailed.emit(error_message(exc))
            return
        self._start_worker(self._run_export, (job,), "fl-export")

    def _run_export(self, job: ExportJob) -> None:
        outcome = self.view.run_export(job, self.exportProgress.emit)
        if isinstance(outcome, str):
            self.exportFailed.emit(outcome)
        else:
            self.exportFinished.emit(outcome)

    @Slot()
    def cancel_export(self) -> None:
        self.view.cancel_export()

    # ---- lifetime -----------------------------------------------------------------

    def shutdown(self) -> None:
        self.cancel_export()
        self.choice.shutdown()
        self.player.close()
        # the export and precision threads stop at their next frame or step, cancelled:
        # wait for them, so that none emits into this controller once it is deleted
        deadline = time.monotonic() + SHUTDOWN_WAIT_S
        for thread in self._workers:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._workers = []


class _ChoiceSignals:
    """The controller's side of its PlaybackChoice: the player, Qt signals, threads."""

    def __init__(self, controller: Controller) -> None:
        self._controller = controller

    def run(self, settings: PipelineSettings) -> None:
        self._controller.player.set_model(settings)

    def model_changed(self, spec: ModelSpec | None) -> None:
        self._controller.modelChanged.emit(spec)

    def precision_changed(
        self, precision: str, report: SensitivityReport | None, chosen: bool
    ) -> None:
        self._controller.precisionChanged.emit(precision, report, chosen)

    def precision_failed(self, precision: str, message: str, restoring: bool) -> None:
        self._controller.precisionFailed.emit(precision, message, restoring)

    def prepare(
        self,
        job: PrecisionJob,
        spec: ModelSpec,
        source: str | None,
        calibration: CalibrationSettings,
    ) -> None:
        c = self._controller
        c._start_worker(c._prepare, (job, spec, source, calibration), "fl-precision")
