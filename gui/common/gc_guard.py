"""Python's cyclic garbage collector, run on the GUI thread only.

The collector runs on whichever thread allocates when a generation fills up: in
FrameLens mostly the worker threads (the player's, an export's, a calibration's, ONNX
Runtime's callers), which allocate far more than the GUI does. Qt objects that Python
owns and that sit in reference cycles (pyqtgraph keeps QPen, QPixmap, QPicture and its
menus' objects in cycles; a model or widget with one of its own methods connected) are
then destroyed on that worker thread, which Qt does not allow: a QWidget, a pixmap or a
model deleted off the GUI thread can crash the process (a segmentation fault, seen in
the test suite while an export ran).

``collect_on_gui_thread`` turns automatic collection off and collects on a timer in the
GUI thread instead, generation by generation when Python would have (the counts past
its thresholds), as pyqtgraph's GarbageCollector does. Reference counting still frees
everything outside cycles at once, on any thread.
"""

from __future__ import annotations

import gc

import shiboken6
from PySide6.QtCore import QCoreApplication, QObject, QTimer, Slot

__all__ = ["GuiThreadCollector", "collect_on_gui_thread"]

INTERVAL_MS = 500


class GuiThreadCollector(QObject):
    """Collects cyclic garbage on the thread it lives in (the application's), every
    ``interval_ms``; automatic collection stays off while it runs."""

    def __init__(self, parent: QObject, interval_ms: int = INTERVAL_MS) -> None:
        super().__init__(parent)
        self._thresholds = gc.get_threshold()
        self._interval_ms = interval_ms
        self._timer = QTimer(self)
        self._timer.timeout.connect(self.collect_due)
        self.start()

    def start(self) -> None:
        """Automatic collection off, this thread's timer on (again, after ``stop``)."""
        gc.disable()
        if not self._timer.isActive():
            self._timer.start(self._interval_ms)

    @Slot()
    def collect_due(self) -> None:
        """The generations Python would have collected by now (their counts past the
        thresholds), youngest first."""
        counts = gc.get_count()
        for generation in range(3):
            if counts[generation] <= self._thresholds[generation]:
                break
            gc.collect(generation)

    def stop(self) -> None:
        """Back to Python's automatic collection (what was left collected here first)."""
        self._timer.stop()
        gc.collect()
        gc.enable()


_collector: GuiThreadCollector | None = None


def collect_on_gui_thread(app: QCoreApplication) -> GuiThreadCollector:
    """Collect garbage on ``app``'s thread from now on (once per process; called on the
    GUI thread once the application exists)."""
    global _collector
    if _collector is None or not shiboken6.isValid(_collector):
        _collector = GuiThreadCollector(app)
    else:
        _collector.start()
    return _collector
