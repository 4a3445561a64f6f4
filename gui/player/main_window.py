"""The main window: canvas, transport bar, model panel, plots, menus and status bar.

Widgets only send intents to the Controller and draw what its signals bring. The
window builds its shared parts (gui/player/main_window_parts.py: the controller, the
canvas, the panel, the transport bar, the status bar), lays them out, and composes one
feature object per job, each handed those parts: the playback controls
(main_playback.py), opening sources, snapshot and export (main_sources.py), the video
wall (main_wall.py), batch analysis (main_batch.py), the model, device, backend and
thresholds (main_models.py), precision switching (main_precision.py), the
super-resolution views and enlarged detections (main_superres.py), results and state
on screen (main_display.py), the detections list (main_detections.py), tracking (the
Tracking menu, Follow This ID, the track list: main_tracks.py), lines and zones (the
Zones menu, the editor on the canvas, the Events dock: main_zones.py), the compare view
(main_compare.py) and the menus and toolbar that hold their actions (main_actions.py).
Features reach each other through those parts and Qt signals only. The window builds
and wires them, and says errors.
"""

from __future__ import annotations

from framelens.core.api import PlayerState, TrackerSettings
from framelens.gui.common.controller import Controller
from framelens.gui.common.settings import Settings
from framelens.gui.common.widgets import icon, set_text
from framelens.gui.compare.compare_view import CompareWindow
from framelens.gui.player.dialogs import ExportDialog
from framelens.gui.player.main_actions import MainMenus
from framelens.gui.player.main_batch import BatchAnalysis
from framelens.gui.player.main_compare import CompareOpening
from framelens.gui.player.main_detections import DetectionsList
from framelens.gui.player.main_display import ResultDisplay
from framelens.gui.player.main_heatmap import HeatmapFeature
from framelens.gui.player.main_models import ModelChoice
from framelens.gui.player.main_playback import PlaybackControls
from framelens.gui.player.main_precision import PrecisionSwitching
from framelens.gui.player.main_sources import SourceOpening, camera_spec, display_name
from framelens.gui.player.main_superres import SuperResolution
from framelens.gui.player.main_tracks import TrackingFeature
from framelens.gui.player.main_wall import WallOpening
from framelens.gui.player.main_window_parts import Shown, WindowParts
from framelens.gui.player.main_zones import ZonesFeature
from framelens.gui.player.model_panel import ModelPanel, PanelScroll
from framelens.gui.player.status_bar import MainStatusBar
from framelens.gui.player.transport import TransportBar
from framelens.gui.superres.sr_canvas import SrCanvas
from framelens.gui.wall.wall_window import WallWindow
from PySide6.QtCore import QByteArray, Qt, Slot
from PySide6.QtGui import QCloseEvent, QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import (
    QDockWidget,
    QMainWindow,
    QMessageBox,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)


class MainWindow(QMainWindow):
    """FrameLens's window. ``controller`` and ``settings`` are injectable for tests."""

    def __init__(
        self,
        controller: Controller | None = None,
        settings: Settings | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings or Settings()
        self.controller = controller or Controller(self)
        self._shown = Shown()

        self.setWindowTitle("FrameLens")
        self.setWindowIcon(icon("framelens"))
        self.setAcceptDrops(True)
        self.setDockOptions(
            QMainWindow.DockOption.AnimatedDocks | QMainWindow.DockOption.AllowTabbedDocks
        )
        self.canvas = SrCanvas()  # with the super-resolution views (main_superres.py)
        self.transport = TransportBar()
        self.panel = ModelPanel()
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
        self.compare = CompareOpening(
            parts, model_key=lambda: self.models.key, tracking=self._tracker
        )
        # results and state on screen; a super-resolution result in the view chosen
        self.display = ResultDisplay(parts, views=[self.superres.show])
        self.plots = self.display.plots
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
        self.display.resultShown.connect(self.detections.show)  # the list, when open
        # the Tracking menu, Follow This ID and the track list (a dock beside the plots)
        self.tracking = TrackingFeature(
            parts, self.detections, before=self.menus.help_menu, plots=self.plots_dock
        )
        self.display.resultShown.connect(self.tracking.show)
        self.display.sourceOpened.connect(self.tracking.source_opened)
        self.tracking.restore()
        # the Zones menu, the lines and zones editor, the Events dock (beside the plots)
        self.zones = ZonesFeature(
            parts, self.tracking, before=self.menus.help_menu, plots=self.plots_dock
        )
        self.display.resultShown.connect(self.zones.show)
        self.display.sourceOpened.connect(self.zones.source_opened)
        self.heatmap = HeatmapFeature(parts, self.tracking)  # Tracking > Show Heatmap
        self.heatmap.restore()

    def _tracker(self) -> TrackerSettings | None:
        """The Tracking menu's tracker (compare's panes start with it), None when off."""
        return self.tracking.chosen

    # ---- what users do (the features' own, for scripts and tests) ----------------------

    @property
    def source(self) -> str | None:
        """The source asked for last (the title's), before and after it has opened."""
        return self._shown.source

    @property
    def state(self) -> PlayerState:
        """The player's state as the window last showed it."""
        return self.display.state

    @property
    def results_shown(self) -> int:
        """Results the window has taken since the source opened."""
        return self.display.results_shown

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

    def open_wall(
        self, specs: list[str], *, layout: str | None = None, zones: str | None = None
    ) -> WallWindow | None:
        return self.wall.open_wall(specs, layout=layout, zones=zones)

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
        scroll = PanelScroll()  # scrolls on a short screen, never cuts the panel off
        scroll.setWidget(self.panel)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
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
        self.display_label.setText(self.canvas.display_path)  # interop, or upload and why
        self.display_label.setToolTip("How frames reach the screen")
        self.canvas.displayPathChanged.connect(lambda path: set_text(self.display_label, path))
        metrics = self.fps_label.fontMetrics()
        self.fps_label.setFixedSize(
            metrics.horizontalAdvance("0000.0 fps") + 20, metrics.height() + 4
        )
        self.fps_label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)

    def _connect(self) -> None:
        self.controller.errorOccurred.connect(self.show_error)
        # the features' signals to one another
        self.display.resultShown.connect(self.superres.feed_crops)  # enlarged detections
        self.display.sourceOpened.connect(self.sources.source_opened)
        self.sources.opening.connect(self.precision.source_opening)
        self.sources.wallRequested.connect(self.wall.open_wall)
        self.sources.layoutRequested.connect(self.wall.open_wall_layout)
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

    # ---- errors and closing ---------------------------------------------------------------

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
