"""Rough edge 4: status texts overlapped ("End of v..." under "Preparing INT8 5%").

The status bar has a message area and one field per thing it reports (job progress,
source, model and precision, backend, display path, frame rate); every text is in a
widget of its own, shown whole, none over another; when the window is narrow the
least important fields give way instead of being cut. An error outlives the status
tips shown over it.
"""

from __future__ import annotations

import contextlib

import pytest
import shiboken6
from framelens.gui.player.main_window import MainWindow
from framelens.gui.player.status_bar import MainStatusBar
from legibility import overlapping, painted_text, save_shot, shown_whole
from PySide6.QtCore import QPoint, QRect
from PySide6.QtGui import QStatusTipEvent
from PySide6.QtWidgets import QApplication, QLabel, QStatusBar
from pytestqt.qtbot import QtBot

pytestmark = pytest.mark.gui

END = "End of video — Space plays it again"


def shown_labels(bar: QStatusBar) -> list[QLabel]:
    """The status bar's labels that paint a text now."""
    return [
        label
        for label in bar.findChildren(QLabel)
        if label.isVisible() and painted_text(label) and label.width() > 0
    ]


def laid_out(qtbot: QtBot, bar: QStatusBar) -> None:
    """Qt lays a text change out at a later turn of its event loop, before it paints
    (the INT8 progress may have just grown by a digit): wait for every label to be whole
    for up to 2 s (a loaded machine can take longer than 50 ms); whatever is still cut
    after that is for the assertion that follows to name."""
    with contextlib.suppress(qtbot.TimeoutError):
        qtbot.waitUntil(lambda: all(shown_whole(lb) for lb in shown_labels(bar)), timeout=2000)


def assert_all_whole_and_apart(bar: QStatusBar) -> list[str]:
    labels = shown_labels(bar)
    for label in labels:
        assert shown_whole(label), f"{painted_text(label)!r} is cut: {label.width()} px"
    rects = [(painted_text(lb), QRect(lb.mapTo(bar, QPoint(0, 0)), lb.size())) for lb in labels]
    assert not overlapping(rects), overlapping(rects)
    outside = [name for name, rect in rects if not bar.rect().contains(rect)]
    assert not outside, f"past the status bar's edge: {outside}"
    return [painted_text(label) for label in labels]


def test_job_progress_and_end_of_video_both_show_whole(
    window: MainWindow, qtbot: QtBot, sample: str
) -> None:
    window.open_source(sample)
    qtbot.waitUntil(lambda: window.results_shown >= 3, timeout=60_000)
    window.choose_precision("int8")  # calibrates in the background: "Preparing INT8 n%"
    qtbot.waitUntil(lambda: "%" in window.busy_label.text(), timeout=60_000)
    window.controller.pause()
    qtbot.waitUntil(lambda: not window.state.playing, timeout=10_000)
    # a few frames before the end (Play on the last frame itself plays from the start)
    count = window.state.frame_count or 0
    window.controller.seek(count - 3)
    qtbot.waitUntil(lambda: window.shown_index == count - 3, timeout=10_000)
    window.controller.play()
    bar = window.statusBar()
    qtbot.waitUntil(lambda: bar.currentMessage() == END, timeout=30_000)
    assert window.controller.preparing == "int8"

    texts = assert_all_whole_and_apart(bar)
    assert END in texts, f"the message is not shown whole in a widget of its own: {texts}"
    assert any(t.startswith("Preparing INT8 ") and t.endswith("%") for t in texts), texts
    assert any("768×432" in t for t in texts), texts
    assert any("FP32 → INT8" in t for t in texts), texts
    save_shot(bar.grab(), "status-bar.png")

    # narrower: fields give way (short form, then hidden), the rest stays whole
    window.resize(960, window.height())
    qtbot.waitUntil(lambda: bar.width() < 1000, timeout=5000)
    if bar.currentMessage() != END:  # its 4 s ran out: bring it back
        bar.showMessage(END, 4000)
    laid_out(qtbot, bar)
    texts = assert_all_whole_and_apart(bar)
    assert END in texts, texts
    assert any(t.startswith("Preparing INT8 ") for t in texts), texts
    fields = [f for f in window.status_bar.fields if f.text()]
    gave_way = [f for f in fields if painted_text(f) != f.text() or f.isHidden()]
    assert gave_way, "nothing gave way, yet everything fit 960 px?"
    for field in gave_way:
        if not field.isHidden():  # a short form: the full text is in its tooltip
            assert field.text() in QLabel.toolTip(field)
    window.controller.cancel_precision()
    qtbot.waitUntil(lambda: window.controller.preparing is None, timeout=60_000)


