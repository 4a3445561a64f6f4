"""Lines, zones and events in the window (gui/player/main_zones.py): a line drawn by
clicks on the canvas, named in its dialog, saved beside the video and read again when
it opens; the real YOLOX-Nano and ByteTrack counting the sample's first walker across
it while it plays (the counts on the canvas and in the plot going from 0 to 1); the
Events dock, where a click on an event shows its frame with its track followed; N and
Shift+N; a zone drawn on a zoomed canvas landing where it was clicked; a zone that
crosses itself refused with one line; a point dragged in Edit.

Screenshots go to a temporary folder; FRAMELENS_ZONES_SCREENSHOTS=docs writes the docs'.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from framelens.core.api import shape_colour
from framelens.gui.common.screenshots import grab_window
from framelens.gui.player.main_window import MainWindow
from framelens.gui.player.zone_dialog import ZoneDialog
from PySide6.QtCore import QPoint, QPointF, Qt, QTimer
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot
from shots import shots_dir

pytestmark = pytest.mark.gui

TIMEOUT_MS = 90_000
SHOTS = shots_dir("FRAMELENS_ZONES_SCREENSHOTS", "zones")
# The sample's first walker crosses x = 600 left to right near frame 190, counted by
# hand (tests/unit/test_cli_analytics.py); nobody crosses it before.
START, END, CROSSED_NEAR = 150, 235, 190
U8 = npt.NDArray[np.uint8]


def rgb(image: QImage) -> U8:
    img = image.convertToFormat(QImage.Format.Format_RGB888)
    w, h, stride = img.width(), img.height(), img.bytesPerLine()
    data = np.frombuffer(img.constBits(), dtype=np.uint8, count=stride * h)
    return data.reshape(h, stride)[:, : w * 3].reshape(h, w, 3).copy()


@pytest.fixture
def video(tmp_path: Path, sample: str) -> Path:
    """The sample in a folder of the test's own (its zones are written beside it)."""
    path = tmp_path / "walkers.mp4"
    shutil.copy(sample, path)
    return path


def widget_point(window: MainWindow, x: float, y: float) -> QPoint:
    p = window.canvas.map_from_source(x, y)
    return QPoint(round(p.x()), round(p.y()))


def answer(window: MainWindow, name: str, classes: tuple[str, ...] = (), loiter: float = 0.0,
           shot: str = "") -> list[bool]:  # fmt: skip
    """Fill in the line or zone dialog as soon as it opens, then OK; the list says it was."""
    done: list[bool] = []

    def fill() -> None:
        dialog = window.findChild(ZoneDialog)
        if dialog is None or not dialog.isVisible():
            QTimer.singleShot(20, fill)
            return
        dialog.name_edit.setText(name)
        for c in classes:
            dialog.check(c)
        dialog.loiter_box.setValue(loiter)
        if shot:
            dialog.grab().save(str(SHOTS / shot))
        done.append(True)
        dialog.accept()

    QTimer.singleShot(0, fill)
    return done


def click(window: MainWindow, qtbot: QtBot, x: float, y: float) -> None:
    qtbot.mouseClick(window.canvas, Qt.MouseButton.LeftButton, pos=widget_point(window, x, y))


def press(window: MainWindow, qtbot: QtBot, key: Qt.Key,
          modifier: Qt.KeyboardModifier = Qt.KeyboardModifier.NoModifier) -> None:  # fmt: skip
    window.activateWindow()
    window.canvas.setFocus()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5000)
    qtbot.keyClick(window.canvas, key, modifier)


def open_at(window: MainWindow, qtbot: QtBot, video: Path, frame: int) -> None:
    window.open_source(str(video), play=False)
    qtbot.waitUntil(lambda: window.results_shown >= 1, timeout=TIMEOUT_MS)
    window.controller.seek(frame)
    qtbot.waitUntil(lambda: window.shown_index == frame, timeout=TIMEOUT_MS)


def wait_for(qtbot: QtBot, what: Callable[[], bool]) -> None:
    qtbot.waitUntil(what, timeout=TIMEOUT_MS)


