"""The one object between the widgets and core: intents in, results out, as Qt signals.

The Player calls back on its worker threads; emitting a signal from there queues
it to the GUI thread, so every slot connected to this controller runs on the GUI
thread. A small semaphore applies back-pressure: the worker waits (briefly) when
the GUI has not yet taken the last few results, so memory stays flat and the
plots see every frame.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from framelens.core.catalog import DEFAULT_MODEL, load_catalog, resolve_model
from framelens.core.devices import DeviceChoice, device_choices, resolve_device
from framelens.core.drawing import OverlayStyle
from framelens.core.errors import ExportError, FrameLensError
from framelens.core.export import save_snapshot
from framelens.core.modelspec import ModelSpec
from framelens.core.pipeline import PipelineSettings
from framelens.core.player import Player, PlayerState, error_message
from framelens.core.run import run_to_outputs
from framelens.core.runner import Cancelled
from framelens.core.types import FrameResult
from PySide6.QtCore import QObject, Signal, Slot

_IN_FLIGHT = 3  # results emitted but not yet taken by the GUI thread

ProgressFn = Callable[[int, int], None]


@dataclass(frozen=True)
class ExportRequest:
    """What File > Export asks for. ``count`` None = to the end of the source."""

    source: str
    video_path: str | None
    detections_path: str | None = None
    start: int = 0
    count: int | None = None


class ExportJob:
    """Runs a source range through its own pipeline into the exporters, on a thread.

    Independent of the player (its own source, engine and outputs), so export
    and playback do not disturb each other. A cancelled or failed job leaves no file.
    """

    def __init__(self, request: ExportRequest, settings: PipelineSettings) -> None:
        self.request = request
        self.settings = settings
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        self._cancelled.set()

    def run(self, progress: ProgressFn) -> str:
        """Export; returns the path written (the video, else the detections file)."""
        req = self.request
        if not req.video_path and not req.detections_path:
            raise ExportError("choose a video file or a detections file to export")
        summary = run_to_outputs(
            req.source,
            self.settings,
            export=req.video_path,
            detections=req.detections_path,
            start=req.start,
            frames=req.count,
            progress=False,
            on_progress=progress,
            cancel=self._cancelled,
        )
        return str(summary["outputs"][0])


class Controller(QObject):
    """Owns the Player and the export job; the only path from widgets to core."""

    resultReady = Signal(object)  # FrameResult
    stateChanged = Signal(object)  # PlayerState
    errorOccurred = Signal(str)  # one line
    modelChanged = Signal(object)  # ModelSpec chosen (labels for the class filter)
    exportProgress = Signal(int, int)  # done, total (total 0 when unknown)
    exportFinished = Signal(str)  # path written
    exportFailed = Signal(str)  # one line; "cancelled" after cancel_export()
    snapshotSaved = Signal(str)

    _deliver = Signal(object)

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
        self.state = PlayerState()
        self.last_result: FrameResult | None = None
        self._export: ExportJob | None = None
        self.stateChanged.connect(self._remember_state)

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
        self.state = state

    # ---- models -----------------------------------------------------------------

    @staticmethod
    def catalog() -> dict[str, ModelSpec]:
        return load_catalog()

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
        """Switch model; while a source is open the new engine is built in the background."""
        if self.settings is None:
            self.settings = PipelineSettings(spec, backend=self._backend, device=self._device)
        else:
            self.settings = replace(self.settings, model=spec, classes=None)
        self.modelChanged.emit(spec)
        if self.source is not None:
            self.player.set_model(self.settings)

    def set_device(self, device: str) -> bool:
        """Run inference on "auto", "cpu" or "cuda:N"; False (and a message) when impossible."""
        try:
            resolved = resolve_device(device)
        except FrameLensError as exc:
            self.errorOccurred.emit(error_message(exc))
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

    # ---- thresholds and overlay ---------------------------------------------------

    def _update(self, **changes: object) -> None:
        if self.settings is not None:
            self.settings = replace(self.settings, **changes)  # type: ignore[arg-type]
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

    def configure(self, *, conf: float, iou: float, overlay: OverlayStyle) -> None:
        """Initial thresholds (from saved settings) before anything is open."""
        if self.settings is not None:
            self.settings = replace(self.settings, conf=conf, iou=iou, overlay=overlay)

    # ---- playback -------------------------------------------------------------------

    @Slot(str)
    def open_source(self, spec: str) -> None:
        self.source = spec
        self.last_result = None
        self.player.open(spec, self.settings)

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
        image = result.annotated if result.annotated is not None else result.frame.image
        try:
            written = save_snapshot(image, path)
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
        threading.Thread(
            target=self._run_export, args=(job,), name="fl-export", daemon=True
        ).start()

    def _run_export(self, job: ExportJob) -> None:
        try:
            path = job.run(self.exportProgress.emit)
        except Cancelled:
            self._export = None
            self.exportFailed.emit("cancelled")
        except BaseException as exc:
            self._export = None
            self.exportFailed.emit(error_message(exc))
        else:
            self._export = None
            self.exportFinished.emit(path)

    @Slot()
    def cancel_export(self) -> None:
        if self._export is not None:
            self._export.cancel()

    # ---- lifetime -----------------------------------------------------------------

    def shutdown(self) -> None:
        self.cancel_export()
        self.player.close()


def default_output(source: str, suffix: str) -> str:
    """``clip.mp4`` -> ``clip_annotated.mp4`` next to it (or in the home folder)."""
    p = Path(source)
    folder = p.parent if p.parent.is_dir() else Path.home()
    return str(folder / f"{p.stem or 'capture'}_annotated{suffix}")
