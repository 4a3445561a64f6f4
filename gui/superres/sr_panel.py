"""The side panel's super-resolution sections: the view (and the original's enlargement),
PSNR of the frame on demand, and for detectors "Enlarge detections" (which model, which
classes). They only show and ask; the window does the rest."""

from __future__ import annotations

from collections.abc import Iterable

from framelens.core.api import FrameQuality, ModelSpec
from framelens.gui.superres.sr_canvas import MODE_LABELS, MODES
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QGridLayout,
    QGroupBox,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

__all__ = ["ORIGINAL_FILTERS", "CropPanel", "SrPanel", "quality_text"]

ORIGINAL_FILTERS = {"bicubic": "Bicubic", "nearest": "Nearest neighbour"}
"""How the original is enlarged to the output's size for the wipe and side by side."""


def quality_text(q: FrameQuality, model: str, precision: str) -> str:
    """The result of "Measure PSNR of this frame", a few lines of rich text."""
    gain = q.psnr_gain_db
    verdict = "the model is closer" if gain > 0 else "bicubic is closer on this frame"
    return (
        f"<b>{model} · {precision.upper()}</b>: PSNR <b>{q.model.psnr_db:.2f} dB</b>, "
        f"SSIM <b>{q.model.ssim:.4f}</b><br>"
        f"bicubic: PSNR {q.bicubic.psnr_db:.2f} dB, SSIM {q.bicubic.ssim:.4f}<br>"
        f"{gain:+.2f} dB ({verdict}) · the frame ({q.width}×{q.height}) shrunk ×{q.scale} "
        f"and upscaled again"
    )


class SrPanel(QGroupBox):
    """View mode, the original's enlargement, and PSNR of the frame on demand."""

    modeChosen = Signal(str)
    filterChosen = Signal(str)
    measureRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Super-resolution", parent)
        self.view_combo = QComboBox()
        for i, mode in enumerate(MODES):
            self.view_combo.addItem(MODE_LABELS[mode], mode)
            self.view_combo.setItemData(i, f"Alt+{i + 1}", Qt.ItemDataRole.ToolTipRole)
        self.view_combo.activated.connect(
            lambda i: self.modeChosen.emit(str(self.view_combo.itemData(i)))
        )
        self.filter_combo = QComboBox()
        for key, label in ORIGINAL_FILTERS.items():
            self.filter_combo.addItem(label, key)
        self.filter_combo.setToolTip("How the original is enlarged to the upscaled size")
        self.filter_combo.activated.connect(
            lambda i: self.filterChosen.emit(str(self.filter_combo.itemData(i)))
        )
        self.measure_button = QPushButton("Measure PSNR of this frame")
        self.measure_button.setToolTip(
            "Shrink the frame by the scale, upscale it with the model and with bicubic, "
            "and measure both against the frame (Ctrl+M)"
        )
        self.measure_button.clicked.connect(self.measureRequested)
        self.quality_label = QLabel("")
        self.quality_label.setObjectName("plotSummary")
        self.quality_label.setWordWrap(True)
        self.quality_label.setTextFormat(Qt.TextFormat.RichText)
        self.quality_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        grid = QGridLayout()
        grid.addWidget(QLabel("View"), 0, 0)
        grid.addWidget(self.view_combo, 0, 1)
        grid.addWidget(QLabel("Original"), 1, 0)
        grid.addWidget(self.filter_combo, 1, 1)
        grid.setColumnStretch(1, 1)
        lay = QVBoxLayout(self)
        lay.addLayout(grid)
        lay.addWidget(self.measure_button)
        lay.addWidget(self.quality_label)

    def show_mode(self, mode: str) -> None:
        self._select(self.view_combo, mode)

    def show_filter(self, key: str) -> None:
        self._select(self.filter_combo, key)

    @staticmethod
    def _select(combo: QComboBox, value: str) -> None:
        i = combo.findData(value)
        if i >= 0 and i != combo.currentIndex():
            combo.blockSignals(True)
            combo.setCurrentIndex(i)
            combo.blockSignals(False)


class CropPanel(QGroupBox):
    """Enlarge detections: on/off, the super-resolution model, the classes enlarged."""

    enabledChanged = Signal(bool)
    modelChosen = Signal(str)
    classesChanged = Signal(object)  # frozenset[str]: class names

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Enlarge detections", parent)
        self.enable_check = QCheckBox("Upscale the boxes into a strip")
        self.enable_check.setToolTip(
            "Cut out the detections of the chosen classes and upscale them with a "
            "super-resolution model (best 8 by score)"
        )
        self.enable_check.toggled.connect(self.enabledChanged)
        self.model_combo = QComboBox()
        self.model_combo.activated.connect(
            lambda i: self.modelChosen.emit(str(self.model_combo.itemData(i)))
        )
        self.class_list = QListWidget()
        self.class_list.setMaximumHeight(110)
        self.class_list.itemChanged.connect(lambda _item: self.classesChanged.emit(self.classes()))
        lay = QVBoxLayout(self)
        lay.addWidget(self.enable_check)
        row = QGridLayout()
        row.addWidget(QLabel("Model"), 0, 0)
        row.addWidget(self.model_combo, 0, 1)
        row.setColumnStretch(1, 1)
        lay.addLayout(row)
        lay.addWidget(self.class_list)

    def set_models(self, models: dict[str, ModelSpec], current: str) -> None:
        self.model_combo.blockSignals(True)
        self.model_combo.clear()
        for name, spec in models.items():
            self.model_combo.addItem(f"{name} (×{spec.scale})", name)
        i = self.model_combo.findData(current)
        self.model_combo.setCurrentIndex(max(0, i))
        self.model_combo.blockSignals(False)

    def model(self) -> str:
        return str(self.model_combo.currentData() or "")

    def set_labels(self, labels: Iterable[str], chosen: Iterable[str]) -> None:
        """The detector's classes, ``chosen`` checked."""
        wanted = set(chosen)
        self.class_list.blockSignals(True)
        self.class_list.clear()
        for name in dict.fromkeys(labels):  # unique, in the model's order
            item = QListWidgetItem(name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if name in wanted else Qt.CheckState.Unchecked)
            self.class_list.addItem(item)
        self.class_list.blockSignals(False)

    def classes(self) -> frozenset[str]:
        items = (self.class_list.item(i) for i in range(self.class_list.count()))
        return frozenset(it.text() for it in items if it.checkState() == Qt.CheckState.Checked)
