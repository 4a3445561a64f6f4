"""The INT8 sensitivity chart: how much quantizing each convolution alone hurts.

One bar per Conv in graph order, on a log axis (sensitivities span decades), the
layers kept in float in another colour; beside it the INT8 share of the MACs and
the float layers. It draws a SensitivityReport (plain data); it computes nothing.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from framelens.core.api import LayerSensitivity, SensitivityReport
from framelens.gui.display.plots import themed_plot
from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QVBoxLayout,
    QWidget,
)

INT8_COLOUR = "#4cc9a0"
FLOAT_COLOUR = "#f4a259"
TENSORRT_FLOAT_COLOUR = "#b58cf0"  # quantized in the graph, run in float by TensorRT
BAR_WIDTH = 0.8


def log_heights(layers: list[LayerSensitivity]) -> tuple[np.ndarray, float]:
    """log10 of each sensitivity and the axis floor; zero or unknown ones sit on the floor."""
    values = np.array([layer.sensitivity for layer in layers], dtype=np.float64)
    positive = values[np.isfinite(values) & (values > 0)]
    floor = math.floor(math.log10(float(positive.min()))) - 0.5 if len(positive) else -6.0
    logs = np.full(len(values), floor)
    ok = np.isfinite(values) & (values > 0)
    logs[ok] = np.log10(values[ok])
    return logs, floor


def _sensitivity_text(value: float) -> str:
    return f"{value:.2e}" if math.isfinite(value) else "n/a"


class SensitivityChart(QWidget):
    """Bar chart of a report's per-layer sensitivity, with its totals and float layers."""

    def __init__(self, report: SensitivityReport | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.report: SensitivityReport | None = None
        self.plot = themed_plot("Sensitivity per convolution (quantized alone)", "output NSR")
        self.plot.setMinimumSize(520, 300)
        item = self.plot.getPlotItem()
        left = item.getAxis("left")
        left.setLogMode(False, True)  # the bars are drawn in log10 units
        left.enableAutoSIPrefix(False)
        item.setLabel("bottom", "convolutions in graph order", color="#aab2bf")
        self.legend = item.addLegend(offset=(-10, 8), labelTextColor="#aab2bf")
        self.legend.setBrush(pg.mkBrush(22, 24, 29, 200))
        self.int8_bars = pg.BarGraphItem(
            x=[], height=[], width=BAR_WIDTH, brush=INT8_COLOUR, pen=pg.mkPen(None)
        )
        self.float_bars = pg.BarGraphItem(
            x=[], height=[], width=BAR_WIDTH, brush=FLOAT_COLOUR, pen=pg.mkPen(None)
        )
        # quantized in the graph, but TensorRT's engine ran them in float (its layer list)
        self.tensorrt_bars = pg.BarGraphItem(
            x=[], height=[], width=BAR_WIDTH, brush=TENSORRT_FLOAT_COLOUR, pen=pg.mkPen(None)
        )
        self.tensorrt_float: set[str] = set()
        item.addItem(self.int8_bars)
        item.addItem(self.float_bars)
        item.addItem(self.tensorrt_bars)
        self.legend.addItem(self.int8_bars, "INT8")
        self.legend.addItem(self.float_bars, "kept in float")
        self.legend.addItem(self.tensorrt_bars, "TensorRT kept this layer in float")
        self.hover = QLabel("Point at a bar to see its layer.")
        self.hover.setObjectName("plotSummary")
        self.plot.scene().sigMouseMoved.connect(self._on_mouse)

        self.summary = QLabel("")
        self.summary.setObjectName("sensitivitySummary")
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.RichText)
        self.float_title = QLabel("Kept in float")
        self.float_title.setObjectName("sectionTitle")
        self.float_list = QListWidget()
        self.float_list.setObjectName("floatLayers")
        self.float_list.setMinimumWidth(230)
        self.details = QLabel("")
        self.details.setObjectName("plotSummary")
        self.details.setWordWrap(True)

        side = QVBoxLayout()
        side.setSpacing(6)
        side.addWidget(self.summary)
        side.addWidget(self.float_title)
        side.addWidget(self.float_list, 1)
        side.addWidget(self.details)
        left = QVBoxLayout()
        left.setSpacing(4)
        left.addWidget(self.plot, 1)
        left.addWidget(self.hover)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 8, 8, 8)
        lay.setSpacing(12)
        lay.addLayout(left, 3)
        lay.addLayout(side, 1)
        if report is not None:
            self.set_report(report)

    @property
    def bar_count(self) -> int:
        """Bars drawn: one per convolution of the report."""
        bars = (self.int8_bars, self.float_bars, self.tensorrt_bars)
        return sum(len(b.opts["x"]) for b in bars)

    def set_report(self, report: SensitivityReport, tensorrt_float: set[str] | None = None) -> None:
        """``tensorrt_float``: convolutions the graph quantized that a TensorRT engine of
        it ran in float (core.api.tensorrt_kept_float; empty until a GPU ran one)."""
        self.report = report
        self.tensorrt_float = set(tensorrt_float or ())
        layers = report.layers
        logs, floor = log_heights(layers)
        x = np.arange(1, len(layers) + 1, dtype=np.float64)
        kept = np.array([layer.kept_float for layer in layers], dtype=bool)
        by_trt = np.array([layer.name in self.tensorrt_float for layer in layers], dtype=bool)
        by_trt &= ~kept
        masks = (
            (self.int8_bars, ~kept & ~by_trt),
            (self.float_bars, kept),
            (self.tensorrt_bars, by_trt),
        )
        for bars, mask in masks:
            bars.setOpts(x=x[mask], y0=floor, height=logs[mask] - floor, width=BAR_WIDTH)
        top = float(logs.max()) if len(logs) else floor + 1
        self.plot.setRange(xRange=(0.0, len(layers) + 1.0), yRange=(floor, top + 0.3), padding=0.01)
        total = report.total_macs or 1
        self.float_list.clear()
        for layer in layers:
            if layer.kept_float:
                text = (
                    f"{layer.name}   {100 * layer.macs / total:.1f}% MACs · "
                    f"{_sensitivity_text(layer.sensitivity)}"
                )
                QListWidgetItem(text, self.float_list)
        by_engine = [n.name for n in layers if n.name in self.tensorrt_float and not n.kept_float]
        for name in by_engine:
            item = QListWidgetItem(f"{name}   float in TensorRT", self.float_list)
            item.setToolTip("INT8 in the graph; TensorRT kept this layer in float")
        if not report.kept_float and not self.tensorrt_float:
            QListWidgetItem("none: every convolution runs in INT8", self.float_list)
        trt = f" + {len(by_engine)} by TensorRT" if by_engine else ""
        self.float_title.setText(f"Kept in float ({len(report.kept_float)}{trt})")
        reached = "reached" if report.target_reached else "not reached (best kept)"
        self.summary.setText(
            f'<span style="font-size:20pt; color:{INT8_COLOUR}; font-weight:600">'
            f"{100 * report.int8_mac_fraction:.1f}%</span><br>"
            f"of {report.total_macs / 1e6:.0f} M MACs run in INT8 "
            f"(minimum {100 * report.min_int8_mac_fraction:.0f}%)<br><br>"
            f"against FP32: <b>{report.agreement_text()}</b><br>"
            f"target {report.target_text()}: {reached}"
        )
        self.details.setText(
            f"{len(layers)} convolutions · calibrated on {report.calibration_frames} frames "
            f"({report.method}) · sensitivity scored on {report.sensitivity_frames} · "
            "sensitivity = noise-to-signal ratio of the outputs with that layer alone in INT8"
        )

    def _on_mouse(self, pos: QPointF) -> None:
        if self.report is None:
            return
        view = self.plot.getPlotItem().getViewBox()
        if not view.sceneBoundingRect().contains(pos):
            return
        x = view.mapSceneToView(pos).x()
        i = round(x) - 1
        layers = self.report.layers
        if not 0 <= i < len(layers) or abs(x - (i + 1)) > BAR_WIDTH / 2:
            return
        layer = layers[i]
        total = self.report.total_macs or 1
        where = "kept in float" if layer.kept_float else "INT8"
        if layer.name in self.tensorrt_float and not layer.kept_float:
            where = "INT8 in the graph; TensorRT kept this layer in float"
        extra = " · depthwise" if layer.depthwise else ""
        self.hover.setText(
            f"#{i + 1} {layer.name} · {100 * layer.macs / total:.2f}% of MACs · "
            f"sensitivity {_sensitivity_text(layer.sensitivity)} · {where}{extra}"
        )


class SensitivityDialog(QDialog):
    """A non-modal window around the chart (Analysis > INT8 Layer Sensitivity…)."""

    def __init__(
        self, report: SensitivityReport, model: str = "", parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"INT8 layer sensitivity — {model}" if model else "INT8 sensitivity")
        self.setModal(False)
        self.resize(980, 520)
        self.chart = SensitivityChart(report)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        lay = QVBoxLayout(self)
        lay.addWidget(self.chart, 1)
        lay.addWidget(buttons)

    def set_report(
        self, report: SensitivityReport, model: str = "", tensorrt_float: set[str] | None = None
    ) -> None:
        self.chart.set_report(report, tensorrt_float)
        if model:
            self.setWindowTitle(f"INT8 layer sensitivity — {model}")
