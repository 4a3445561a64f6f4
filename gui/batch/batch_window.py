"""File > Batch Analysis…: a folder of footage (or many) through the model, with every
input's state, progress, fps and error; cancellable, resumable.

The user adds files and folders (buttons or a drop; folders are expanded to their
videos at once, as run_batch discovers them), picks the output folder (created if
missing), chooses whether the annotated videos are written too and where the batch runs
(this process, Ray on this machine, or a Ray cluster), and presses Start. The model,
task, precision, device and backend are the main window's, shown here as they will run.
The batch runs on a thread (gui/batch/batch_runner.py); its events update the table
(gui/batch/batch_table.py), the overall progress bar and the summary. Cancel stops it: what
finished is kept, the input in flight leaves no file, and the window says so. Starting
again into the same folder resumes: inputs done before show "skipped". Opening a folder
that holds a batch shows its manifest's states. Closing the window hides it; the batch
goes on (File > Batch Analysis… shows it again); quitting FrameLens cancels it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from framelens.core.api import (
    BatchSummary,
    FrameLensError,
    InputProgress,
    PipelineSettings,
    discover_inputs,
    error_message,
    read_manifest,
)
from framelens.gui.batch.batch_options import BatchOptions
from framelens.gui.batch.batch_runner import BatchRequest, BatchRunner
from framelens.gui.batch.batch_table import (
    COLUMNS,
    ERROR,
    PROGRESS,
    BatchTableModel,
    ErrorDelegate,
    ProgressDelegate,
)
from framelens.gui.common.file_dialogs import VIDEO_FILTER, open_files_telling, open_folder
from framelens.gui.common.folder_dialog import choose_folder
from framelens.gui.common.settings import Settings
from framelens.gui.common.widgets import format_time, icon
from PySide6.QtCore import Qt, QTimer, Signal, Slot
from PySide6.QtGui import QCloseEvent, QDragEnterEvent, QDropEvent, QKeySequence, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

__all__ = ["BatchWindow", "summary_text"]

SettingsFn = Callable[[], PipelineSettings | None]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def summary_text(summary: BatchSummary) -> str:
    """What the window says when a batch ends: what was done, and what was kept."""
    took = format_time(summary.wall_s)
    if summary.cancelled:
        kept = summary.done + summary.skipped
        unfinished = len(summary.inputs) - kept - summary.failed
        return (
            f"Cancelled after {took}: kept the outputs of {_plural(kept, 'finished input')}; "
            f"{_plural(unfinished, 'unfinished input')} left no files. "
            "Start again to resume."
        )
    parts = [f"{summary.done} analysed"]
    if summary.skipped:
        parts.append(f"{summary.skipped} skipped (done before)")
    if summary.failed:
        parts.append(f"{summary.failed} failed")
    return f"Done: {', '.join(parts)} · {summary.frames} frames in {took} ({summary.fps:.1f} fps)"


class BatchWindow(QMainWindow):
    """The batch's inputs, options and progress. ``current_settings`` gives the main
    window's pipeline settings (model, precision, device) at the time of Start."""

    browseRequested = Signal(str)  # the output folder: open the results browser on it
    started = Signal()  # a batch starts (the main window pauses its player)
    ended = Signal(str)  # how it ended, in one line (the main window's status bar too)

    def __init__(
        self,
        current_settings: SettingsFn,
        app_settings: Settings,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowFlag(Qt.WindowType.Window)
        self.setWindowTitle("FrameLens — Batch Analysis")
        self.setWindowIcon(icon("framelens"))
        self.setAcceptDrops(True)
        self.current_settings = current_settings
        self.app_settings = app_settings
        self.summary: BatchSummary | None = None  # of the last batch that ended
        self.runner = BatchRunner(self)
        self.runner.progressed.connect(self._on_progress)
        self.runner.finished.connect(self._on_finished)
        self.runner.failed.connect(self._on_failed)
        self._started_at = 0.0
        self._timer = QTimer(self)  # the elapsed time in the summary, while running
        self._timer.setInterval(1000)
        self._timer.timeout.connect(self._show_running)

        self.model = BatchTableModel(self)
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.addWidget(self._build_inputs(), 1)
        layout.addWidget(self._build_options())
        layout.addLayout(self._build_progress())
        self.setCentralWidget(central)

        self.error_box = QMessageBox(self)
        self.error_box.setIcon(QMessageBox.Icon.Warning)
        self.error_box.setWindowTitle("Batch Analysis")
        self.error_box.setWindowModality(Qt.WindowModality.NonModal)
        self._restore()
        self.resize(980, 640)

    # ---- construction ---------------------------------------------------------------

    def _build_inputs(self) -> QGroupBox:
        box = QGroupBox("Inputs")
        self.add_files_button = QPushButton(icon("open"), "Add Files…")
        self.add_folder_button = QPushButton(icon("open"), "Add Folder…")
        self.remove_button = QPushButton("Remove")
        self.clear_button = QPushButton("Clear")
        self.add_files_button.clicked.connect(self._choose_files)
        self.add_folder_button.clicked.connect(self._choose_folder)
        self.remove_button.clicked.connect(self._remove_selected)
        self.clear_button.clicked.connect(self.clear_inputs)
        self.remove_button.setShortcut(QKeySequence.StandardKey.Delete)
        hint = QLabel("or drop files and folders here")
        hint.setObjectName("dialogStatus")
        row = QHBoxLayout()
        for button in (self.add_files_button, self.add_folder_button):
            row.addWidget(button)
        row.addWidget(hint)
        row.addStretch(1)
        row.addWidget(self.remove_button)
        row.addWidget(self.clear_button)

        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.setItemDelegateForColumn(PROGRESS, ProgressDelegate(self.table))
        self.table.setItemDelegateForColumn(ERROR, ErrorDelegate(self.table))
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setAlternatingRowColors(True)
        self.table.verticalHeader().setVisible(False)
        self.table.setWordWrap(False)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
        for col in range(1, len(COLUMNS) - 1):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        for col, width in enumerate((250, 80, 150, 64, 80)):
            self.table.setColumnWidth(col, width)
        layout = QVBoxLayout(box)
        layout.addLayout(row)
        layout.addWidget(self.table, 1)
        return box

    def _build_options(self) -> BatchOptions:
        self.options = options = BatchOptions(self.app_settings)
        options.browseRequested.connect(self._choose_output)
        options.outputEdited.connect(self._load_manifest)
        return options

    def _build_progress(self) -> QVBoxLayout:
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setValue(0)
        self.progress.setFormat("%p%")
        self.summary_label = QLabel("Add videos or folders, choose the output folder, Start.")
        self.summary_label.setObjectName("dialogStatus")
        self.summary_label.setWordWrap(True)
        self.summary_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.start_button = QPushButton(icon("play"), "Start")
        self.start_button.setDefault(True)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.browse_button = QPushButton("Browse Results…")
        self.browse_button.setEnabled(False)
        self.start_button.clicked.connect(self.start)
        self.cancel_button.clicked.connect(self.cancel)
        self.browse_button.clicked.connect(lambda: self.browseRequested.emit(self.options.output))
        buttons = QHBoxLayout()
        buttons.addWidget(self.summary_label, 1)
        for button in (self.browse_button, self.cancel_button, self.start_button):
            buttons.addWidget(button)
        layout = QVBoxLayout()
        layout.addWidget(self.progress)
        layout.addLayout(buttons)
        return layout

    def _restore(self) -> None:
        if self.options.output:  # the last batch's folder, and what its manifest holds
            self._load_manifest(self.options.output)
        self.refresh_settings()

    # ---- inputs ------------------------------------------------------------------------

    def add_inputs(self, paths: Iterable[str]) -> int:
        """Files and folders (expanded to their videos) added to the table; how many new."""
        paths = [p for p in paths if p]
        if not paths:
            return 0
        try:
            files = discover_inputs(paths)
        except FrameLensError as exc:
            self.show_error(error_message(exc))
            return 0
        if not files:
            self.show_error(f"no videos in {', '.join(paths)}")
            return 0
        added = self.model.add_paths(files)
        self._show_idle()
        return added

    def clear_inputs(self) -> None:
        if not self.runner.running:
            self.model.clear()
            self._show_idle()

    def _remove_selected(self) -> None:
        if not self.runner.running:
            self.model.remove_rows([i.row() for i in self.table.selectionModel().selectedRows()])
            self._show_idle()

    def _choose_files(self) -> None:
        paths, left_out = open_files_telling(
            self, "Add videos", self.app_settings.last_dir, VIDEO_FILTER
        )
        if left_out:  # Qt's dialog drops them silently
            self.show_error(f"Add Videos {left_out}")
        if paths:
            self.app_settings.last_dir = str(Path(paths[0]).parent)
            self.add_inputs(paths)

    def _choose_folder(self) -> None:
        folder = open_folder(self, "Add a folder of videos", self.app_settings.last_dir)
        if folder:
            self.app_settings.last_dir = folder
            self.add_inputs([folder])

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if event.mimeData().hasUrls() and not self.runner.running:
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        paths = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if paths and not self.runner.running:
            self.add_inputs(paths)
            event.acceptProposedAction()

    # ---- the output folder -----------------------------------------------------------

    def set_output(self, folder: str) -> None:
        """Use ``folder``; a batch already there shows its states (its manifest)."""
        self.options.output_edit.setText(folder)
        self._load_manifest(folder)

    def _choose_output(self) -> None:
        start = self.options.output or self.app_settings.last_dir
        folder = choose_folder(self, "Batch output folder", start)
        if folder:
            self.set_output(folder)

    def _load_manifest(self, folder: str) -> None:
        self.options.loaded = folder
        if self.runner.running or not folder or not (Path(folder) / "manifest.json").is_file():
            self.browse_button.setEnabled(False)
            return
        try:
            states = read_manifest(folder)
        except FrameLensError as exc:
            self.show_error(error_message(exc))
            return
        self.model.reset_states()
        for state in states:
            self.model.apply(state)
        self.browse_button.setEnabled(True)
        counts = self.model.counts()
        self.progress.setValue(round(self.model.fraction() * 1000))
        done = counts["done"] + counts["skipped"]
        failed = f", {counts['failed']} failed" if counts["failed"] else ""
        self.summary_label.setText(
            f"This folder holds an earlier batch: {done} of {len(states)} done{failed}. "
            "Start resumes it: what is done is skipped."
        )

    # ---- running ---------------------------------------------------------------------

    def refresh_settings(self) -> None:
        """Show the main window's settings as a batch would run them now."""
        self.options.show_settings(self.current_settings())

    def request(self) -> BatchRequest | None:
        """What Start would run, or None (with the reason shown)."""
        settings = self.current_settings()
        self.refresh_settings()
        output = self.options.output
        if not self.model.rows:
            self.show_error("add videos or folders first")
            return None
        if not output:
            self.show_error("choose the output folder first")
            return None
        if settings is None:
            self.show_error("choose a model in the main window first")
            return None
        return BatchRequest(
            tuple(self.model.paths()),
            os.path.abspath(os.path.expanduser(output)),
            settings,
            export_video=self.options.export_video,
            ray=self.options.ray,
        )

    @Slot()
    def start(self) -> bool:
        """Start the batch (True), or say why not."""
        if self.runner.running:
            return False
        request = self.request()
        if request is None:
            return False
        try:
            Path(request.output_dir).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self.show_error(f"cannot create {request.output_dir}: {exc.strerror or exc}")
            return False
        self._save(request)
        self.summary = None
        self.model.reset_states()
        self.progress.setValue(0)
        self._started_at = time.monotonic()
        self.runner.start(request)
        self.started.emit()
        self._set_running(True)
        self._show_running()
        self._timer.start()
        return True

    @Slot()
    def cancel(self) -> None:
        if self.runner.running:
            self.runner.cancel()
            self.cancel_button.setEnabled(False)
            self.summary_label.setText("Cancelling: the input in progress is being stopped…")

    def _save(self, request: BatchRequest) -> None:
        self.app_settings.batch_output = request.output_dir
        self.options.save()
        self.app_settings.sync()

    def _set_running(self, running: bool) -> None:
        for widget in (
            self.add_files_button,
            self.add_folder_button,
            self.remove_button,
            self.clear_button,
            self.start_button,
        ):
            widget.setEnabled(not running)
        self.options.set_running(running)
        self.cancel_button.setEnabled(running)
        self.browse_button.setEnabled(not running and self.summary is not None)

    @Slot(object)
    def _on_progress(self, event: InputProgress) -> None:
        self.model.apply(event)
        self.progress.setValue(round(self.model.fraction() * 1000))
        if not self.runner.cancelling:
            self._show_running()

    def _show_running(self) -> None:
        if not self.runner.running or self.runner.cancelling:
            return
        counts = self.model.counts()
        total = len(self.model.rows)
        finished = counts["done"] + counts["skipped"]
        parts = [f"{finished} of {total} done"]
        if counts["pending"] and not counts["running"] and not counts["done"]:
            on_ray = self.runner.request is not None and self.runner.request.ray is not None
            parts.append("starting Ray's workers…" if on_ray else "loading the model…")
        if counts["running"]:
            fps = sum(r.fps for r in self.model.rows if r.state == "running")
            parts.append(f"{counts['running']} running at {fps:.1f} fps")
        if counts["failed"]:
            parts.append(f"{counts['failed']} failed")
        parts.append(format_time(time.monotonic() - self._started_at))
        self.summary_label.setText(" · ".join(parts))

    @Slot(object)
    def _on_finished(self, summary: BatchSummary) -> None:
        self._timer.stop()
        self.summary = summary
        for state in summary.inputs:  # the final word on each input
            self.model.apply(state)
        self.progress.setValue(round(self.model.fraction() * 1000))
        self.summary_label.setText(summary_text(summary))
        self._set_running(False)
        self.ended.emit(self.summary_label.text())

    @Slot(str)
    def _on_failed(self, message: str) -> None:
        self._timer.stop()
        self._set_running(False)
        self.summary_label.setText(f"The batch could not run: {message}")
        self.show_error(message)
        self.ended.emit(self.summary_label.text())

    def _show_idle(self) -> None:
        if not self.runner.running:
            n = len(self.model.rows)
            self.summary_label.setText(f"{_plural(n, 'input')}. Start runs them." if n else "")

    def show_error(self, message: str) -> None:
        self.statusBar().showMessage(message, 10000)
        self.error_box.setText(message)
        self.error_box.show()

    # ---- lifetime ------------------------------------------------------------------------

    def showEvent(self, event: QShowEvent) -> None:
        self.refresh_settings()
        super().showEvent(event)

    def closeEvent(self, event: QCloseEvent) -> None:
        """Hidden, not ended: the batch goes on (shutdown() ends it, with the app)."""
        self.options.save()
        super().closeEvent(event)

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Cancel a running batch and wait for it (FrameLens is quitting)."""
        if self.runner.running:
            self.runner.cancel()
            self.runner.wait(timeout_s)
        self._timer.stop()
