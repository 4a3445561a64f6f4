"""The one object between the widgets and core: intents in, results out, as Qt signals.

The Player calls back on its worker threads; emitting a signal from there queues
it to the GUI thread, so every slot connected to this controller runs on the GUI
thread. A small semaphore applies back-pressure: the worker waits (briefly) when
the GUI has not yet taken the last few results, so memory stays flat and the
plots see every frame.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from framelens.core.api import (
    DEFAULT_MODEL,
    PRECISIONS,
    CalibrationSettings,
    Cancelled,
    DetectParams,
    DeviceChoice,
    ExportJob,
    ExportRequest,
    FrameLensError,
    FrameResult,
    ModelSpec,
    OverlayStyle,
    PipelineSettings,
    Player,
    PlayerState,
    PrecisionJob,
    Region,
    SensitivityReport,
    SuperResParams,
    VariantInfo,
    backend_choices,
    default_outputs,
    device_choices,
    error_message,
    fp32_variant,
    load_catalog,
    prepare_job,
    produces_image,
    resolve_device,
    resolve_model,
    save_frame_snapshot,
    with_changes,
    without_classes,
)
from PySide6.QtCore import QObject, Signal, Slot

__all__ = ["Controller", "ExportJob", "ExportRequest", "default_outputs"]

_IN_FLIGHT = 3  # results emitted but not yet taken by the GUI thread
SHUTDOWN_WAIT_S = 10.0  # at most, for cancelled export and precision threads to end


class Controller(QObject):
    """Owns the Player and the export job; the only path from widgets to core."""

    resultReady = Signal(object)  # FrameResult
    stateChanged = Signal(object)  # PlayerState
    errorOccurred = Signal(str)  # one line
    modelChanged = Signal(object)  # ModelSpec chosen (labels for the class filter); None: no model
    exportProgress = Signal(int, int)  # done, total (total 0 when unknown)
    exportFinished = Signal(list)  # every path written: the video, the detections
    exportFailed = Signal(str)  # one line; "cancelled" after cancel_export()
    snapshotSaved = Signal(str)
    precisionProgress = Signal(str, float)  # "INT8: calibrating …", 0..1
    precisionChanged = Signal(str, object)  # active precision, SensitivityReport | None
    precisionFailed = Signal(str, str)  # precision asked for, one line ("cancelled")

    _deliver = Signal(object)
    _variantReady = Signal(int, object)  # job token, VariantInfo | None
    _variantFailed = Signal(int, str)  # job token, one line

    def __init__(
        self, parent: QObject | None = None, *, backend: str = "onnxruntime", device: str = "cpu"
    ) -> None:
        super().__init__(parent)
        self._slots = threading.Semaphore(_IN_FLIGHT)
        self._deliver.connect(self._on_deliver)
        self.player = Player(self._from_worker, self.stateChanged.emit, self.errorOccurred.emit)
        self.settings: PipelineSettings | None = None
        self._backend, self._device = backend, device
        self.source: str | None = None
        self._opening: str | None = None  # asked for while another source is open
        self.state = PlayerState()
        self.last_result: FrameResult | None = None
        self._export: ExportJob | None = None
        self._workers: list[threading.Thread] = []  # export and precision threads
        self.stateChanged.connect(self._remember_state)
        # Precision: the active one (what self.settings hold), the model it is a variant
        # of, and the background job preparing another one.
        self.precision = "fp32"
        self.report: SensitivityReport | None = None  # of the active INT8 variant
        self.calibration: CalibrationSettings | None = None  # None: defaults at the run's conf
        self._base_model: ModelSpec | None = None
        self._job: PrecisionJob | None = None
        self._job_token = 0
        self._variantReady.connect(self._on_variant_ready)
        self._variantFailed.connect(self._on_variant_failed)

    # ---- results from the worker ------------------------------------------------

    def _from_worker(self, result: FrameResult) -> None:
        # Wait a little for the GUI; on timeout (GUI blocked) the result is dropped.
        if self._slots.acquire(timeout=0.5):
            self._deliver.emit(result)

    @Slot(object)
    def _on_deliver(self, result: FrameResult) -> None:
        self._slots.release()
        self.last_result = result
        self.resultReady.emit(result)

    @Slot(object)
    def _remember_state(self, state: PlayerState) -> None:
        if self._opening is not None and state.source is None and self.state.source is not None:
            self._opened()  # the new source opened: the current one is let go
        self.state = state

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
        """Switch model; while a source is open the new engine is built in the background.

        At FP16 or INT8 the new model's variant is prepared first (INT8 only from the
        cache: calibrating is the user's call); without one it switches at FP32.
        """
        self._base_model = spec
        wanted = self.precision
        if self.settings is None:
            self.settings = PipelineSettings(spec, backend=self._backend, device=self._device)
        else:
            self.settings = replace(
                self.settings,
                model=spec,
                params=without_classes(self.settings.params),
                precision="fp32",
            )
        self.precision, self.report = "fp32", None
        self.modelChanged.emit(spec)
        if wanted != "fp32":
            self._start_job(wanted, cached_only=wanted == "int8", fallback=True)
        elif self.source is not None:
            self.player.set_model(self.settings)

    def clear_model(self) -> None:
        """Play without a model: frames as decoded (a review, an export's boxes not twice)."""
        self._drop_job()
        self._base_model, self.settings = None, None
        self.precision, self.report = "fp32", None
        self.player.clear_model()
        self.modelChanged.emit(None)

    def set_device(self, device: str) -> bool:
        """Run inference on "auto", "cpu" or "cuda:N"; False (and a message) when impossible."""
        try:
            resolved = resolve_device(device)
        except FrameLensError as exc:
            self.errorOccurred.emit(error_message(exc))
            return False
        if self._backend == "tensorrt" and not resolved.startswith("cuda"):
            self.errorOccurred.emit(
                "TensorRT runs on NVIDIA GPUs: choose ONNX Runtime to run on the CPU"
            )
            return False
        self._device = resolved
        if self.settings is not None and self.settings.device != resolved:
            self.settings = replace(self.settings, device=resolved)
            if self.source is not None:
                self.player.set_model(self.settings)
        return True

    @staticmethod
    def device_choices() -> list[DeviceChoice]:
        return device_choices()

    @staticmethod
    def backend_choices() -> list[DeviceChoice]:
        return backend_choices()

    def set_backend(self, backend: str) -> bool:
        """Run inference with "onnxruntime" or "tensorrt"; False (and a message) when that
        backend cannot run here."""
        choice = next((c for c in backend_choices() if c.id == backend), None)
        if choice is None:
            self.errorOccurred.emit(f"unknown backend {backend!r}")
            return False
        if choice.unavailable is not None:
            self.errorOccurred.emit(f"{choice.label} cannot be used: {choice.unavailable}")
            return False
        if backend == "tensorrt" and not self._device.startswith("cuda"):
            self.errorOccurred.emit("TensorRT runs on NVIDIA GPUs: choose a CUDA device first")
            return False
        self._backend = backend
        if self.settings is not None and self.settings.backend != backend:
            self.settings = replace(self.settings, backend=backend)
            if self.source is not None:
                self.player.set_model(self.settings)
        return True

    def base_settings(self) -> PipelineSettings | None:
        """The current settings at FP32: the model as chosen, not its variant."""
        if self.settings is None:
            return None
        model = self._base_model or self.settings.model
        return replace(self.settings, model=model, precision="fp32")

    # ---- precision ------------------------------------------------------------------

    @property
    def preparing(self) -> str | None:
        """The precision being prepared in the background, None when idle."""
        return self._job.precision if self._job is not None else None

    def set_precision(self, precision: str, *, cached_only: bool = False) -> None:
        """Switch to the FP32, FP16 or INT8 variant of the current model, playing on.

        A variant not yet cached is prepared on a thread (FP16: a fraction of a second;
        INT8: calibrated on the open source, most of a minute on a laptop CPU), with
        precisionProgress; then precisionChanged, and the player swaps engines without
        stopping. ``cached_only``: take the variant only if it is cached (restoring a
        saved choice). Failures and cancels end in precisionFailed; nothing changes.
        """
        p = precision.strip().lower()
        if p not in PRECISIONS:
            self.precisionFailed.emit(p, f"unknown precision {precision!r}")
            return
        if self.settings is None:
            self.precisionFailed.emit(p, "choose a model first")
            return
        dropped = self._drop_job()  # the newer choice wins
        # a model switch that waited on the dropped job must still reach the player
        fallback = dropped is not None and dropped.fallback
        if p == self.precision:
            if fallback and self.source is not None:
                self.player.set_model(self.settings)
            self.precisionChanged.emit(p, self.report)  # nothing to do: say what is active
            return
        if p == "fp32":
            self._apply(fp32_variant(self._base()))
            return
        if p == "int8" and self.source is None:
            if fallback:
                self._apply(fp32_variant(self._base()))
            self.precisionFailed.emit(p, "open a video first: INT8 is calibrated on its frames")
            return
        self._start_job(p, cached_only=cached_only, fallback=fallback)

    @Slot()
    def cancel_precision(self) -> None:
        """Stop preparing a variant; precisionFailed(…, "cancelled") follows."""
        if self._job is not None:
            self._job.cancel.set()

    def _base(self) -> ModelSpec:
        assert self.settings is not None
        return self._base_model or self.settings.model

    def _drop_job(self) -> PrecisionJob | None:
        job, self._job = self._job, None
        if job is not None:
            job.cancel.set()
            self._job_token += 1  # whatever it still reports is ignored
        return job

    def _start_job(self, precision: str, *, cached_only: bool, fallback: bool = False) -> None:
        self._drop_job()
        self._job_token += 1
        job = self._job = PrecisionJob(
            precision, self._job_token, threading.Event(), cached_only, fallback
        )
        assert self.settings is not None
        conf = getattr(self.settings.params, "conf", CalibrationSettings().conf)
        calibration = self.calibration or CalibrationSettings(conf=conf)
        args = (job, self._base(), self.source, calibration)
        self._start_worker(self._prepare, args, "fl-precision")

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
            if job.token == self._job_token:  # a superseded job's progress is not shown
                self.precisionProgress.emit(text, fraction)

        prepare_job(
            job, spec, source, calibration, on_progress=progress,
            on_ready=lambda variant: self._variantReady.emit(job.token, variant),
            on_failed=lambda message: self._variantFailed.emit(job.token, message),
        )  # fmt: skip

    @Slot(int, object)
    def _on_variant_ready(self, token: int, variant: VariantInfo | None) -> None:
        job = self._job
        if job is None or token != job.token:
            return  # superseded
        self._job = None
        if variant is None:
            name = job.precision.upper()
            model = self._base().name
            message = f"{name} of {model} is not prepared for this video yet: choose {name}"
            self._variant_missing(job, message + " to calibrate it")
            return
        self._apply(variant)

    @Slot(int, str)
    def _on_variant_failed(self, token: int, message: str) -> None:
        job = self._job
        if job is None or token != job.token:
            return
        self._job = None
        self._variant_missing(job, message)

    def _variant_missing(self, job: PrecisionJob, message: str) -> None:
        if job.fallback and self.source is not None and self.settings is not None:
            self.player.set_model(self.settings)  # the model switch goes on, at FP32
            self.precisionChanged.emit(self.precision, self.report)
        self.precisionFailed.emit(job.precision, message)

    def _apply(self, variant: VariantInfo) -> None:
        assert self.settings is not None
        self.settings = replace(self.settings, model=variant.spec, precision=variant.precision)
        self.precision, self.report = variant.precision, variant.report
        if self.source is not None:
            self.player.set_model(self.settings)
        self.precisionChanged.emit(self.precision, self.report)

    # ---- thresholds and overlay ---------------------------------------------------

    def _update(self, **changes: object) -> None:
        if self.settings is not None:
            self.settings = with_changes(self.settings, changes)
        self.player.update(**changes)

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
        if self.settings is not None and isinstance(self.settings.params, SuperResParams):
            self._update(region=region)

    @property
    def superres(self) -> bool:
        """True while a super-resolution model is loaded."""
        return self.settings is not None and produces_image(self.settings.model)

    def configure(self, *, conf: float, iou: float, overlay: OverlayStyle) -> None:
        """Initial thresholds (from saved settings) before anything is open."""
        if self.settings is not None:
            params = self.settings.params
            if isinstance(params, DetectParams):
                params = replace(params, conf=conf, iou=iou)
            self.settings = replace(self.settings, params=params, overlay=overlay)

    # ---- playback -------------------------------------------------------------------

    @Slot(str)
    def open_source(self, spec: str, *, play: bool = False) -> None:
        """Open ``spec`` paused, or playing (``play``); a failed open changes nothing."""
        self._opening = spec  # taken once the player lets the current source go
        if self.state.source is None:
            self._opened()
        self.player.open(spec, self.settings, play=play)

    def _opened(self) -> None:
        self.source, self._opening, self.last_result = self._opening, None, None

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

    # ---- snapshot and export -----------------------------------------------------

    @Slot(str)
    def save_snapshot(self, path: str) -> None:
        result = self.last_result
        if result is None:
            self.errorOccurred.emit("nothing to save: open a video first")
            return
        try:
            # the GPU path draws overlays on screen, not into frames: drawn for the file
            written = save_frame_snapshot(result, path, self.settings)
        except FrameLensError as exc:
            self.errorOccurred.emit(error_message(exc))
            return
        self.snapshotSaved.emit(str(written or path))

    @property
    def exporting(self) -> bool:
        return self._export is not None

    def start_export(self, request: ExportRequest) -> None:
        if self._export is not None:
            self.exportFailed.emit("an export is already running")
            return
        if self.settings is None:
            self.exportFailed.emit("choose a model before exporting")
            return
        job = self._export = ExportJob(request, self.settings)
        self._start_worker(self._run_export, (job,), "fl-export")

    def _run_export(self, job: ExportJob) -> None:
        try:
            paths = job.run(self.exportProgress.emit)
        except BaseException as exc:
            self._export = None
            cancelled = isinstance(exc, Cancelled)
            self.exportFailed.emit("cancelled" if cancelled else error_message(exc))
        else:
            self._export = None
            self.exportFinished.emit(paths)

    @Slot()
    def cancel_export(self) -> None:
        if self._export is not None:
            self._export.cancel()

    # ---- lifetime -----------------------------------------------------------------

    def shutdown(self) -> None:
        self.cancel_export()
        self._drop_job()
        self.player.close()
        # the export and precision threads stop at their next frame or step, cancelled:
        # wait for them, so that none emits into this controller once it is deleted
        deadline = time.monotonic() + SHUTDOWN_WAIT_S
        for thread in self._workers:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._workers = []