def test_a_line_drawn_by_clicks_counts_the_walker_and_an_event_click_seeks(
    window: MainWindow, qtbot: QtBot, video: Path
) -> None:
    zones = window.zones
    assert window.tracking.kind == "off"
    open_at(window, qtbot, video, START)
    zones.events_action.trigger()  # the Events dock
    assert zones.dock.isVisible()

    zones.draw_line_action.trigger()
    click(window, qtbot, 600, 431)  # bottom to top: walking up, the right is 'in'
    filled = answer(window, "door", ("person",), shot="")
    click(window, qtbot, 600, 200)
    assert filled == [True]
    saved = Path(f"{video}.zones.json")
    wait_for(qtbot, saved.is_file)
    data = json.loads(saved.read_text())
    ((x1, y1), (x2, y2)) = data["lines"][0]["points"]
    assert data["lines"][0]["name"] == "door" and data["lines"][0]["classes"] == ["person"]
    assert abs(x1 - 600) <= 1.5 and abs(y1 - 431) <= 1.5  # source pixels
    assert abs(x2 - 600) <= 1.5 and abs(y2 - 200) <= 1.5
    assert data["zones"] == []
    assert window.tracking.kind == "bytetrack"  # counting needs tracks: turned on

    window.controller.set_realtime(False)  # every frame, as fast as it goes
    window.controller.play()
    wait_for(qtbot, lambda: window.shown_index >= END)
    window.controller.pause()
    wait_for(qtbot, lambda: not window.state.playing)
    crossed = [e for e in window.controller.analytics.events() if e.kind == "cross"]
    assert [(e.name, e.direction) for e in crossed] == [("door", "in")]
    event = crossed[0]
    assert abs(event.frame - CROSSED_NEAR) <= 10
    # the plot: "door in" went from 0 to 1 at the crossing's time, "door out" stayed 0
    zones._refresh(force=True)
    times, counts = zones.panel.series("door in")
    assert counts[0] == 0 and counts[-1] == 1
    for t, c in zip(times, counts, strict=True):  # confirmed a frame after it (min_frames 2)
        assert c == (0 if t < event.time_s else 1 if t > event.time_s + 0.15 else c), t
    assert set(zones.panel.series("door out")[1]) == {0}
    grab_window(window).save(str(SHOTS / "zones-counts.png"))

    # the events list: a click on the crossing shows its frame, its track followed
    table = zones.panel.table
    wait_for(qtbot, lambda: table.rowCount() >= 1)
    row = zones.panel.events.index(event)
    assert table.item(row, 4).text() == "cross" and table.item(row, 6).text() == "in"
    assert table.item(row, 1).text() == str(event.frame + 1)
    rect = table.visualItemRect(table.item(row, 0))
    qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    wait_for(qtbot, lambda: window.shown_index == event.frame)
    following = window.tracking.following
    assert following is not None and following.track_id == event.track_id
    wait_for(qtbot, lambda: window.canvas.follow is not None)
    qtbot.wait(200)
    grab_window(window).save(str(SHOTS / "zones-events.png"))

    # N: the next event from a frame before it; Shift+N: none before it
    window.controller.seek(START)
    wait_for(qtbot, lambda: window.shown_index == START)
    press(window, qtbot, Qt.Key.Key_N)
    wait_for(qtbot, lambda: window.shown_index == event.frame)
    press(window, qtbot, Qt.Key.Key_N, Qt.KeyboardModifier.ShiftModifier)
    wait_for(qtbot, lambda: "No event before" in window.status_bar.currentMessage())
    assert window.shown_index == event.frame

    # opened again: the line read from beside the video, counting again
    window.open_source(str(video), play=False)
    wait_for(qtbot, lambda: window.controller.analytics.spec.lines != ())
    assert window.controller.analytics.spec.lines[0].name == "door"


