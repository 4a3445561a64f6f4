"""Dialogs: export, open URL, open camera, import an ONNX model."""

from __future__ import annotations

import os
from pathlib import Path

from framelens.core.api import (
    LAYOUTS,
    TASK_OF_LAYOUT,
    CameraDevice,
    ExportRequest,
    default_outputs,
    describe_outputs,
)
from framelens.gui.common.controller import Controller
from framelens.gui.common.file_dialogs import (
    DETECTIONS_FILTER,
    EXPORT_VIDEO_FILTER,
    LABELS_FILTER,
    ONNX_FILTER,
    open_file,
    save_file,
)
from PySide6.QtCore import Qt, Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)


def export_message(paths: list[str]) -> str:
    """What File > Export says when done: every output written, one per line."""
    lines = describe_outputs(paths)
    if len(lines) == 1:
        return f"Saved {lines[0]}"
    return "\n".join([f"Saved {len(lines)} files:", *(f"  {line}" for line in lines)])


def _path_row(edit: QLineEdit, browse: QPushButton) -> QWidget:
    row = QWidget()
    lay = QHBoxLayout(row)
    lay.setContentsMargins(0, 0, 0, 0)
    lay.addWidget(edit, 1)
    lay.addWidget(browse)
    return row


class ExportDialog(QDialog):
    """Output paths and frame range; runs the export with progress and cancel.

    The export itself runs in the controller's background job, so the window
    stays responsive; closing the dialog while it runs cancels it.
    """

    def __init__(
        self,
        controller: Controller,
        source: str,
        frame_count: int | None,
        current: int = 0,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Export annotated video")
        self.setMinimumWidth(560)
        self.controller = controller
        self.source = source
        self.result_path: str | None = None  # the first output written
        self.result_paths: list[str] = []  # every output written, in order
        # frames numbered as the transport counts them: 1 to the count ("501/1394")
        last = max(1, frame_count or 1)

        self.video_check = QCheckBox("Annotated video")
        self.video_check.setChecked(True)
        video_path, detections_path = default_outputs(source)
        self.video_edit = QLineEdit(video_path)
        video_browse = QPushButton("Browse…")
        video_browse.clicked.connect(self._browse_video)
        self.dets_check = QCheckBox("Detections")
        self.dets_edit = QLineEdit(detections_path)
        self.dets_edit.setEnabled(False)
        dets_browse = QPushButton("Browse…")
        dets_browse.clicked.connect(self._browse_dets)
        self.dets_check.toggled.connect(self.dets_edit.setEnabled)
        self.video_check.toggled.connect(self.video_edit.setEnabled)

        outputs = QGroupBox("Outputs")
        grid = QGridLayout(outputs)
        grid.addWidget(self.video_check, 0, 0)
        grid.addWidget(_path_row(self.video_edit, video_browse), 0, 1)
        grid.addWidget(self.dets_check, 1, 0)
        grid.addWidget(_path_row(self.dets_edit, dets_browse), 1, 1)

        self.start_spin = QSpinBox()
        self.end_spin = QSpinBox()
        for spin in (self.start_spin, self.end_spin):
            spin.setRange(1, last if frame_count else 10_000_000)
            spin.setAccelerated(True)
        self.end_spin.setValue(last)
        from_current = QPushButton("From current frame")
        from_current.clicked.connect(lambda: self.start_spin.setValue(current + 1))
        whole = QPushButton("Whole video")
        whole.clicked.connect(lambda: self._set_range(1, last))
        rng = QGroupBox("Frame range (inclusive)")
        rl = QHBoxLayout(rng)
        rl.addWidget(QLabel("From"))
        rl.addWidget(self.start_spin)
        rl.addWidget(QLabel("to"))
        rl.addWidget(self.end_spin)
        rl.addStretch(1)
        rl.addWidget(from_current)
        rl.addWidget(whole)

        self.progress = QProgressBar()
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.status = QLabel("Ready.")
        self.status.setObjectName("dialogStatus")
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.buttons = QDialogButtonBox()
        self.export_button = self.buttons.addButton(
            "Export", QDialogButtonBox.ButtonRole.AcceptRole
        )
        self.cancel_button = self.buttons.addButton(QDialogButtonBox.StandardButton.Close)
        self.export_button.clicked.connect(self.start)
        self.cancel_button.clicked.connect(self._cancel_or_close)
        self.export_button.setDefault(True)

        lay = QVBoxLayout(self)
        lay.addWidget(outputs)
        lay.addWidget(rng)
        lay.addWidget(self.progress)
        lay.addWidget(self.status)
        lay.addWidget(self.buttons)

        controller.exportProgress.connect(self._on_progress)
        controller.exportFinished.connect(self._on_finished)
        controller.exportFailed.connect(self._on_failed)
        self._running = False

    def _set_range(self, start: int, end: int) -> None:
        self.start_spin.setValue(start)
        self.end_spin.setValue(end)

    def request(self) -> ExportRequest:
        start, end = self.start_spin.value() - 1, self.end_spin.value() - 1  # indexes

        def path(edit: QLineEdit, wanted: bool) -> str | None:
            text = edit.text().strip()
            # ~ is home; a trailing "/" stays (DIR/: one PNG per frame)
            return os.path.expanduser(text) if wanted and text else None

        return ExportRequest(
            source=self.source,
            video_path=path(self.video_edit, self.video_check.isChecked()),
            detections_path=path(self.dets_edit, self.dets_check.isChecked()),
            start=start,
            count=max(1, end - start + 1),
        )

    @Slot()
    def start(self) -> None:
        req = self.request()
        if not req.video_path and not req.detections_path:
            self.status.setText("Choose at least one output.")
            return
        if self.end_spin.value() < self.start_spin.value():
            self.status.setText("The range ends before it starts.")
            return
        outputs = [p for p in (req.video_path, req.detections_path) if p]
        resolved = [Path(p).resolve() for p in outputs]
        if Path(self.source).resolve() in resolved:
            self.status.setText("An output would replace the video it is made from.")
            return
        if len(set(resolved)) < len(resolved):
            self.status.setText("The video and the detections need two different names.")
            return
        taken = [p for p in outputs if Path(p).exists()]
        if taken and not self._may_replace(taken):
            return
        for path in (req.video_path, req.detections_path):  # a folder typed in is made
            if path:
                try:
                    Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    self.status.setText(
                        f"Cannot create the folder of {path}: {exc.strerror or exc}"
                    )
                    return
        self._set_running(True)
        self.progress.setRange(0, req.count or 0)
        self.progress.setValue(0)
        self.status.setText("Exporting…")
        self.controller.start_export(req)

    def _may_replace(self, paths: list[str]) -> bool:
        """Asks before files that exist are replaced, as a file dialog asks."""
        names = "\n".join(paths)
        box = QMessageBox(
            QMessageBox.Icon.Question,
            "Replace files?",
            f"These files exist already:\n{names}\n\nExporting replaces them.",
            QMessageBox.StandardButton.Cancel,
            self,
        )
        replace = box.addButton("Replace", QMessageBox.ButtonRole.AcceptRole)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.exec()
        return box.clickedButton() is replace

    def _set_running(self, running: bool) -> None:
        self._running = running
        self.export_button.setEnabled(not running)
        self.cancel_button.setText("Cancel" if running else "Close")

    @Slot()
    def _cancel_or_close(self) -> None:
        if self._running:
            self.status.setText("Cancelling…")
            self.controller.cancel_export()
        else:
            self.reject()

    def reject(self) -> None:
        if self._running:  # Esc or the close button while exporting: cancel first
            self.controller.cancel_export()
        super().reject()

    @Slot(int, int)
    def _on_progress(self, done: int, total: int) -> None:
        if total > 0:
            self.progress.setRange(0, total)
        self.progress.setValue(done)
        self.status.setText(f"Exporting… frame {done} of {total}" if total else f"{done} frames")

    @Slot(list)
    def _on_finished(self, paths: list[str]) -> None:
        self._set_running(False)
        self.result_paths = list(paths)
        self.result_path = paths[0] if paths else None
        self.progress.setValue(self.progress.maximum())
        self.status.setText(export_message(paths))

    @Slot(str)
    def _on_failed(self, message: str) -> None:
        self._set_running(False)
        self.progress.setValue(0)
        self.status.setText(
            "Cancelled; nothing was written."
            if message == "cancelled"
            else f"Export failed: {message}"
        )

    def _browse_video(self) -> None:
        path = save_file(self, "Export video", self.video_edit.text(), EXPORT_VIDEO_FILTER)
        if path:
            self.video_edit.setText(path)

    def _browse_dets(self) -> None:
        path = save_file(self, "Export detections", self.dets_edit.text(), DETECTIONS_FILTER)
        if path:
            self.dets_edit.setText(path)
            self.dets_check.setChecked(True)


class OpenUrlDialog(QDialog):
    """Asks for an RTSP/HTTP(S) stream or a file URL, offering recent ones."""

    def __init__(self, recent: list[str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Open stream")
        self.setMinimumWidth(520)
        self.combo = QComboBox()
        self.combo.setEditable(True)
        self.combo.addItems([r for r in recent if "://" in r])
        self.combo.setCurrentText("")
        edit = self.combo.lineEdit()
        if edit is not None:
            edit.setPlaceholderText("rtsp://camera.local/stream  or  https://…/video.mp4")
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Open | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form = QFormLayout(self)
        form.addRow("URL", self.combo)
        form.addRow(buttons)

    @property
    def url(self) -> str:
        return self.combo.currentText().strip()


class OpenCameraDialog(QDialog):
    """The cameras present, by name (Linux: /dev/videoN as /sys/class/video4linux names
    them); an index, a device path or a URL can be typed instead, also when none is found."""

    def __init__(self, cameras: list[CameraDevice], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Open camera")
        self.setMinimumWidth(460)
        self.cameras = list(cameras)
        self.list = QListWidget()
        for camera in self.cameras:
            item = QListWidgetItem(camera.label)
            item.setToolTip(camera.label)
            self.list.addItem(item)
        self.list.itemDoubleClicked.connect(lambda _item: self.accept())
        self.notice = QLabel(
            "No camera was found on this computer. Type a camera index, a device path "
            "or a stream URL below."
        )
        self.notice.setObjectName("dialogStatus")
        self.notice.setWordWrap(True)
        self.edit = QLineEdit()
        self.edit.setPlaceholderText("or type an index (0), /dev/video0 or a URL")
        self.edit.textEdited.connect(self._on_typed)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Open | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        if self.cameras:
            lay.addWidget(QLabel("Cameras on this computer:"))
        lay.addWidget(self.list if self.cameras else self.notice)
        self.list.setVisible(bool(self.cameras))
        self.notice.setVisible(not self.cameras)
        lay.addWidget(self.edit)
        lay.addWidget(buttons)
        if self.cameras:
            self.list.setCurrentRow(0)
        else:
            self.edit.setFocus()

    def _on_typed(self, text: str) -> None:
        if text:  # what is typed is what opens: no camera stays marked
            self.list.clearSelection()

    @property
    def spec(self) -> str:
        """What to open: the text typed, else the camera chosen ("" when neither)."""
        typed = self.edit.text().strip()
        if typed:
            return typed
        row = self.list.currentRow()
        selected = self.list.selectedItems()
        return self.cameras[row].path if selected and 0 <= row < len(self.cameras) else ""


class ImportModelDialog(QDialog):
    """Layout, task and labels for an ONNX model FrameLens could not recognise alone."""

    AUTO = "auto-detect"

    def __init__(self, path: str = "", message: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Import ONNX model")
        self.setMinimumWidth(560)
        self.path_edit = QLineEdit(path)
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse_model)
        self.layout_combo = QComboBox()
        self.layout_combo.addItems([self.AUTO, *LAYOUTS])
        self.task_combo = QComboBox()
        self.task_combo.addItems([self.AUTO, *sorted(set(TASK_OF_LAYOUT.values()))])
        self.labels_edit = QLineEdit()
        self.labels_edit.setPlaceholderText("optional: one class name per line (default: COCO)")
        labels_browse = QPushButton("Browse…")
        labels_browse.clicked.connect(self._browse_labels)
        self.message = QLabel(message)
        self.message.setObjectName("dialogError")
        self.message.setWordWrap(True)
        self.message.setVisible(bool(message))
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form = QFormLayout(self)
        form.addRow(self.message)
        form.addRow("Model file", _path_row(self.path_edit, browse))
        form.addRow("Output layout", self.layout_combo)
        form.addRow("Task", self.task_combo)
        form.addRow("Labels file", _path_row(self.labels_edit, labels_browse))
        form.addRow(buttons)

    def show_message(self, message: str) -> None:
        self.message.setText(message)
        self.message.setVisible(bool(message))

    @property
    def model_path(self) -> str:
        return self.path_edit.text().strip()

    @property
    def layout_name(self) -> str | None:
        text = self.layout_combo.currentText()
        return None if text == self.AUTO else text

    @property
    def task(self) -> str | None:
        text = self.task_combo.currentText()
        return None if text == self.AUTO else text

    @property
    def labels_file(self) -> str | None:
        return self.labels_edit.text().strip() or None

    def _browse_model(self) -> None:
        start = str(Path(self.model_path).parent) if self.model_path else ""
        path = open_file(self, "Import ONNX model", start, ONNX_FILTER)
        if path:
            self.path_edit.setText(path)

    def _browse_labels(self) -> None:
        path = open_file(self, "Labels file", "", LABELS_FILTER)
        if path:
            self.labels_edit.setText(path)
