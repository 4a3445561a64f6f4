"""The precision toggle: a segmented FP32 | FP16 | INT8 control with its progress and status.

It only shows and asks: the controller prepares variants and says which is active.
While a variant is prepared the chosen segment stays checked and a small progress
bar with Cancel appears; on failure the toggle returns to the active variant.
"""

from __future__ import annotations

from framelens.core.api import SensitivityReport
from framelens.gui.common.widgets import ElidedLabel, set_text
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

PRECISION_NAMES = ("fp32", "fp16", "int8")
TIPS = {
    "fp32": "The model as it is (Ctrl+1)",
    "fp16": "Half-precision graph, float32 inputs and outputs (Ctrl+2)",
    "int8": "INT8 Q/DQ graph calibrated on frames of this video; "
    "the most sensitive layers stay in float (Ctrl+3)",
}


def active_text(precision: str, report: SensitivityReport | None) -> str:
    """The state line, e.g. "Active: INT8 (96% MACs int8)" (the MAC share for INT8 only)."""
    text = f"Active: {precision.upper()}"
    if precision == "int8" and report is not None:
        text += f" ({100 * report.int8_mac_fraction:.0f}% MACs int8)"
    return text


def report_tip(report: SensitivityReport) -> str:
    kept = ", ".join(report.kept_float) or "none"
    reached = "reached" if report.target_reached else "not reached"
    return (
        f"Calibrated on {report.calibration_frames} frames of the video ({report.method}).\n"
        f"Kept in float: {kept}.\n"
        f"Agreement with FP32: {report.agreement_text()} "
        f"(target {report.target_text()}, {reached})."
    )


class PrecisionToggle(QWidget):
    """FP32 | FP16 | INT8 buttons, "Layers…" for the INT8 sensitivity, progress and state."""

    precisionChosen = Signal(str)
    cancelRequested = Signal()
    sensitivityRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.active = "fp32"
        segments = QFrame()
        segments.setObjectName("segmented")
        sl = QHBoxLayout(segments)
        sl.setContentsMargins(2, 2, 2, 2)
        sl.setSpacing(2)
        self.group = QButtonGroup(self)
        self.group.setExclusive(True)
        self.buttons: dict[str, QToolButton] = {}
        for i, name in enumerate(PRECISION_NAMES):
            button = QToolButton()
            button.setText(name.upper())
            button.setCheckable(True)
            button.setToolTip(TIPS[name])
            button.setObjectName("segment")
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            # shares the panel's width instead of asking for its own: the dock is narrow
            button.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
            button.setMinimumWidth(button.fontMetrics().horizontalAdvance("FP32") + 14)
            self.group.addButton(button, i)
            self.buttons[name] = button
            sl.addWidget(button, 1)
        self.buttons["fp32"].setChecked(True)
        self.group.idClicked.connect(lambda i: self.precisionChosen.emit(PRECISION_NAMES[i]))

        self.layers_button = QToolButton()
        self.layers_button.setText("Layers…")
        self.layers_button.setObjectName("layersButton")
        self.layers_button.setToolTip("INT8 sensitivity per layer, and the layers kept in float")
        self.layers_button.setEnabled(False)
        self.layers_button.clicked.connect(self.sensitivityRequested)

        self.progress = QProgressBar()
        self.progress.setObjectName("precisionProgress")
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(False)
        self.progress.setFixedHeight(8)
        self.cancel_button = QToolButton()
        self.cancel_button.setText("Cancel")
        self.cancel_button.setObjectName("smallButton")
        self.cancel_button.setToolTip("Stop preparing the variant; the active one stays")
        self.cancel_button.clicked.connect(self.cancelRequested)
        # one line ending in "…" (the whole line in its tooltip): a long stage name must
        # not widen the panel, nor wrap out of the lines the panel has
        self.progress_text = ElidedLabel("")
        self.progress_text.setObjectName("plotSummary")
        self.progress_row = QWidget()
        pl = QHBoxLayout(self.progress_row)
        pl.setContentsMargins(0, 0, 0, 0)
        pl.addWidget(self.progress, 1)
        pl.addWidget(self.cancel_button)

        self.state_label = QLabel(active_text("fp32", None))
        self.state_label.setObjectName("precisionActive")
        self.state_label.setWordWrap(True)

        top = QHBoxLayout()
        top.setSpacing(6)
        top.addWidget(QLabel("Precision"))
        top.addWidget(segments, 1)
        state = QHBoxLayout()
        state.setSpacing(6)
        state.addWidget(self.state_label, 1)
        state.addWidget(self.layers_button, 0, Qt.AlignmentFlag.AlignTop)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(4)
        lay.addLayout(top)
        lay.addWidget(self.progress_row)
        lay.addWidget(self.progress_text)
        lay.addLayout(state)
        self._hide_progress()

    # ---- what the window tells it ----------------------------------------------------

    def show_active(
        self, precision: str, report: SensitivityReport | None, loading: bool = False
    ) -> None:
        """The variant in use; ``loading`` while the player builds its engine."""
        self.active = precision
        self._check(precision)
        self._hide_progress()
        text = active_text(precision, report)
        set_text(self.state_label, f"{text} · loading…" if loading else text)
        self.state_label.setToolTip(report_tip(report) if report is not None else "")
        self.layers_button.setEnabled(precision == "int8" and report is not None)

    def show_preparing(self, precision: str) -> None:
        """A variant is being prepared: its segment checked, progress at 0."""
        self._check(precision)
        self.progress.setValue(0)
        self.progress_row.show()
        self.progress_text.show()
        set_text(self.progress_text, f"Preparing {precision.upper()}…")

    def show_progress(self, text: str, fraction: float) -> None:
        if self.progress_row.isHidden():
            self.progress_row.show()
            self.progress_text.show()
        self.progress.setValue(round(1000 * max(0.0, min(1.0, fraction))))
        set_text(self.progress_text, f"{text[:1].upper()}{text[1:]} · {100 * fraction:.0f}%")

    def show_failed(self) -> None:
        """Back to the active variant (after a failure or a cancel)."""
        self._check(self.active)
        self._hide_progress()

    @property
    def checked(self) -> str:
        button = self.group.checkedButton()
        for name, b in self.buttons.items():
            if b is button:
                return name
        return self.active

    def _check(self, precision: str) -> None:
        button = self.buttons.get(precision)
        if button is not None and not button.isChecked():
            button.setChecked(True)

    def _hide_progress(self) -> None:
        self.progress_row.hide()
        self.progress_text.hide()
