"""The main window's detections list: View > Detections (Ctrl+D), a dock with the
detections of the frame on screen (gui/player/detections_dock.py).

The list follows the frame the canvas shows (playback, seeks, steps, a threshold moved
on a paused frame); a row clicked marks its box on the canvas (around its tag too, so
the tag stays readable). Whether the dock is shown is remembered
(Settings.detections_visible). For a super-resolution model the dock says that it lists
a detector's boxes.
"""

from __future__ import annotations

from framelens.core.api import (
    Detections,
    FrameResult,
    ModelSpec,
    OverlayStyle,
    mark_region,
    produces_image,
)
from framelens.gui.player.detections_dock import DetectionsPanel
from framelens.gui.player.main_window_parts import WindowParts
from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QDockWidget
from shiboken6 import isValid

__all__ = ["DETECTIONS_SHORTCUT", "DetectionsList"]

DETECTIONS_SHORTCUT = "Ctrl+D"


class DetectionsList(QObject):
    """The Detections dock, its View action and what it lists (see the module doc)."""

    def __init__(self, parts: WindowParts, beside: QDockWidget) -> None:
        """The dock, placed under ``beside`` (the Analysis panel) the first time, then
        where the user left it, and shown as it was last time.

        Built after the window state is restored: ``restoreDockWidget`` puts it back."""
        super().__init__(parts.window)
        self.parts = parts
        self._listed: FrameResult | None = None
        window = parts.window
        panel = self.panel = DetectionsPanel()
        dock = self.dock = QDockWidget("Detections", window)
        dock.setObjectName("detectionsDock")  # saveState() needs names
        dock.setWidget(panel)
        dock.setFeatures(
            QDockWidget.DockWidgetFeature.DockWidgetMovable
            | QDockWidget.DockWidgetFeature.DockWidgetFloatable
            | QDockWidget.DockWidgetFeature.DockWidgetClosable
        )
        if not window.restoreDockWidget(dock):
            window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
            window.splitDockWidget(beside, dock, Qt.Orientation.Vertical)
            window.resizeDocks([beside, dock], [440, 320], Qt.Orientation.Vertical)
        action = self.action = dock.toggleViewAction()
        action.setText("&Detections")
        action.setShortcut(QKeySequence(DETECTIONS_SHORTCUT))
        action.setStatusTip("The detections of the frame on screen: class, score and box")
        window.addAction(action)  # the shortcut works with the menu bar hidden (full screen)
        dock.setVisible(parts.settings.detections_visible)
        action.toggled.connect(self._on_toggled)
        dock.visibilityChanged.connect(self._on_visible)
        panel.boxPicked.connect(lambda _box: self._mark())
        parts.controller.modelChanged.connect(self._sync)
        if parts.controller.settings is not None:
            self._sync(parts.controller.settings.model)

    def _on_toggled(self, on: bool) -> None:
        window = self.parts.window  # not while it is being built, closed or deleted:
        if isValid(window) and window.isVisible():
            self.parts.settings.detections_visible = on
        if not on:
            self.panel.pick(None)  # no box stays marked with the list gone

    def _on_visible(self, visible: bool) -> None:
        """Shown again (its tab raised, say): the frame on screen now."""
        if visible and self._listed is not None:
            self._list(self._listed)

    def _sync(self, spec: ModelSpec | None) -> None:
        if spec is None:
            self.panel.show_unavailable(
                "No model is chosen: the video plays as it is.\n\nThis list shows a "
                "detector's boxes: choose YOLOX-Nano or YuNet in the Analysis panel."
            )
        elif produces_image(spec):
            self.panel.show_unavailable(
                f"{spec.name} upscales frames; it finds no boxes.\n\nThis list shows a "
                "detector's boxes: choose YOLOX-Nano or YuNet in the Analysis panel."
            )
        else:
            self.panel.set_labels(spec.labels)

    def show(self, result: FrameResult) -> None:
        """The frame just put on the canvas: listed if the dock is open."""
        self._listed = result
        if self.dock.isVisible():
            self._list(result)

    def _list(self, result: FrameResult) -> None:
        output: object = result.output
        if not isinstance(output, Detections) or not self.panel.available:
            return  # super-resolution: the panel says so
        settings = self.parts.controller.settings
        labels = settings.model.labels if settings is not None else ()
        frame = result.frame
        self.panel.show_frame(frame.index, output, labels, (frame.width, frame.height))
        self._mark()  # the picked box's tag may have moved or changed (overlay, frame)

    def _mark(self) -> None:
        """The picked box marked on the canvas, around its tag too (core's
        ``mark_region``, for the overlay style and size the frame is drawn with)."""
        row, result = self.panel.picked, self._listed
        if row is None:
            self.parts.canvas.set_highlight(None)
            return
        region = None
        if (
            result is not None
            and isinstance(result.output, Detections)
            and result.frame.index == self.panel.frame_index
        ):
            settings = self.parts.controller.settings
            labels = settings.model.labels if settings is not None else ()
            style = settings.overlay if settings is not None else OverlayStyle()
            size = (result.frame.width, result.frame.height)
            region = mark_region(result.output, row.index, labels, style, *size)
        self.parts.canvas.set_highlight(row.box, region)
