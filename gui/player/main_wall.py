"""The main window's part in the video wall: File > Open Several…, a drop of several
files, focusing one tile in the single-source player, and going back to the wall."""

from __future__ import annotations

from pathlib import Path

from framelens.core.api import FrameLensError, load_wall_layout
from framelens.gui.common.file_dialogs import (
    VIDEO_FILTER,
    WALL_LAYOUT_FILTER,
    open_file,
    open_files_telling,
)
from framelens.gui.player.main_window_parts import MainWindowParts
from framelens.gui.wall.wall_window import WallWindow

__all__ = ["WallOpening"]


class WallOpening(MainWindowParts):
    """Opens the wall window on several sources, and moves between it and the player."""

    wall_window: WallWindow | None

    def choose_several(self) -> None:
        paths, left_out = open_files_telling(
            self, "Open several videos", self.settings.last_dir, VIDEO_FILTER
        )
        if left_out:  # Qt's dialog drops them silently
            self.show_error(f"Open Several {left_out}")
        if paths:
            self.settings.last_dir = str(Path(paths[0]).parent)
            self.open_wall(paths)

    def choose_wall_layout(self) -> None:
        path = open_file(self, "Open wall layout", self.settings.last_dir, WALL_LAYOUT_FILTER)
        if path:
            self.settings.last_dir = str(Path(path).parent)
            self.open_wall_layout(path)

    def open_wall_layout(self, path: str) -> WallWindow | None:
        """The wall saved at ``path`` (File > Open Wall Layout…, Open, a drop, Recent):
        its sources in its grid; a file that is not a layout is one message, and what
        plays here plays on."""
        try:
            wall = load_wall_layout(path)
        except FrameLensError as exc:
            self.show_error(str(exc))
            return None
        window = self.open_wall(list(wall.sources), layout=wall.layout)
        if window is not None:
            window.layout_path = path
            self._rebuild_recent(self.settings.add_recent(path))
        return window

    def open_wall(self, specs: list[str], *, layout: str | None = None) -> WallWindow | None:
        """A wall of ``specs`` with the model chosen here, in ``layout`` (None: the last
        one chosen); the player here pauses."""
        settings = self.controller.settings
        if settings is None:
            self.show_error("choose a model before opening a video wall")
            return None
        if self.wall_window is not None:
            self.wall_window.close()
            self.wall_window.deleteLater()
        self.controller.pause()  # the cores go to the wall
        realtime = self.settings.realtime
        window = WallWindow(
            list(specs), settings, self.settings, self, realtime=realtime, layout=layout
        )
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
