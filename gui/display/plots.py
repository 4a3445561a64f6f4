"""Live plots: results per second, and milliseconds per stage, over the last frames.

Fed with every FrameResult's StageTimes (the same numbers the CLI benchmark
prints) plus the canvas's own draw time; redrawn at most ten times a second so
plotting never competes with the video for the GUI thread.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import deque

import numpy as np
import pyqtgraph as pg
from framelens.core.api import FrameResult
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QResizeEvent, QTextDocument
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

HISTORY = 300
REFRESH_MS = 100
SUMMARY_INTERVAL_S = 1.0  # the medians line: a re-layout each time, and steadier to read
FPS_WINDOW = 30  # results the fps of a point is measured over
FPS_MIN_SPAN_S = 0.03
"""The least time a rate is measured over until the window is full: results that reach
the GUI thread together (queued while it was busy) arrive microseconds apart, and a rate
over those read thousands of fps on the first points, flattening the plot."""

# Stage -> (label, colour). "display" is getting the frame on screen: the pipeline's own
# display stage (the GPU's RGBA kernel) plus the canvas's upload + paint
# (VideoCanvas.drawTimeMs); "draw" is drawing the overlay into the frame.
STAGE_STYLE: dict[str, tuple[str, str]] = {
    "decode": ("decode", "#5aa9e6"),
    "preprocess": ("preprocess", "#7fc8a9"),
    "inference": ("inference", "#f4a259"),
    "postprocess": ("postprocess", "#c58fe0"),
    "track": ("tracking", "#5cc8c8"),
    "draw": ("overlay", "#e0d36a"),
    "display": ("display", "#9aa5b1"),
    "e2e": ("end to end", "#f25f5c"),
}

_BG = "#16181d"
_FG = "#aab2bf"


def themed_plot(title: str, units: str) -> pg.PlotWidget:
    widget = pg.PlotWidget(background=_BG)
    widget.setMinimumHeight(110)
    item = widget.getPlotItem()
    item.setTitle(title, color=_FG, size="9pt")
    item.setLabel("left", units, color=_FG)
    item.showGrid(x=True, y=True, alpha=0.15)
    item.setMenuEnabled(False)
    item.hideButtons()
    item.setMouseEnabled(x=False, y=False)
    item.enableAutoRange(x=False, y=False)  # refresh() sets both ranges: fewer repaints
    for axis in ("left", "bottom"):
        item.getAxis(axis).setTextPen(_FG)
        item.getAxis(axis).setPen(pg.mkPen("#3a3f4b"))
    return widget


def _span(values: np.ndarray, margin: float = 0.0) -> tuple[float, float]:
    """(low, high) of the finite values, widened by ``margin``; (0, 1) when none."""
    finite = values[np.isfinite(values)]
    if not len(finite):
        return (0.0, 1.0)
    lo, hi = float(finite.min()) - margin, float(finite.max()) + margin
    return (lo, hi) if hi > lo else (lo - 0.5, hi + 0.5)


def _log_span(log_values: np.ndarray) -> tuple[float, float]:
    """The latency axis' range (log10 of ms): the values with a margin, at least two
    decades wide, 0.1 to 1000 ms while there are none. Within one decade pyqtgraph's
    log axis labels every minor tick, and "2 3 4 ... 9" pile up on each other."""
    finite = log_values[np.isfinite(log_values)]
    if not len(finite):
        return (-1.0, 3.0)
    lo, hi = float(finite.min()) - 0.2, float(finite.max()) + 0.2
    if hi - lo < 2.0:
        mid = (lo + hi) / 2
        lo, hi = mid - 1.0, mid + 1.0
    return lo, hi


class StagePlots(QWidget):
    """An fps plot above a per-stage latency plot, with a one-line median summary."""

    def __init__(self, parent: QWidget | None = None, *, auto_refresh: bool = True) -> None:
        """With ``auto_refresh`` a timer redraws at 10 Hz; else the owner calls refresh()."""
        super().__init__(parent)
        self._count = 0
        self._x: deque[int] = deque(maxlen=HISTORY)
        self._arrivals: deque[float] = deque(maxlen=FPS_WINDOW)
        self._fps: deque[float] = deque(maxlen=HISTORY)
        self._stages: dict[str, deque[float]] = {k: deque(maxlen=HISTORY) for k in STAGE_STYLE}
        self._display_ms = math.nan
        self._dropped_total = 0  # the player's count: frames dropped unprocessed, late
        self._drop_marks: deque[tuple[float, int]] = deque(maxlen=FPS_WINDOW)
        self._dropped: deque[float] = deque(maxlen=HISTORY)  # dropped per second
        self._dirty = False
        self._summary_at = 0.0

        self.fps_plot = themed_plot("Throughput", "fps")
        self.fps_curve = self.fps_plot.plot(pen=pg.mkPen("#4cc9a0", width=2))
        # real-time playback drops frames it cannot process in time (core player_clock):
        # their rate in red under the shown rate, so a plot never hides that it skipped
        self.dropped_curve = self.fps_plot.plot(pen=pg.mkPen("#e05260", width=1.5))
        self.latency_plot = themed_plot("Latency per stage (log scale)", "ms")
        # Stages span 0.1 ms (overlay) to 100+ ms (end to end): only a log axis shows all.
        self.latency_plot.getPlotItem().setLogMode(x=False, y=True)
        self.latency_plot.setYRange(*_log_span(np.empty(0)), padding=0)  # before any data
        self.stage_curves = {
            name: self.latency_plot.plot(pen=pg.mkPen(colour, width=1.5))
            for name, (_label, colour) in STAGE_STYLE.items()
        }
        self.summary = QLabel(self.summary_text(), self)
        self.summary.setTextFormat(Qt.TextFormat.RichText)
        self.summary.setObjectName("plotSummary")
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # Fixed height, no wrapping: a new text must not re-layout (and repaint) the dock.
        self.summary.setFixedHeight(self.summary.fontMetrics().height() + 6)
        self.summary.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)

        row = QHBoxLayout()
        row.setSpacing(6)
        row.addWidget(self.fps_plot, 2)
        row.addWidget(self.latency_plot, 3)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 4)
        layout.setSpacing(4)
        layout.addLayout(row, 1)
        layout.addWidget(self.summary)

        self._timer = QTimer(self)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self.refresh)
        if auto_refresh:
            self._timer.start()

    def add_result(self, result: FrameResult) -> None:
        """Record one frame's times; the plots catch up at the next refresh."""
        self._arrivals.append(time.perf_counter())
        self._count += 1
        self._x.append(self._count)
        self._fps.append(self._measured_fps())
        self._dropped.append(self._dropped_rate())
        times = result.times.as_dict()
        converted = times.get("display", math.nan)
        times["display"] = self._display_ms + (0.0 if math.isnan(converted) else converted)
        for name, values in self._stages.items():
            values.append(times.get(name, math.nan))
        self._dirty = True

    def add_display_time(self, ms: float) -> None:
        """The canvas's draw time; attached to the next frame recorded."""
        self._display_ms = ms

    def set_dropped(self, total: int) -> None:
        """The player's count of frames dropped so far (it restarts with each source)."""
        if total < self._dropped_total:
            self._drop_marks.clear()
        self._dropped_total = total
        self._drop_marks.append((time.perf_counter(), total))

    def _dropped_rate(self) -> float:
        """Frames dropped per second over the last few state reports; 0 when none."""
        if len(self._drop_marks) < 2:
            return 0.0 if self._dropped_total == 0 else math.nan
        (t0, n0), (t1, n1) = self._drop_marks[0], self._drop_marks[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 else math.nan

    def reset_rate(self) -> None:
        """Forget arrival times (after a pause, so the gap does not read as a slow frame)."""
        self._arrivals.clear()
        self._drop_marks.clear()

    def clear(self) -> None:
        self._count = 0
        self._x.clear()
        self._arrivals.clear()
        self._fps.clear()
        self._dropped.clear()
        self._drop_marks.clear()
        self._dropped_total = 0
        for values in self._stages.values():
            values.clear()
        self._dirty = True
        self.refresh()

    def _measured_fps(self) -> float:
        if len(self._arrivals) < 3:  # two intervals: a rate from the third frame on
            return math.nan
        span = self._arrivals[-1] - self._arrivals[0]
        if span <= 0 or (span < FPS_MIN_SPAN_S and len(self._arrivals) < FPS_WINDOW):
            return math.nan
        return (len(self._arrivals) - 1) / span

    def refresh(self) -> None:
        """Redraw the curves and the summary if new data came since the last call."""
        if not self._dirty or not self.isVisible():
            return
        self._dirty = False
        x = np.fromiter(self._x, dtype=np.float64, count=len(self._x))
        fps = np.fromiter(self._fps, dtype=np.float64)
        dropped = np.fromiter(self._dropped, dtype=np.float64)
        stages = {k: np.fromiter(v, dtype=np.float64) for k, v in self._stages.items()}
        # Ranges set here rather than auto-ranged: one repaint per refresh, not three.
        lo = max(0.0, x[-1] - HISTORY) if len(x) else 0.0
        hi = max(lo + 10.0, x[-1] if len(x) else 0.0)
        both = np.concatenate([fps, dropped]) if dropped.size and np.any(dropped > 0) else fps
        self.fps_plot.setRange(xRange=(lo, hi), yRange=_span(both), padding=0.02)
        ms = np.concatenate([v[v > 0] for v in stages.values()])
        log_ms = np.log10(ms) if len(ms) else ms
        self.latency_plot.setRange(xRange=(lo, hi), yRange=_log_span(log_ms), padding=0.02)
        self.fps_curve.setData(x, fps, connect="finite")
        self.dropped_curve.setData(x, dropped, connect="finite")
        # one frame (a one-frame file, a seek while paused) is a point, not a line
        for name, curve in self.stage_curves.items():
            if len(x) == 1 and np.isfinite(stages[name]).any():
                colour = STAGE_STYLE[name][1]
                curve.setData(x, stages[name], symbol="o", symbolSize=5, symbolBrush=colour)
            else:
                curve.setData(x, stages[name], connect="finite", symbol=None)
        for plot in (self.fps_plot, self.latency_plot):
            # Settle the view transform now, not during the paint (which would queue
            # another repaint, and the window would be composited twice).
            plot.getPlotItem().getViewBox().prepareForPaint()
        now = time.perf_counter()
        if now - self._summary_at >= SUMMARY_INTERVAL_S or self._count < 2:
            self._summary_at = now
            self._show_summary()

    def medians(self) -> dict[str, float]:
        """Median ms of each stage that ran, and "fps", over the frames shown."""
        out: dict[str, float] = {}
        for name, values in (*self._stages.items(), ("fps", self._fps)):
            finite = [v for v in values if not math.isnan(v)]
            if finite:
                out[name] = statistics.median(finite)
        return out

    def summary_text(self) -> str:
        """The legend: each stage in its curve's colour with its median (rich text)."""
        prefix, parts, suffix = self._summary_parts()
        return prefix + " &nbsp; ".join(parts) + suffix

    def _summary_parts(self) -> tuple[str, list[str], str]:
        medians = self.medians()
        # end to end first: in a narrow dock the line is cut on the right, and the
        # number a user reads first must not be what is cut (the tooltip has it all)
        order = ["e2e", *(name for name in STAGE_STYLE if name != "e2e")]
        parts = [
            f'<span style="color:{STAGE_STYLE[name][1]}">■</span> {STAGE_STYLE[name][0]} '
            f"<b>{medians[name]:.1f}</b>"
            for name in order
            if name in medians
        ]
        if not parts:
            return "Play a video to see the time each stage takes.", [], ""
        fps = f"<b>{medians['fps']:.1f}</b> fps · " if "fps" in medians else ""
        dropped = ""
        if self._dropped_total:
            dropped = f' · <span style="color:#e05260">{self._dropped_total} dropped</span>'
        n = len(self._x)
        prefix = f"Median of last {n} frames: {fps}" if n > 1 else f"This frame: {fps}"
        return prefix, parts, " ms" + dropped

    def _show_summary(self) -> None:
        """The summary, cut after the last stage that fits and marked "…" when cut; the
        tooltip has it all."""
        full = self.summary_text()
        self.summary.setToolTip(full)
        prefix, parts, suffix = self._summary_parts()
        room = self.summary.contentsRect().width()
        shown = full
        for k in range(len(parts), -1, -1):
            shown = prefix + " &nbsp; ".join(parts[:k]) + (suffix if k == len(parts) else " …")
            if _rich_width(shown, self.summary) <= room:
                break
        self.summary.setText(shown)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._show_summary()


def _rich_width(html: str, label: QLabel) -> float:
    """The width ``label`` needs to show ``html`` on one line."""
    doc = QTextDocument()
    doc.setDefaultFont(label.font())
    doc.setDocumentMargin(0)
    doc.setHtml(html)
    return doc.idealWidth()