def test_zones_drawn_on_a_zoomed_canvas_edited_and_refused(
    window: MainWindow, qtbot: QtBot, video: Path
) -> None:
    zones = window.zones
    open_at(window, qtbot, video, 600)
    canvas = window.canvas
    canvas.zoom_at(1.4, QPointF(canvas.width() * 0.3, canvas.height() * 0.6))
    corners = [(180.0, 240.0), (420.0, 230.0), (440.0, 400.0), (200.0, 410.0)]

    # a zone that crosses itself: refused as it is closed, before its dialog asks for a
    # name (that would be typed for nothing); one line, in a box too, nothing kept
    zones.draw_zone_action.trigger()
    for x, y in [corners[0], corners[2], corners[1], corners[3]]:
        click(window, qtbot, x, y)
    press(window, qtbot, Qt.Key.Key_Return)
    said = "Zones: zone 'zone 1': the polygon crosses itself: draw it again"
    assert window.status_bar.currentMessage() == said
    assert window.error_box.isVisible() and window.error_box.text() == said
    assert window.findChild(ZoneDialog) is None  # no dialog was opened
    window.error_box.hide()
    assert not window.controller.analytics.spec
    assert not Path(f"{video}.zones.json").exists()

    # Esc cancels a zone half drawn
    zones.draw_zone_action.trigger()
    click(window, qtbot, *corners[0])
    press(window, qtbot, Qt.Key.Key_Escape)
    assert zones.editor.mode == "" and not window.controller.analytics.spec

    # drawn on the zoomed canvas: its corners where they were clicked, in source pixels
    zones.draw_zone_action.trigger()
    for x, y in corners[:3]:
        click(window, qtbot, x, y)
    qtbot.mouseMove(canvas, widget_point(window, *corners[3]))
    qtbot.wait(100)
    grab_window(window).save(str(SHOTS / "zones-drawing.png"))  # the corners so far
    filled = answer(window, "table", ("person",), loiter=30.0, shot="zones-dialog.png")
    qtbot.mouseDClick(canvas, Qt.MouseButton.LeftButton, pos=widget_point(window, *corners[3]))
    assert filled == [True]
    saved = Path(f"{video}.zones.json")
    wait_for(qtbot, saved.is_file)
    zone = json.loads(saved.read_text())["zones"][0]
    assert zone["name"] == "table" and zone["loiter_s"] == 30.0
    assert np.allclose(zone["polygon"], corners, atol=1.0)
    # the zone is in the picture under the points clicked (drawn by core into the frame)
    wait_for(qtbot, lambda: window.controller.analytics.latest is not None)
    qtbot.wait(300)
    shot = rgb(canvas.grab_frame_image())
    ratio = canvas.devicePixelRatioF()
    b, g, r = shape_colour(0)
    checked = 0
    for (ax, ay), (bx, by) in zip(corners, corners[1:] + corners[:1], strict=True):
        p = canvas.map_from_source((ax + bx) / 2, (ay + by) / 2)  # an edge's middle
        px, py = round(p.x() * ratio), round(p.y() * ratio)
        if not (3 <= px < shot.shape[1] - 3 and 3 <= py < shot.shape[0] - 3):
            continue  # zoomed out of view
        near = shot[py - 3 : py + 4, px - 3 : px + 4].reshape(-1, 3).astype(int)
        assert (np.abs(near - [r, g, b]).max(axis=1) <= 40).any(), f"no edge at {(ax, ay)}"
        checked += 1
    assert checked >= 3
    grab_window(window).save(str(SHOTS / "zones-table.png"))

    # Edit: a corner dragged moves it, saved
    zones.edit_action.trigger()
    assert zones.editor.mode == "edit"
    start, end = widget_point(window, *corners[1]), widget_point(window, 460, 200)
    qtbot.mousePress(canvas, Qt.MouseButton.LeftButton, pos=start)
    qtbot.mouseMove(canvas, end)
    qtbot.mouseRelease(canvas, Qt.MouseButton.LeftButton, pos=end)
    moved = lambda: json.loads(saved.read_text())["zones"][0]["polygon"][1]  # noqa: E731
    wait_for(qtbot, lambda: abs(moved()[0] - 460) <= 1 and abs(moved()[1] - 200) <= 1)
    qtbot.wait(300)
    grab_window(window).save(str(SHOTS / "zones-edit.png"))
    press(window, qtbot, Qt.Key.Key_Escape)
    assert zones.editor.mode == "" and not zones.edit_action.isChecked()
    zones.delete("table")
    assert json.loads(saved.read_text()) == {"lines": [], "zones": []}


def test_a_broken_zones_file_beside_the_video_is_said_in_a_box(
    window: MainWindow, qtbot: QtBot, video: Path
) -> None:
    """The analyst's lines are not counted: said as every error is, a box besides the
    status bar (a passing status message is easily missed), and the video plays."""
    Path(f"{video}.zones.json").write_text('{"lines": [{"name": "x", "points": [[0, 0]]}]}')
    window.open_source(str(video), play=False)
    qtbot.waitUntil(lambda: window.results_shown >= 1, timeout=TIMEOUT_MS)
    qtbot.waitUntil(window.error_box.isVisible, timeout=5000)
    assert window.error_box.text() == f"{video}.zones.json: line 'x': needs 2 points, has 1"
    assert not window.controller.analytics.spec
    window.error_box.hide()
