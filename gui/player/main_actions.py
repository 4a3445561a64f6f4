"""The main window's actions, menus and toolbar (and the View and Help handlers).

Every action is added to the window too, so its shortcut works with the menu bar
hidden (full screen).
"""

from __future__ import annotations

from framelens.core.api import __version__
from framelens.gui.common.widgets import icon
from framelens.gui.player.goto_frame import GoToFrameDialog
from framelens.gui.player.main_window_parts import MainWindowParts
from framelens.gui.player.precision_toggle import PRECISION_NAMES
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMessageBox

__all__ = ["MainActions"]


class MainActions(MainWindowParts):
    """File, Playback, View, Analysis and Help: the actions, their menus, the toolbar."""

    def _action(
        self,
        text: str,
        slot: object,
        shortcut: str | QKeySequence.StandardKey = "",
        icon_name: str = "",
        tip: str = "",
    ) -> QAction:
        action = QAction(text, self)
        if shortcut:
            action.setShortcut(QKeySequence(shortcut))
        if icon_name:
            action.setIcon(icon(icon_name))
        if tip:
            action.setStatusTip(tip)
        action.triggered.connect(slot)
        self.addAction(action)  # shortcuts work with the menu bar hidden (full screen)
        return action

    def _build_actions(self) -> None:
        c = self.controller
        self.open_action = self._action("&Open Video…", self.choose_file, "Ctrl+O", "open")
        self.camera_action = self._action(
            "Open &Camera…", self.choose_camera, "Ctrl+Shift+O", "camera"
        )
        self.url_action = self._action("Open &URL…", self.choose_url, "Ctrl+U", "stream")
        self.several_action = self._action(
            "Open &Several…",
            self.choose_several,
            "Ctrl+Alt+O",
            "open",
            "Play several videos at once in a video wall (one engine call for all)",
        )
        self.wall_layout_action = self._action(
            "Open &Wall Layout…",
            self.choose_wall_layout,
            tip="Open a saved video wall: its sources and its grid",
        )
        self.back_to_wall_action = self._action(
            # Alt+Left, "back" as in a browser: Esc clears a super-resolution region
            "Back to &Wall",
            self.back_to_wall,
            "Alt+Left",
            tip="Return to the video wall",
        )
        self.back_to_wall_action.setEnabled(False)
        self.export_action = self._action(
            "&Export…",
            self.open_export_dialog,
            "Ctrl+E",
            "export",
            "Export annotated video and detections",
        )
        self.snapshot_action = self._action(
            "Save &Snapshot…",
            lambda: self.save_snapshot(),
            "F12",
            "snapshot",
            "Save the annotated frame as PNG",
        )
        self.snapshot_action.setShortcuts([QKeySequence("F12"), QKeySequence("Ctrl+Shift+S")])
        self.quit_action = self._action("&Quit", self.close, "Ctrl+Q")
        self.play_action = self._action("&Play / Pause", c.toggle_play, "Space", "play")
        self.back_action = self._action("Step &Back", lambda: c.step(-1), "Left", "step-back")
        self.forward_action = self._action(
            "Step &Forward", lambda: c.step(1), "Right", "step-forward"
        )
        self.start_action = self._action("Go to &Start", lambda: c.seek(0), "Home")
        self.end_action = self._action("Go to &End", self.seek_end, "End")
        self.goto_action = self._action(
            "&Go to Frame…",
            self.go_to_frame,
            "Ctrl+G",
            tip="Show a frame by its number, as the counter shows it",
        )
        self.fullscreen_action = self._action("&Full Screen", self.toggle_fullscreen, "F11")
        self.reset_view_action = self._action("&Reset Zoom", self.canvas.reset_view, "Ctrl+0")
        self.about_action = self._action("&About FrameLens", self.about)
        self.shortcuts_action = self._action(
            "&Keyboard Shortcuts", self.show_shortcuts, "Ctrl+/", tip="Every shortcut, by menu"
        )
        self.user_guide_action = self._action(
            "&User Guide", self.show_user_guide, "F1", tip="How to use FrameLens, in one page"
        )
        self.precision_group = QActionGroup(self)
        self.precision_group.setExclusive(True)
        self.precision_actions: dict[str, QAction] = {}
        for i, name in enumerate(PRECISION_NAMES):
            action = self._action(
                f"Run at {name.upper()}",
                lambda _checked=False, p=name: self.choose_precision(p),
                f"Ctrl+{i + 1}",
                tip=f"Switch the model to its {name.upper()} variant while playing",
            )
            action.setCheckable(True)
            self.precision_group.addAction(action)
            self.precision_actions[name] = action
        self.precision_actions["fp32"].setChecked(True)
        self.sensitivity_action = self._action(
            "INT8 Layer &Sensitivity…",
            self.show_sensitivity,
            tip="Sensitivity per layer of the active INT8 variant, and the layers kept in float",
        )
        self.sensitivity_action.setEnabled(False)
        self.engine_action = self._action(
            "Build TensorRT &Engine…",
            self.open_engine_builder,
            tip="Build a TensorRT plan of a model before playing (ahead of time with TensorRT-RTX)",
        )
        self.compare_action = self._action(
            "&Compare…",
            self.open_compare,
            "Ctrl+K",
            "compare",
            "Play 2 to 4 precisions or models side by side on the same frames",
        )
        for a in (
            self.play_action,
            self.back_action,
            self.forward_action,
            self.start_action,
            self.end_action,
        ):
            a.setShortcutContext(Qt.ShortcutContext.WindowShortcut)

    def _build_menus(self) -> None:
        mb = self.menuBar()
        file_menu = self.file_menu = mb.addMenu("&File")
        file_menu.addActions(
            [
                self.open_action,
                self.camera_action,
                self.url_action,
                self.several_action,
                self.wall_layout_action,
            ]
        )
        self.recent_menu = file_menu.addMenu("Open &Recent")
        file_menu.addSeparator()
        file_menu.addActions([self.export_action, self.snapshot_action])
        file_menu.addSeparator()
        file_menu.addAction(self.quit_action)
        play_menu = mb.addMenu("&Playback")
        play_menu.addActions(
            [
                self.play_action,
                self.back_action,
                self.forward_action,
                self.start_action,
                self.end_action,
                self.goto_action,
            ]
        )
        play_menu.addSeparator()
        self.realtime_action = QAction("&Real-time Pacing", self, checkable=True)
        self.realtime_action.toggled.connect(self.transport.realtime_button.setChecked)
        self.transport.realtime_button.toggled.connect(self.realtime_action.setChecked)
        play_menu.addAction(self.realtime_action)
        view_menu = mb.addMenu("&View")
        view_menu.addActions(
            [self.fullscreen_action, self.reset_view_action, self.back_to_wall_action]
        )
        view_menu.addSeparator()
        view_menu.addActions(
            [self.panel_dock.toggleViewAction(), self.plots_dock.toggleViewAction()]
        )
        analysis_menu = mb.addMenu("&Analysis")
        analysis_menu.addActions(list(self.precision_actions.values()))
        analysis_menu.addSeparator()
        analysis_menu.addActions([self.sensitivity_action, self.compare_action])
        analysis_menu.addAction(self.engine_action)
        self.view_menu, self.analysis_menu = view_menu, analysis_menu  # the SR parts add to them
        help_menu = mb.addMenu("&Help")
        help_menu.addAction(self.user_guide_action)
        help_menu.addAction(self.shortcuts_action)
        help_menu.addAction(self.about_action)
        self._rebuild_recent(self.settings.recent)

    def _build_toolbar(self) -> None:
        bar = self.addToolBar("Main")
        bar.setObjectName("mainToolBar")
        bar.setMovable(False)
        bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.open_action.setIconText("Open")
        self.camera_action.setIconText("Camera")
        self.url_action.setIconText("Stream")
        self.export_action.setIconText("Export")
        self.snapshot_action.setIconText("Snapshot")
        self.compare_action.setIconText("Compare")
        bar.addActions([self.open_action, self.camera_action, self.url_action])
        bar.addSeparator()
        bar.addActions([self.export_action, self.snapshot_action])
        bar.addSeparator()
        bar.addAction(self.compare_action)

    def go_to_frame(self) -> GoToFrameDialog | None:
        """Playback > Go to Frame… (Ctrl+G): shows the frame typed, paused."""
        info = self.state.source
        if info is None:
            self.show_error("open a video first, then go to one of its frames")
            return None
        if not info.seekable:
            self.show_error(f"{info.kind} sources play live: there is no frame to go to")
            return None
        current = self.shown_index if self.shown_index >= 0 else self.state.index
        dialog = GoToFrameDialog(self.state.frame_count, current, self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)

        def go() -> None:
            self.controller.pause()
            self.controller.seek(dialog.index)

        dialog.accepted.connect(go)
        dialog.open()
        return dialog

    def toggle_fullscreen(self) -> None:
        if self.isFullScreen():
            self.showNormal()
        else:
            self.showFullScreen()

    def show_shortcuts(self) -> None:
        from framelens.gui.common.shortcuts_dialog import ShortcutsDialog

        ShortcutsDialog(self).show()

    def show_user_guide(self) -> None:
        from framelens.gui.common.user_guide import UserGuideDialog

        dialog = UserGuideDialog(self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.show()

    def about(self) -> None:
        QMessageBox.about(
            self,
            "About FrameLens",
            f"<b>FrameLens {__version__}</b><p>A workbench for video analysis: run a "
            "detector over a video, watch overlays and per-stage timings live, export "
            "annotated video and detections.</p>",
        )
