"""Tracking > Track List: every track of the video seen so far, as a table.

One row per track ID: the ID (in its track's colour), the class, the first and last
frame it was seen in (numbered from 1, as the window counts frames), its duration and
how many frames saw it. Clicking a row (or Enter) jumps to the track's first frame;
double-clicking jumps to its last (``jumpRequested``). The context menu follows the
row's track (``followRequested``). The rows come from core's track log
(``TrackLog.tracks()``); the table keeps the selected track selected as rows change.
"""

from __future__ import annotations

from collections.abc import Sequence

from framelens.core.api import TrackRecord, track_colour
from framelens.gui.common.rows_model import ModelIndex, RowsModel
from PySide6.QtCore import (
    QItemSelectionModel,
    QModelIndex,
    QObject,
    QPoint,
    QSize,
    QSortFilterProxyModel,
    Qt,
    Signal,
)
from PySide6.QtGui import QColor, QKeyEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QMenu,
    QTableView,
    QVBoxLayout,
    QWidget,
)

__all__ = ["TRACK_COLUMNS", "TrackListPanel", "format_duration"]

TRACK_COLUMNS = ("ID", "Class", "First", "Last", "Duration")
_TIPS = (
    "The track's ID, in its colour on the video",
    "The class most of its boxes had",
    "The first frame it was seen in (click the row to go there)",
    "The last frame it was seen in (double-click the row to go there)",
    "From its first frame to its last",
)
_SORT_ROLE = Qt.ItemDataRole.UserRole
OFF_TEXT = "Tracking is off: choose a tracker in the Tracking menu (Ctrl+T)"


def format_duration(seconds: float) -> str:
    """ "4.2 s", "1:05.0"."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)}:{rest:04.1f}"


class _TracksModel(RowsModel[TrackRecord]):
    def __init__(self, parent: QObject) -> None:
        super().__init__(parent, TRACK_COLUMNS, _TIPS)
        self.labels: tuple[str, ...] = ()

    def set_rows(self, rows: list[TrackRecord], labels: Sequence[str]) -> None:
        self.labels = tuple(labels)
        self.replace_rows(rows)

    def label(self, record: TrackRecord) -> str:
        cid = record.class_id
        return self.labels[cid] if 0 <= cid < len(self.labels) else str(cid)

    def data(self, index: ModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> object:
        if not index.isValid():
            return None
        t, column = self.rows[index.row()], index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return (
                f"#{t.track_id}",
                self.label(t),
                str(t.first_frame + 1),
                str(t.last_frame + 1),
                format_duration(t.duration),
            )[column]
        if role == _SORT_ROLE:
            return (t.track_id, self.label(t), t.first_frame, t.last_frame, t.duration)[column]
        if role == Qt.ItemDataRole.DecorationRole and column == 0:
            b, g, r = track_colour(t.track_id)
            return QColor(r, g, b)
        if role == Qt.ItemDataRole.TextAlignmentRole and column != 1:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole:
            return (
                f"{self.label(t)} #{t.track_id}: frames {t.first_frame + 1} to "
                f"{t.last_frame + 1}, seen in {t.observations}"
            )
        return None


class _Table(QTableView):
    """Enter jumps to the selected track's first frame."""

    entered = Signal()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            self.entered.emit()
            event.accept()
            return
        super().keyPressEvent(event)


class TrackListPanel(QWidget):
    """The table of tracks and a caption (see the module doc)."""

    jumpRequested = Signal(int)  # a 0-based frame index
    followRequested = Signal(object)  # TrackRecord

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.caption = QLabel(OFF_TEXT)
        self.caption.setObjectName("plotSummary")
        self.caption.setWordWrap(True)
        self._model = _TracksModel(self)
        self._proxy = QSortFilterProxyModel(self)
        self._proxy.setSourceModel(self._model)
        self._proxy.setSortRole(_SORT_ROLE)
        table = self.table = _Table()
        table.setObjectName("trackTable")
        table.setModel(self._proxy)
        table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        table.setAlternatingRowColors(True)
        table.setSortingEnabled(True)
        table.sortByColumn(0, Qt.SortOrder.AscendingOrder)
        table.verticalHeader().hide()
        table.setWordWrap(False)
        table.setIconSize(QSize(10, 10))
        table.setToolTip("Click a track: its first frame; double-click: its last")
        header = table.horizontalHeader()
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        for column in (0, 2, 3, 4):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        # narrow sections: the class name keeps room in a narrow dock
        header.setStyleSheet("QHeaderView::section { padding: 4px 1px 4px 3px; }")
        table.clicked.connect(lambda index: self._jump(index, last=False))
        table.doubleClicked.connect(lambda index: self._jump(index, last=True))
        table.entered.connect(self._jump_selected)
        table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        table.customContextMenuRequested.connect(self._context_menu)
        self.menu: QMenu | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(self.caption)
        layout.addWidget(table, 1)

    def show_tracks(self, records: list[TrackRecord], labels: Sequence[str], on: bool) -> None:
        """The tracks listed now (``on``: a tracker runs; else the caption says how)."""
        selected = self.selected()
        self._model.set_rows(records, labels)
        if selected is not None:
            self.select(selected.track_id)
        n = len(records)
        if not on:
            self.caption.setText(OFF_TEXT)
        else:
            self.caption.setText(
                f"{n} track{'s' * (n != 1)} so far" if n else "No tracks yet: play the video"
            )

    def rows(self) -> list[TrackRecord]:
        """The rows as the table shows them, top to bottom."""
        return [self._record(r) for r in range(self._proxy.rowCount())]

    def _record(self, view_row: int) -> TrackRecord:
        source = self._proxy.mapToSource(self._proxy.index(view_row, 0))
        return self._model.rows[source.row()]

    def selected(self) -> TrackRecord | None:
        rows = self.table.selectionModel().selectedRows()
        return self._record(rows[0].row()) if rows else None

    def select(self, track_id: int) -> bool:
        """Select the row of ``track_id`` (no jump); False when it is not listed."""
        for r in range(self._proxy.rowCount()):
            if self._record(r).track_id == track_id:
                index = self._proxy.index(r, 0)
                flags = (
                    QItemSelectionModel.SelectionFlag.ClearAndSelect
                    | QItemSelectionModel.SelectionFlag.Rows
                )
                self.table.selectionModel().select(index, flags)
                return True
        return False

    def _jump(self, index: QModelIndex, *, last: bool) -> None:
        if index.isValid():
            record = self._record(index.row())
            self.jumpRequested.emit(record.last_frame if last else record.first_frame)

    def _jump_selected(self) -> None:
        record = self.selected()
        if record is not None:
            self.jumpRequested.emit(record.first_frame)

    def _context_menu(self, at: QPoint) -> None:
        index = self.table.indexAt(at)
        if not index.isValid():
            return
        record = self._record(index.row())
        name = f"{self._model.label(record)} #{record.track_id}"
        menu = self.menu = QMenu(self)
        menu.addAction(f"Go to First Frame ({record.first_frame + 1})").triggered.connect(
            lambda: self.jumpRequested.emit(record.first_frame)
        )
        menu.addAction(f"Go to Last Frame ({record.last_frame + 1})").triggered.connect(
            lambda: self.jumpRequested.emit(record.last_frame)
        )
        menu.addAction(f"Follow This ID ({name})").triggered.connect(
            lambda: self.followRequested.emit(record)
        )
        menu.popup(self.table.viewport().mapToGlobal(at))
