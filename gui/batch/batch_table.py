"""The Batch window's table: every input with its state, progress, fps, worker and error.

One row per input file (folders are expanded when added). Rows follow run_batch's
InputProgress events by path; an event for a path not listed (a manifest's input, say)
adds its row. The state is coloured for the dark theme (each colour reads at 4.5:1 or
more on the table's background); the progress column is painted as a progress bar by
``ProgressDelegate``; a failed row's error column holds the first line of the error,
its tooltip the whole text.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from framelens.core.api import InputProgress
from framelens.gui.common.widgets import elide
from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    QRectF,
    Qt,
)
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QStyledItemDelegate, QStyleOptionViewItem, QWidget

__all__ = [
    "COLUMNS",
    "STATE_COLOURS",
    "BatchRow",
    "BatchTableModel",
    "ErrorDelegate",
    "ProgressDelegate",
]

COLUMNS = ("Input", "State", "Progress", "fps", "Worker", "Error")
INPUT, STATE, PROGRESS, FPS, WORKER, ERROR = range(len(COLUMNS))
STATE_COLOURS = {
    "pending": "#aab2bf",  # grey: waiting
    "running": "#5aa9e6",  # blue: in progress
    "done": "#4cc9a0",  # the theme's green
    "skipped": "#b99cf5",  # violet: done by an earlier run, kept
    "failed": "#f2716e",  # red
}
STATE_TIPS = {
    "pending": "Waiting to run",
    "running": "Being analysed now",
    "done": "Analysed: its outputs are in the output folder",
    "skipped": "Done by an earlier run into this folder (same file): kept, not run again",
    "failed": "Could not be analysed: the error says why; the others go on",
}
_ModelIndex = QModelIndex | QPersistentModelIndex
_STATE_ROLE = Qt.ItemDataRole.UserRole + 1
TRACK, TEXT = QColor("#262b35"), QColor("#e6e9ef")


@dataclass
class BatchRow:
    """What the table shows of one input (the last InputProgress for it)."""

    path: str
    state: str = "pending"
    frames_done: int = 0
    frames_total: int = 0
    fps: float = 0.0
    worker: str = ""
    error: str | None = None

    @property
    def fraction(self) -> float:
        """0..1 of this input's frames (its bar): done and skipped are whole."""
        if self.state in ("done", "skipped"):
            return 1.0
        if self.frames_total > 0:
            return min(1.0, self.frames_done / self.frames_total)
        return 0.0

    @property
    def settled(self) -> float:
        """0..1 of this input's share of the batch: a failed one is over too."""
        return 1.0 if self.state == "failed" else self.fraction

    @property
    def progress_text(self) -> str:
        if self.state == "skipped":
            return "done before"
        if self.frames_total > 0:
            return f"{self.frames_done}/{self.frames_total}"
        return f"{self.frames_done} frames" if self.frames_done else ""

    @property
    def error_line(self) -> str:
        """The error's first line; the input's path in it shortened to its name (the row
        says which input it is; the tooltip has the whole text)."""
        if not self.error or not self.error.strip():
            return ""
        line = self.error.strip().splitlines()[0]
        return line.replace(self.path, os.path.basename(self.path) or self.path)


def _key(path: str) -> str:
    return os.path.normcase(os.path.abspath(path))


