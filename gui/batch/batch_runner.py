"""The Batch window's job: ``api.run_batch`` on a thread, its events brought to the GUI
thread as Qt signals.

run_batch calls ``on_progress`` from its own threads (the local runner's, or the one
that gathers Ray's reports); each InputProgress is emitted as a signal of this object,
which lives on the GUI thread, so Qt queues it there. Cancel sets run_batch's cancel
Event: the input in flight is dropped (its outputs are temporaries, removed), what
finished is kept, and ``finished`` still comes with the summary (``cancelled`` True).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from framelens.core.api import (
    BatchSummary,
    InputProgress,
    PipelineSettings,
    error_message,
    run_batch,
)
from PySide6.QtCore import QObject, Signal

__all__ = ["BatchRequest", "BatchRunner"]


@dataclass(frozen=True)
class BatchRequest:
    """What the Batch window starts: every input (files and folders), where, with what."""

    inputs: tuple[str, ...]
    output_dir: str
    settings: PipelineSettings
    export_video: bool = False
    ray: str | None = None


class BatchRunner(QObject):
    """One batch at a time, on a thread; ``progressed``, then ``finished`` or ``failed``."""

    progressed = Signal(object)  # InputProgress
    finished = Signal(object)  # BatchSummary (cancelled or not)
    failed = Signal(str)  # one line: the batch could not run at all

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None
        self.request: BatchRequest | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def cancelling(self) -> bool:
        return self.running and self._cancel.is_set()

    def start(self, request: BatchRequest) -> bool:
        """Start ``request``; False while another batch runs."""
        if self.running:
            return False
        self.request = request
        self._cancel = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(request, self._cancel), name="fl-batch", daemon=True
        )
        self._thread.start()
        return True

    def cancel(self) -> None:
        self._cancel.set()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for the thread (closing the window); True when it has ended."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
            return not thread.is_alive()
        return True

    def _run(self, request: BatchRequest, cancel: threading.Event) -> None:
        try:
            summary: BatchSummary = run_batch(
                list(request.inputs),
                request.output_dir,
                request.settings,
                export_video=request.export_video,
                ray=request.ray,
                on_progress=self._emit_progress,
                cancel=cancel,
                progress=False,  # no tqdm bars on the terminal: the window shows them
            )
        except BaseException as exc:
            self.failed.emit(error_message(exc))
        else:
            self.finished.emit(summary)

    def _emit_progress(self, event: InputProgress) -> None:
        self.progressed.emit(event)
