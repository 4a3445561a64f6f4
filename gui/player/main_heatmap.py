"""The main window's heatmap: Tracking > Show Heatmap (H) and Heatmap Fades.

Show Heatmap is the Analysis panel's Heatmap box (an overlay setting, saved with the
others, off until asked for): while tracking is on, the player's stages keep a heatmap
of where the tracked objects have been (core/sessions/playback/heatmap.py), and the
overlay draws it under the boxes, as an export draws it. Heatmap Fades switches it from
accumulating to decaying (the heat halving every 10 s of the video), saved too.
"""

from __future__ import annotations

from typing import Literal

from framelens.gui.player.main_tracks import TrackingFeature
from framelens.gui.player.main_window_parts import WindowParts
from PySide6.QtCore import QObject

__all__ = ["HeatmapFeature"]


class HeatmapFeature(QObject):
    """Show Heatmap and Heatmap Fades in the Tracking menu, after Show Trails."""

    def __init__(self, parts: WindowParts, tracking: TrackingFeature) -> None:
        super().__init__(parts.window)
        self.parts = parts
        self.tracking = tracking
        check = self.check = parts.panel.overlay_checks["heatmap"]
        a = parts.action
        self.show_action = a(
            "Show &Heatmap", check.toggle, "H", tip="Where tracked objects have been, in colour"
        )
        self.show_action.setCheckable(True)
        self.show_action.setChecked(check.isChecked())
        check.toggled.connect(self._shown)
        self.fades_action = a(
            "Heatmap &Fades",
            self._fades,
            tip="The heatmap fades (its heat halves every 10 s) instead of accumulating",
        )
        self.fades_action.setCheckable(True)
        menu = tracking.menu
        actions = menu.actions()
        after = actions.index(tracking.trails_action) + 1
        before = actions[after] if after < len(actions) else None
        menu.insertActions(before, [self.show_action, self.fades_action])  # type: ignore[arg-type]

    def restore(self) -> None:
        """The mode chosen last time (whether it is shown is the overlay's setting)."""
        decay = self.parts.settings.heatmap_mode == "decay"
        self.fades_action.setChecked(decay)
        self._fades(decay, save=False)

    @property
    def shown(self) -> bool:
        return self.check.isChecked()

    def _shown(self, on: bool) -> None:
        self.show_action.setChecked(on)
        if on and self.parts.controller.tracker is None:
            self.parts.show_message(
                "The heatmap shows tracked objects: turn tracking on (Tracking > Track Objects, "
                "Ctrl+T)",
                8000,
            )

    def _fades(self, on: bool, *, save: bool = True) -> None:
        mode: Literal["accumulate", "decay"] = "decay" if on else "accumulate"
        self.parts.controller.heatmap.set_mode(mode)
        if save:
            self.parts.settings.heatmap_mode = mode
