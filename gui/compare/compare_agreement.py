"""The compare view's numbers: the agreement table and the latency and F1 plots.

PaneStats keeps what the view remembers of one pane between repaints (latency and
running F1 history, image metrics); AgreementTable shows one column per pane and
one row per measure, and says why a measure does not apply (PSNR/SSIM of a
detector), and, when the panes track, rows of their tracks against the reference's
(TRACK_METRICS, the report's numbers, refreshed about once a second), and when they
also count lines and zones, a row per line (its crossings in / out) and zone (enter /
exit, and loiter where it has a loiter time), with the changes from the reference's;
AgreementPlots draws every pane's latency and running F1.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg
from framelens.core.api import (
    MAX_PANES,
    CompareStep,
    PaneSpec,
    TrackNumbers,
    ZonesFile,
    produces_image,
)
from framelens.gui.compare.compare_panes import PANE_COLOURS
from framelens.gui.display.plots import themed_plot
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

__all__ = [
    "HISTORY",
    "IMAGE_METRICS",
    "METRICS",
    "METRIC_TIPS",
    "NONE",
    "TRACK_METRICS",
    "AgreementPlots",
    "AgreementTable",
    "PaneStats",
    "count_rows",
    "image_metrics_reason",
    "number",
]

HISTORY = 600  # frames kept in the plots
NONE = "—"
NO_FRAME_TIP = "No frame compared yet"

# The agreement table has one column per pane and one row per measure.
METRICS = (
    "Inference ms (frame)",
    "Inference ms (median)",
    "F1",
    "Precision",
    "Recall",
    "Mean IoU",
    "Mean |Δscore|",
    "PSNR dB",
    "SSIM",
    "Tracks",
    "ID switches",
    "Track IDF1",
    "Track HOTA",
)
TRACK_METRICS = ("Tracks", "ID switches", "Track IDF1", "Track HOTA")
"""Rows shown only when the panes track; their keys in the report's "tracking"."""
_TRACK_KEYS = dict(zip(TRACK_METRICS, ("tracks", "id_switches", "idf1", "hota"), strict=True))
IMAGE_METRICS = ("PSNR dB", "SSIM")
METRIC_TIPS = {
    "Inference ms (frame)": "Inference time of the frame on screen",
    "Inference ms (median)": "Median inference time over every frame compared, as in the report",
    "F1": "Detection agreement with the reference (matched at IoU 0.5, same class)",
    "Precision": "Share of this pane's detections that the reference also has",
    "Recall": "Share of the reference's detections that this pane also has",
    "Mean IoU": "Mean overlap of matched boxes",
    "Mean |Δscore|": "Mean absolute score difference of matched boxes",
    "PSNR dB": "Image agreement of the model's output image (super-resolution only)",
    "SSIM": "Structural similarity of the model's output image (super-resolution only)",
    "Tracks": "Tracks this pane's tracker started over the frames compared",
    "ID switches": "Times this pane's track ID changes where the reference's keeps one",
    "Track IDF1": "Agreement of this pane's tracks with the reference's (IDF1, IoU 0.5)",
    "Track HOTA": "Agreement of this pane's tracks with the reference's (HOTA)",
}
TRACKS_PENDING = "…"
CHANGED = "#ff6b6b"  # a count that differs from the reference's
_COUNT_TIPS = {
    "lines": "Crossings of the line {name}: in (from the left to the right of its p1 → p2) / out",
    "zones": "Tracks that entered / left {name} (/ stayed past its loiter time)",
}
CountRow = tuple[str, str, tuple[str, ...]]  # lines or zones, the name, the counts' keys


def count_rows(zones: ZonesFile | None) -> list[CountRow]:
    """The count rows of ``zones``: one per line (in, out) and zone (enter, exit, and
    loiter where it has a loiter time)."""
    if zones is None:
        return []
    rows: list[CountRow] = [("lines", s.name, ("in", "out")) for s in zones.lines]
    for z in zones.zones:
        rows.append(("zones", z.name, ("enter", "exit", *(("loiter",) if z.loiter_s else ()))))
    return rows


