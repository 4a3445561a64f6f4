"""Analysis > Build TensorRT Engine…: a plan built before playing, with progress and a
Cancel that stops TensorRT's builder (and caches nothing).

What the build is for follows `framelens engines build`: the GPU here when the installed
flavour runs it, else every target the flavour can build for ahead of time (TensorRT-RTX
on a machine without an RTX GPU), or the targets typed in. INT8 calibrates on the video
that is open (else the bundled sample).
"""

from __future__ import annotations

import threading

from framelens.core.api import (
    Cancelled,
    EngineBuild,
    build_engine,
    error_message,
    tensorrt_flavours,
)
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

__all__ = ["EngineBuildDialog"]


class _BuildJob(QObject):
    progressed = Signal(str, float)
    finished = Signal(object)  # EngineBuild
    failed = Signal(str)
    cancelled = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.cancel = threading.Event()
        self.worker: threading.Thread | None = None

    def start(self, model: str, precision: str, calibration: str, targets: str | None) -> None:
        self.cancel.clear()
        self.worker = threading.Thread(
            target=self._run, args=(model, precision, calibration, targets), daemon=True,
            name="fl-engine-build",
        )  # fmt: skip
        self.worker.start()

    def _run(self, model: str, precision: str, calibration: str, targets: str | None) -> None:
        try:
            built = build_engine(
                model, precision, calibration=calibration, targets=targets,
                on_progress=self.progressed.emit, cancel=self.cancel,
            )  # fmt: skip
        except Cancelled:
            self.cancelled.emit()
        except Exception as exc:  # one line for the user, whatever failed
            self.failed.emit(error_message(exc))
        else:
            self.finished.emit(built)


class EngineBuildDialog(QDialog):
    """Model, precision and targets; Build; a progress bar and Cancel while it builds."""

    def __init__(
        self, models: list[str], model: str, calibration: str, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Build TensorRT Engine")
        self.setMinimumWidth(520)
        self._calibration = calibration
        self.result_build: EngineBuild | None = None
        flavours = tensorrt_flavours()
        self.model_combo = QComboBox()
        self.model_combo.addItems(models)
        if model in models:
            self.model_combo.setCurrentText(model)
        self.precision_combo = QComboBox()
        for precision in ("fp32", "fp16", "int8"):  # written as the rest of the window does
            self.precision_combo.addItem(precision.upper(), precision)
        self.targets_edit = QLineEdit()
        aot = next((f for f in flavours if f.ahead_of_time), None)
        self.targets_edit.setPlaceholderText(
            f"this GPU, or all of: {', '.join(aot.targets)}" if aot else "this GPU"
        )
        self.flavour_label = QLabel(
            ", ".join(f.label for f in flavours) or "TensorRT is not installed"
        )
        form = QFormLayout()
        form.addRow("TensorRT", self.flavour_label)
        form.addRow("Model", self.model_combo)
        form.addRow("Precision", self.precision_combo)
        form.addRow("Targets", self.targets_edit)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setValue(0)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        buttons = QDialogButtonBox()
        self.build_button = QPushButton("Build")
        self.build_button.setDefault(True)
        self.build_button.setEnabled(bool(flavours))
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.close_button = QPushButton("Close")
        for b in (self.build_button, self.cancel_button):
            buttons.addButton(b, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self.close_button, QDialogButtonBox.ButtonRole.RejectRole)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        layout.addWidget(buttons)
        self.job = _BuildJob()
        self.job.progressed.connect(self._on_progress, Qt.ConnectionType.QueuedConnection)
        self.job.finished.connect(self._on_finished, Qt.ConnectionType.QueuedConnection)
        self.job.failed.connect(self._on_failed, Qt.ConnectionType.QueuedConnection)
        self.job.cancelled.connect(self._on_cancelled, Qt.ConnectionType.QueuedConnection)
        self.build_button.clicked.connect(self.start)
        self.cancel_button.clicked.connect(self.cancel)
        self.close_button.clicked.connect(self.reject)
        if not flavours:
            self.status.setText("Install TensorRT-RTX (RTX GPUs) or TensorRT: installer/gpu.sh.")

    @property
    def building(self) -> bool:
        return self.job.worker is not None and self.job.worker.is_alive()

    def start(self) -> None:
        if self.building:
            return
        self.result_build = None
        self._busy(True)
        self.status.setText("Starting…")
        self.progress.setValue(0)
        self.job.start(
            self.model_combo.currentText(),
            str(self.precision_combo.currentData()),
            self._calibration,
            self.targets_edit.text().strip() or None,
        )

    def cancel(self) -> None:
        if self.building:
            self.job.cancel.set()  # the builder's progress monitor stops at its next step
            self.status.setText("Cancelling…")
            self.cancel_button.setEnabled(False)

    def _busy(self, busy: bool) -> None:
        for w in (self.build_button, self.model_combo, self.precision_combo, self.targets_edit):
            w.setEnabled(not busy)
        self.cancel_button.setEnabled(busy)
        self.close_button.setEnabled(not busy)

    def _on_progress(self, text: str, fraction: float) -> None:
        self.progress.setValue(round(1000 * fraction))
        if not self.job.cancel.is_set():
            self.status.setText(text)

    def _on_finished(self, built: EngineBuild) -> None:
        self._busy(False)
        self.progress.setValue(1000)
        self.result_build = built
        self.status.setText(built.line())

    def _on_failed(self, message: str) -> None:
        self._busy(False)
        self.progress.setValue(0)
        self.status.setText(f"Not built: {message}")

    def _on_cancelled(self) -> None:
        self._busy(False)
        self.progress.setValue(0)
        self.status.setText("Cancelled: nothing was cached.")

    def reject(self) -> None:
        if self.building:  # Esc or the window's close button while building: cancel first
            self.cancel()
            return
        super().reject()
