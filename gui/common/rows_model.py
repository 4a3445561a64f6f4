"""A table model over a list of rows with named columns and their tooltips: what the
window's tables (the detections list, the track list) share; each says how its rows
are shown (``data``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QObject, QPersistentModelIndex, Qt

__all__ = ["ModelIndex", "RowsModel"]

Row = TypeVar("Row")
ModelIndex = QModelIndex | QPersistentModelIndex


class RowsModel(QAbstractTableModel, Generic[Row]):
    """``rows`` under ``columns`` (header texts) with ``tips`` (header tooltips)."""

    def __init__(self, parent: QObject, columns: Sequence[str], tips: Sequence[str]) -> None:
        super().__init__(parent)  # owned by its view's panel: deleted with it, on the GUI thread
        self.rows: list[Row] = []
        self._columns, self._tips = tuple(columns), tuple(tips)

    def replace_rows(self, rows: list[Row]) -> None:
        self.beginResetModel()
        self.rows = rows
        self.endResetModel()

    def rowCount(self, parent: ModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: ModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._columns)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> object:
        if orientation != Qt.Orientation.Horizontal:
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return self._columns[section]
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tips[section]
        return None
