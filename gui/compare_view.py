"""The compare view: 2 to 4 panes playing the same frames in lock-step, side by side.

Each pane is a precision (and optionally another model or device) of the detector;
the first pane is the reference. The view shows each pane's annotated frame and
its inference latency, the agreement of every pane with the reference (a table
and plots of latency and running F1), and a difference view that marks the
detections present in one pane only. All the work happens in a CompareSession's
worker; this window only draws, at most ten times a second.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from framelens.core.api import (
    MAX_PANES,
    MIN_PANES,
    PRECISIONS,
    DeviceChoice,
    FrameLensError,
    Image,
    PaneSpec,
    difference_colours,
)
from framelens.gui.compare_controller import CompareFrame, CompareSession, PaneRequest
from framelens.gui.controller import Controller
from framelens.gui.plots import themed_plot
from framelens.gui.widgets import icon, set_text
from PySide6.QtCore import QRectF, QSize, Qt, QTimer, QUrl, Slot
from PySide6.QtGui import QAction, QCloseEvent, QColor, QImage, QKeySequence, QPainter, QPaintEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFileDialog,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMainWindow,
    QProgressBar,
    QSizePolicy,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

PANE_COLOURS = ("#5aa9e6", "#4cc9a0", "#f4a259", "#c58fe0")
REFRESH_MS = 100  # panes, table and plots repaint at most 10 times a second
LATENCY_WINDOW = 30  # the title's latency: median of the last frames
HISTORY = 600  # frames kept in the plots
NONE = "—"

# The agreement table has one column per pane and one row per measure.
METRICS = (
    "Inference ms",
    "F1",
    "Precision",
    "Recall",
    "Mean IoU",
    "Mean |Δscore|",
    "PSNR dB",
    "SSIM",
)
METRIC_TIPS = {
    "Inference ms": f"Median inference time over the last {LATENCY_WINDOW} frames",
    "F1": "Detection agreement with the reference (matched at IoU 0.5, same class)",
    "Precision": "Share of this pane's detections that the reference also has",
    "Recall": "Share of the reference's detections that this pane also has",
    "Mean IoU": "Mean overlap of matched boxes",
    "Mean |Δscore|": "Mean absolute score difference of matched boxes",
    "PSNR dB": "Image agreement of the model's output image (super-resolution only)",
    "SSIM": "Structural similarity of the model's output image (super-resolution only)",
}


def diff_note(counts: tuple[int, int], reference: str) -> str:
    """The difference view's header note: what this frame's pane lacks and adds."""
    missed, extra = counts
    if not missed and not extra:
        return '<span style="color:#6b7382">no difference on this frame</span>'
    colours = difference_colours()
    parts = []
    if missed:
        parts.append(f'<span style="color:{colours.ref_only}">{missed} only in {reference}</span>')
    if extra:
        parts.append(f'<span style="color:{colours.test_only}">{extra} only here</span>')
    return " · ".join(parts)


def number(value: float | None, digits: int = 3) -> str:
    """A table cell: the value, or "—" when there is none (NaN, None, no PSNR)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NONE
    if math.isinf(value):
        return "∞"
    return f"{value:.{digits}f}"


