"""The Batch window's options: the output folder, what runs (the main window's model,
task, precision, device and backend, shown as they will run), whether the annotated
videos are written, and where the batch runs. Every choice is remembered as it changes
(gui/common/settings.py, the batch/ keys)."""

from __future__ import annotations

from framelens.core.api import PipelineSettings
from framelens.gui.common.settings import Settings
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QWidget,
)

__all__ = ["RUN_MODES", "BatchOptions", "describe_settings", "ray_target"]

RUN_MODES = {
    "process": "This process",
    "ray-local": "Ray on this machine",
    "ray-cluster": "Ray cluster at",
}


def ray_target(mode: str, address: str) -> str | None:
    """run_batch's ``ray`` for a run mode: None (this process), "local" or the address."""
    if mode == "ray-local":
        return "local"
    if mode == "ray-cluster":
        return address.strip() or "auto"  # "auto": the cluster RAY_ADDRESS names
    return None


def describe_settings(settings: PipelineSettings | None) -> str:
    """ "yolox-nano · detect · FP32 · CPU · onnxruntime": what a batch will run."""
    if settings is None:
        return "no model chosen: choose one in the main window"
    device = settings.device.upper() if settings.device == "cpu" else settings.device
    parts = [settings.model.name, settings.model.task, settings.precision.upper(), device]
    return " · ".join([*parts, settings.backend])


class BatchOptions(QGroupBox):
    """Where the results go, what runs and where. ``browseRequested``: the output
    folder's Browse… button; ``outputEdited``: a folder typed in (not a focus change)."""

    browseRequested = Signal()
    outputEdited = Signal(str)

    def __init__(self, app_settings: Settings, parent: QWidget | None = None) -> None:
        super().__init__("Options", parent)
        self.app_settings = app_settings
        self.loaded = ""  # the output folder the window shows (set by it)
        form = QFormLayout(self)
        self.output_edit = QLineEdit()
        self.output_edit.setPlaceholderText("a folder for the results (created if missing)")
        self.output_edit.editingFinished.connect(self._on_output_edited)
        self.browse_button = QPushButton("Browse…")
        self.browse_button.clicked.connect(self.browseRequested.emit)
        out_row = QHBoxLayout()
        out_row.addWidget(self.output_edit, 1)
        out_row.addWidget(self.browse_button)
        form.addRow("Output folder", out_row)
        self.settings_label = QLabel()
        self.settings_label.setToolTip(
            "The main window's model, task, precision, device and backend: change them there"
        )
        self.settings_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        form.addRow("Analysis", self.settings_label)
        self.export_check = QCheckBox(
            "Export annotated video (one per input, beside its detections)"
        )
        form.addRow("", self.export_check)
        self.mode_combo = QComboBox()
        for key, text in RUN_MODES.items():
            self.mode_combo.addItem(text, key)
        self.mode_combo.setToolTip(
            "This process: one input after another, here. Ray: inputs (and segments of long "
            "ones) spread over workers on this machine or on a cluster"
        )
        self.address_edit = QLineEdit()
        self.address_edit.setPlaceholderText("ray://head:10001 (empty: the RAY_ADDRESS cluster)")
        self._mode_row = QHBoxLayout()
        self._mode_row.addWidget(self.mode_combo)
        self._mode_row.addWidget(self.address_edit, 1)
        self._mode_row.addStretch(1)  # none while the address shows (_on_mode)
        form.addRow("Runs on", self._mode_row)
        self._restore()

    def _restore(self) -> None:
        s = self.app_settings
        self.export_check.setChecked(s.batch_export_video)
        self.address_edit.setText(s.batch_address)
        self.mode_combo.setCurrentIndex(max(0, self.mode_combo.findData(s.batch_run_mode)))
        self._on_mode()
        self.output_edit.setText(s.batch_output)
        self.mode_combo.currentIndexChanged.connect(self._on_mode)
        self.export_check.toggled.connect(self.save)
        self.mode_combo.currentIndexChanged.connect(self.save)
        self.address_edit.editingFinished.connect(self.save)

    def save(self) -> None:
        s = self.app_settings
        s.batch_run_mode = self.mode
        s.batch_address = self.address_edit.text().strip()
        s.batch_export_video = self.export_check.isChecked()

    # ---- what is chosen -----------------------------------------------------------

    @property
    def output(self) -> str:
        return self.output_edit.text().strip()

    @property
    def mode(self) -> str:
        return str(self.mode_combo.currentData())

    @property
    def ray(self) -> str | None:
        return ray_target(self.mode, self.address_edit.text())

    @property
    def export_video(self) -> bool:
        return self.export_check.isChecked()

    def show_settings(self, settings: PipelineSettings | None) -> None:
        self.settings_label.setText(describe_settings(settings))

    def set_running(self, running: bool) -> None:
        for widget in (self.output_edit, self.browse_button, self.export_check, self.mode_combo):
            widget.setEnabled(not running)
        self.address_edit.setEnabled(not running)

    def _on_mode(self) -> None:
        cluster = self.mode == "ray-cluster"
        self.address_edit.setVisible(cluster)
        self._mode_row.setStretch(2, 0 if cluster else 1)

    def _on_output_edited(self) -> None:
        if self.output != self.loaded:  # typed, not a mere loss of focus
            self.outputEdited.emit(self.output)
