"""The main window: canvas, transport bar, model panel, plots, menus and status bar.

Widgets only send intents to the Controller and draw what its signals bring. The
window builds its shared parts (gui/player/main_window_parts.py: the controller, the
canvas, the panel, the transport bar, the status bar), lays them out, and composes one
feature object per job, each handed those parts: the playback controls
(main_playback.py), opening sources, snapshot and export (main_sources.py), the video
wall (main_wall.py), batch analysis (main_batch.py), the model, device, backend and
thresholds (main_models.py), precision switching (main_precision.py), the
super-resolution views and enlarged detections (main_superres.py), the detections list
(main_detections.py), the compare view (main_compare.py) and the menus and toolbar that
hold their actions (main_actions.py). Features reach each other through those parts and
Qt signals only. The window itself shows results and state and says errors.
"""

from __future__ import annotations

import time
from typing import cast

from framelens.core.api import (
    DeviceFrame,
    FrameResult,
    OverlayStyle,
    PlayerState,
    Upscaled,
)
from framelens.gui.common.controller import Controller
from framelens.gui.common.settings import Settings
from framelens.gui.common.widgets import icon, set_text
from framelens.gui.compare.compare_view import CompareWindow
from framelens.gui.display.plots import StagePlots
from framelens.gui.player.dialogs import ExportDialog
from framelens.gui.player.main_actions import MainMenus
from framelens.gui.player.main_batch import BatchAnalysis
from framelens.gui.player.main_compare import CompareOpening
from framelens.gui.player.main_detections import DetectionsList
from framelens.gui.player.main_models import ModelChoice
from framelens.gui.player.main_playback import PlaybackControls
from framelens.gui.player.main_precision import PrecisionSwitching
from framelens.gui.player.main_sources import SourceOpening, camera_spec, display_name
from framelens.gui.player.main_superres import SuperResolution
from framelens.gui.player.main_wall import WallOpening
from framelens.gui.player.main_window_parts import Shown, WindowParts
from framelens.gui.player.model_panel import ModelPanel
from framelens.gui.player.status_bar import MainStatusBar
from framelens.gui.player.transport import TransportBar
from framelens.gui.superres.sr_canvas import SrCanvas
from framelens.gui.wall.wall_window import WallWindow
from PySide6.QtCore import QByteArray, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QCloseEvent, QDragEnterEvent, QDropEvent
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


