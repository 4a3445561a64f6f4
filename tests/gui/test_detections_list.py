"""Rough edge 13: View > Detections lists the boxes of the frame on screen (class, score,
box in source pixels), follows playback and seeks, filters by class, and a row clicked
marks its box on the canvas. The real YOLOX-Nano on the bundled sample, under Xvfb; the
rows are checked against a separate run of the same model over the same frame.

Screenshots go to a temporary folder; FRAMELENS_DETECTIONS_SCREENSHOTS=docs writes the
README's (docs/detections-list.png).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from framelens.core.api import PipelineSettings, run_to_outputs
from framelens.gui.common.screenshots import grab_window
from framelens.gui.common.settings import Settings
from framelens.gui.player.detections_dock import ALL_CLASSES, DetectionRow, class_matcher
from framelens.gui.player.main_detections import DETECTIONS_SHORTCUT
from framelens.gui.player.main_window import MainWindow
from PySide6.QtCore import QRect, QSettings, Qt
from PySide6.QtGui import QImage, QKeySequence
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot
from shots import shots_dir

pytestmark = pytest.mark.gui

TIMEOUT_MS = 60_000
FRAME = 600  # a person and two skateboards (the stool's legs) in the sample
ALONE = 200  # no person: only the framed picture on the wall
SHOTS = shots_dir("FRAMELENS_DETECTIONS_SCREENSHOTS", "detections")
U8 = npt.NDArray[np.uint8]


def rgb(image: QImage) -> U8:
    img = image.convertToFormat(QImage.Format.Format_RGB888)
    w, h, stride = img.width(), img.height(), img.bytesPerLine()
    data = np.frombuffer(img.constBits(), dtype=np.uint8, count=stride * h)
    return data.reshape(h, stride)[:, : w * 3].reshape(h, w, 3).astype(np.int16)


def press(window: MainWindow, qtbot: QtBot, key: Qt.Key, mods: Qt.KeyboardModifier) -> None:
    """A key the user presses in the window (its shortcuts need it active)."""
    window.activateWindow()
    window.canvas.setFocus()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5000)
    qtbot.keyClick(window.canvas, key, mods)


def listed(window: MainWindow, index: int) -> bool:
    return window.shown_index == index and window.detections.panel.frame_index == index


def open_paused(window: MainWindow, qtbot: QtBot, sample: str, frame: int = FRAME) -> None:
    """The sample open, the list shown (Ctrl+D), paused on ``frame``."""
    press(window, qtbot, Qt.Key.Key_D, Qt.KeyboardModifier.ControlModifier)
    assert window.detections.dock.isVisible()
    window.open_source(sample)
    qtbot.waitUntil(lambda: window.results_shown >= 3, timeout=TIMEOUT_MS)
    window.controller.pause()
    qtbot.waitUntil(lambda: not window.state.playing, timeout=10_000)
    window.controller.seek(frame)
    qtbot.waitUntil(lambda: listed(window, frame), timeout=TIMEOUT_MS)


def model_detections(settings: PipelineSettings, sample: str, frame: int, tmp: Path) -> list[Any]:
    """What the same model finds on ``frame`` in a run of its own (the detections file)."""
    out = tmp / f"frame{frame}.json"
    run_to_outputs(sample, settings, detections=str(out), start=frame, frames=1, progress=False)
    (record,) = json.loads(out.read_text())["frames"]
    assert record["index"] == frame
    return list(record["detections"])


def assert_rows_match(rows: list[DetectionRow], expected: list[Any]) -> None:
    assert len(rows) == len(expected) > 0
    by_score = sorted(expected, key=lambda d: -float(d["score"]))
    for row, det in zip(sorted(rows, key=lambda r: -r.score), by_score, strict=True):
        assert row.label == det["label"]
        assert row.score == pytest.approx(det["score"], abs=1e-3)
        assert row.box == pytest.approx(det["box"], abs=0.01)  # both clipped to the frame
        shown = [int(v) for v in row.box_text.split(", ")]
        assert shown == pytest.approx(det["box"], abs=0.51)  # the table's whole pixels


def view_rect(window: MainWindow, box: tuple[float, float, float, float]) -> QRect:
    """Where ``box`` (source pixels) lies on the canvas, in its pixels."""
    r = window.canvas.image_rect()
    size = window.canvas.image_size
    assert size is not None
    sx, sy = r.width() / size[0], r.height() / size[1]
    x1, y1 = round(r.x() + box[0] * sx), round(r.y() + box[1] * sy)
    x2, y2 = round(r.x() + box[2] * sx), round(r.y() + box[3] * sy)
    return QRect(x1, y1, x2 - x1, y2 - y1)


def click_row(window: MainWindow, qtbot: QtBot, label: str) -> DetectionRow:
    panel = window.detections.panel
    rows = panel.visible_rows()
    view_row = next(i for i, r in enumerate(rows) if r.label == label)
    table = panel.table
    centre = table.visualRect(table.model().index(view_row, 0)).center()
    qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=centre)
    return rows[view_row]


def save_screenshot(window: MainWindow, name: str) -> Path:
    """The window with the canvas's own framebuffer over its place (the window's grab
    misses what QPainter draws into the GL canvas)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / name
    assert grab_window(window).save(str(path))
    return path


