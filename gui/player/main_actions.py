"""The main window's menus and toolbar, and the actions no feature owns (Quit, Full
Screen, Reset Zoom, the Help menu's).

Each feature makes its own actions (gui/player/main_*.py); this puts them in the
File, Playback, View, Analysis and Help menus and on the toolbar, in one order.
"""

from __future__ import annotations

from framelens.core.api import __version__
from framelens.gui.player.main_batch import BatchAnalysis
from framelens.gui.player.main_playback import PlaybackControls
from framelens.gui.player.main_precision import PrecisionSwitching
from framelens.gui.player.main_sources import SourceOpening
from framelens.gui.player.main_superres import SuperResolution
from framelens.gui.player.main_wall import WallOpening
from framelens.gui.player.main_window_parts import WindowParts
from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QDockWidget, QMessageBox

__all__ = ["MainMenus"]


class MainMenus(QObject):
    """File, Playback, View, Analysis and Help, and the toolbar (see the module doc)."""

    def __init__(self, parts: WindowParts) -> None:
        super().__init__(parts.window)
        self.parts = parts
        window, a = parts.window, parts.action
        self.quit_action = a("&Quit", window.close, "Ctrl+Q")
        self.fullscreen_action = a("&Full Screen", self.toggle_fullscreen, "F11")
        self.reset_view_action = a("&Reset Zoom", parts.canvas.reset_view, "Ctrl+0")
        self.about_action = a("&About FrameLens", self.about)
        self.shortcuts_action = a(
            "&Keyboard Shortcuts", self.show_shortcuts, "Ctrl+/", tip="Every shortcut, by menu"
        )
        self.user_guide_action = a(
            "&User Guide", self.show_user_guide, "F1", tip="How to use FrameLens, in one page"
        )
        mb = window.menuBar()
        self.file_menu = mb.addMenu("&File")
        self.playback_menu = mb.addMenu("&Playback")
        self.view_menu = mb.addMenu("&View")
        self.analysis_menu = mb.addMenu("&Analysis")
        self.help_menu = mb.addMenu("&Help")

    def fill(
        self,
        *,
        sources: SourceOpening,
        wall: WallOpening,
        batch: BatchAnalysis,
        playback: PlaybackControls,
        precision: PrecisionSwitching,
        superres: SuperResolution,
        compare_action: QAction,
        docks: list[QDockWidget],
    ) -> None:
        """Every feature's actions in the menus and on the toolbars, in their order."""
        file_menu = self.file_menu
        file_menu.addActions(sources.source_actions)
        file_menu.addActions([wall.several_action, wall.zones_action, wall.layout_action])
        file_menu.addMenu(wall.process_menu)
        file_menu.addAction(batch.batch_action)  # beside the other ways in
        file_menu.addMenu(sources.recent_menu)
        file_menu.addSeparator()
        file_menu.addActions(
            [sources.export_action, sources.snapshot_action, sources.quick_snapshot_action]
        )
        file_menu.addSeparator()
        file_menu.addAction(self.quit_action)
        play_menu = self.playback_menu
        play_menu.addActions([*playback.stepping, playback.goto_action])
        play_menu.addSeparator()
        play_menu.addActions(playback.review)
        play_menu.addSeparator()
        play_menu.addAction(playback.realtime_action)
        view_menu = self.view_menu
        view_menu.addActions([self.fullscreen_action, self.reset_view_action, wall.back_action])
        view_menu.addSeparator()
        view_menu.addActions([dock.toggleViewAction() for dock in docks])
        analysis_menu = self.analysis_menu
        analysis_menu.addActions(list(precision.actions.values()))
        analysis_menu.addSeparator()
        analysis_menu.addActions([precision.sensitivity_action, compare_action])
        analysis_menu.addAction(precision.engine_action)
        self.help_menu.addActions(
            [self.user_guide_action, self.shortcuts_action, self.about_action]
        )
        self._build_toolbar(sources, compare_action)
        superres.add_to_menus(view_menu, analysis_menu)
        analysis_menu.addSeparator()
        analysis_menu.addAction(batch.results_action)

    def add_view_toggle(self, action: QAction, after: QAction) -> None:
        """A dock's toggle beside the other docks' (just after ``after``), else at the end."""
        actions = self.view_menu.actions()
        if after in actions and actions.index(after) + 1 < len(actions):
            self.view_menu.insertAction(actions[actions.index(after) + 1], action)
        else:
            self.view_menu.addAction(action)

    def _build_toolbar(self, sources: SourceOpening, compare_action: QAction) -> None:
        bar = self.parts.window.addToolBar("Main")
        bar.setObjectName("mainToolBar")
        bar.setMovable(False)
        bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        sources.open_action.setIconText("Open")
        sources.camera_action.setIconText("Camera")
        sources.url_action.setIconText("Stream")
        sources.export_action.setIconText("Export")
        sources.snapshot_action.setIconText("Snapshot")
        compare_action.setIconText("Compare")
        bar.addActions(sources.source_actions)
        bar.addSeparator()
        bar.addActions([sources.export_action, sources.snapshot_action])
        bar.addSeparator()
        bar.addAction(compare_action)

    def toggle_fullscreen(self) -> None:
        window = self.parts.window
        if window.isFullScreen():
            window.showNormal()
        else:
            window.showFullScreen()

    def show_shortcuts(self) -> None:
        from framelens.gui.common.shortcuts_dialog import ShortcutsDialog

        ShortcutsDialog(self.parts.window).show()

    def show_user_guide(self) -> None:
        from framelens.gui.common.user_guide import UserGuideDialog

        dialog = UserGuideDialog(self.parts.window)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.show()

    def about(self) -> None:
        QMessageBox.about(
            self.parts.window,
            "About FrameLens",
            f"<b>FrameLens {__version__}</b><p>A workbench for video analysis: run a "
            "detector or a super-resolution model over a video, a camera or a stream and "
            "watch the result and each stage's timings live; follow objects with a "
            "tracker, count line crossings and zone visits, compare precisions side by "
            "side, play many sources on a wall, analyse archives, and export the "
            "annotated video, the detections, the tracks and the events.</p>"
            "<p>Help &gt; User Guide (F1) tells the rest.</p>",
        )
