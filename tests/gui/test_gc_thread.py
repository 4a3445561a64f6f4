"""Qt objects die on the GUI thread: Python's cyclic garbage collector runs there only
(gui/common/gc_guard.py), not on the player's or an export's thread, and a closed window is
deleted with what it owns (the flaky segmentation fault of the export test: Qt objects in
reference cycles destroyed by a collection an export thread happened to trigger)."""

from __future__ import annotations

import gc
import threading
from pathlib import Path
from typing import Any

import shiboken6
from framelens.gui.common.controller import ExportRequest
from framelens.gui.common.settings import Settings
from framelens.gui.player.main_window import MainWindow
from PySide6.QtCore import QCoreApplication, QEvent
from pytestqt.qtbot import QtBot


def test_garbage_is_collected_on_the_gui_thread_while_workers_allocate(
    window: MainWindow, qtbot: QtBot, sample: str, tmp_path: Path
) -> None:
    threads: list[str] = []

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            threads.append(threading.current_thread().name)

    gc.callbacks.append(on_gc)
    try:
        window.open_source(sample)  # the player's thread decodes and infers
        qtbot.waitUntil(lambda: window.results_shown >= 10, timeout=60_000)
        out = tmp_path / "export.mp4"
        request = ExportRequest(sample, str(out), str(tmp_path / "export.json"), 0, 30)
        with qtbot.waitSignal(window.controller.exportFinished, timeout=120_000):
            window.controller.start_export(request)  # and an export's thread, meanwhile
        # and a worker thread that leaves a collection due for certain (those threads
        # may free nearly all they allocate, and a fast run ends before one is due):
        # Python's own collector would run on this thread, the guard's on the GUI's
        kept: list[list[int]] = []
        worker = threading.Thread(
            target=lambda: kept.extend([] for _ in range(20 * gc.get_threshold()[0])),
            name="allocating-worker",
        )
        worker.start()
        worker.join()
        qtbot.waitUntil(lambda: bool(threads), timeout=5_000)  # the guard's next tick
    finally:
        gc.callbacks.remove(on_gc)
    assert out.is_file()
    assert threads and set(threads) == {threading.main_thread().name}, sorted(set(threads))


def play_and_close(qtbot: QtBot, app_settings: Settings, sample: str) -> None:
    """A window that played the sample, closed and deleted as the application does."""
    win = MainWindow(settings=app_settings)
    win.show()
    qtbot.waitExposed(win)
    win.open_source(sample)
    qtbot.waitUntil(lambda: win.results_shown >= 5, timeout=60_000)
    win.close()
    win.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    assert not shiboken6.isValid(win)


def test_a_closed_window_leaves_no_qt_object_of_its_own_to_the_collector(
    qtbot: QtBot, app_settings: Settings, sample: str
) -> None:
    """What FrameLens creates for a window (its models, its workers) belongs to the
    window in Qt terms and is deleted with it on the GUI thread; nothing of ours is left
    for the cyclic collector to destroy wherever it runs."""
    gc.collect()  # what earlier tests left: not this window's
    play_and_close(qtbot, app_settings, sample)
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        ours = sorted(
            type(o).__qualname__
            for o in gc.garbage
            if isinstance(o, shiboken6.Shiboken.Object)
            and type(o).__module__.startswith("framelens.")
            and shiboken6.isValid(o)
            and shiboken6.ownedByPython(o)
        )
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert ours == []
