"""What the main window's features share: the window, its controller, settings, canvas,
panel, transport and status bar, and where an error is said.

MainWindow (main_window.py) builds these parts, then one feature object per job, each
handed the parts: the menus and toolbar (main_actions.py), the playback controls
(main_playback.py), opening sources and saving what it shows (main_sources.py), the
video wall (main_wall.py), batch analysis (main_batch.py), the model, device and
backend (main_models.py), precision switching (main_precision.py), the
super-resolution views and enlarged detections (main_superres.py), the detections
list (main_detections.py) and the compare view (main_compare.py). A feature reads the
others only through these parts and Qt signals, never through the window's ``self``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from framelens.gui.common.widgets import icon
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMainWindow

if TYPE_CHECKING:
    from framelens.gui.common.controller import Controller
    from framelens.gui.common.settings import Settings
    from framelens.gui.player.model_panel import ModelPanel
    from framelens.gui.player.status_bar import MainStatusBar
    from framelens.gui.player.transport import TransportBar
    from framelens.gui.superres.sr_canvas import SrCanvas

__all__ = ["Shown", "WindowParts"]


@dataclass
class Shown:
    """What the window shows: the source asked for (its title) and the frame on screen."""

    source: str | None = None  # asked for, before the player has opened it
    index: int = -1  # source index of the frame on screen (-1: none yet)


@dataclass(frozen=True)
class WindowParts:
    """The main window's shared parts, handed to each of its features."""

    window: QMainWindow  # a parent for dialogs, the home of actions, toolbars and docks
    controller: Controller
    settings: Settings
    canvas: SrCanvas
    panel: ModelPanel
    transport: TransportBar
    status_bar: MainStatusBar
    shown: Shown
    show_error: Callable[[str], None]  # one line, in the status bar and a message box

    def action(
        self,
        text: str,
        slot: object,
        shortcut: str | QKeySequence.StandardKey = "",
        icon_name: str = "",
        tip: str = "",
    ) -> QAction:
        """An action of the window: its shortcut works with the menu bar hidden (full screen)."""
        action = QAction(text, self.window)
        if shortcut:
            action.setShortcut(QKeySequence(shortcut))
        if icon_name:
            action.setIcon(icon(icon_name))
        if tip:
            action.setStatusTip(tip)
        action.triggered.connect(slot)
        self.window.addAction(action)
        return action

    def show_message(self, text: str, timeout_ms: int = 0) -> None:
        self.status_bar.showMessage(text, timeout_ms)
