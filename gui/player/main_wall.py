"""The main window's part in the video wall: File > Open Several…, a drop of several
files, focusing one tile in the single-source player, and going back to the wall.

Each tile counts its own lines and zones (core/sessions/wall_zones.py): its video's
``<video>.zones.json`` beside it, or, with File > Open Several with Zones…, one zones file
chosen for every tile."""

from __future__ import annotations

from pathlib import Path

from framelens.core.api import FrameLensError, WallZones, load_wall_layout, wall_zones
from framelens.gui.common.file_dialogs import (
    VIDEO_FILTER,
    WALL_LAYOUT_FILTER,
    ZONES_FILTER,
    open_file,
    open_files_telling,
)
from framelens.gui.player.main_window_parts import WindowParts
from framelens.gui.wall.wall_window import WallWindow
from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction, QActionGroup
from PySide6.QtWidgets import QMenu

__all__ = ["WallOpening"]


_PROCESS_CHOICES = (
    ("auto", "&Automatic",
     "Decode and inference in a process of their own on a GPU, in this one on the CPU"),
    ("own", "&Own Process",
     "Always a process of their own: the window's thread shares nothing with the pipeline"),
    ("this", "&This Process", "Always threads of this process (the picture needs no hand-over)"),
)  # fmt: skip


class WallOpening(QObject):
    """Opens the wall window on several sources, and moves between it and the player."""

    playRequested = Signal(str)  # a tile focused: play it in the main window
    layoutOpened = Signal(str)  # a saved layout opened: it goes to Open Recent

    def __init__(self, parts: WindowParts) -> None:
        super().__init__(parts.window)
        self.parts = parts
        self.window: WallWindow | None = None
        a = parts.action
        self.several_action = a(
            "Open &Several…",
            self.choose_several,
            "Ctrl+Alt+O",
            "open",
            "Play several videos at once in a video wall (one engine call for all)",
        )
        self.zones_action = a(
            "Open Several with &Zones…",
            self.choose_several_with_zones,
            "Ctrl+Alt+Shift+O",
            tip="A video wall whose every tile counts the lines and zones of one zones.json",
        )
        self.layout_action = a(
            "Open &Wall Layout…",
            self.choose_wall_layout,
            "Ctrl+Alt+W",
            tip="Open a saved video wall: its sources and its grid",
        )
        self.back_action = a(
            # Alt+Left, "back" as in a browser: Esc clears a super-resolution region
            "Back to &Wall",
            self.back_to_wall,
            "Alt+Left",
            tip="Return to the video wall",
        )
        self.back_action.setEnabled(False)
        # where the next wall's decode and inference run (core decides "auto" by device)
        self.process_menu = QMenu("Wall &Process", parts.window)
        self.process_menu.setToolTipsVisible(True)
        group = QActionGroup(self.process_menu)
        self.process_actions: dict[str, QAction] = {}
        for choice, text, tip in _PROCESS_CHOICES:
            action = QAction(text, self.process_menu, checkable=True)
            action.setStatusTip(tip)
            action.setToolTip(tip)
            action.setChecked(parts.settings.wall_process == choice)
            action.triggered.connect(lambda _c=False, ch=choice: self.set_wall_process(ch))
            group.addAction(action)
            self.process_menu.addAction(action)
            self.process_actions[choice] = action

    def set_wall_process(self, choice: str) -> None:
        """Where the next wall plays (the one open keeps its own); remembered (the
        exclusive group checks the action chosen)."""
        self.parts.settings.wall_process = choice
        if self.window is not None:
            self.parts.show_message("The wall process applies to the next wall opened", 4000)

    def choose_several(self) -> None:
        s = self.parts.settings
        paths, left_out = open_files_telling(
            self.parts.window, "Open several videos", s.last_dir, VIDEO_FILTER
        )
        if left_out:  # Qt's dialog drops them silently
            self.parts.show_error(f"Open Several {left_out}")
        if paths:
            s.last_dir = str(Path(paths[0]).parent)
            self.open_wall(paths)

    def choose_several_with_zones(self) -> None:
        """Several videos, then the zones file every tile counts."""
        s = self.parts.settings
        paths, left_out = open_files_telling(
            self.parts.window, "Open several videos", s.last_dir, VIDEO_FILTER
        )
        if left_out:
            self.parts.show_error(f"Open Several {left_out}")
        if not paths:
            return
        s.last_dir = str(Path(paths[0]).parent)
        zones = open_file(self.parts.window, "Lines and zones for every tile", s.last_dir,
                          ZONES_FILTER)  # fmt: skip
        if zones:
            self.open_wall(paths, zones=zones)

    def choose_wall_layout(self) -> None:
        s = self.parts.settings
        path = open_file(self.parts.window, "Open wall layout", s.last_dir, WALL_LAYOUT_FILTER)
        if path:
            s.last_dir = str(Path(path).parent)
            self.open_wall_layout(path)

    def open_wall_layout(self, path: str) -> WallWindow | None:
        """The wall saved at ``path`` (File > Open Wall Layout…, Open, a drop, Recent):
        its sources in its grid; a file that is not a layout is one message, and what
        plays here plays on."""
        try:
            wall = load_wall_layout(path)
        except FrameLensError as exc:
            self.parts.show_error(str(exc))
            return None
        window = self.open_wall(list(wall.sources), layout=wall.layout)
        if window is not None:
            window.layout_path = path
            self.layoutOpened.emit(path)
        return window

    def open_wall(
        self, specs: list[str], *, layout: str | None = None, zones: str | None = None
    ) -> WallWindow | None:
        """A wall of ``specs`` with the model chosen here, in ``layout`` (None: the last
        one chosen), each tile counting ``zones`` (a zones.json for every tile; None:
        each video's own ``<video>.zones.json``, if any); the player here pauses."""
        c, s = self.parts.controller, self.parts.settings
        if c.settings is None:
            self.parts.show_error("choose a model before opening a video wall")
            return None
        labels = dict(enumerate(c.settings.model.labels or ()))
        per_tile, problems = wall_zones(specs, zones, labels)
        if problems:  # a video's own file: that tile counts nothing, the wall opens
            self.parts.show_error("; ".join(problems))
            if zones is not None:
                return None
        if self.window is not None:
            self.window.close()
            self.window.deleteLater()
        c.pause()  # the cores go to the wall
        window = WallWindow(
            list(specs), c.settings, s, self.parts.window, realtime=s.realtime, layout=layout,
            stages=c.tracking.export_stages(),  # tracking as here: each tile its own tracks
            zones=WallZones(per_tile, labels),
        )  # fmt: skip
        window.focusRequested.connect(self.focus_tile)
        self.window = window
        self.back_action.setEnabled(False)
        window.show()
        return window

    def focus_tile(self, spec: str) -> None:
        """Play ``spec`` here, with the usual controls; the wall pauses out of sight."""
        wall = self.window
        if wall is None:
            return
        wall.pause()
        wall.hide()
        self.playRequested.emit(spec)
        self.back_action.setEnabled(True)
        main = self.parts.window
        main.show()
        main.raise_()
        main.activateWindow()

    def back_to_wall(self) -> None:
        """The wall again (Alt+Left), playing; the player here pauses."""
        wall = self.window
        if wall is None:
            return
        self.parts.controller.pause()
        self.back_action.setEnabled(False)
        wall.show()
        wall.raise_()
        wall.activateWindow()
        wall.resume()

    def close(self) -> None:
        if self.window is not None:
            self.window.close()