def test_the_fields_come_back_when_the_message_is_gone(window: MainWindow, qtbot: QtBot) -> None:
    bar = window.statusBar()
    window.resize(960, window.height())
    qtbot.waitUntil(lambda: bar.width() < 1000, timeout=5000)
    shown = assert_all_whole_and_apart(bar)
    message = "Saved /a/rather/long/path/to/a/snapshot/of/the/video/frame_000123.png"
    bar.showMessage(message, 5000)
    laid_out(qtbot, bar)
    during = assert_all_whole_and_apart(bar)
    assert message in during
    assert set(shown) - set(during), "no field made room for the message"
    bar.clearMessage()
    laid_out(qtbot, bar)
    assert assert_all_whole_and_apart(bar) == shown


def test_an_error_stays_readable_while_the_pointer_crosses_the_menus(
    window: MainWindow, qtbot: QtBot
) -> None:
    """Hovering a menu shows its status tip, and leaving it clears the message: the
    error of a moment ago must come back, not vanish."""
    error = "camera 7 could not be opened"
    window.show_error(error)
    window.error_box.hide()
    bar = window.statusBar()
    assert bar.currentMessage() == error
    QApplication.sendEvent(window, QStatusTipEvent("Open a video file"))
    assert bar.currentMessage() == "Open a video file"
    QApplication.sendEvent(window, QStatusTipEvent(""))  # the pointer left the menu
    qtbot.waitUntil(lambda: bar.currentMessage() == error, timeout=2000)
    assert error in assert_all_whole_and_apart(bar)


def test_an_error_brought_back_after_its_bar_is_gone_raises_nothing(qtbot: QtBot) -> None:
    """The error comes back on the next turn of the event loop; a window closed in
    between (the bar deleted with it) must not make that turn raise (it did: "Internal
    C++ object (MainStatusBar) already deleted", in a test that closed its window)."""
    bar = MainStatusBar()
    bar.show_error("camera 7 could not be opened")
    bar.showMessage("Open a video file")
    QStatusBar.clearMessage(bar)  # Qt's own clear: the error is due back on the next turn
    shiboken6.delete(bar)
    qtbot.wait(50)  # pytest-qt fails the test on an exception raised in the event loop


def test_the_backend_field_tells_the_plan_in_its_tooltip(
    window: MainWindow, qtbot: QtBot, sample: str
) -> None:
    """Hovering the backend says why the run took its path: each choice of the plan."""
    window.open_source(sample)
    qtbot.waitUntil(lambda: window.results_shown >= 1 and bool(window.state.plan), timeout=60_000)
    tip = window.backend_label.toolTip().splitlines()
    assert tip[0].startswith("model: yolox-nano fp32 (the detect task's default model"), tip
    assert "path: cpu pipeline (device is cpu)" in tip, tip
    assert any(line.startswith("workers: ") for line in tip), tip
    assert tip[-1].startswith("decoding: cpu"), tip


def test_a_counting_progress_keeps_its_width_and_its_neighbours_stay_put(
    window: MainWindow, qtbot: QtBot
) -> None:
    """ "Preparing INT8 9%" -> "10%" -> "100%": the job field is as wide as at 100% from
    the start. Before, each new digit widened it at Qt's next layout pass: until then the
    text was cut by a digit, and then the message beside it lost that width."""
    bar = window.status_bar
    bar.source.setText("768×432 · 10 fps · h264 · 1394 frames")
    bar.showMessage("Playing")
    bar.job.setText("Preparing INT8 9%")
    laid_out(qtbot, bar)
    width, message_width = bar.job.width(), bar.message_label.width()
    for percent in (10, 55, 100):
        bar.job.setText(f"Preparing INT8 {percent}%")
        # at once, before Qt lays the change out: whole
        assert shown_whole(bar.job), f"{percent}%: {bar.job.width()} px"
        laid_out(qtbot, bar)
        assert (bar.job.width(), bar.message_label.width()) == (width, message_width), percent
    # the progress done, another job: as wide as its own text, the rest back to the message
    bar.job.setText("Loading model…")
    qtbot.waitUntil(lambda: bar.message_label.width() > message_width, timeout=2000)
    assert bar.job.width() < width and shown_whole(bar.job)
    bar.job.setText("")  # no job: its room goes back to the message too
    assert bar.job.isHidden()
    qtbot.waitUntil(lambda: bar.message_label.x() + bar.message_label.width() > bar.job.x())
