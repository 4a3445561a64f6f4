"""What the main window's parts share: its widgets, controller, settings and state.

MainWindow (main_window.py) is assembled from one mixin per job: its actions and
menus (main_actions.py), opening sources and saving what it shows (main_sources.py),
choosing the model, device and backend (main_models.py) and switching precision
(main_precision.py) and the super-resolution views, PSNR on demand and enlarged
detections (main_superres.py). MainWindowParts, their common base, declares what they read of
each other for the type checker; at run time it is a plain object, and MainWindow
(a QMainWindow) builds everything declared here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from framelens.core.api import ModelSpec, PlayerState
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDockWidget, QLabel, QMainWindow, QMenu

if TYPE_CHECKING:
    from framelens.gui.common.controller import Controller
    from framelens.gui.common.engine_dialog import EngineBuildDialog
    from framelens.gui.common.settings import Settings
    from framelens.gui.compare.compare_view import CompareWindow
    from framelens.gui.compare.sensitivity import SensitivityDialog
    from framelens.gui.display.plots import StagePlots
    from framelens.gui.player.dialogs import ExportDialog
    from framelens.gui.player.model_panel import ModelPanel
    from framelens.gui.player.transport import TransportBar
    from framelens.gui.superres.sr_canvas import SrCanvas

    _Window = QMainWindow
else:
    _Window = object

__all__ = ["MainWindowParts"]


class MainWindowParts(_Window):
    """The main window's shared attributes and cross-part methods, declared only."""

    settings: Settings
    controller: Controller
    state: PlayerState
    source: str | None
    results_shown: int
    shown_index: int  # source index of the frame on screen (-1: none yet)
    canvas: SrCanvas
    transport: TransportBar
    panel: ModelPanel
    plots: StagePlots
    panel_dock: QDockWidget
    plots_dock: QDockWidget
    model_label: QLabel
    recent_menu: QMenu
    file_menu: QMenu
    analysis_menu: QMenu
    precision_actions: dict[str, QAction]
    sensitivity_action: QAction
    sensitivity_dialog: SensitivityDialog | None
    engine_action: QAction
    back_to_wall_action: QAction
    _pending_recent: str | None
    _model_key: str
    _asked_precision: str | None  # chosen by the user, being prepared
    _restore_precision: str | None  # saved INT8: looked up once a video opens

    if TYPE_CHECKING:
        # main_actions.py
        def _action(
            self,
            text: str,
            slot: object,
            shortcut: str | QKeySequence.StandardKey = "",
            icon_name: str = "",
            tip: str = "",
        ) -> QAction: ...

        # main_superres.py
        def _sync_superres(self, spec: ModelSpec | None) -> None: ...

        # main_window.py
        def show_error(self, message: str) -> None: ...
        def seek_end(self) -> None: ...
        def open_compare(self) -> CompareWindow | None: ...
        def _update_busy(self, progress: str = "") -> None: ...

        # main_sources.py
        def open_source(self, spec: str, *, play: bool = True) -> None: ...
        def open_at(self, spec: str, frame: int) -> None: ...
        def choose_file(self) -> None: ...
        def choose_camera(self) -> None: ...
        def choose_url(self) -> None: ...
        def _rebuild_recent(self, items: list[str]) -> None: ...
        def save_snapshot(self, path: str | None = None) -> None: ...
        def open_export_dialog(self) -> ExportDialog | None: ...

        # main_wall.py
        def choose_several(self) -> None: ...
        def choose_wall_layout(self) -> None: ...
        def open_wall(self, specs: list[str], *, layout: str | None = None) -> object: ...
        def open_wall_layout(self, path: str) -> object: ...
        def back_to_wall(self) -> None: ...

        # main_precision.py
        def choose_precision(self, precision: str) -> None: ...
        def show_sensitivity(self) -> SensitivityDialog | None: ...
        def open_engine_builder(self) -> EngineBuildDialog: ...
        def _sync_precision(self) -> None: ...
