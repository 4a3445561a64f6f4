"""The main window's part in batch analysis: File > Batch Analysis… (the Batch window,
gui/batch/batch_window.py) and Analysis > Browse Batch Results… (gui/batch/results_browser.py),
whose hits open here, paused at their frame."""

from __future__ import annotations

from framelens.gui.batch.batch_window import BatchWindow
from framelens.gui.batch.results_browser import ResultsBrowser
from framelens.gui.player.main_window_parts import MainWindowParts
from PySide6.QtGui import QAction

__all__ = ["BatchAnalysis"]


class BatchAnalysis(MainWindowParts):
    """Opens the Batch window and the results browser, and shows a hit here."""

    batch_window: BatchWindow | None
    results_browser: ResultsBrowser | None
    batch_action: QAction
    results_action: QAction

    def _build_batch_actions(self) -> None:
        self.batch_window = None
        self.results_browser = None
        self.batch_action = self._action(
            "&Batch Analysis…",
            self.open_batch_window,
            "Ctrl+Shift+B",
            tip="Analyse folders of footage with the current model: resumable, with progress",
        )
        self.results_action = self._action(
            "Browse Batch &Results…",
            lambda: self.open_results_browser(),
            "Ctrl+Shift+R",
            tip="Thumbnails of a batch's detections by class; double-click opens the video there",
        )

    def _build_batch_menus(self) -> None:
        # File: beside the other ways in, before Open Recent
        self.file_menu.insertAction(self.recent_menu.menuAction(), self.batch_action)
        self.analysis_menu.addSeparator()
        self.analysis_menu.addAction(self.results_action)

    def open_batch_window(self) -> BatchWindow:
        """The Batch window (one; shown again with its batch as it stands)."""
        window = self.batch_window
        if window is None:
            window = self.batch_window = BatchWindow(
                lambda: self.controller.settings, self.settings, self
            )
            window.browseRequested.connect(self.open_results_browser)
            window.started.connect(self.controller.pause)  # the cores go to the batch
            window.ended.connect(self._batch_ended)
        window.show()
        window.raise_()
        window.activateWindow()
        return window

    def _batch_ended(self, text: str) -> None:
        """Said here too: the Batch window may be closed (the batch went on)."""
        self.statusBar().showMessage(f"Batch analysis: {text}", 15000)

    def open_results_browser(self, folder: str | None = None) -> ResultsBrowser:
        """The results browser on ``folder`` (else the last batch's output folder)."""
        browser = self.results_browser
        if browser is None:
            browser = self.results_browser = ResultsBrowser(self.settings, self)
            browser.openRequested.connect(self.show_hit)
        wanted = folder or browser.folder_edit.text().strip() or self.settings.batch_output
        if wanted:  # the same folder again too: a batch may have added to it
            browser.set_folder(wanted)
        browser.show()
        browser.raise_()
        browser.activateWindow()
        return browser

    def show_hit(self, source: str, frame: int) -> None:
        """A hit of the results browser: its video here, paused at its frame."""
        self.open_at(source, frame)
        self.show()
        self.raise_()
        self.activateWindow()

    def _close_batch(self) -> None:
        """FrameLens quits: a running batch is cancelled (what finished is kept)."""
        if self.results_browser is not None:
            self.results_browser.close()
        if self.batch_window is not None:
            self.batch_window.shutdown()
            self.batch_window.close()
