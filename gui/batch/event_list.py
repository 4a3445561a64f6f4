"""The Batch Results window's Events tab: the events of a batch that counted lines and
zones (``framelens batch --track --zones``, DIR/events/), one row each, filtered by
kind, line or zone, direction and source (``api.query_events``); double-click (or
Enter) on a row opens its video at the event's frame in the main window."""

from __future__ import annotations

from pathlib import Path

from framelens.core.api import (
    EventRow,
    FrameLensError,
    archive_event_names,
    error_message,
    query_events,
)
from framelens.gui.common.widgets import format_time
from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

__all__ = ["ALL_NAMES", "COLUMNS", "MAX_ROWS", "EventsPanel", "event_cells"]

ALL_NAMES = "All lines and zones"
MAX_ROWS = 5000  # rows listed per search; the rest are counted
COLUMNS = ("Video", "Time", "Frame", "Track", "Class", "Event", "Line or zone", "Direction")
KINDS = (
    ("Any event", None),
    ("Crossings", "cross"),
    ("Entering", "enter"),
    ("Leaving", "exit"),
    ("Loitering", "loiter"),
)
DIRECTIONS = (("Both ways", None), ("In", "in"), ("Out", "out"))


def event_cells(event: EventRow) -> tuple[str, ...]:
    """A row's cells (the frame counted from 1, as the main window's counter shows it)."""
    return (
        Path(event.source).name,
        format_time(event.time_s),
        str(event.frame + 1),
        f"#{event.track_id}",
        event.label,
        event.kind,
        event.name,
        event.direction,
    )


class EventsTable(QTableWidget):
    """The events, one per row; Enter on one opens it as a double-click does."""

    activatedEvent = Signal(object)  # EventRow

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, len(COLUMNS), parent)
        self.setHorizontalHeaderLabels(list(COLUMNS))
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.verticalHeader().setVisible(False)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)  # the video's name
        self.events: list[EventRow] = []
        self.cellDoubleClicked.connect(lambda row, _c: self._activate(row))

    def show_events(self, events: list[EventRow]) -> None:
        self.events = events
        self.setRowCount(len(events))
        for row, event in enumerate(events):
            for column, text in enumerate(event_cells(event)):
                item = QTableWidgetItem(text)
                item.setToolTip(f"{event.source}\nDouble-click to open it here, at this frame")
                self.setItem(row, column, item)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and self.currentRow() >= 0:
            self._activate(self.currentRow())
            return
        super().keyPressEvent(event)

    def _activate(self, row: int) -> None:
        if 0 <= row < len(self.events):
            self.activatedEvent.emit(self.events[row])


class EventsPanel(QWidget):
    """The events of a batch's folder with their filters (see the module's docstring)."""

    openRequested = Signal(str, int)  # the event's video and frame index

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.folder = ""
        self.names: list[str] = []  # the lines and zones the folder's events name
        self.total = 0  # events of the folder, unfiltered
        self.kind_combo = QComboBox()
        for text, kind in KINDS:
            self.kind_combo.addItem(text, kind)
        self.name_combo = QComboBox()
        self.name_combo.setMinimumContentsLength(14)
        self.name_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.direction_combo = QComboBox()
        for text, direction in DIRECTIONS:
            self.direction_combo.addItem(text, direction)
        self.direction_combo.setToolTip("A crossing's direction (lines only)")
        self.source_edit = QLineEdit()
        self.source_edit.setPlaceholderText("all sources (or a pattern: *cam2*)")
        for combo in (self.kind_combo, self.name_combo, self.direction_combo):
            combo.currentIndexChanged.connect(lambda _i: self.refresh())
        self.source_edit.textChanged.connect(lambda _t: self.refresh())
        filters = QHBoxLayout()
        for text, widget in (
            ("Event", self.kind_combo),
            ("Line or zone", self.name_combo),
            ("Direction", self.direction_combo),
            ("Source", self.source_edit),
        ):
            filters.addWidget(QLabel(text))
            filters.addWidget(widget, 1 if widget is self.source_edit else 0)
        self.table = EventsTable()
        self.table.activatedEvent.connect(self._open)
        self.count_label = QLabel("")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(filters)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.count_label)

    def set_folder(self, folder: str) -> int:
        """List ``folder``'s events; returns how many it holds (0: none, or no events)."""
        self.folder = folder
        self.count_label.setText("")
        try:
            self.names = archive_event_names(folder) if folder else []
            self.total = len(query_events(folder)) if folder else 0
        except FrameLensError as exc:
            self.names, self.total = [], 0
            self.count_label.setText(error_message(exc))
        self.name_combo.blockSignals(True)
        previous = self.name_combo.currentText()
        self.name_combo.clear()
        self.name_combo.addItem(ALL_NAMES, None)
        for name in self.names:
            self.name_combo.addItem(name, name)
        self.name_combo.setCurrentIndex(max(0, self.name_combo.findText(previous)))
        self.name_combo.blockSignals(False)
        self.refresh()
        return self.total

    @Slot()
    def refresh(self) -> None:
        """List the events the filters select."""
        kind = self.kind_combo.currentData()
        self.direction_combo.setEnabled(kind in (None, "cross"))
        direction = self.direction_combo.currentData() if kind in (None, "cross") else None
        pattern = self.source_edit.text().strip()
        if pattern and not any(c in pattern for c in "*?["):
            pattern = f"*{pattern}*"  # a plain word: paths that contain it
        if not self.folder or not self.total:
            self.table.show_events([])
            if self.folder and not self.count_label.text():
                self.count_label.setText(
                    "No events: this batch counted no lines or zones (batch it with "
                    "--track --zones ZONES.json)."
                )
            return
        try:
            events = query_events(
                self.folder, kind=kind, name=self.name_combo.currentData(),
                direction=direction, source_glob=pattern or None, limit=MAX_ROWS + 1,
            )  # fmt: skip
        except FrameLensError as exc:
            self.table.show_events([])
            self.count_label.setText(error_message(exc))
            return
        more = len(events) > MAX_ROWS
        self.table.show_events(events[:MAX_ROWS])
        shown = f"the first {MAX_ROWS} of" if more else f"{len(events)} of"
        self.count_label.setText(
            f"Showing {shown} {self.total} events. Double-click one to open it at its frame."
        )

    def _open(self, event: EventRow) -> None:
        self.openRequested.emit(event.source, event.frame)
