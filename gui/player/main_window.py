"""The main window: canvas, transport bar, model panel, plots, menus and status bar.

Widgets only send intents to the Controller and draw what its signals bring. The
window is built here (layout, docks, status bar, wiring, saved settings) and shows
results and state; its other jobs are mixins: actions and menus (main_actions),
opening sources, snapshot and export (main_sources), model choice (main_models),
precision switching (main_precision) and batch analysis (main_batch).
"""

from __future__ import annotations

import time
from typing import cast

from framelens.core.api import (
    DeviceFrame,
    FrameLensError,
    FrameResult,
    OverlayStyle,
    PlayerState,
    Upscaled,
    error_message,
)
from framelens.gui.common.controller import Controller
from framelens.gui.common.settings import Settings
from framelens.gui.common.widgets import icon, set_text
from framelens.gui.compare.compare_view import CompareWindow
from framelens.gui.compare.sensitivity import SensitivityDialog
from framelens.gui.display.plots import StagePlots
from framelens.gui.player.main_actions import MainActions
from framelens.gui.player.main_batch import BatchAnalysis
from framelens.gui.player.main_detections import DetectionsList
from framelens.gui.player.main_models import ModelChoice
from framelens.gui.player.main_precision import PrecisionSwitching
from framelens.gui.player.main_sources import SourceOpening, camera_spec, display_name
from framelens.gui.player.main_superres import SuperResolution
from framelens.gui.player.main_wall import WallOpening
from framelens.gui.player.model_panel import OVERLAYS, ModelPanel
from framelens.gui.player.status_bar import MainStatusBar
from framelens.gui.player.transport import TransportBar
from framelens.gui.superres.sr_canvas import SrCanvas
from framelens.gui.wall.wall_window import WallWindow
from PySide6.QtCore import QByteArray, Qt, QTimer, Slot
from PySide6.QtGui import (
    QCloseEvent,
)
from PySide6.QtWidgets import (
    QDockWidget,
    QMainWindow,
    QMessageBox,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

# Repaint rates while playing: (video Hz, plots Hz). A window holding a GL widget is
# composited as a whole on each repaint: ~1 ms on a GPU, but ~25 ms of CPU for a
# 1360x860 window on Mesa's llvmpipe, CPU the pipeline needs. Real-time playback shows
# every frame up to 30 Hz; "max speed" is a throughput mode and previews more sparsely,
# the more so with software OpenGL.
REFRESH_RATES = {
    # (realtime, software GL)
    (True, False): (30.0, 10.0),
    (True, True): (30.0, 4.0),
    (False, False): (30.0, 10.0),
    (False, True): (10.0, 1.0),
}


class MainWindow(
    MainActions,
    SourceOpening,
    WallOpening,
    BatchAnalysis,
    ModelChoice,
    PrecisionSwitching,
    SuperResolution,
    DetectionsList,
    QMainWindow,
):
    """FrameLens's window. ``controller`` and ``settings`` are injectable for tests."""

    def __init__(
        self,
        controller: Controller | None = None,
        settings: Settings | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings or Settings()
        self.controller = controller or Controller(self)
        self.state = PlayerState()
        self.results_shown = 0
        self.shown_index = -1  # source index of the frame on screen
        self.source: str | None = None
        self._latest: FrameResult | None = None
        self._plots_at = 0.0
        self._ui_timer = QTimer(self)
        self._ui_timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._ui_timer.timeout.connect(self._tick)
        self._plots_interval_s = 0.1
        self._pending_recent: str | None = None
        self._model_key = ""
        self._asked_precision: str | None = None  # chosen by the user, being prepared
        self._restore_precision: str | None = None  # saved INT8: looked up once a video opens
        self.compare_window: CompareWindow | None = None
        self.sensitivity_dialog: SensitivityDialog | None = None
        self.wall_window: WallWindow | None = None

        self.setWindowTitle("FrameLens")
        self.setWindowIcon(icon("framelens"))
        self.setAcceptDrops(True)
        self.setDockOptions(
            QMainWindow.DockOption.AnimatedDocks | QMainWindow.DockOption.AllowTabbedDocks
        )

        self.canvas = SrCanvas()  # with the super-resolution views (main_superres.py)
        self.transport = TransportBar()
        self.panel = ModelPanel()
        central = QWidget()
        cl = QVBoxLayout(central)
        cl.setContentsMargins(0, 0, 0, 0)
        cl.setSpacing(0)
        cl.addWidget(self._build_superres(), 1)  # the canvas, the ROI view, the crop strip
        cl.addWidget(self.transport)
        self.setCentralWidget(central)

        # The side panel runs the full height; the plots sit under the video only.
        self.setCorner(Qt.Corner.BottomRightCorner, Qt.DockWidgetArea.RightDockWidgetArea)
        scroll = QScrollArea()
        scroll.setWidget(self.panel)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        # on a short screen the panel scrolls vertically; it never needs a sideways bar
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.panel_dock = self._dock(
            "Analysis", "analysisDock", scroll, Qt.DockWidgetArea.RightDockWidgetArea
        )
        self.plots = StagePlots(auto_refresh=False)  # refreshed by _tick
        self.plots_dock = self._dock(
            "Performance", "performanceDock", self.plots, Qt.DockWidgetArea.BottomDockWidgetArea
        )

        self.error_box = QMessageBox(self)
        self.error_box.setIcon(QMessageBox.Icon.Warning)
        self.error_box.setWindowTitle("FrameLens")
        self.error_box.setWindowModality(Qt.WindowModality.NonModal)

        self._build_status_bar()
        self._build_actions()
        self._build_sr_actions()
        self._build_batch_actions()
        self._build_menus()
        self._build_toolbar()
        self._build_sr_menus(self.view_menu, self.analysis_menu)
        self._build_batch_menus()
        self._connect()
        self._connect_superres()
        self._restore()
        self._build_detections()  # after the restore: it puts the dock back (main_detections)

    # ---- construction ---------------------------------------------------------------

    def _dock(self, title: str, name: str, widget: QWidget, area: Qt.DockWidgetArea) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(name)  # saveState() needs names
        dock.setWidget(widget)
        dock.setFeatures(
            QDockWidget.DockWidgetFeature.DockWidgetMovable
            | QDockWidget.DockWidgetFeature.DockWidgetFloatable
            | QDockWidget.DockWidgetFeature.DockWidgetClosable
        )
        self.addDockWidget(area, dock)
        return dock

    def _build_status_bar(self) -> None:
        # one field per text, fitted so that none overlaps or is cut (gui/player/status_bar.py)
        self.status_bar = bar = MainStatusBar(self)
        self.setStatusBar(bar)
        self.busy_label, self.source_label, self.model_label = bar.job, bar.source, bar.model
        self.backend_label, self.display_label, self.fps_label = bar.backend, bar.display, bar.fps
        self.source_label.setText("No source")
        self.display_label.setText(self.canvas.display_path)  # interop, or upload and why
        self.display_label.setToolTip("How frames reach the screen")
        self.canvas.displayPathChanged.connect(lambda path: set_text(self.display_label, path))
        metrics = self.fps_label.fontMetrics()
        self.fps_label.setFixedSize(
            metrics.horizontalAdvance("0000.0 fps") + 20, metrics.height() + 4
        )
        self.fps_label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)

    def _connect(self) -> None:
        c, t, p = self.controller, self.transport, self.panel
        c.resultReady.connect(self._on_result)
        c.stateChanged.connect(self._on_state)
        c.errorOccurred.connect(self.show_error)
        c.modelChanged.connect(self._on_model)
        c.snapshotSaved.connect(lambda path: self.statusBar().showMessage(f"Saved {path}", 5000))
        self.canvas.drawTimeMs.connect(self.plots.add_display_time)
        c.stateChanged.connect(lambda state: self.plots.set_dropped(state.dropped))
        self.canvas.zoomChanged.connect(
            lambda z: self.statusBar().showMessage(f"Zoom {z * 100:.0f}%", 1500)
        )
        t.play_button.clicked.connect(c.toggle_play)
        t.back_button.clicked.connect(lambda: c.step(-1))
        t.forward_button.clicked.connect(lambda: c.step(1))
        t.seekRequested.connect(c.seek)
        t.speed_combo.currentIndexChanged.connect(self._on_speed)
        t.realtime_button.toggled.connect(self._on_realtime)
        p.modelChosen.connect(self.choose_model)
        p.importRequested.connect(lambda: self.import_model())
        p.confChanged.connect(self._on_conf)
        p.iouChanged.connect(self._on_iou)
        p.classesChanged.connect(c.set_classes)
        p.overlayChanged.connect(self._on_overlay)
        p.deviceChosen.connect(self.choose_device)
        p.backendChosen.connect(self.choose_backend)
        p.precision.precisionChosen.connect(self.choose_precision)
        p.precision.cancelRequested.connect(c.cancel_precision)
        p.precision.sensitivityRequested.connect(self.show_sensitivity)
        c.precisionProgress.connect(self._on_precision_progress)
        c.precisionChanged.connect(self._on_precision_changed)
        c.precisionFailed.connect(self._on_precision_failed)

    def _restore(self) -> None:
        s = self.settings
        geometry, state = s.geometry, s.window_state
        if geometry is not None:
            self.restoreGeometry(geometry)
        else:
            self.resize(1360, 860)
        if state is not None:
            self.restoreState(state)
        else:
            self.resizeDocks([self.panel_dock], [300], Qt.Orientation.Horizontal)
            self.resizeDocks([self.plots_dock], [250], Qt.Orientation.Vertical)
        self._restore_superres()
        self.panel.set_thresholds(s.conf, s.iou)
        self.panel.set_overlay(OverlayStyle(**{n: s.overlay(n) for n in OVERLAYS}))
        speed_index = self.transport.speed_combo.findData(s.speed)
        self.transport.speed_combo.setCurrentIndex(speed_index if speed_index >= 0 else 2)
        self.transport.realtime_button.setChecked(s.realtime)
        self.realtime_action.setChecked(s.realtime)
        self.controller.set_speed(self.transport.speed_combo.currentData())
        self.controller.set_realtime(s.realtime)
        try:
            catalog = self.controller.catalog()
        except FrameLensError as exc:
            catalog = {}
            self.show_error(error_message(exc))
        self.panel.set_models(catalog)
        device = s.device
        if not self.controller.set_device(device):  # saved on a machine with a GPU, say
            device = s.device = "auto"
            self.controller.set_device(device)
        self.panel.set_devices(self.controller.device_choices(), device)
        backend = s.backend
        if backend != "onnxruntime" and not self.controller.set_backend(backend):
            backend = s.backend = "onnxruntime"  # saved where TensorRT was installed, say
        self.panel.set_backends(self.controller.backend_choices(), backend)
        wanted = s.model or self.controller.default_model()
        layout, labels, task = s.model_options() if s.model else (None, None, None)
        if not self._load_model(wanted, layout, labels, task, quiet=True):
            self._load_model(self.controller.default_model())
        self.controller.configure(conf=s.conf, iou=s.iou, overlay=self.panel.overlay())
        if s.precision == "fp16":  # quick to build, so restored at once
            self.controller.set_precision("fp16")
            self._sync_precision()
        elif s.precision == "int8":  # calibrated per video: looked up when one opens
            self._restore_precision = "int8"

    # ---- sources -----------------------------------------------------------------
    # ---- thresholds, overlay, playback settings ------------------------------------

    def _on_conf(self, value: float) -> None:
        self.settings.conf = value
        self.controller.set_conf(value)

    def _on_iou(self, value: float) -> None:
        self.settings.iou = value
        self.controller.set_iou(value)

    def _on_overlay(self, style: OverlayStyle) -> None:
        for name in OVERLAYS:
            self.settings.set_overlay(name, bool(getattr(style, name)))
        self.controller.set_overlay(style)

    def _on_speed(self, _index: int) -> None:
        speed = float(self.transport.speed_combo.currentData())
        self.settings.speed = speed
        self.controller.set_speed(speed)

    def _on_realtime(self, on: bool) -> None:
        self.settings.realtime = on
        self.transport.speed_combo.setEnabled(on)
        self.controller.set_realtime(on)

    def seek_end(self) -> None:
        if self.state.frame_count:
            self.controller.seek(self.state.frame_count - 1)

    # ---- results and state ------------------------------------------------------------

    @Slot(object)
    def _on_result(self, result: FrameResult) -> None:
        """Every result feeds the plots; the screen shows the latest one at each tick."""
        self.results_shown += 1
        self.plots.add_result(result)
        self._latest = result
        if not self.state.playing:
            self._tick()  # a seek or a step: show it now
        elif not self._ui_timer.isActive():
            self._start_ticks()

    def _start_ticks(self) -> None:
        video_hz, plots_hz = REFRESH_RATES[(self.state.realtime, self.canvas.software_gl)]
        self._plots_interval_s = 1.0 / plots_hz
        self._ui_timer.start(round(1000.0 / video_hz))

    def _tick(self) -> None:
        """One repaint of everything that changed: video, position, plots.

        A window holding a GL widget is composited as a whole on every repaint,
        which is costly without a GPU (llvmpipe), so all updates share one tick
        at the rates of REFRESH_RATES while playing.
        """
        result, self._latest = self._latest, None
        if result is not None:
            frame = result.frame
            if isinstance(result.output, Upscaled):
                self._show_superres(result)  # the view chosen (main_superres.py)
            elif result.annotated is None and frame.device is not None:
                # the GPU path: the display kernel's RGBA frame goes to the canvas on the
                # device (CUDA-GL interop when possible); the canvas paints the overlays
                settings = self.controller.settings
                labels = settings.model.labels if settings is not None else ()
                style = settings.overlay if settings is not None else OverlayStyle()
                self.canvas.set_image(
                    cast(DeviceFrame, frame.device), (result.output, labels, style)
                )
            else:
                image = result.annotated if result.annotated is not None else frame.image
                self.canvas.set_image(image)
            self._feed_crops(result)  # enlarged detections, when asked for
            self._show_detections(result)  # the detections list, when open
            self.transport.show_position(result.frame.index, result.frame.pts)
            self.shown_index = result.frame.index
        now = time.perf_counter()
        if now - self._plots_at >= self._plots_interval_s or not self.state.playing:
            self._plots_at = now
            self.plots.refresh()
        if result is None and not self.state.playing:
            self._ui_timer.stop()

    @Slot(object)
    def _on_state(self, state: PlayerState) -> None:
        previous, self.state = self.state, state
        info = state.source
        if info is not None and (previous.source is None or previous.source != info):
            self.transport.set_source(state.frame_count, info.fps, info.duration)
            set_text(self.source_label, self._describe_source(state))
            # a source opened (a failed open publishes none): what the old one showed goes
            self.results_shown = 0
            self.canvas.reset_view()
            self.plots.clear()
            if self._pending_recent is not None:
                self._rebuild_recent(self.settings.add_recent(self._pending_recent))
                self._pending_recent = None
            self.statusBar().clearMessage()
        elif info is not None and state.frame_count != previous.frame_count:
            self.transport.set_count(state.frame_count)  # a file found cut short
            set_text(self.source_label, self._describe_source(state))
        if info is None and state.status == "empty":
            set_text(self.source_label, "No source")
        if info is not None and state.reconnecting != previous.reconnecting:
            text = self._describe_source(state)  # a stream down: backoff until it is back
            set_text(self.source_label, f"{text} · reconnecting…" if state.reconnecting else text)
        if state.playing != previous.playing:
            self.transport.show_playing(state.playing)
            self.plots.reset_rate()
        if state.realtime != previous.realtime and self._ui_timer.isActive():
            self._start_ticks()
        cut_short = info is not None and state.frame_count != previous.frame_count
        if state.status == "ended" and previous.status != "ended" and not cut_short:
            self.statusBar().showMessage("End of video — Space plays it again", 4000)
        device = state.device.upper() if state.device == "cpu" else state.device
        backend = f"{state.backend} · {device}" if state.backend else ""
        if backend and state.decoder.startswith("nvdec"):
            backend += " · NVDEC"
        set_text(self.backend_label, backend)
        tip = [*state.plan, *([f"decoding: {state.decoder}"] if state.decoder else [])]
        self.backend_label.setToolTip("\n".join(tip))  # the plan: each choice and why
        if state.model:
            set_text(self.model_label, self._model_text(state))
        set_text(self.fps_label, f"{state.fps:.1f} fps" if state.playing and state.fps else "")
        if (state.precision, state.loading_model) != (previous.precision, previous.loading_model):
            self._sync_precision()
        self._update_busy()

    def _model_text(self, state: PlayerState) -> str:
        """The model and the precision that runs; while another is prepared (a restored
        INT8 calibrating, say) or its engine loads, that one too, as the panel says."""
        running = state.precision.upper()
        preparing = self.controller.preparing
        # prepared, the player still building its engine: the panel says INT8 then
        coming = preparing or self.controller.precision
        if running and coming.upper() != running:
            doing = "preparing" if preparing is not None else "loading"
            return f"{state.model} · {running} → {coming.upper()} ({doing})"
        return f"{state.model} · {running}"

    def _update_busy(self, progress: str = "") -> None:
        if self.state.loading_model:
            text = "Loading model…"
        elif self.controller.preparing is not None:
            coming = f"Preparing {self.controller.preparing.upper()}"
            if not progress and self.busy_label.text().startswith(f"{coming} "):
                progress = self.busy_label.text()  # its last percentage, until the next
            text = progress or f"{coming}…"
        else:
            text = ""
        set_text(self.busy_label, text)  # shown while it says something
        if self.state.model:
            set_text(self.model_label, self._model_text(self.state))

    def open_compare(self) -> CompareWindow | None:
        """The compare view on the open video, from the frame on screen; playback pauses."""
        if self.source is None or self.state.source is None:
            self.show_error("nothing to compare: open a video first")
            return None
        if self.controller.base_settings() is None:
            self.show_error("choose a model before comparing")
            return None
        if self.compare_window is not None and self.compare_window.source == self.source:
            self.compare_window.show()
            self.compare_window.raise_()
            return self.compare_window
        if self.compare_window is not None:
            self.compare_window.close()
            self.compare_window.deleteLater()
        self.controller.pause()  # two cores: the comparison gets them
        last = self.controller.last_result
        window = CompareWindow(
            self.controller,
            self.source,
            max(0, self.state.index),
            model_key=self._model_key,
            preview=last.frame.image if last is not None else None,
            parent=self,
        )
        self.compare_window = window
        window.show()
        return window

    @staticmethod
    def _describe_source(state: PlayerState) -> str:
        info = state.source
        if info is None:
            return ""
        parts = [f"{info.width}×{info.height}"]
        if info.fps > 0:
            parts.append(f"{round(info.fps, 2):g} fps")  # an average: 11.78, 29.97, 25
        if info.codec:
            parts.append(info.codec)
        if state.frame_count:
            parts.append(f"{state.frame_count} frames")
        return " · ".join(parts)

    @Slot(str)
    def show_error(self, message: str) -> None:
        """One line in the status bar and in a (non-blocking) message box."""
        pending = self._pending_recent
        if pending is not None and (
            self.state.source is None or display_name(pending).lower() in message.lower()
        ):
            # the open failed: the title and the recent list stay with what plays
            self._pending_recent = None
            current = self.state.source
            self.source = current.uri if current is not None else None
            self.setWindowTitle(
                f"FrameLens — {display_name(current.uri)}" if current is not None else "FrameLens"
            )
        self.status_bar.show_error(message, 10000)  # back after any tip shown over it
        self.error_box.setText(message)
        self.error_box.show()

    def closeEvent(self, event: QCloseEvent) -> None:
        for child in (self.compare_window, self.sensitivity_dialog, self.wall_window):
            if child is not None:
                child.close()
        self._close_batch()  # a running batch is cancelled; what finished is kept
        self.settings.geometry = QByteArray(self.saveGeometry())
        self.settings.window_state = QByteArray(self.saveState())
        self.settings.sync()
        self.crop_worker.close()
        self.controller.shutdown()
        super().closeEvent(event)


__all__ = ["MainWindow", "ModelPanel", "TransportBar", "camera_spec", "display_name"]
