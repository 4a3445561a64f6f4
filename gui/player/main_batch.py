"""The main window's part in batch analysis: File > Batch Analysis… (the Batch window,
gui/batch/batch_window.py) and Analysis > Browse Batch Results… (gui/batch/results_browser.py),
whose hits open here, paused at their frame."""

from __future__ import annotations

from framelens.gui.batch.batch_window import BatchWindow
from framelens.gui.batch.results_browser import ResultsBrowser
from framelens.gui.player.main_window_parts import WindowParts
from PySide6.QtCore import QObject, Signal

__all__ = ["BatchAnalysis"]


class BatchAnalysis(QObject):
    """Opens the Batch window and the results browser, and shows a hit here."""

    hitChosen = Signal(str, int)  # a hit's video and frame: opened paused there

    def __init__(self, parts: WindowParts) -> None:
        super().__init__(parts.window)
        self.parts = parts
        self.batch_window: BatchWindow | None = None
        self.results_browser: ResultsBrowser | None = None
        self.batch_action = parts.action(
            "&Batch Analysis…",
            self.open_batch_window,
            "Ctrl+Shift+B",
            tip="Analyse folders of footage with the current model: resumable, with progress",
        )
        self.results_action = parts.action(
            "Browse Batch &Results…",
            lambda: self.open_results_browser(),
            "Ctrl+Shift+R",
            tip="Thumbnails of a batch's detections by class; double-click opens the video there",
        )

    def open_batch_window(self) -> BatchWindow:
        """The Batch window (one; shown again with its batch as it stands)."""
        window = self.batch_window
        if window is None:
            c = self.parts.controller
            window = self.batch_window = BatchWindow(
                lambda: c.settings, self.parts.settings, self.parts.window
            )
            window.browseRequested.connect(self.open_results_browser)
            window.started.connect(c.pause)  # the cores go to the batch
            window.ended.connect(self._batch_ended)
        window.show()
        window.raise_()
        window.activateWindow()
        return window

    def _batch_ended(self, text: str) -> None:
        """Said here too: the Batch window may be closed (the batch went on)."""
        self.parts.show_message(f"Batch analysis: {text}", 15000)

    def open_results_browser(self, folder: str | None = None) -> ResultsBrowser:
        """The results browser on ``folder`` (else the last batch's output folder)."""
        browser = self.results_browser
        if browser is None:
            browser = self.results_browser = ResultsBrowser(self.parts.settings, self.parts.window)
            browser.openRequested.connect(self.show_hit)
        wanted = folder or browser.folder_edit.text().strip() or self.parts.settings.batch_output
        if wanted:  # the same folder again too: a batch may have added to it
            browser.set_folder(wanted)
        browser.show()
        browser.raise_()
        browser.activateWindow()
        return browser

    def show_hit(self, source: str, frame: int) -> None:
        """A hit of the results browser: its video here, paused at its frame."""
        self.hitChosen.emit(source, frame)
        main = self.parts.window
        main.show()
        main.raise_()
        main.activateWindow()

    def close(self) -> None:
        """FrameLens quits: a running batch is cancelled (what finished is kept)."""
        if self.results_browser is not None:
            self.results_browser.close()
        if self.batch_window is not None:
            self.batch_window.shutdown()
            self.batch_window.close()
