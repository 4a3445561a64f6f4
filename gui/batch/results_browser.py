"""Analysis > Browse Batch Results…: the detections of a batch's output folder, as
thumbnails; double-click one to see that moment in the main window.

The user picks the output folder, a class (the labels the folder's detections hold,
``archive_labels``), a minimum score, optionally which sources (a glob such as
``*cam2*``, or a word the path contains) and the order (best first, or by video and
time). The search runs in the background (gui/batch/hit_search.py): at most ``limit`` hits
shown ("showing N of M"), each a thumbnail of its box with the scene around it, decoded
from its video as they come. Double-click (or Enter) on a hit asks for its video at its
frame (``openRequested``), which the main window opens, paused there. A batch that
counted lines and zones also has an Events tab (gui/batch/event_list.py): its events,
filtered by kind, line or zone and direction, a double-click opening one at its frame.
"""

from __future__ import annotations

from pathlib import Path

from framelens.core.api import DetectionHit, FrameLensError, archive_labels, error_message
from framelens.gui.batch.event_list import EventsPanel
from framelens.gui.batch.hit_search import THUMB_SIZE, HitSearch, SearchQuery
from framelens.gui.common.folder_dialog import choose_folder
from framelens.gui.common.settings import Settings
from framelens.gui.common.widgets import format_time, icon
from PySide6.QtCore import QSize, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QCloseEvent, QColor, QIcon, QImage, QKeyEvent, QPixmap, QResizeEvent
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListView,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QPushButton,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

__all__ = ["ALL_CLASSES", "MAX_SHOWN", "HitList", "ResultsBrowser", "hit_caption"]

ALL_CLASSES = "All classes"
MAX_SHOWN = 200  # thumbnails decoded per search; the rest are counted
_HIT_ROLE = Qt.ItemDataRole.UserRole


def hit_caption(hit: DetectionHit) -> str:
    """ "cam1.mp4 · 00:12.4\nperson 0.87 · frame 187": under the thumbnail (the frame
    counted from 1, as the main window's counter shows it)."""
    name = Path(hit.source).name
    return f"{name} · {format_time(hit.pts)}\n{hit.label} {hit.score:.2f} · frame {hit.frame + 1}"


def hit_tip(hit: DetectionHit) -> str:
    box = ", ".join(f"{round(v)}" for v in (hit.x1, hit.y1, hit.x2, hit.y2))
    return (
        f"{hit.source}\nframe {hit.frame + 1} at {format_time(hit.pts)}\n"
        f"{hit.label} {hit.score:.3f} · box {box}\n{hit.model} · {hit.precision.upper()}\n"
        "Double-click to open it here, at this frame"
    )


def _placeholder() -> QIcon:
    """What a hit shows until its thumbnail is decoded."""
    pixmap = QPixmap(THUMB_SIZE)
    pixmap.fill(QColor(38, 43, 53))
    return QIcon(pixmap)


