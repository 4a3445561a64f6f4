"""Zones > Events: the counts of each line and zone over time, and the events so far.

The plot (pyqtgraph, like the fps and latency plots) draws, against the video's time,
each line's ``in`` and ``out`` crossings so far and each zone's tracks inside, from the
counts every frame shown carried (``LiveCounts``). The table lists the events (time,
frame, track, class, event, line or zone, direction) from core's ``PlaybackAnalytics``; clicking
a row (or Enter) asks for its frame with its track marked (``eventPicked``).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyqtgraph as pg
from framelens.core.api import Event, LiveCounts, shape_colour, track_colour
from framelens.gui.display.plots import themed_plot
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

__all__ = ["EVENT_HEADERS", "EventsPanel"]

EVENT_HEADERS = ("Time", "Frame", "Track", "Class", "Event", "Line or zone", "Direction")
NONE_TEXT = "No lines or zones: draw one from the Zones menu (Ctrl+Alt+L, Ctrl+Alt+Z)"


def _hex(bgr: tuple[int, int, int]) -> str:
    b, g, r = bgr
    return f"#{r:02x}{g:02x}{b:02x}"


class EventsPanel(QWidget):
    """The counts plot above the events table (see the module's docstring)."""

    eventPicked = Signal(object)  # Event

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.events: list[Event] = []
        self.labels: tuple[str, ...] = ()
        self._counts: dict[int, LiveCounts] = {}  # by frame
        self._curves: dict[str, pg.PlotDataItem] = {}
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        self.note = QLabel(NONE_TEXT)
        self.note.setWordWrap(True)
        layout.addWidget(self.note)
        split = QSplitter(Qt.Orientation.Horizontal)
        self.plot = themed_plot("Counts", "count")
        self.plot.getPlotItem().setLabel("bottom", "s")
        self.plot.getPlotItem().addLegend(offset=(4, 4))
        split.addWidget(self.plot)
        table = self.table = QTableWidget(0, len(EVENT_HEADERS))
        table.setHorizontalHeaderLabels(EVENT_HEADERS)
        table.verticalHeader().setVisible(False)
        table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        table.horizontalHeader().setStretchLastSection(True)
        table.cellClicked.connect(lambda row, _col: self._picked(row))
        table.cellActivated.connect(lambda row, _col: self._picked(row))
        split.addWidget(table)
        split.setSizes([420, 520])
        layout.addWidget(split, 1)

    # ---- the table ------------------------------------------------------------------

    def show_events(self, events: Sequence[Event], labels: Sequence[str]) -> None:
        """The rows: ``events`` in frame order (the selected one stays selected)."""
        selected = self.selected()
        self.events, self.labels = list(events), tuple(labels)
        table = self.table
        table.setUpdatesEnabled(False)
        table.setRowCount(len(self.events))
        for row, e in enumerate(self.events):
            cls = labels[e.class_id] if 0 <= e.class_id < len(labels) else str(e.class_id)
            cells = (f"{e.time_s:.2f} s", str(e.frame + 1), f"#{e.track_id}", cls, e.kind,
                     e.name, e.direction)  # fmt: skip
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if col == 2:
                    item.setForeground(QColor(_hex(track_colour(e.track_id))))
                table.setItem(row, col, item)
        table.setUpdatesEnabled(True)
        if selected is not None and selected in self.events:
            self.select(self.events.index(selected))

    def selected(self) -> Event | None:
        rows = self.table.selectionModel().selectedRows()
        return self.events[rows[0].row()] if rows else None

    def select(self, row: int) -> None:
        self.table.selectRow(row)
        item = self.table.item(row, 0)
        if item is not None:
            self.table.scrollToItem(item)

    def _picked(self, row: int) -> None:
        if 0 <= row < len(self.events):
            self.eventPicked.emit(self.events[row])

    # ---- the plot -------------------------------------------------------------------

    def clear_counts(self, names: Sequence[str] = ()) -> None:
        """No counts yet; ``names``: the lines' and zones' (none: say how to draw one)."""
        self._counts.clear()
        self.note.setVisible(not names)
        item = self.plot.getPlotItem()
        for curve in self._curves.values():
            item.removeItem(curve)
        self._curves.clear()
        legend = item.legend
        if legend is not None:
            legend.clear()

    def add_counts(self, counts: LiveCounts) -> None:
        self._counts[counts.frame] = counts

    def refresh_plot(self) -> None:
        """The curves from the counts kept (by the video's time)."""
        if not self._counts:
            return
        ordered = [self._counts[f] for f in sorted(self._counts)]
        times = [c.time_s for c in ordered]
        series: dict[str, tuple[list[int], str, Qt.PenStyle]] = {}
        for k, (name, _i, _o) in enumerate(ordered[-1].lines):
            colour = _hex(shape_colour(k))
            series[f"{name} in"] = ([c.lines[k][1] for c in ordered], colour, Qt.PenStyle.SolidLine)
            series[f"{name} out"] = ([c.lines[k][2] for c in ordered], colour, Qt.PenStyle.DashLine)
        n = len(ordered[-1].lines)
        for k, (name, _now, _in) in enumerate(ordered[-1].zones):
            colour = _hex(shape_colour(n + k))
            series[f"{name} inside"] = ([c.zones[k][1] for c in ordered], colour,
                                        Qt.PenStyle.SolidLine)  # fmt: skip
        item = self.plot.getPlotItem()
        for key, (values, colour, style) in series.items():
            curve = self._curves.get(key)
            if curve is None:
                curve = item.plot(name=key, pen=pg.mkPen(colour, width=2, style=style))
                self._curves[key] = curve
            curve.setData(times, values, stepMode=None)
        top = max((max(v[0]) for v in series.values() if v[0]), default=1)
        item.setXRange(times[0], max(times[-1], times[0] + 1.0), padding=0.02)
        item.setYRange(0, max(1, top) * 1.15, padding=0)

    def series(self, key: str) -> tuple[list[float], list[int]]:
        """One curve's points (time, count): "gate in", "gate out", "bay inside"."""
        curve = self._curves.get(key)
        if curve is None:
            return [], []
        xs, ys = curve.getData()
        if xs is None or ys is None:
            return [], []
        return [float(x) for x in xs], [int(y) for y in ys]
