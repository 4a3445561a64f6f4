"""The main window's detections list: View > Detections (Ctrl+D), a dock with the
detections of the frame on screen (gui/player/detections_dock.py).

The list follows the frame the canvas shows (playback, seeks, steps, a threshold moved
on a paused frame); a row clicked marks its box on the canvas. Whether the dock is
shown is remembered (Settings.detections_visible). For a super-resolution model the
dock says that it lists a detector's boxes.
"""

from __future__ import annotations

from framelens.core.api import Detections, FrameResult, ModelSpec, produces_image
from framelens.gui.player.detections_dock import DetectionsPanel
from framelens.gui.player.main_window_parts import MainWindowParts
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDockWidget, QMenu

__all__ = ["DETECTIONS_SHORTCUT", "DetectionsList"]

DETECTIONS_SHORTCUT = "Ctrl+D"


class DetectionsList(MainWindowParts):
    """The Detections dock, its View action and what it lists (see the module doc)."""

    detections_panel: DetectionsPanel
    detections_dock: QDockWidget
    detections_action: QAction
    view_menu: QMenu
    _listed: FrameResult | None

    def _build_detections(self) -> None:
        """The dock, placed under the Analysis panel the first time (then where the user
        left it), its toggle in the View menu, and the visibility saved last time.

        Built after the window state is restored: ``restoreDockWidget`` puts it back."""
        self._listed = None
        panel = self.detections_panel = DetectionsPanel()
        dock = self.detections_dock = QDockWidget("Detections", self)
        dock.setObjectName("detectionsDock")  # saveState() needs names
        dock.setWidget(panel)
        dock.setFeatures(
            QDockWidget.DockWidgetFeature.DockWidgetMovable
            | QDockWidget.DockWidgetFeature.DockWidgetFloatable
            | QDockWidget.DockWidgetFeature.DockWidgetClosable
        )
        if not self.restoreDockWidget(dock):
            self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
            self.splitDockWidget(self.panel_dock, dock, Qt.Orientation.Vertical)
            self.resizeDocks([self.panel_dock, dock], [440, 320], Qt.Orientation.Vertical)
        action = self.detections_action = dock.toggleViewAction()
        action.setText("&Detections")
        action.setShortcut(QKeySequence(DETECTIONS_SHORTCUT))
        action.setStatusTip("The detections of the frame on screen: class, score and box")
        self.addAction(action)  # the shortcut works with the menu bar hidden (full screen)
        self._add_to_view_menu(action)
        dock.setVisible(self.settings.detections_visible)
        action.toggled.connect(self._on_detections_toggled)
        dock.visibilityChanged.connect(self._on_detections_visible)
        panel.boxPicked.connect(self.canvas.set_highlight)
        self.controller.modelChanged.connect(self._sync_detections)
        if self.controller.settings is not None:
            self._sync_detections(self.controller.settings.model)

    def _add_to_view_menu(self, action: QAction) -> None:
        """Beside the other docks' toggles (after Performance), else at the end."""
        actions = self.view_menu.actions()
        after = self.plots_dock.toggleViewAction()
        if after in actions and actions.index(after) + 1 < len(actions):
            self.view_menu.insertAction(actions[actions.index(after) + 1], action)
        else:
            self.view_menu.addAction(action)

    def _on_detections_toggled(self, on: bool) -> None:
        if self.isVisible():  # not while the window is being built or closed
            self.settings.detections_visible = on
        if not on:
            self.detections_panel.pick(None)  # no box stays marked with the list gone

    def _on_detections_visible(self, visible: bool) -> None:
        """Shown again (its tab raised, say): the frame on screen now."""
        if visible and self._listed is not None:
            self._list_detections(self._listed)

    def _sync_detections(self, spec: ModelSpec | None) -> None:
        if spec is None:
            self.detections_panel.show_unavailable(
                "No model is chosen: the video plays as it is.\n\nThis list shows a "
                "detector's boxes: choose YOLOX-Nano or YuNet in the Analysis panel."
            )
        elif produces_image(spec):
            self.detections_panel.show_unavailable(
                f"{spec.name} upscales frames; it finds no boxes.\n\nThis list shows a "
                "detector's boxes: choose YOLOX-Nano or YuNet in the Analysis panel."
            )
        else:
            self.detections_panel.set_labels(spec.labels)

    def _show_detections(self, result: FrameResult) -> None:
        """The frame just put on the canvas: listed if the dock is open."""
        self._listed = result
        if self.detections_dock.isVisible():
            self._list_detections(result)

    def _list_detections(self, result: FrameResult) -> None:
        output: object = result.output
        if not isinstance(output, Detections) or not self.detections_panel.available:
            return  # super-resolution: the panel says so
        settings = self.controller.settings
        labels = settings.model.labels if settings is not None else ()
        frame = result.frame
        self.detections_panel.show_frame(frame.index, output, labels, (frame.width, frame.height))