class BatchTableModel(QAbstractTableModel):
    """The inputs of a batch and what became of each."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.rows: list[BatchRow] = []
        self._index: dict[str, int] = {}
        self._root = ""  # paths are shown relative to the inputs' common folder

    # ---- contents -------------------------------------------------------------

    def paths(self) -> list[str]:
        return [row.path for row in self.rows]

    def row_of(self, path: str) -> BatchRow | None:
        i = self._index.get(_key(path))
        return None if i is None else self.rows[i]

    def add_paths(self, paths: Iterable[str]) -> int:
        """Append the paths not listed yet (pending); returns how many were new."""
        new = [p for p in dict.fromkeys(paths) if _key(p) not in self._index]
        if not new:
            return 0
        first = len(self.rows)
        self.beginInsertRows(QModelIndex(), first, first + len(new) - 1)
        for i, path in enumerate(new, first):
            self.rows.append(BatchRow(path))
            self._index[_key(path)] = i
        self.endInsertRows()
        self._update_root()
        return len(new)

    def remove_rows(self, rows: Sequence[int]) -> None:
        for i in sorted(set(rows), reverse=True):
            if 0 <= i < len(self.rows):
                self.beginRemoveRows(QModelIndex(), i, i)
                del self.rows[i]
                self.endRemoveRows()
        self._reindex()

    def clear(self) -> None:
        self.beginResetModel()
        self.rows.clear()
        self._index.clear()
        self.endResetModel()
        self._root = ""

    def reset_states(self) -> None:
        """Every row pending again (a new run starts)."""
        for row in self.rows:
            row.state, row.frames_done, row.frames_total = "pending", 0, 0
            row.fps, row.worker, row.error = 0.0, "", None
        self._changed(0, len(self.rows) - 1)

    def apply(self, event: InputProgress) -> BatchRow:
        """An input's state changed or it progressed: its row shows it (added if new)."""
        if _key(event.path) not in self._index:
            self.add_paths([event.path])
        i = self._index[_key(event.path)]
        row = self.rows[i]
        row.state, row.frames_done = event.state, event.frames_done
        row.frames_total = event.frames_total
        row.fps, row.worker, row.error = event.fps, event.worker, event.error
        self._changed(i, i)
        return row

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(STATE_COLOURS, 0)
        for row in self.rows:
            counts[row.state] = counts.get(row.state, 0) + 1
        return counts

    def fraction(self) -> float:
        """The batch's progress, 0..1: each input weighs the same."""
        return sum(r.settled for r in self.rows) / len(self.rows) if self.rows else 0.0

    def shown_path(self, row: BatchRow) -> str:
        if self._root:
            try:
                return os.path.relpath(row.path, self._root)
            except ValueError:  # another drive (Windows)
                pass
        return os.path.basename(row.path) or row.path

    def _update_root(self) -> None:
        folders = [os.path.dirname(os.path.abspath(r.path)) for r in self.rows]
        try:
            self._root = os.path.commonpath(folders) if folders else ""
        except ValueError:
            self._root = ""
        self._changed(0, len(self.rows) - 1, INPUT, INPUT)

    def _reindex(self) -> None:
        self._index = {_key(r.path): i for i, r in enumerate(self.rows)}
        self._update_root()

    def _changed(self, first: int, last: int, col0: int = 0, col1: int = ERROR) -> None:
        if last >= first >= 0:
            self.dataChanged.emit(self.index(first, col0), self.index(last, col1))

    # ---- QAbstractTableModel ------------------------------------------------------

    def rowCount(self, parent: _ModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: _ModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> object:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def data(self, index: _ModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> object:
        if not index.isValid() or not 0 <= index.row() < len(self.rows):
            return None
        row, col = self.rows[index.row()], index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self._text(row, col)
        if role == Qt.ItemDataRole.ToolTipRole:
            if col == INPUT:
                return row.path
            if col == STATE:
                return STATE_TIPS.get(row.state, row.state)
            if col == ERROR and row.error:
                return row.error
            if col in (PROGRESS, WORKER):  # cut with "…" in a narrow column: whole here
                return self._text(row, col) or None
            return None
        if role == Qt.ItemDataRole.ForegroundRole and col in (STATE, ERROR):
            colour = STATE_COLOURS["failed" if col == ERROR else row.state]
            return QColor(colour)
        if role == Qt.ItemDataRole.TextAlignmentRole and col == FPS:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.UserRole and col == PROGRESS:
            return row.fraction
        if role == _STATE_ROLE:
            return row.state
        return None

    def _text(self, row: BatchRow, col: int) -> str:
        if col == INPUT:
            return self.shown_path(row)
        if col == STATE:
            return row.state
        if col == PROGRESS:
            return row.progress_text
        if col == FPS:
            return f"{row.fps:.1f}" if row.fps > 0 else ""
        if col == WORKER:
            return row.worker
        return row.error_line


class ProgressDelegate(QStyledItemDelegate):
    """The progress column as a bar in the row's state colour, "done/total" on it."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: _ModelIndex) -> None:
        fraction = index.data(Qt.ItemDataRole.UserRole)
        if not isinstance(fraction, float):
            super().paint(painter, option, index)
            return
        rect = QRectF(option.rect).adjusted(4, 5, -4, -5)
        state = str(index.data(_STATE_ROLE) or "pending")
        colour = QColor(STATE_COLOURS.get(state, STATE_COLOURS["pending"]))
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(TRACK)
        painter.drawRoundedRect(rect, 3, 3)
        if fraction > 0:
            colour.setAlpha(150)  # the text on it stays legible
            painter.setBrush(colour)
            painter.drawRoundedRect(
                QRectF(rect.x(), rect.y(), rect.width() * fraction, rect.height()), 3, 3
            )
        painter.setPen(TEXT)
        text = elide(str(index.data() or ""), painter.fontMetrics(), rect.width() - 4)
        painter.drawText(rect, int(Qt.AlignmentFlag.AlignCenter), text)
        painter.restore()


class ErrorDelegate(QStyledItemDelegate):
    """The error column elided at its end: its beginning says what went wrong."""

    def initStyleOption(self, option: QStyleOptionViewItem, index: _ModelIndex) -> None:
        super().initStyleOption(option, index)
        option.textElideMode = Qt.TextElideMode.ElideRight
