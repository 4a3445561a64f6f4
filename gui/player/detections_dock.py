"""View > Detections: the detections of the frame on screen, as a table.

One row per box of the frame the canvas shows: class, track ID (when a tracker runs;
"–" for a box of no track), score and box (x1, y1, x2, y2 in source pixels, clipped to
the frame as the detections file writes them). The list follows playback and seeks.
The filter keeps the rows of some classes: a class name (exactly that class), part of
one ("ca": car, cat, cake…), or several separated by commas. Clicking a row picks that
box (``boxPicked``), which the canvas marks; the pick follows the box from frame to
frame (the box of its track; untracked, the box of the same class that overlaps it
most, IoU at least ``FOLLOW_IOU``), so it holds while the video plays. A row's context
menu asks to follow its track (``followRequested``). Esc, a click below the rows or
Ctrl+click on the picked row lets it go. For a super-resolution model the panel says
that it lists a detector's boxes only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from framelens.core.api import Detections, box_colour
from framelens.gui.common.rows_model import ModelIndex, RowsModel
from PySide6.QtCore import (
    QItemSelectionModel,
    QObject,
    QPoint,
    QSize,
    QSortFilterProxyModel,
    Qt,
    Signal,
)
from PySide6.QtGui import QColor, QKeyEvent, QMouseEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMenu,
    QTableView,
    QVBoxLayout,
    QWidget,
)

__all__ = [
    "ALL_CLASSES",
    "COLUMNS",
    "COLUMN_TIPS",
    "FOLLOW_IOU",
    "DetectionRow",
    "DetectionsPanel",
    "class_matcher",
    "detection_rows",
]

ALL_CLASSES = "All classes"
COLUMNS = ("Class", "ID", "Score", "Box")
COLUMN_TIPS = (
    "The class, in its box's colour on the video",
    "The box's track (Tracking menu); – for a box of no track",
    "The detector's confidence",
    "The box: x1, y1, x2, y2 (left, top, right, bottom), in source pixels",
)
FOLLOW_IOU = 0.3  # a picked box is the same box in the next frame above this overlap
Box = tuple[float, float, float, float]
_SORT_ROLE = Qt.ItemDataRole.UserRole


@dataclass(frozen=True)
class DetectionRow:
    """One box of a frame, as the list shows it. ``index``: its place in the Detections."""

    index: int
    class_id: int
    label: str
    score: float
    box: Box  # source pixels, clipped to the frame
    track_id: int = -1  # its track (>= 1), -1: none

    @property
    def box_text(self) -> str:
        return ", ".join(f"{round(v)}" for v in self.box)

    @property
    def id_text(self) -> str:
        return str(self.track_id) if self.track_id >= 1 else "–"


def _clip(v: float, limit: float) -> float:
    return min(max(v, 0.0), limit)


def detection_rows(
    dets: Detections, labels: Sequence[str], size: tuple[int, int] | None = None
) -> list[DetectionRow]:
    """The rows of one frame's detections, in their order; boxes clipped to ``size``
    (width, height) when it is given."""
    rows = []
    w, h = size if size is not None else (float("inf"), float("inf"))
    tracks = dets.track_ids.tolist() if dets.track_ids is not None else [-1] * len(dets)
    for i in range(len(dets)):
        x1, y1, x2, y2 = (float(v) for v in dets.boxes[i])
        box = (_clip(x1, w), _clip(y1, h), _clip(x2, w), _clip(y2, h))
        cid = int(dets.class_ids[i])
        label = labels[cid] if 0 <= cid < len(labels) else str(cid)
        rows.append(DetectionRow(i, cid, label, float(dets.scores[i]), box, int(tracks[i])))
    return rows


def class_matcher(text: str, labels: Sequence[str] = ()) -> Callable[[str], bool]:
    """Which class names the filter ``text`` keeps: every one for "" or ALL_CLASSES; else
    each comma-separated term keeps the class of that name when it is one of ``labels``
    (so "car" is not "carrot"), otherwise every class whose name contains it."""
    terms = [t.strip().lower() for t in text.split(",") if t.strip()]
    if not terms or text.strip() == ALL_CLASSES:
        return lambda _label: True
    known = {label.lower() for label in labels}
    exact = {t for t in terms if t in known}
    parts = [t for t in terms if t not in known]
    return lambda label: label.lower() in exact or any(p in label.lower() for p in parts)


def _iou(a: Box, b: Box) -> float:
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


class _RowsModel(RowsModel[DetectionRow]):
    """The frame's rows; sorted and filtered by the proxy in front of it."""

    def __init__(self, parent: QObject) -> None:
        super().__init__(parent, COLUMNS, COLUMN_TIPS)

    def data(self, index: ModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> object:
        if not index.isValid():
            return None
        row, column = self.rows[index.row()], index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return (row.label, row.id_text, f"{row.score:.2f}", row.box_text)[column]
        if role == _SORT_ROLE:
            return (row.label, row.track_id, row.score, row.box[0])[column]
        if role == Qt.ItemDataRole.DecorationRole and column == 0:
            # the colour of its box on the canvas: its track's, else its class's
            b, g, r = box_colour(row.class_id, row.track_id)
            return QColor(r, g, b)
        if role == Qt.ItemDataRole.TextAlignmentRole and column > 0:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole:
            name = f"{row.label} #{row.track_id}" if row.track_id >= 1 else row.label
            return f"{name} {row.score:.4f} at {row.box_text} (detection {row.index})"
        return None


class _ClassFilter(QSortFilterProxyModel):
    def __init__(self, rows: _RowsModel, parent: QObject) -> None:
        super().__init__(parent)
        self.setSourceModel(rows)
        self.setSortRole(_SORT_ROLE)
        self._rows = rows
        self.keeps: Callable[[str], bool] = class_matcher("")

    def set_matcher(self, keeps: Callable[[str], bool]) -> None:
        self.beginFilterChange()
        self.keeps = keeps
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def filterAcceptsRow(self, source_row: int, source_parent: ModelIndex) -> bool:
        del source_parent
        return self.keeps(self._rows.rows[source_row].label)


class _Table(QTableView):
    """Esc, or a click below the rows, lets the picked box go."""

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Escape and self.selectionModel().hasSelection():
            self.clearSelection()
            event.accept()
            return
        super().keyPressEvent(event)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if not self.indexAt(event.position().toPoint()).isValid():
            self.clearSelection()
        super().mousePressEvent(event)


class DetectionsPanel(QWidget):
    """The table, its class filter and a caption (see the module doc)."""

    boxPicked = Signal(object)  # Box (x1, y1, x2, y2, source pixels) or None
    followRequested = Signal(object)  # DetectionRow: follow its track (Follow This ID)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.frame_index: int | None = None  # the frame listed (source index)
        self._labels: tuple[str, ...] = ()
        self._picked: DetectionRow | None = None
        self._quiet = False  # while the rows are replaced: no pick is emitted
        self._unavailable = False  # the model is not a detector: the notice is shown
        self.caption = QLabel("No frame yet: open a video")
        self.caption.setObjectName("plotSummary")
        self.filter_combo = QComboBox()
        self.filter_combo.setEditable(True)
        self.filter_combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.filter_combo.setToolTip(
            "Show the rows of one class, of classes whose name contains the text, "
            "or of several separated by commas"
        )
        self.filter_combo.addItem(ALL_CLASSES)
        self.filter_combo.currentTextChanged.connect(self._on_filter)
        self._rows = _RowsModel(self)
        self._proxy = _ClassFilter(self._rows, self)
        self.table = _Table()
        self.table.setObjectName("detectionsTable")
        self.table.setModel(self._proxy)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setAlternatingRowColors(True)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(2, Qt.SortOrder.DescendingOrder)  # best score first
        self.table.verticalHeader().hide()
        self.table.setWordWrap(False)
        header = self.table.horizontalHeader()
        # the dock is narrow: the class name, ID and score keep their width and the box
        # takes the room left, elided where it must be (its tooltip has it whole)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        # as wide as "Score" and its sort arrow (a fixed width crowded the arrow); scores
        # are narrower than that, so the width holds still while frames go by
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        self.table.setColumnHidden(1, True)  # the ID column: shown while boxes have IDs
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._context_menu)
        self.table.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.table.setIconSize(QSize(10, 10))  # the class's colour, a small swatch
        # narrow sections: the class name keeps room in a narrow dock
        header.setStyleSheet("QHeaderView::section { padding: 4px 2px 4px 4px; }")
        self.table.selectionModel().selectionChanged.connect(self._on_selection)
        self.notice = QLabel("")
        self.notice.setWordWrap(True)
        self.notice.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.notice.hide()

        top = QHBoxLayout()
        top.addWidget(QLabel("Filter"))
        top.addWidget(self.filter_combo, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addLayout(top)
        layout.addWidget(self.caption)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.notice, 1)

    # ---- what is listed ----------------------------------------------------------------

    @property
    def available(self) -> bool:
        """False while the model is not a detector (the notice is shown instead)."""
        return not self._unavailable

    def set_labels(self, labels: Sequence[str]) -> None:
        """A detector's class names: the filter offers them; the list is for detectors."""
        self._labels = tuple(labels)
        self._unavailable = False
        self.notice.setText("")
        self.notice.hide()
        for widget in (self.table, self.caption, self.filter_combo):
            widget.setEnabled(True)
        self.table.show()
        text = self.filter_combo.currentText()
        self.filter_combo.blockSignals(True)
        self.filter_combo.clear()
        self.filter_combo.addItems([ALL_CLASSES, *sorted(set(self._labels))])
        self.filter_combo.setCurrentText(text)
        self.filter_combo.blockSignals(False)
        self._proxy.set_matcher(class_matcher(text, self._labels))

    def show_unavailable(self, text: str) -> None:
        """No list for this model (super-resolution): ``text`` says so instead."""
        self.show_rows(None, [])
        self._unavailable = True
        self._labels = ()
        self.notice.setText(text)
        self.notice.show()
        self.table.hide()
        self.caption.setText("")
        self.filter_combo.setEnabled(False)

    def show_frame(
        self,
        frame_index: int,
        dets: Detections,
        labels: Sequence[str],
        size: tuple[int, int] | None = None,
    ) -> None:
        """List the detections of frame ``frame_index`` (source index); a picked box
        stays picked if the frame has it (see the module doc)."""
        if tuple(labels) != self._labels:
            self.set_labels(labels)
        self.show_rows(frame_index, detection_rows(dets, labels, size))

    def show_rows(self, frame_index: int | None, rows: list[DetectionRow]) -> None:
        before = self._picked
        self.frame_index = frame_index
        self._quiet = True
        try:
            self._rows.replace_rows(rows)
        finally:
            self._quiet = False
        self._show_ids(any(r.track_id >= 1 for r in rows))
        follow = self._follow(before, rows) if before is not None else None
        if follow is not None:
            self._select(follow)  # emits the pick (its box moved with the frame)
        else:
            self._set_picked(None)
        self._update_caption()

    def _show_ids(self, tracked: bool) -> None:
        """The ID column while a tracker numbers the boxes."""
        if self.table.isColumnHidden(1) != tracked:
            return
        self.table.setColumnHidden(1, not tracked)

    def _follow(self, before: DetectionRow, rows: list[DetectionRow]) -> DetectionRow | None:
        """The row of ``rows`` that is the box ``before`` picked in the previous frame:
        its track's box, or for a box of no track the one overlapping it most."""
        if before.track_id >= 1:
            same = [r for r in rows if r.track_id == before.track_id and self._proxy.keeps(r.label)]
            return same[0] if same else None
        best, best_iou = None, FOLLOW_IOU
        for row in rows:
            if row.class_id != before.class_id or not self._proxy.keeps(row.label):
                continue
            overlap = _iou(row.box, before.box)
            if overlap >= best_iou:
                best, best_iou = row, overlap
        return best

    def _update_caption(self) -> None:
        if self.frame_index is None:
            self.caption.setText("No frame yet: open a video")
            return
        total, shown = self._rows.rowCount(), self._proxy.rowCount()
        what = "no detections" if total == 0 else f"{total} detection{'s' * (total != 1)}"
        if shown != total:
            what += f", {shown} shown"
        self.caption.setText(f"Frame {self.frame_index + 1} · {what}")

    # ---- rows as shown ---------------------------------------------------------------

    def visible_rows(self) -> list[DetectionRow]:
        """The rows the table shows, top to bottom (sorted, filtered)."""
        return [self._row_at(r) for r in range(self._proxy.rowCount())]

    def all_rows(self) -> list[DetectionRow]:
        """Every row of the frame listed, in the frame's order, filtered or not."""
        return list(self._rows.rows)

    def _row_at(self, view_row: int) -> DetectionRow:
        source = self._proxy.mapToSource(self._proxy.index(view_row, 0))
        return self._rows.rows[source.row()]

    @property
    def picked(self) -> DetectionRow | None:
        return self._picked

    def pick(self, view_row: int | None) -> None:
        """Pick the row ``view_row`` of the table as shown (None: none)."""
        if view_row is None:
            self.table.clearSelection()
        else:
            self._select(self._row_at(view_row))

    def _select(self, row: DetectionRow) -> None:
        source_row = self._rows.rows.index(row)
        index = self._proxy.mapFromSource(self._rows.index(source_row, 0))
        if not index.isValid():
            self._set_picked(None)
            return
        flags = (
            QItemSelectionModel.SelectionFlag.ClearAndSelect
            | QItemSelectionModel.SelectionFlag.Rows
        )
        self.table.selectionModel().select(index, flags)
        self.table.scrollTo(index)
        self._set_picked(row)  # also when the selection was already there

    def _on_selection(self, *_args: object) -> None:
        if self._quiet:
            return
        rows = self.table.selectionModel().selectedRows()
        self._set_picked(self._row_at(rows[0].row()) if rows else None)

    def _set_picked(self, row: DetectionRow | None) -> None:
        changed = row != self._picked
        self._picked = row
        if changed:
            self.boxPicked.emit(row.box if row is not None else None)

    def _context_menu(self, at: QPoint) -> None:
        """Follow This ID, for a row of a tracked box."""
        index = self.table.indexAt(at)
        if not index.isValid():
            return
        row = self._row_at(index.row())
        menu = QMenu(self)
        name = f"{row.label} #{row.track_id}" if row.track_id >= 1 else row.label
        follow = menu.addAction(
            f"Follow This ID ({name})" if row.track_id >= 1 else "Follow This ID"
        )
        follow.setEnabled(row.track_id >= 1)
        if row.track_id < 1:
            follow.setToolTip("This box belongs to no track: turn tracking on (Tracking menu)")
        follow.triggered.connect(lambda: self.followRequested.emit(row))
        self.menu = menu  # kept for tests; shown and gone
        menu.popup(self.table.viewport().mapToGlobal(at))

    def _on_filter(self, text: str) -> None:
        picked = self._picked
        self._quiet = True  # rows leave: the view would move the selection to a neighbour
        try:
            self._proxy.set_matcher(class_matcher(text, self._labels))
            if picked is None or not self._proxy.keeps(picked.label):
                self.table.clearSelection()
        finally:
            self._quiet = False
        if picked is not None and self._proxy.keeps(picked.label):
            self._select(picked)
        else:
            self._set_picked(None)
        self._update_caption()