class FrameView(QWidget):
    """A BGR frame scaled to fit (aspect kept) with plain QPainter: cheap under llvmpipe."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("frameView")
        self.setMinimumSize(240, 150)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self._image: QImage | None = None
        self._array: Image | None = None  # keeps the QImage's memory alive
        self.placeholder = ""  # drawn over a dimmed image, or alone
        self.dimmed = False

    def set_image(self, image: Image | None) -> None:
        if image is None:
            self._image = self._array = None
        else:
            array = np.ascontiguousarray(image)
            h, w = array.shape[:2]
            self._array = array
            self._image = QImage(array.data, w, h, array.strides[0], QImage.Format.Format_BGR888)
        self.update()

    @property
    def has_image(self) -> bool:
        return self._image is not None

    def show_placeholder(self, text: str, dimmed: bool = True) -> None:
        """``text`` over the (dimmed) image on screen, e.g. a preview before the start."""
        self.placeholder, self.dimmed = text, dimmed
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.fillRect(self.rect(), QColor("#0f1115"))
        if self._image is not None:
            w, h = self._image.width(), self._image.height()
            scale = min(self.width() / w, self.height() / h)
            tw, th = w * scale, h * scale
            target = QRectF((self.width() - tw) / 2, (self.height() - th) / 2, tw, th)
            p.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
            p.drawImage(target, self._image)
            if self.dimmed:
                p.fillRect(target, QColor(15, 17, 21, 175))
        if self.placeholder and (self._image is None or self.dimmed):
            p.setPen(QColor("#aab2bf") if self._image is not None else QColor("#6b7382"))
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, self.placeholder)


class PaneCard(QFrame):
    """One pane: a header (its set-up, or its label and latency) over its frame."""

    def __init__(
        self,
        index: int,
        models: Sequence[tuple[str, str | None]],
        devices: Sequence[DeviceChoice],
        device: str,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("paneCard")
        self.index = index
        self.chip = QLabel("●")
        self.chip.setObjectName("paneChip")
        self.title = QLabel("")
        self.title.setObjectName("paneTitle")
        self.note = QLabel("")
        self.note.setObjectName("paneNote")
        self.note.setTextFormat(Qt.TextFormat.RichText)
        self.note.hide()
        self.latency = QLabel("")
        self.latency.setObjectName("paneLatency")
        self.latency.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)

        self.precision_combo = QComboBox()
        for p in PRECISIONS:
            self.precision_combo.addItem(p.upper(), p)
        self.precision_combo.setToolTip("Precision variant (INT8 is calibrated on this video)")
        self.model_combo = QComboBox()
        for text, key in models:
            self.model_combo.addItem(text, key)
        self.model_combo.setToolTip("Model from the catalogue")
        self.device_combo = QComboBox()
        for choice in devices:
            self.device_combo.addItem(choice.label, choice.id)
            if choice.unavailable is not None:
                row = self.device_combo.count() - 1
                self.device_combo.model().item(row).setEnabled(False)  # type: ignore[attr-defined]
                self.device_combo.setItemData(row, choice.unavailable, Qt.ItemDataRole.ToolTipRole)
        i = self.device_combo.findData(device)
        self.device_combo.setCurrentIndex(max(0, i))
        self.device_combo.setToolTip("Where this pane's inference runs")
        for combo, chars in ((self.model_combo, 6), (self.device_combo, 3)):
            combo.setSizeAdjustPolicy(
                QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
            )
            combo.setMinimumContentsLength(chars)
        self.remove_button = QToolButton()
        self.remove_button.setText("✕")
        self.remove_button.setObjectName("removeButton")
        self.remove_button.setToolTip("Remove this pane")
        self.remove_button.setFixedSize(26, 26)
        self.setup_row = QWidget()
        sl = QHBoxLayout(self.setup_row)
        sl.setContentsMargins(0, 0, 0, 0)
        sl.setSpacing(4)
        sl.addWidget(self.precision_combo)
        sl.addWidget(self.model_combo, 1)
        sl.addWidget(self.device_combo)
        sl.addWidget(self.remove_button)

        self.view = FrameView()
        header = QHBoxLayout()
        header.setSpacing(6)
        header.addWidget(self.chip)
        header.addWidget(self.title)
        header.addWidget(self.setup_row, 1)
        header.addWidget(self.note)
        header.addWidget(self.latency, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 4, 6, 6)
        lay.setSpacing(4)
        lay.addLayout(header)
        lay.addWidget(self.view, 1)
        self.set_index(index)
        self.set_editing(True)

    def set_index(self, index: int) -> None:
        self.index = index
        colour = PANE_COLOURS[index % len(PANE_COLOURS)]
        self.chip.setStyleSheet(f"color: {colour};")
        if self.setup_row.isVisible() or not self.title.text():
            self.title.setText("Reference" if index == 0 else f"Pane {index + 1}")

    def set_editing(self, editing: bool) -> None:
        self.setup_row.setVisible(editing)
        self.latency.setVisible(not editing)
        if editing:
            self.title.setText("Reference" if self.index == 0 else f"Pane {self.index + 1}")
            self.view.show_placeholder("Press Start to compare")

    def request(self) -> PaneRequest:
        key = self.model_combo.currentData()
        return PaneRequest(
            precision=str(self.precision_combo.currentData()),
            model=None if key is None else str(key),
            device=str(self.device_combo.currentData()),
        )

    def set_precision(self, precision: str) -> None:
        self.precision_combo.setCurrentIndex(max(0, self.precision_combo.findData(precision)))


class _PaneStats:
    """What the view keeps of one pane between repaints."""

    def __init__(self) -> None:
        self.x: deque[float] = deque(maxlen=HISTORY)
        self.latency: deque[float] = deque(maxlen=HISTORY)
        self.f1: deque[float] = deque(maxlen=HISTORY)
        self.recent: deque[float] = deque(maxlen=LATENCY_WINDOW)
        self.psnr: list[float] = []
        self.ssim: list[float] = []

    def median_latency(self) -> float:
        finite = [v for v in self.recent if math.isfinite(v)]
        return statistics.median(finite) if finite else math.nan


class CompareWindow(QMainWindow):
    """Compare… (Ctrl+K): set up the panes, press Start; closing stops the worker."""

    def __init__(
        self,
        controller: Controller,
        source: str,
        start: int = 0,
        *,
        model_key: str = "",
        preview: Image | None = None,
        parent: QWidget | None = None,
    ) -> None:
        """``preview``: the frame on the main window's screen, shown dimmed before the start."""
        super().__init__(parent)
        self.setWindowFlag(Qt.WindowType.Window)
        self.setWindowTitle(f"Compare — {Path(source).name or source}")
        self.setObjectName("compareWindow")
        self.controller = controller
        self.source = source
        self.start_index = max(0, start)
        base = controller.base_settings()
        if base is None:
            raise ValueError("the compare view needs a model")
        self.session = CompareSession(base, controller.resolve, controller.calibration, self)
        self.labels: list[str] = []
        self.frames_seen = 0
        self._stats: list[_PaneStats] = []
        self._latest: CompareFrame | None = None
        self._run = 0
        self._dirty = False
        self.report_path: str | None = None
        self.preview = preview
        self._fitted = False

        try:
            catalog = list(controller.catalog())
        except FrameLensError:
            catalog = []
        current = model_key or base.model.name
        self._models: list[tuple[str, str | None]] = [(base.model.name, None)]
        self._models += [(name, name) for name in catalog if name != current]
        self._devices = controller.device_choices()
        self._device = base.device

        self._build_toolbar()
        self.cards: list[PaneCard] = []
        self.grid_host = QWidget()
        self.grid = QGridLayout(self.grid_host)
        self.grid.setContentsMargins(6, 6, 6, 6)
        self.grid.setSpacing(6)
        first = controller.precision if controller.precision != "fp32" else "fp16"
        for precision in ("fp32", first):
            self.add_pane(precision)

        self.table = self._build_table()
        self.latency_plot = themed_plot("Inference latency per frame", "ms")
        self.f1_plot = themed_plot("Running F1 against the reference", "F1")
        for plot in (self.latency_plot, self.f1_plot):
            plot.setMinimumHeight(150)
            plot.getPlotItem().setLabel("bottom", "frame", color="#aab2bf")
        self.latency_curves: list[pg.PlotDataItem] = []
        self.f1_curves: list[pg.PlotDataItem] = []
        bottom = QSplitter(Qt.Orientation.Horizontal)
        bottom.addWidget(self.table)
        bottom.addWidget(self.latency_plot)
        bottom.addWidget(self.f1_plot)
        bottom.setSizes([440, 440, 440])
        split = self.split = QSplitter(Qt.Orientation.Vertical)
        split.setObjectName("compareSplit")
        split.addWidget(self.grid_host)
        split.addWidget(bottom)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 1)
        split.setSizes([540, 290])
        self.setCentralWidget(split)
        self.status = QLabel("")
        self.status.setObjectName("compareStatus")
        self.status.setOpenExternalLinks(True)
        self.statusBar().addWidget(self.status, 1)
        self.frame_label = QLabel("")
        self.frame_label.setObjectName("compareFrame")
        self.statusBar().addPermanentWidget(self.frame_label)

        s = self.session
        s.ready.connect(self._on_ready)
        s.frameReady.connect(self._on_frame)
        s.stateChanged.connect(self._on_state)
        s.prepareProgress.connect(self._on_progress)
        s.errorOccurred.connect(self._on_error)
        s.reportProgress.connect(self._on_report_progress)
        s.reportFinished.connect(self._on_report_finished)
        s.reportFailed.connect(self._on_report_failed)
        self._timer = QTimer(self)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self.refresh)
        self._set_mode("setup")
        self.resize(1320, 900)

    # ---- construction ---------------------------------------------------------------

    def _action(self, text: str, slot: object, shortcut: str = "", tip: str = "") -> QAction:
        action = QAction(text, self)
        if shortcut:
            action.setShortcut(QKeySequence(shortcut))
        if tip:
            action.setToolTip(f"{tip} ({shortcut})" if shortcut else tip)
        action.triggered.connect(slot)
        self.addAction(action)
        return action

    def _build_toolbar(self) -> None:
        bar = self.addToolBar("Compare")
        bar.setObjectName("compareToolBar")
        bar.setMovable(False)
        bar.setIconSize(QSize(18, 18))
        bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.start_action = self._action(
            "Start", self.start, "Ctrl+Return", "Prepare the panes and play them in lock-step"
        )
        self.start_action.setIcon(icon("play"))
        self.play_action = self._action("Pause", self.session_toggle, "Space", "Play or pause")
        self.play_action.setIcon(icon("pause"))
        self.edit_action = self._action("Edit Panes", self.edit_panes, "", "Stop and change panes")
        self.add_action = self._action(
            "Add Pane", lambda: self.add_pane(), "Ctrl+N", f"Up to {MAX_PANES} panes"
        )
        self.diff_action = self._action(
            "Differences",
            self._on_differences,
            "D",
            "Show the detections present in one pane only: missed or added against the reference",
        )
        self.diff_action.setCheckable(True)
        self.report_action = self._action(
            "Save Report…",
            lambda: self.save_report(),
            "Ctrl+S",
            "Write an HTML report (summary, CSV, plots) of the frames compared so far",
        )
        self.report_action.setIcon(icon("export"))
        bar.addActions([self.start_action, self.play_action, self.edit_action, self.add_action])
        bar.addSeparator()
        bar.addAction(self.diff_action)
        colours = difference_colours()
        self.diff_legend = QLabel(
            f'<span style="color:{colours.ref_only}">┅ only in the reference</span>'
            f'&nbsp;&nbsp;<span style="color:{colours.test_only}">▭ only in the pane</span>'
        )
        self.diff_legend.setObjectName("diffLegend")
        self.diff_legend_action = bar.addWidget(self.diff_legend)
        self.diff_legend_action.setVisible(False)
        bar.addSeparator()
        bar.addAction(self.report_action)
        spacer = QWidget()
        spacer.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        bar.addWidget(spacer)
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
        self.cancel_button.clicked.connect(self.cancel)
        self._progress_actions = [
            bar.addWidget(self.progress_text),
            bar.addWidget(self.progress),
            bar.addWidget(self.cancel_button),
        ]

    def _build_table(self) -> QTableWidget:
        table = QTableWidget(len(METRICS), 0)
        table.setObjectName("agreementTable")
        table.setVerticalHeaderLabels(list(METRICS))
        for i, name in enumerate(METRICS):
            item = table.verticalHeaderItem(i)
            if item is not None:
                item.setToolTip(METRIC_TIPS[name])
        table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        table.setShowGrid(False)
        table.setAlternatingRowColors(True)
        table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        table.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        rows = table.verticalHeader()
        rows.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        rows.setDefaultSectionSize(rows.fontMetrics().height() + 9)
        rows.setDefaultAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        table.setMinimumWidth(400)
        table.setMinimumHeight(
            table.horizontalHeader().sizeHint().height()
            + len(METRICS) * rows.defaultSectionSize()
            + 4
        )
        return table

    # ---- panes ---------------------------------------------------------------------

    def add_pane(self, precision: str | None = None) -> PaneCard | None:
        if len(self.cards) >= MAX_PANES:
            return None
        card = PaneCard(len(self.cards), self._models, self._devices, self._device)
        if precision is None:
            used = {c.request().precision for c in self.cards}
            precision = next((p for p in ("fp16", "int8", "fp32") if p not in used), "fp32")
        card.set_precision(precision)
        card.view.set_image(self.preview)
        card.remove_button.clicked.connect(lambda: self.remove_pane(card))
        self.cards.append(card)
        self._relayout()
        return card

    def remove_pane(self, card: PaneCard) -> None:
        if len(self.cards) <= MIN_PANES or card not in self.cards:
            return
        self.cards.remove(card)
        card.setParent(None)
        card.deleteLater()
        for i, c in enumerate(self.cards):
            c.set_index(i)
        self._relayout()

    def _relayout(self) -> None:
        for card in self.cards:
            self.grid.removeWidget(card)
        columns = 3 if len(self.cards) == 3 else 2
        for i, card in enumerate(self.cards):
            self.grid.addWidget(card, i // columns, i % columns)
        rows = (len(self.cards) + columns - 1) // columns
        for r in range(2):
            self.grid.setRowStretch(r, 1 if r < rows else 0)
        for c in range(3):
            self.grid.setColumnStretch(c, 1 if c < columns else 0)
        editing = getattr(self, "_mode", "setup") == "setup"
        for card in self.cards:
            card.remove_button.setEnabled(editing and len(self.cards) > MIN_PANES)
        if hasattr(self, "add_action"):
            self.add_action.setVisible(editing)
            self.add_action.setEnabled(len(self.cards) < MAX_PANES)

    def requests(self) -> list[PaneRequest]:
        return [card.request() for card in self.cards]

    # ---- intents --------------------------------------------------------------------

    def start(self) -> None:
        """Prepare the panes as set up and play them from the main window's frame."""
        self._clear()
        self.session.start(self.source, self.start_index, self.requests())

    def session_toggle(self) -> None:
        if self._mode == "setup":
            self.start()
        else:
            self.session.toggle()

    def play(self) -> None:
        self.session.play()

    def pause(self) -> None:
        self.session.pause()

    def edit_panes(self) -> None:
        self.session.stop()
        self._set_mode("setup")

    def cancel(self) -> None:
        if self.session.reporting:
            self.session.cancel_report()
        elif self._mode == "preparing":
            self.session.stop()
            self._set_mode("setup")
            set_text(self.status, "Cancelled.")

    def save_report(self, folder: str | None = None) -> None:
        """Ask for a folder (empty, or an earlier report; else a subfolder is made)."""
        if folder is None:
            start_dir = str(Path(self.source).parent) if Path(self.source).exists() else ""
            folder = QFileDialog.getExistingDirectory(self, "Save compare report in", start_dir)
            if not folder:
                return
        first, last = self.session.compared
        if first >= 0:
            set_text(self.status, f"Writing the report of frames {first}–{last}…")
        self.session.save_report(folder)
        if self.session.reporting:
            self._show_progress("Report", 0.0)

    @Slot()
    def _on_differences(self) -> None:
        self.diff_legend_action.setVisible(self.diff_action.isChecked())
        self._dirty = True
        self.refresh()

    @property
    def differences(self) -> bool:
        return self.diff_action.isChecked()

    # ---- what the session says ------------------------------------------------------

    def _set_mode(self, mode: str) -> None:
        """setup | preparing | playing | paused | ended | stopped."""
        self._mode = mode
        editing = mode == "setup"
        for card in self.cards:
            card.set_editing(editing)
        self._relayout()
        self.start_action.setVisible(editing)
        self.play_action.setVisible(not editing)
        self.play_action.setEnabled(mode in ("playing", "paused", "ended"))
        self.edit_action.setVisible(not editing)
        self.report_action.setEnabled(mode in ("playing", "paused", "ended", "stopped"))
        playing = mode == "playing"
        self.play_action.setText("Pause" if playing else "Play")
        self.play_action.setIcon(icon("pause" if playing else "play"))
        if mode != "preparing" and not self.session.reporting:
            self._hide_progress()
        if playing and not self._timer.isActive():
            self._timer.start()

    @Slot(object)
    def _on_ready(self, panes: list[PaneSpec]) -> None:
        self.labels = [p.label for p in panes]
        self._stats = [_PaneStats() for _ in panes]
        for card, pane in zip(self.cards, panes, strict=False):
            s = pane.settings
            card.title.setText(f"{pane.label} · reference" if card.index == 0 else pane.label)
            card.title.setToolTip(f"{s.model.name} · {s.precision.upper()} · {s.device}")
            card.view.show_placeholder("Waiting for the first frame…")
        self._build_table_columns(panes)
        self._build_curves()

    def _build_table_columns(self, panes: list[PaneSpec]) -> None:
        self.table.setColumnCount(len(panes))
        for col, pane in enumerate(panes):
            head = QTableWidgetItem(f"● {pane.label}" + (" (ref.)" if col == 0 else ""))
            head.setForeground(QColor(PANE_COLOURS[col % len(PANE_COLOURS)]))
            head.setToolTip("the reference" if col == 0 else f"{pane.label} against the reference")
            self.table.setHorizontalHeaderItem(col, head)
            for row in range(len(METRICS)):
                item = QTableWidgetItem(NONE)
                item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                self.table.setItem(row, col, item)

    def _build_curves(self) -> None:
        for plot in (self.latency_plot, self.f1_plot):
            plot.getPlotItem().clear()
        legend = self.latency_plot.getPlotItem().legend
        if legend is None:
            legend = self.latency_plot.getPlotItem().addLegend(
                offset=(8, 4), labelTextColor="#aab2bf", colCount=MAX_PANES
            )
            legend.setBrush(pg.mkBrush(22, 24, 29, 200))
        legend.clear()
        self.latency_curves, self.f1_curves = [], []
        for i, label in enumerate(self.labels):
            pen = pg.mkPen(PANE_COLOURS[i % len(PANE_COLOURS)], width=1.6)
            self.latency_curves.append(self.latency_plot.plot(pen=pen, name=label))
            self.f1_curves.append(self.f1_plot.plot(pen=pen))

    @Slot(object)
    def _on_frame(self, frame: CompareFrame) -> None:
        """Every frame feeds the history; the screen catches up at the next tick."""
        if frame.run != self._run:
            self._run = frame.run
            self._stats = [_PaneStats() for _ in self._stats]
        self.frames_seen += 1
        index = float(frame.step.frame.index)
        for stats, pane in zip(self._stats, frame.step.panes, strict=False):
            stats.x.append(index)
            stats.latency.append(pane.times.inference)
            stats.recent.append(pane.times.inference)
            stats.f1.append(pane.running.f1)
            if pane.image is not None:
                stats.psnr.append(pane.image.psnr_db)
                stats.ssim.append(pane.image.ssim)
        self._latest = frame
        self._dirty = True
        if not self._fitted:
            self._fitted = True
            self._fit_panes(frame.step.frame.width, frame.step.frame.height)

    def _fit_panes(self, width: int, height: int) -> None:
        """Give the panes the height their frames need; the table and plots the rest."""
        n = len(self.cards)
        columns = 3 if n == 3 else 2
        rows = (n + columns - 1) // columns
        margins = self.grid.contentsMargins()
        spacing = self.grid.spacing()
        inner = self.grid_host.width() - margins.left() - margins.right()
        card_w = (inner - (columns - 1) * spacing) / columns - 12
        header = self.cards[0].title.sizeHint().height() + 14 if self.cards else 40
        card_h = card_w * height / max(1, width) + header
        top = int(rows * card_h + (rows - 1) * spacing + margins.top() + margins.bottom())
        total = sum(self.split.sizes())
        low = self.table.minimumHeight() + 8
        bottom = min(max(low, total - top), max(low, 400))  # spare height goes to the panes
        self.split.setSizes([max(200, total - bottom), bottom])

    @Slot(str)
    def _on_state(self, state: str) -> None:
        if state == "preparing":
            self._set_mode("preparing")
            self._show_progress("Preparing the panes", 0.0)
        elif state in ("playing", "paused", "ended"):
            self._set_mode(state)
            if state == "ended":
                set_text(self.status, "End of video — Play compares it again from the start.")
            self.refresh()
        elif state == "stopped" and self._mode == "preparing":
            self._set_mode("setup")  # failed or cancelled: the panes stay as they were set
        elif state == "stopped" and self._mode != "setup":
            self._set_mode("stopped")  # an error while playing: Edit Panes starts again

    @Slot(str, float)
    def _on_progress(self, text: str, fraction: float) -> None:
        self._show_progress(text, fraction)

    @Slot(str)
    def _on_error(self, message: str) -> None:
        set_text(self.status, f"⚠ {message}")
        self.status.setToolTip(message)

    @Slot(int, int)
    def _on_report_progress(self, done: int, total: int) -> None:
        self._show_progress(
            f"Report: frame {done} of {total}" if total else "Report", done / total if total else 0
        )

    @Slot(str)
    def _on_report_finished(self, path: str) -> None:
        self.report_path = path
        self._hide_progress()
        url = QUrl.fromLocalFile(path).toString()
        self.status.setText(f'Report saved: <a href="{url}" style="color:#4cc9a0">{path}</a>')

    @Slot(str)
    def _on_report_failed(self, message: str) -> None:
        self._hide_progress()
        text = "Report cancelled." if message == "cancelled" else f"⚠ Report: {message}"
        set_text(self.status, text)

    def _show_progress(self, text: str, fraction: float) -> None:
        for action in self._progress_actions:
            action.setVisible(True)
        set_text(self.progress_text, text if len(text) <= 70 else text[:69] + "…")
        self.progress_text.setToolTip(text)
        self.progress.setValue(round(1000 * max(0.0, min(1.0, fraction))))

    def _hide_progress(self) -> None:
        for action in self._progress_actions:
            action.setVisible(False)

    # ---- drawing ----------------------------------------------------------------------

    def _clear(self) -> None:
        self._latest = None
        self._fitted = False
        self.frames_seen = 0
        self._stats = []
        self.table.setColumnCount(0)
        for card in self.cards:
            card.view.set_image(self.preview)
            card.view.show_placeholder("Preparing…")
        set_text(self.status, "")
        set_text(self.frame_label, "")

    def refresh(self) -> None:
        """One repaint of what changed: panes, titles, table, plots."""
        if not self._dirty:
            if self._mode != "playing":
                self._timer.stop()
            return
        self._dirty = False
        frame = self._latest
        if frame is None:
            return
        step = frame.step
        for i, (card, pane) in enumerate(zip(self.cards, step.panes, strict=False)):
            diff = frame.differences[i] if i < len(frame.differences) else None
            image = diff if self.differences and diff is not None else pane.result.annotated
            card.view.set_image(image if image is not None else step.frame.image)
            if card.view.placeholder:
                card.view.show_placeholder("", dimmed=False)
            latency = self._stats[i].median_latency() if i < len(self._stats) else math.nan
            set_text(card.latency, f"inference {number(latency, 1)} ms")
            counts = frame.diff_counts[i] if i < len(frame.diff_counts) else None
            card.note.setVisible(self.differences and counts is not None)
            if self.differences and counts is not None:
                set_text(card.note, diff_note(counts, self.labels[0] if self.labels else ""))
        self._fill_table(frame)
        self.themed_plot()
        set_text(self.frame_label, f"frame {step.frame.index} · {self.frames_seen} compared")

    def _fill_table(self, frame: CompareFrame) -> None:
        for col, pane in enumerate(frame.step.panes):
            if col >= self.table.columnCount() or col >= len(self._stats):
                break
            stats, r = self._stats[col], pane.running
            psnr = statistics.fmean(stats.psnr) if stats.psnr else None
            ssim = statistics.fmean(stats.ssim) if stats.ssim else None
            values = (
                number(stats.median_latency(), 1),
                number(r.f1),
                number(r.precision),
                number(r.recall),
                number(r.mean_iou),
                number(r.mean_score_diff),
                number(psnr, 2),
                number(ssim),
            )
            for row, text in enumerate(values):
                item = self.table.item(row, col)
                if item is not None and item.text() != text:
                    item.setText(text)

    def themed_plot(self) -> None:
        lo, hi, f1_lo = math.inf, -math.inf, 1.0
        lat_hi = 0.0
        for i, stats in enumerate(self._stats):
            if i >= len(self.latency_curves) or not stats.x:
                continue
            x = np.fromiter(stats.x, dtype=np.float64)
            lat = np.fromiter(stats.latency, dtype=np.float64)
            f1 = np.fromiter(stats.f1, dtype=np.float64)
            self.latency_curves[i].setData(x, lat, connect="finite")
            self.f1_curves[i].setData(x, f1)
            lo, hi = min(lo, float(x[0])), max(hi, float(x[-1]))
            finite = lat[np.isfinite(lat)]
            if len(finite):
                lat_hi = max(lat_hi, float(np.percentile(finite, 98)))
            f1_lo = min(f1_lo, float(f1.min()))
        if not math.isfinite(lo):
            return
        hi = max(hi, lo + 10.0)
        # headroom above the curves for the legend
        self.latency_plot.setRange(xRange=(lo, hi), yRange=(0.0, lat_hi * 1.35 or 1.0))
        self.f1_plot.setRange(xRange=(lo, hi), yRange=(max(0.0, f1_lo - 0.05), 1.02))

    # ---- numbers for tests and the report ----------------------------------------------

    def table_value(self, pane: int, metric: str) -> str:
        """The agreement table's cell for ``pane`` (0 = reference) and a METRICS name."""
        item = self.table.item(METRICS.index(metric), pane)
        return item.text() if item is not None else ""

    def closeEvent(self, event: QCloseEvent) -> None:
        self._timer.stop()
        self.session.shutdown()
        super().closeEvent(event)
