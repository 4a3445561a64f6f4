"""The main window's part in the video wall: File > Open Several…, a drop of several
files, focusing one tile in the single-source player, and going back to the wall."""

from __future__ import annotations

from pathlib import Path

from framelens.gui.dialogs import VIDEO_FILTER
from framelens.gui.file_dialogs import open_files
from framelens.gui.main_window_parts import MainWindowParts
from framelens.gui.wall_window import WallWindow

__all__ = ["WallOpening"]


class WallOpening(MainWindowParts):
    """Opens the wall window on several sources, and moves between it and the player."""

    wall_window: WallWindow | None

    def choose_several(self) -> None:
        paths = open_files(self, "Open several videos", self.settings.last_dir, VIDEO_FILTER)
        if paths:
            self.settings.last_dir = str(Path(paths[0]).parent)
            self.open_wall(paths)

    def open_wall(self, specs: list[str]) -> WallWindow | None:
        """A wall of ``specs`` with the model chosen here; the player here pauses."""
        settings = self.controller.settings
        if settings is None:
            self.show_error("choose a model before opening a video wall")
            return None
        if self.wall_window is not None:
            self.wall_window.close()
            self.wall_window.deleteLater()
        self.controller.pause()  # the cores go to the wall
        realtime = self.settings.realtime
        window = WallWindow(list(specs), settings, self.settings, self, realtime=realtime)
        window.focusRequested.connect(self.focus_tile)
        self.wall_window = window
        self.back_to_wall_action.setEnabled(False)
        window.show()
        return window

    def focus_tile(self, spec: str) -> None:
        """Play ``spec`` here, with the usual controls; the wall pauses out of sight."""
        wall = self.wall_window
        if wall is None:
            return
        wall.pause()
        wall.hide()
        self.open_source(spec)
        self.back_to_wall_action.setEnabled(True)
        self.show()
        self.raise_()
        self.activateWindow()

    def back_to_wall(self) -> None:
        """The wall again (Alt+Left), playing; the player here pauses."""
        wall = self.wall_window
        if wall is None:
            return
        self.controller.pause()
        self.back_to_wall_action.setEnabled(False)
        wall.show()
        wall.raise_()
        wall.activateWindow()
        wall.resume()
