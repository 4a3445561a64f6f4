"""The compare window's toolbar: its actions, the difference legend and the progress strip.

Start / Play-Pause / First Frame (Home) / Edit Panes / Add Pane, Tracks (every pane
tracks its boxes; chosen before Start), Differences (with its colour legend), Save
Report, and while preparing or writing a report a progress bar with Cancel.
The window passes what each action does; every action is added to the window
too, so its shortcut works wherever the focus is in it.
"""

from __future__ import annotations

from collections.abc import Callable

from framelens.core.api import MAX_PANES, difference_colours
from framelens.gui.common.widgets import icon, set_text
from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QLabel, QProgressBar, QSizePolicy, QToolBar, QToolButton, QWidget

__all__ = ["CompareToolbar"]

Slot0 = Callable[[], object]


class CompareToolbar(QToolBar):
    """The compare window's actions and progress, wired to the window's intents."""

    def __init__(
        self,
        window: QWidget,
        *,
        start: Slot0,
        toggle: Slot0,
        home: Slot0,
        edit: Slot0,
        add: Slot0,
        differences: Slot0,
        report: Slot0,
        cancel: Slot0,
    ) -> None:
        super().__init__("Compare", window)
        self._window = window
        self.setObjectName("compareToolBar")
        self.setMovable(False)
        self.setIconSize(QSize(18, 18))
        self.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.start_action = self._action(
            "Start", start, "Ctrl+Return", "Prepare the panes and play them in lock-step"
        )
        self.start_action.setIcon(icon("play"))
        self.play_action = self._action("Pause", toggle, "Space", "Play or pause")
        self.play_action.setIcon(icon("pause"))
        self.home_action = self._action(
            "First Frame", home, "Home", "Compare again from the first frame of the video"
        )
        self.home_action.setIcon(icon("step-back"))
        self.edit_action = self._action("Edit Panes", edit, "Ctrl+E", "Stop and change panes")
        self.add_action = self._action("Add Pane", add, "Ctrl+N", f"Up to {MAX_PANES} panes")
        self.tracks_action = self._action(
            "Tracks",
            lambda: None,  # read at Start
            "T",
            "Every pane tracks its own boxes; the table and the report add each pane's "
            "tracks, ID switches and IDF1/HOTA against the reference's (set before Start)",
        )
        self.tracks_action.setCheckable(True)
        self.diff_action = self._action(
            "Differences",
            differences,
            "D",
            "Show the detections present in one pane only: missed or added against the reference",
        )
        self.diff_action.setCheckable(True)
        self.report_action = self._action(
            "Save Report…",
            report,
            "Ctrl+S",
            "Write an HTML report (summary, CSV, plots) of the frames compared so far",
        )
        self.report_action.setIcon(icon("export"))
        self.addActions(
            [
                self.start_action,
                self.play_action,
                self.home_action,
                self.edit_action,
                self.add_action,
            ]
        )
        self.addSeparator()
        self.addAction(self.tracks_action)
        self.addAction(self.diff_action)
        colours = difference_colours()
        self.diff_legend = QLabel(
            f'<span style="color:{colours.ref_only}">┅ only in the reference</span>'
            f'&nbsp;&nbsp;<span style="color:{colours.test_only}">▭ only in the pane</span>'
            '&nbsp;&nbsp;<span style="color:#8a93a3">boxes both found: hidden</span>'
        )
        self.diff_legend.setObjectName("diffLegend")
        self.diff_legend_action = self.addWidget(self.diff_legend)
        self.diff_legend_action.setVisible(False)
        self.addSeparator()
        self.addAction(self.report_action)
        spacer = QWidget()
        spacer.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self.addWidget(spacer)
        self.progress_text = QLabel("")
        self.progress_text.setObjectName("plotSummary")
        self.progress = QProgressBar()
        self.progress.setObjectName("compareProgress")
        self.progress.setRange(0, 1000)
        self.progress.setFixedWidth(180)
        self.progress.setTextVisible(False)
        self.progress.setFixedHeight(8)
        self.cancel_button = QToolButton()
        self.cancel_button.setText("Cancel")
        self.cancel_button.setObjectName("smallButton")
        self.cancel_button.clicked.connect(cancel)
        self._progress_actions = [
            self.addWidget(self.progress_text),
            self.addWidget(self.progress),
            self.addWidget(self.cancel_button),
        ]

    def _action(self, text: str, slot: Slot0, shortcut: str = "", tip: str = "") -> QAction:
        action = QAction(text, self._window)
        if shortcut:
            action.setShortcut(QKeySequence(shortcut))
        if tip:
            action.setToolTip(f"{tip} ({shortcut})" if shortcut else tip)
        action.triggered.connect(slot)
        self._window.addAction(action)
        return action

    def show_progress(self, text: str, fraction: float) -> None:
        """The progress strip with ``text`` (shortened) at ``fraction`` (0..1)."""
        for action in self._progress_actions:
            action.setVisible(True)
        set_text(self.progress_text, text if len(text) <= 70 else text[:69] + "…")
        self.progress_text.setToolTip(text)
        self.progress.setValue(round(1000 * max(0.0, min(1.0, fraction))))

    def hide_progress(self) -> None:
        for action in self._progress_actions:
            action.setVisible(False)