def number(value: float | None, digits: int = 3) -> str:
    """A table cell: the value, or "—" when there is none (NaN, None, no PSNR)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NONE
    if math.isinf(value):
        return "∞"
    return f"{value:.{digits}f}"


def image_metrics_reason(panes: Sequence[PaneSpec], pane: int, reference: int = 0) -> str | None:
    """Why PSNR/SSIM do not apply to ``pane`` (None when they do): they compare the
    image a model outputs (super-resolution) with the reference's, and a detector
    outputs boxes."""
    if not produces_image(panes[pane].settings.model):
        return "n/a: detection task"
    if not produces_image(panes[reference].settings.model):
        return "n/a: reference outputs no image"
    return None


_REASON_TIPS = {
    "n/a: detection task": (
        "Detectors output boxes, not an image: PSNR and SSIM measure the image a "
        "super-resolution model outputs against the reference's"
    ),
    "n/a: reference outputs no image": (
        "PSNR and SSIM compare this pane's image with the reference's, and the "
        "reference is a detector"
    ),
}


def above(widget: QWidget, caption: QWidget) -> QWidget:
    """``widget`` with ``caption`` under it, in one widget."""
    box = QWidget()
    column = QVBoxLayout(box)
    column.setContentsMargins(0, 0, 0, 0)
    column.setSpacing(2)
    column.addWidget(widget, 1)
    column.addWidget(caption)
    return box


def scope_text(compared_now: set[int], compared: tuple[int, int]) -> str:
    """Over which frames the figures are (frames counted from 1): the table's F1,
    precision and recall over this pass (a pass starts at Start, Home or Play after the
    end), the report over every frame from the first compared to the last (the frames
    never compared in between are computed for it)."""
    if not compared_now:
        return ""
    lo, hi = min(compared_now) + 1, max(compared_now) + 1
    n = len(compared_now)
    span = f"{lo}" if lo == hi else f"{lo}–{hi}"
    now = f"Table over this pass: {n} frame{'s' if n != 1 else ''}, {span}"
    first, last = compared
    if first < 0:
        return now
    return f"{now} · Save Report over frames {first + 1}–{last + 1}"


class PaneStats:
    """What the view keeps of one pane between repaints."""

    def __init__(self) -> None:
        self.x: deque[float] = deque(maxlen=HISTORY)
        self.latency: deque[float] = deque(maxlen=HISTORY)
        self.f1: deque[float] = deque(maxlen=HISTORY)
        self.last_latency = math.nan  # inference ms of the latest frame
        self.median = math.nan  # over every frame compared (the worker's, as reported)
        self.psnr: list[float] = []
        self.ssim: list[float] = []


class AgreementTable(QTableWidget):
    """One column per pane, one row per measure (METRICS) of its agreement."""

    def __init__(self) -> None:
        super().__init__(len(METRICS), 0)
        self.setObjectName("agreementTable")
        self.setVerticalHeaderLabels(list(METRICS))
        for i, name in enumerate(METRICS):
            item = self.verticalHeaderItem(i)
            if item is not None:
                item.setToolTip(METRIC_TIPS[name])
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.setShowGrid(False)
        self.setAlternatingRowColors(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        rows = self.verticalHeader()
        rows.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        rows.setDefaultSectionSize(rows.fontMetrics().height() + 9)
        rows.setDefaultAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        self._reasons: list[str | None] = []
        self._counts: list[CountRow] = []  # the count rows, after METRICS
        self.setMinimumWidth(400)
        self.show_tracks(False)

    def show_tracks(self, shown: bool) -> None:
        """The tracks' rows shown (the panes track) or hidden, the height to match."""
        for metric in TRACK_METRICS:
            self.setRowHidden(METRICS.index(metric), not shown)
        rows = len(METRICS) - (0 if shown else len(TRACK_METRICS)) + len(self._counts)
        self.setMinimumHeight(
            self.horizontalHeader().sizeHint().height()
            + rows * self.verticalHeader().defaultSectionSize()
            + 4
        )

    def set_panes(
        self, panes: Sequence[PaneSpec], tracking: bool = False, zones: ZonesFile | None = None
    ) -> None:
        """One column per pane, the reference first, every cell "—" until the first
        frame; a measure that cannot apply says why instead (one cell across the row
        when it is the same for every pane). ``tracking``: the tracks' rows shown;
        ``zones`` (with ``tracking``): a row per count of its lines and zones."""
        self._counts = count_rows(zones) if tracking else []
        self.setRowCount(len(METRICS) + len(self._counts))
        for k, (table, name, keys) in enumerate(self._counts):
            head = QTableWidgetItem(f"{name} {' / '.join(keys)}")
            head.setToolTip(
                _COUNT_TIPS[table].format(name=name)
                + ", over the frames compared; in brackets the changes from the reference's"
            )
            self.setVerticalHeaderItem(len(METRICS) + k, head)
        self.show_tracks(tracking)
        self.clearSpans()
        self.setColumnCount(len(panes))
        self._reasons = [image_metrics_reason(panes, col) for col in range(len(panes))]
        for col, pane in enumerate(panes):
            head = QTableWidgetItem(f"● {pane.label}" + (" (ref.)" if col == 0 else ""))
            head.setForeground(QColor(PANE_COLOURS[col % len(PANE_COLOURS)]))
            head.setToolTip("the reference" if col == 0 else f"{pane.label} against the reference")
            self.setHorizontalHeaderItem(col, head)
            for row, metric in enumerate(METRICS):
                reason = self._reasons[col] if metric in IMAGE_METRICS else None
                item = QTableWidgetItem(reason or NONE)
                item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                item.setToolTip(_REASON_TIPS.get(reason or "", NO_FRAME_TIP))
                if reason is not None:
                    item.setForeground(QColor("#8f99a8"))
                self.setItem(row, col, item)
            for k in range(len(self._counts)):
                item = QTableWidgetItem(TRACKS_PENDING)
                item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                self.setItem(len(METRICS) + k, col, item)
        if len(panes) > 1 and len(set(self._reasons)) == 1 and self._reasons[0] is not None:
            for metric in IMAGE_METRICS:
                self.setSpan(METRICS.index(metric), 0, 1, len(panes))

    def fill(
        self, step: CompareStep, stats: Sequence[PaneStats], tracks: TrackNumbers | None = None
    ) -> None:
        """The running numbers of ``step``'s panes (cells that changed only); ``tracks``:
        the latest track numbers (the rows say "…" until the first are computed)."""
        for col, pane in enumerate(step.panes):
            if col >= self.columnCount() or col >= len(stats):
                break
            s, r = stats[col], pane.running
            psnr = statistics.fmean(s.psnr) if s.psnr else None
            ssim = statistics.fmean(s.ssim) if s.ssim else None
            reason = self._reasons[col] if col < len(self._reasons) else None
            values = (
                number(s.last_latency, 1),
                number(s.median, 1),
                number(r.f1),
                number(r.precision),
                number(r.recall),
                number(r.mean_iou),
                number(r.mean_score_diff),
                reason or number(psnr, 2),
                reason or number(ssim),
                *_track_cells(tracks, col),
            )
            for row, text in enumerate(values):
                item = self.item(row, col)
                if item is not None and item.text() != text:
                    item.setText(text)
                    if text != NONE and item.toolTip() == NO_FRAME_TIP:
                        item.setToolTip("")
            for k, (text, changed) in enumerate(self._count_cells(tracks, col)):
                item = self.item(len(METRICS) + k, col)
                if item is not None and item.text() != text:
                    item.setText(text)
                    item.setForeground(QColor(CHANGED) if changed else self.palette().text())

    def tracks_tip(self, tracks: TrackNumbers | None) -> None:
        """Over how many frames the tracks' rows are (their header's tip)."""
        over = f" — over the {tracks.frames} frames compared, as the report" if tracks else ""
        for metric in TRACK_METRICS:
            item = self.verticalHeaderItem(METRICS.index(metric))
            if item is not None:
                item.setToolTip(METRIC_TIPS[metric] + over)

    def value(self, pane: int, metric: str) -> str:
        """The cell for ``pane`` (0 = reference) and a METRICS name, or a count's row
        name ("door in")."""
        names = [f"{name} {' / '.join(keys)}" for _, name, keys in self._counts]
        row = METRICS.index(metric) if metric in METRICS else len(METRICS) + names.index(metric)
        item = self.item(row, pane)
        return item.text() if item is not None else ""

    def _count_cells(self, tracks: TrackNumbers | None, pane: int) -> list[tuple[str, bool]]:
        """The count rows of one pane: its counts ("1 / 0"), and their changes from the
        reference's in brackets where there is one ("0 / 0 (-1 / +0)"; True: changed)."""
        if not self._counts:
            return []
        if tracks is None or pane >= len(tracks.counts):
            return [(TRACKS_PENDING, False)] * len(self._counts)
        entry = tracks.counts[pane]
        cells = []
        for table, name, keys in self._counts:
            values = [entry["counts"][table][name][k] for k in keys]
            changes = [entry["vs_reference"]["count_changes"][name][k] for k in keys]
            text = " / ".join(str(v) for v in values)
            if any(changes):
                text += f" ({' / '.join(f'{c:+d}' for c in changes)})"
            cells.append((text, any(changes)))
        return cells