def test_the_list_shows_the_models_detections_of_the_frame_on_screen(
    window: MainWindow, qtbot: QtBot, sample: str, tmp_path: Path
) -> None:
    open_paused(window, qtbot, sample)
    panel = window.detections.panel
    settings = window.controller.settings
    assert settings is not None
    expected = model_detections(settings, sample, FRAME, tmp_path)
    assert_rows_match(panel.visible_rows(), expected)
    assert {r.label for r in panel.visible_rows()} == {"person", "skateboard"}
    scores = [r.score for r in panel.visible_rows()]
    assert scores == sorted(scores, reverse=True)  # best first
    header = panel.table.horizontalHeader()  # "Score" and its sort arrow, not over it
    assert header.sectionSize(2) >= header.sectionSizeHint(2), header.sectionSizeHint(2)
    assert panel.caption.text() == f"Frame {FRAME + 1} · {len(expected)} detections"
    # it follows a seek, and a step (Right) from there
    window.controller.seek(ALONE)
    qtbot.waitUntil(lambda: listed(window, ALONE), timeout=TIMEOUT_MS)
    assert_rows_match(panel.visible_rows(), model_detections(settings, sample, ALONE, tmp_path))
    assert "person" not in {r.label for r in panel.visible_rows()}
    press(window, qtbot, Qt.Key.Key_Right, Qt.KeyboardModifier.NoModifier)
    qtbot.waitUntil(lambda: listed(window, ALONE + 1), timeout=TIMEOUT_MS)
    assert panel.caption.text().startswith(f"Frame {ALONE + 2} ·")
    # and playback: the list moves on with the video
    window.controller.play()
    qtbot.waitUntil(
        lambda: (panel.frame_index or 0) > ALONE + 5 and panel.frame_index == window.shown_index,
        timeout=TIMEOUT_MS,
    )


def test_a_row_clicked_marks_its_box_on_the_canvas(
    window: MainWindow, qtbot: QtBot, sample: str
) -> None:
    open_paused(window, qtbot, sample)
    panel, canvas = window.detections.panel, window.canvas
    qtbot.wait(200)
    before = rgb(canvas.grab_frame_image())
    person = click_row(window, qtbot, "person")
    assert panel.picked == person and canvas.highlight == person.box
    qtbot.wait(200)
    after = rgb(canvas.grab_frame_image())
    box = view_rect(window, person.box)
    image = canvas.image_rect().toRect()
    # the frame outside the box is dimmed, inside it untouched, a white ring around it
    left = (slice(image.top() + 5, image.bottom() - 5), slice(image.left() + 5, box.left() - 8))
    assert after[left].mean() < 0.7 * before[left].mean()
    inside = (slice(box.top() + 30, box.bottom() - 30), slice(box.left() + 20, box.right() - 20))
    assert np.abs(after[inside] - before[inside]).mean() < 2
    # the white outline just outside what is drawn of the box (its outline, its tag)
    marked = canvas.highlight_region
    assert marked is not None and marked[2] > person.box[2]
    ring_x = view_rect(window, marked).right() + 3
    ring = after[box.top() + 40 : box.bottom() - 40, ring_x - 1 : ring_x + 2]
    assert (ring.max(axis=1) > 235).all()  # all the way down that side
    save_screenshot(window, "detections-list.png")
    # another row moves the mark; Esc in the list lets it go
    board = click_row(window, qtbot, "skateboard")
    assert canvas.highlight == board.box != person.box
    panel.table.setFocus()
    qtbot.keyClick(panel.table, Qt.Key.Key_Escape)
    assert panel.picked is None and canvas.highlight is None
    qtbot.wait(200)
    assert np.abs(rgb(canvas.grab_frame_image())[left] - before[left]).mean() < 2