class MainWindow(QMainWindow):
    """FrameLens's window. ``controller`` and ``settings`` are injectable for tests."""

    sourceOpened = Signal()  # the source asked for has opened (its first state)

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
        self._shown = Shown()
        self._latest: FrameResult | None = None
        self._plots_at = 0.0
        self._ui_timer = QTimer(self)
        self._ui_timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._ui_timer.timeout.connect(self._tick)
        self._plots_interval_s = 0.1

        self.setWindowTitle("FrameLens")
        self.setWindowIcon(icon("framelens"))
        self.setAcceptDrops(True)
        self.setDockOptions(
            QMainWindow.DockOption.AnimatedDocks | QMainWindow.DockOption.AllowTabbedDocks
        )
        self.canvas = SrCanvas()  # with the super-resolution views (main_superres.py)
        self.transport = TransportBar()
        self.panel = ModelPanel()
        self.plots = StagePlots(auto_refresh=False)  # refreshed by _tick
        self.error_box = QMessageBox(self)
        self.error_box.setIcon(QMessageBox.Icon.Warning)
        self.error_box.setWindowTitle("FrameLens")
        self.error_box.setWindowModality(Qt.WindowModality.NonModal)
        self._build_status_bar()
        parts = WindowParts(
            self,
            self.controller,
            self.settings,
            self.canvas,
            self.panel,
            self.transport,
            self.status_bar,
            self._shown,
            self.show_error,
        )

        # the features, each with its widgets, actions and slots
        self.menus = MainMenus(parts)
        self.playback = PlaybackControls(parts)
        self.sources = SourceOpening(parts)
        self.wall = WallOpening(parts)
        self.batch = BatchAnalysis(parts)
        self.models = ModelChoice(parts)
        self.precision = PrecisionSwitching(parts)
        self.superres = SuperResolution(parts)
        self.compare = CompareOpening(parts, model_key=lambda: self.models.key)
        self._lay_out()
        self.menus.fill(
            sources=self.sources,
            wall=self.wall,
            batch=self.batch,
            playback=self.playback,
            precision=self.precision,
            superres=self.superres,
            compare_action=self.compare.action,
            docks=[self.panel_dock, self.plots_dock],
        )
        self._connect()
        self._restore()
        # after the restore: restoreDockWidget puts its dock back where it was
        self.detections = DetectionsList(parts, beside=self.panel_dock)
        self.menus.add_view_toggle(self.detections.action, self.plots_dock.toggleViewAction())

    # ---- what users do (the features' own, for scripts and tests) ----------------------

    @property
    def source(self) -> str | None:
        """The source asked for last (the title's), before and after it has opened."""
        return self._shown.source

    @property
    def shown_index(self) -> int:
        """The source index of the frame on screen (-1: none yet)."""
        return self._shown.index

    def open_source(self, spec: str, *, play: bool = True) -> None:
        self.sources.open_source(spec, play=play)

    def open_compare(self) -> CompareWindow | None:
        return self.compare.open_compare()

    def open_at(self, spec: str, frame: int) -> None:
        self.sources.open_at(spec, frame)

    def save_snapshot(self, path: str | None = None) -> None:
        self.sources.save_snapshot(path)

    def open_export_dialog(self) -> ExportDialog | None:
        return self.sources.open_export_dialog()

    def open_wall(self, specs: list[str], *, layout: str | None = None) -> WallWindow | None:
        return self.wall.open_wall(specs, layout=layout)

    def choose_model(self, key: str) -> None:
        self.models.choose_model(key)

    def import_model(self, path: str | None = None) -> None:
        self.models.import_model(path)

    def choose_device(self, device: str) -> None:
        self.models.choose_device(device)

    def choose_backend(self, backend: str) -> None:
        self.models.choose_backend(backend)

    def choose_precision(self, precision: str) -> None:
        self.precision.choose_precision(precision)

    # ---- construction ---------------------------------------------------------------

    def _lay_out(self) -> None:
        central = QWidget()
        cl = QVBoxLayout(central)
        cl.setContentsMargins(0, 0, 0, 0)
        cl.setSpacing(0)
        cl.addWidget(self.superres.widget, 1)  # the canvas, the ROI view, the crop strip
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
        self.plots_dock = self._dock(
            "Performance", "performanceDock", self.plots, Qt.DockWidgetArea.BottomDockWidgetArea
        )

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
        c = self.controller
        c.resultReady.connect(self._on_result)
        c.stateChanged.connect(self._on_state)
        c.errorOccurred.connect(self.show_error)
        self.canvas.drawTimeMs.connect(self.plots.add_display_time)
        c.stateChanged.connect(lambda state: self.plots.set_dropped(state.dropped))
        self.canvas.zoomChanged.connect(
            lambda z: self.statusBar().showMessage(f"Zoom {z * 100:.0f}%", 1500)
        )
        # the features' signals to one another
        self.sources.opening.connect(self.precision.source_opening)
        self.sources.wallRequested.connect(self.wall.open_wall)
        self.sources.layoutRequested.connect(self.wall.open_wall_layout)
        self.sourceOpened.connect(self.sources.source_opened)
        self.wall.playRequested.connect(self.sources.open_source)
        self.wall.layoutOpened.connect(self.sources.add_recent)
        self.batch.hitChosen.connect(self.sources.open_at)

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
        self.superres.restore()
        self.playback.restore()
        self.models.restore()
        self.precision.restore()

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        self.sources.drag_enter(event)

    def dropEvent(self, event: QDropEvent) -> None:
        self.sources.drop(event)

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
                self.superres.show(result)  # the view chosen (main_superres.py)
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
            self.superres.feed_crops(result)  # enlarged detections, when asked for
            self.detections.show(result)  # the detections list, when open
            self.transport.show_position(result.frame.index, result.frame.pts)
            self._shown.index = result.frame.index
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
            self.sourceOpened.emit()  # Open Recent takes it (main_sources.py)
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
        set_text(self.fps_label, f"{state.fps:.1f} fps" if state.playing and state.fps else "")
        # the model field and what is being prepared: main_precision.py, on the same signal

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
        self.status_bar.show_error(message, 10000)  # back after any tip shown over it
        self.error_box.setText(message)
        self.error_box.show()

    def closeEvent(self, event: QCloseEvent) -> None:
        self.compare.close()
        self.precision.close()
        self.wall.close()
        self.batch.close()  # a running batch is cancelled; what finished is kept
        self.settings.geometry = QByteArray(self.saveGeometry())
        self.settings.window_state = QByteArray(self.saveState())
        self.settings.sync()
        self.superres.close()
        self.controller.shutdown()
        super().closeEvent(event)


__all__ = ["MainWindow", "ModelPanel", "TransportBar", "camera_spec", "display_name"]