def _track_cells(tracks: TrackNumbers | None, pane: int) -> list[str]:
    """The tracks' rows of one pane: counts as integers, agreement to three decimals."""
    if tracks is None or pane >= len(tracks.panes):
        return [TRACKS_PENDING] * len(TRACK_METRICS)
    entry = tracks.panes[pane]
    cells = []
    for metric in TRACK_METRICS:
        value = entry.get(_TRACK_KEYS[metric])
        cells.append(str(value) if isinstance(value, int) else number(value))
    return cells


class AgreementPlots:
    """Inference latency and running F1 per frame, one curve per pane."""

    def __init__(self) -> None:
        self.latency_plot = themed_plot("Inference latency per frame", "ms")
        self.f1_plot = themed_plot("Running F1 against the reference", "F1")
        for plot in (self.latency_plot, self.f1_plot):
            plot.setMinimumHeight(150)
            plot.getPlotItem().setLabel("bottom", "frame", color="#aab2bf")
        self.latency_curves: list[pg.PlotDataItem] = []
        self.f1_curves: list[pg.PlotDataItem] = []

    def set_labels(self, labels: Sequence[str]) -> None:
        """Fresh curves, one per pane (the latency plot's legend names them)."""
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
        for i, label in enumerate(labels):
            pen = pg.mkPen(PANE_COLOURS[i % len(PANE_COLOURS)], width=1.6)
            self.latency_curves.append(self.latency_plot.plot(pen=pen, name=label))
            self.f1_curves.append(self.f1_plot.plot(pen=pen))

    def refresh(self, stats: Sequence[PaneStats]) -> None:
        """Redraw the curves from ``stats`` and fit both plots to them."""
        lo, hi, f1_lo = math.inf, -math.inf, 1.0
        lat_hi = 0.0
        for i, s in enumerate(stats):
            if i >= len(self.latency_curves) or not s.x:
                continue
            x = np.fromiter(s.x, dtype=np.float64)
            lat = np.fromiter(s.latency, dtype=np.float64)
            f1 = np.fromiter(s.f1, dtype=np.float64)
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