def test_the_picked_box_follows_the_video_until_it_is_gone(
    window: MainWindow, qtbot: QtBot, sample: str
) -> None:
    open_paused(window, qtbot, sample)
    panel, canvas = window.detections.panel, window.canvas
    picked = click_row(window, qtbot, "person")
    for step in (1, 2, 3):
        press(window, qtbot, Qt.Key.Key_Right, Qt.KeyboardModifier.NoModifier)
        qtbot.waitUntil(lambda s=step: listed(window, FRAME + s), timeout=TIMEOUT_MS)
        now = panel.picked
        assert now is not None and now.label == "person"
        assert canvas.highlight == now.box
        selected = panel.table.selectionModel().selectedRows()
        assert [panel.visible_rows()[i.row()] for i in selected] == [now]
        picked = now
    window.controller.seek(ALONE)  # nobody there: nothing stays marked
    qtbot.waitUntil(lambda: listed(window, ALONE), timeout=TIMEOUT_MS)
    assert panel.picked is None and canvas.highlight is None
    assert picked.label == "person"


def test_the_class_filter_hides_the_other_classes(
    window: MainWindow, qtbot: QtBot, sample: str
) -> None:
    open_paused(window, qtbot, sample)
    panel, canvas = window.detections.panel, window.canvas
    combo = panel.filter_combo
    total = len(panel.all_rows())
    assert combo.itemText(0) == ALL_CLASSES and combo.findText("person") > 0
    click_row(window, qtbot, "skateboard")
    combo.setCurrentIndex(combo.findText("person"))
    assert [r.label for r in panel.visible_rows()] == ["person"]
    assert panel.table.model().rowCount() == 1
    assert panel.caption.text() == f"Frame {FRAME + 1} · {total} detections, 1 shown"
    assert panel.picked is None and canvas.highlight is None  # the skateboard went
    combo.setEditText("skate")  # part of a name
    assert {r.label for r in panel.visible_rows()} == {"skateboard"}
    combo.setEditText("person, skateboard")
    assert len(panel.visible_rows()) == total
    combo.setEditText("zebra")
    assert panel.visible_rows() == []
    combo.setCurrentIndex(0)
    assert len(panel.visible_rows()) == total
    # a class's own name is that class only, not every name containing it
    labels = window.controller.settings.model.labels  # type: ignore[union-attr]
    keeps = class_matcher("car", labels)
    assert keeps("car") and not keeps("carrot")
    assert class_matcher("ca", labels)("carrot")


def reopened(settings_file: Path) -> Settings:
    """The settings a new session reads: the same file."""
    return Settings(QSettings(str(settings_file), QSettings.Format.IniFormat))


def test_view_detections_toggles_the_list_and_is_remembered(
    qtbot: QtBot, settings_file: Path, app_settings: Settings
) -> None:
    first = MainWindow(settings=app_settings)
    qtbot.addWidget(first)
    first.show()
    qtbot.waitExposed(first)
    assert not first.detections.dock.isVisible()  # off until asked for
    action = first.detections.action
    assert action in first.menus.view_menu.actions()
    assert action.shortcut() == QKeySequence(DETECTIONS_SHORTCUT)
    press(first, qtbot, Qt.Key.Key_D, Qt.KeyboardModifier.ControlModifier)
    assert first.detections.dock.isVisible() and action.isChecked()
    first.close()
    second = MainWindow(settings=reopened(settings_file))
    qtbot.addWidget(second)
    second.show()
    qtbot.waitExposed(second)
    assert second.detections.dock.isVisible()
    second.detections.action.trigger()  # View > Detections again: hidden
    assert not second.detections.dock.isVisible()
    second.close()
    third = MainWindow(settings=reopened(settings_file))
    qtbot.addWidget(third)
    third.show()
    qtbot.waitExposed(third)
    assert not third.detections.dock.isVisible()
    third.close()


def test_for_super_resolution_the_list_says_it_lists_a_detectors_boxes(
    window: MainWindow, qtbot: QtBot, sample: str
) -> None:
    open_paused(window, qtbot, sample)
    panel = window.detections.panel
    click_row(window, qtbot, "person")
    window.choose_model("espcn-x2")
    qtbot.waitUntil(lambda: not panel.available, timeout=TIMEOUT_MS)
    assert panel.notice.isVisible() and "upscales frames" in panel.notice.text()
    assert not panel.table.isVisible() and not panel.filter_combo.isEnabled()
    assert window.canvas.highlight is None
    window.choose_model("yolox-nano")
    qtbot.waitUntil(lambda: panel.available and panel.table.isVisible(), timeout=TIMEOUT_MS)
    window.controller.seek(FRAME)
    qtbot.waitUntil(
        lambda: listed(window, FRAME) and len(panel.visible_rows()) > 0, timeout=TIMEOUT_MS
    )
