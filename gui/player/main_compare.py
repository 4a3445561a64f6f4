"""The main window's part in comparison: Analysis > Compare… (Ctrl+K) opens the compare
view (gui/compare/compare_view.py) on the open video, from the frame on screen, with
the lines and zones saved beside the video (``<video>.zones.json``), if any, for its
panes to count against when they track."""

from __future__ import annotations

from collections.abc import Callable

from framelens.core.api import (
    FrameLensError,
    TrackerSettings,
    ZonesFile,
    error_message,
    load_zones,
    zones_of,
)
from framelens.gui.compare.compare_view import CompareWindow
from framelens.gui.player.main_window_parts import WindowParts
from PySide6.QtCore import QObject

__all__ = ["CompareOpening"]


class CompareOpening(QObject):
    """Opens the compare view (one; shown again for the same video); playback pauses."""

    def __init__(
        self,
        parts: WindowParts,
        model_key: Callable[[], str],
        tracking: Callable[[], TrackerSettings | None] = lambda: None,
    ) -> None:
        """``model_key``: the panel's entry of the model loaded (the panes start with it);
        ``tracking``: the window's tracker (the panes track with it), None when off."""
        super().__init__(parts.window)
        self.parts = parts
        self._model_key = model_key
        self._tracking = tracking
        self.window: CompareWindow | None = None
        self.action = parts.action(
            "&Compare…",
            self.open_compare,
            "Ctrl+K",
            "compare",
            "Play 2 to 4 precisions or models side by side on the same frames",
        )

    def open_compare(self) -> CompareWindow | None:
        """The compare view on the open video, from the frame on screen; playback pauses."""
        c, source = self.parts.controller, self.parts.shown.source
        if source is None or c.state.source is None:
            self.parts.show_error("nothing to compare: open a video first")
            return None
        if c.base_settings() is None:
            self.parts.show_error("choose a model before comparing")
            return None
        if self.window is not None and self.window.source == source:
            self.window.show()
            self.window.raise_()
            return self.window
        if self.window is not None:
            self.window.close()
            self.window.deleteLater()
        c.pause()  # two cores: the comparison gets them
        last = c.last_result
        window = CompareWindow(
            c,
            source,
            max(0, c.state.index),
            model_key=self._model_key(),
            preview=last.frame.image if last is not None else None,
            tracking=self._tracking(),
            zones=self._zones(source),
            parent=self.parts.window,
        )
        self.window = window
        window.show()
        return window

    def _zones(self, source: str) -> ZonesFile | None:
        """The lines and zones saved beside ``source``; None when there are none or the
        file cannot be used (said in one line: the comparison counts nothing)."""
        path = zones_of(source)
        if path is None:
            return None
        base = self.parts.controller.base_settings()
        try:
            return load_zones(path, base.model.labels if base is not None else ())
        except FrameLensError as exc:
            self.parts.show_error(error_message(exc))
            return None

    def close(self) -> None:
        if self.window is not None:
            self.window.close()