class HitList(QListWidget):
    """The thumbnails, in a grid that reflows with the window. Enter opens the current."""

    activatedHit = Signal(object)  # DetectionHit

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setViewMode(QListView.ViewMode.IconMode)
        self.setResizeMode(QListView.ResizeMode.Adjust)
        self.setMovement(QListView.Movement.Static)
        self.setUniformItemSizes(True)
        self.setIconSize(THUMB_SIZE)
        line = self.fontMetrics().height()
        self._cell = QSize(THUMB_SIZE.width() + 16, THUMB_SIZE.height() + 2 * line + 16)
        self.setGridSize(self._cell)
        self.setWordWrap(True)
        self.setSelectionMode(QListWidget.SelectionMode.SingleSelection)
        self.itemDoubleClicked.connect(self._activate)

    def hit(self, row: int) -> DetectionHit | None:
        item = self.item(row)
        data = item.data(_HIT_ROLE) if item is not None else None
        return data if isinstance(data, DetectionHit) else None

    def resizeEvent(self, event: QResizeEvent) -> None:
        """The columns share the width: no strip left empty at the right."""
        width = self.viewport().width()
        columns = max(1, width // self._cell.width())
        self.setGridSize(QSize(max(self._cell.width(), width // columns), self._cell.height()))
        super().resizeEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and self.currentItem():
            self._activate(self.currentItem())
            return
        super().keyPressEvent(event)

    def _activate(self, item: QListWidgetItem) -> None:
        hit = item.data(_HIT_ROLE)
        if isinstance(hit, DetectionHit):
            self.activatedHit.emit(hit)


class ResultsBrowser(QMainWindow):
    """A batch's detections by class, as thumbnails of the hits."""

    openRequested = Signal(str, int)  # the hit's video and frame index

    def __init__(self, app_settings: Settings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowFlag(Qt.WindowType.Window)
        self.setWindowTitle("FrameLens — Batch Results")
        self.setWindowIcon(icon("framelens"))
        self.app_settings = app_settings
        self.folder = ""  # the folder browsed
        self.limit = MAX_SHOWN  # thumbnails per search
        self.hits: list[DetectionHit] = []
        self.total = 0  # how many hits matched (shown or not)
        self.thumbnails_done = 0
        self.searching = False
        self.search = HitSearch(self)
        self.search.hitsFound.connect(self._on_hits)
        self.search.thumbnailReady.connect(self._on_thumbnail)
        self.search.thumbnailFailed.connect(self._on_thumbnail_failed)
        self.search.searchFailed.connect(self._on_failed)
        self.search.searchDone.connect(self._on_done)
        self._debounce = QTimer(self)  # typing in the filters searches once, when it stops
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(350)
        self._debounce.timeout.connect(self.refresh)

        self.folder_edit = QLineEdit()
        self.folder_edit.setPlaceholderText("a batch's output folder")
        self.folder_edit.editingFinished.connect(self._on_folder_edited)
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._choose_folder)
        self.class_combo = QComboBox()
        self.class_combo.setMinimumContentsLength(14)
        self.class_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.class_combo.currentIndexChanged.connect(lambda _i: self.refresh())
        self.score_spin = QDoubleSpinBox()
        self.score_spin.setRange(0.0, 1.0)
        self.score_spin.setSingleStep(0.05)
        self.score_spin.setDecimals(2)
        self.score_spin.setValue(0.5)
        self.score_spin.setToolTip("Only hits at least this confident")
        self.score_spin.valueChanged.connect(lambda _v: self._debounce.start())
        self.source_edit = QLineEdit()
        self.source_edit.setPlaceholderText("all sources (or a pattern: *cam2*)")
        self.source_edit.setToolTip("Only the videos whose path matches this pattern")
        self.source_edit.textChanged.connect(lambda _t: self._debounce.start())
        self.order_combo = QComboBox()
        self.order_combo.addItem("Best first", "score")
        self.order_combo.addItem("By video and time", "time")
        self.order_combo.setToolTip("The order of the hits (and which are shown when capped)")
        self.order_combo.currentIndexChanged.connect(lambda _i: self.refresh())

        top = QHBoxLayout()
        top.addWidget(QLabel("Folder"))
        top.addWidget(self.folder_edit, 1)
        top.addWidget(browse)
        filters = QHBoxLayout()
        for text, widget in (
            ("Class", self.class_combo),
            ("Min score", self.score_spin),
            ("Source", self.source_edit),
            ("Order", self.order_combo),
        ):
            filters.addWidget(QLabel(text))
            filters.addWidget(widget, 1 if widget is self.source_edit else 0)
        self.list = HitList()
        self.list.activatedHit.connect(self._open_hit)
        self.status_label = QLabel("Choose a batch's output folder.")
        self.status_label.setObjectName("dialogStatus")
        detections = QWidget()
        page = QVBoxLayout(detections)
        page.setContentsMargins(0, 0, 0, 0)
        page.addLayout(filters)
        page.addWidget(self.list, 1)
        page.addWidget(self.status_label)
        self.events = EventsPanel()
        self.events.openRequested.connect(self.openRequested)
        self.tabs = QTabWidget()
        self.tabs.addTab(detections, "Detections")
        self.tabs.addTab(self.events, "Events")
        self.tabs.setTabEnabled(1, False)
        self.tabs.setTabToolTip(1, "The events of a batch run with --track --zones")
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.addLayout(top)
        layout.addWidget(self.tabs, 1)
        self.setCentralWidget(central)
        self.resize(1000, 680)

    # ---- the folder and its classes -------------------------------------------------

    def set_folder(self, folder: str) -> None:
        """Browse ``folder``: its classes in the combo, then the hits of the chosen one."""
        folder = self.folder = folder.strip()
        self.folder_edit.setText(folder)
        previous = self.class_combo.currentText()
        error = ""
        try:
            labels = archive_labels(folder) if folder else []
        except FrameLensError as exc:  # not a batch's folder, say
            labels, error = [], error_message(exc)
        self.class_combo.blockSignals(True)
        self.class_combo.clear()
        self.class_combo.addItem(ALL_CLASSES, None)
        for label in labels:
            self.class_combo.addItem(label, label)
        self.class_combo.setCurrentIndex(max(0, self.class_combo.findText(previous)))
        self.class_combo.blockSignals(False)
        if folder:
            self.app_settings.batch_output = folder
        events = self.events.set_folder(folder) if not error else 0
        self.tabs.setTabText(1, f"Events ({events})" if events else "Events")
        self.tabs.setTabEnabled(1, bool(events))
        if not events:
            self.tabs.setCurrentIndex(0)
        if labels:
            self.refresh()
            return
        self.search.stop()
        self.searching = False
        self._clear_list()
        empty = f"No detections in {folder} yet." if folder else "Choose a batch's output folder."
        self.status_label.setText(error or empty)

    def _on_folder_edited(self) -> None:
        if self.folder_edit.text().strip() != self.folder:  # not a mere loss of focus
            self.set_folder(self.folder_edit.text())

    def choose_class(self, label: str) -> bool:
        """Show the hits of ``label`` (False when the folder has none of it)."""
        index = self.class_combo.findData(label)
        if index >= 0:
            self.class_combo.setCurrentIndex(index)
        return index >= 0

    def _choose_folder(self) -> None:
        start = self.folder_edit.text().strip() or self.app_settings.batch_output
        folder = choose_folder(self, "A batch's output folder", start)
        if folder:
            self.set_folder(folder)

    # ---- searching ----------------------------------------------------------------------

    def query(self) -> SearchQuery:
        pattern = self.source_edit.text().strip()
        if pattern and not any(c in pattern for c in "*?["):
            pattern = f"*{pattern}*"  # a plain word: paths that contain it
        return SearchQuery(
            self.folder_edit.text().strip(),
            label=self.class_combo.currentData(),
            min_score=round(self.score_spin.value(), 4),
            source_glob=pattern or None,
            limit=self.limit,
            order=str(self.order_combo.currentData()),
        )

    @Slot()
    def refresh(self) -> None:
        """Search again with the filters as they are now."""
        self._debounce.stop()
        query = self.query()
        if not query.folder:
            return
        self.searching = True
        self.search.search(query)
        self.status_label.setText("Searching…")

    def _clear_list(self) -> None:
        self.list.clear()
        self.hits, self.total, self.thumbnails_done = [], 0, 0

    @Slot(int, list, int)
    def _on_hits(self, token: int, hits: list[DetectionHit], total: int) -> None:
        if token != self.search.token:
            return
        self._clear_list()
        self.hits, self.total = hits, total
        blank = _placeholder()
        for hit in hits:
            item = QListWidgetItem(blank, hit_caption(hit))
            item.setData(_HIT_ROLE, hit)
            item.setToolTip(hit_tip(hit))
            item.setTextAlignment(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop)
            self.list.addItem(item)
        self._show_count()

    @Slot(int, int, QImage)
    def _on_thumbnail(self, token: int, place: int, image: QImage) -> None:
        item = self.list.item(place) if token == self.search.token else None
        if item is not None:
            item.setIcon(QIcon(QPixmap.fromImage(image)))
            self.thumbnails_done += 1

    @Slot(int, int, str)
    def _on_thumbnail_failed(self, token: int, place: int, message: str) -> None:
        item = self.list.item(place) if token == self.search.token else None
        if item is not None:
            item.setToolTip(f"{item.toolTip()}\n\nNo thumbnail: {message}")
            self.thumbnails_done += 1

    @Slot(int, str)
    def _on_failed(self, token: int, message: str) -> None:
        if token == self.search.token:
            self.searching = False
            self._clear_list()
            self.status_label.setText(message)

    @Slot(int)
    def _on_done(self, token: int) -> None:
        if token == self.search.token:
            self.searching = False
            self._show_count()

    def _show_count(self) -> None:
        q = self.query()
        what = q.label or "detections of any class"
        where = f" in {q.source_glob}" if q.source_glob else ""
        which = f"{what}, score ≥ {q.min_score:.2f}{where}"
        if not self.total:
            self.status_label.setText(f"No hits ({which}).")
            return
        if len(self.hits) < self.total:
            first = "best" if q.order == "score" else "first"
            text = (
                f"Showing the {first} {len(self.hits)} of {self.total} hits ({which}): "
                "raise the score or name a source to narrow them"
            )
        else:
            text = f"Showing {self.total} of {self.total} hits ({which})"
        self.status_label.setText(f"{text}. Double-click a hit to open it at its frame.")

    def _open_hit(self, hit: DetectionHit) -> None:
        self.openRequested.emit(hit.source, hit.frame)

    def closeEvent(self, event: QCloseEvent) -> None:
        self.search.stop()
        self.search.wait()  # at most one thumbnail still being made
        super().closeEvent(event)
