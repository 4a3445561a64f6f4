"""Analysis > Browse Batch Results… under Xvfb: the detections of a real batch (two real
clips through the real YOLOX-Nano, api.run_batch in this process) by class, score and
source, as thumbnails decoded from the videos; a double-click opens the main window on
that video, paused at that frame. A batch that counted a line and a zone (--track
--zones) lists its events in the Events tab, filtered, a double-click opening one.

Screenshots go to a temporary folder; FRAMELENS_BATCH_SCREENSHOTS=docs writes the one
the user guide shows (docs/results-browser.png).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from archive_clips import BOTTLES, PEOPLE, cut_clip
from framelens.core.api import (
    DEFAULT_MODEL,
    PipelineSettings,
    TrackerSettings,
    archive_labels,
    class_colour,
    query_detections,
    query_events,
    resolve_model,
    run_batch,
)
from framelens.core.stages.analytics import parse_zones
from framelens.gui.batch.results_browser import ALL_CLASSES, ResultsBrowser
from framelens.gui.common.widgets import format_time
from framelens.gui.player.events_panel import EventsPanel
from framelens.gui.player.main_window import MainWindow
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QTableWidget
from pytestqt.qtbot import QtBot
from shots import shots_dir

pytestmark = pytest.mark.gui

SHOTS = shots_dir("FRAMELENS_BATCH_SCREENSHOTS", "batch")
TIMEOUT_MS = 30_000
PEOPLE_FRAMES = 60


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output folder of a batch of people (60 frames, and 20 of another moment) and
    bottles (45 frames)."""
    footage = tmp_path_factory.mktemp("footage")
    cut_clip(PEOPLE, footage / "people.mp4", 300, PEOPLE_FRAMES, (384, 216))
    cut_clip(PEOPLE, footage / "lobby.mp4", 1000, 20, (384, 216))
    cut_clip(BOTTLES, footage / "bottles.mp4", 0, 45)
    out = tmp_path_factory.mktemp("archive")
    settings = PipelineSettings(model=resolve_model(DEFAULT_MODEL))
    summary = run_batch([str(footage)], out, settings, progress=False)
    assert (summary.done, summary.failed) == (3, 0)
    return out


def rgb(image: QImage) -> np.ndarray:
    img = image.convertToFormat(QImage.Format.Format_RGB888)
    w, h, stride = img.width(), img.height(), img.bytesPerLine()
    data = np.frombuffer(img.constBits(), dtype=np.uint8, count=stride * h)
    return data.reshape(h, stride)[:, : w * 3].reshape(h, w, 3).copy()


def settled(rb: ResultsBrowser, qtbot: QtBot) -> None:
    """Until the search has ended and every thumbnail has come."""
    qtbot.waitUntil(
        lambda: (
            not rb.searching and not rb._debounce.isActive() and rb.thumbnails_done == len(rb.hits)
        ),
        timeout=TIMEOUT_MS,
    )


def thumbnail(rb: ResultsBrowser, row: int) -> np.ndarray:
    item = rb.list.item(row)
    return rgb(item.icon().pixmap(rb.list.iconSize()).toImage())


def test_hits_of_a_class_as_thumbnails_and_a_double_click_opens_that_frame(
    window: MainWindow, qtbot: QtBot, archive: Path
) -> None:
    assert window.batch.results_action.shortcut().toString() == "Ctrl+Shift+R"
    window.settings.batch_output = str(archive)  # the last batch's folder
    window.batch.results_action.trigger()  # Analysis > Browse Batch Results…
    rb = window.batch.results_browser
    assert rb is not None
    qtbot.waitExposed(rb)
    assert rb.folder_edit.text() == str(archive)
    labels = archive_labels(archive)
    assert "person" in labels
    combo = [rb.class_combo.itemText(i) for i in range(rb.class_combo.count())]
    assert combo == [ALL_CLASSES, *labels]

    # a class: every hit of it above the score, best first, each with its thumbnail
    assert rb.choose_class("person")
    settled(rb, qtbot)
    expected = query_detections(archive, label="person", min_score=0.5)
    assert rb.total == len(expected) > 0
    assert sorted((h.source, h.frame, h.score) for h in rb.hits) == sorted(
        (h.source, h.frame, h.score) for h in expected
    )
    assert [h.score for h in rb.hits] == sorted((h.score for h in rb.hits), reverse=True)
    assert rb.list.count() == len(rb.hits)
    assert rb.status_label.text().startswith(
        f"Showing {len(expected)} of {len(expected)} hits (person, score ≥ 0.50)"
    )
    b, g, r = class_colour(rb.hits[0].class_id)
    for row in (0, len(rb.hits) - 1):
        pixels = thumbnail(rb, row).astype(int)
        assert pixels.std() > 20  # a picture, not the grey placeholder
        box = np.abs(pixels - np.array([r, g, b])).sum(axis=2) < 60
        assert box.sum() > 100  # the hit's box, drawn in its class's colour

    # by video and time: the hits of each video in order, from more than one video
    rb.order_combo.setCurrentIndex(rb.order_combo.findData("time"))
    settled(rb, qtbot)
    assert [(h.source, h.frame) for h in rb.hits] == sorted((h.source, h.frame) for h in rb.hits)
    assert {Path(h.source).name for h in rb.hits} == {"lobby.mp4", "people.mp4"}
    qtbot.wait(100)
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert rb.grab().save(str(SHOTS / "results-browser.png"))
    rb.order_combo.setCurrentIndex(rb.order_combo.findData("score"))

    # a higher score and a cap: the best of them, and how many there are
    rb.limit = 5
    rb.score_spin.setValue(0.8)
    qtbot.waitUntil(lambda: rb.query().min_score == 0.8, timeout=TIMEOUT_MS)
    settled(rb, qtbot)
    above = query_detections(archive, label="person", min_score=0.8)
    assert rb.total == len(above) and len(rb.hits) == min(5, len(above))
    assert all(h.score >= 0.8 for h in rb.hits)
    if len(above) > 5:
        assert rb.status_label.text().startswith(f"Showing the best 5 of {len(above)} hits")

    # one source: the pattern names part of its path
    rb.limit = 200
    rb.score_spin.setValue(0.3)
    rb.class_combo.setCurrentIndex(0)  # every class
    rb.source_edit.setText("bottles")
    settled(rb, qtbot)
    bottles = query_detections(archive, min_score=0.3, source_glob="*bottles*")
    assert rb.total == len(bottles) > 0
    assert {Path(h.source).name for h in rb.hits} == {"bottles.mp4"}

    # double-click a person: the main window shows that video, paused at that frame
    rb.source_edit.setText("people")
    rb.choose_class("person")
    settled(rb, qtbot)
    row = max(range(len(rb.hits)), key=lambda i: rb.hits[i].frame)  # not the first frame
    hit = rb.hits[row]
    assert hit.frame > 0
    item = rb.list.item(row)
    rb.list.scrollToItem(item)
    qtbot.wait(50)
    centre = rb.list.visualItemRect(item).center()
    qtbot.mouseClick(rb.list.viewport(), Qt.MouseButton.LeftButton, pos=centre)  # as a
    qtbot.mouseDClick(rb.list.viewport(), Qt.MouseButton.LeftButton, pos=centre)  # user does
    qtbot.waitUntil(lambda: window.shown_index == hit.frame, timeout=TIMEOUT_MS)
    assert window.source == hit.source
    assert not window.state.playing
    counter = window.transport.time_label.text()
    assert counter.startswith(f"{hit.frame + 1}/{PEOPLE_FRAMES}"), counter


def test_a_folder_without_a_batch_says_so(window: MainWindow, tmp_path: Path) -> None:
    rb = window.batch.open_results_browser(str(tmp_path))
    assert rb.list.count() == 0 and rb.class_combo.count() == 1
    assert rb.status_label.text() == f"No detections in {tmp_path} yet."


def test_the_min_score_box_shows_its_step_arrows(
    window: MainWindow, qtbot: QtBot, tmp_path: Path
) -> None:
    """The Min score box (a QDoubleSpinBox) draws its up and down chevrons, light on the
    dark theme, as the other spin boxes do (its buttons were blank: the theme styled
    QSpinBox only)."""
    rb = window.batch.open_results_browser(str(tmp_path))
    qtbot.waitExposed(rb)
    spin = rb.score_spin
    shot = spin.grab()
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot.save(str(SHOTS / "min-score-arrows.png"))
    buttons = rgb(shot.toImage())[:, -18:]  # the buttons' column, at the box's right
    light = (buttons.astype(int).min(axis=2) > 120).sum(axis=(0, 1))
    assert light >= 8  # the chevrons' strokes (#aab2bf), both arrows
    rb.close()


def test_the_events_dock_and_the_events_tab_name_their_columns_alike(
    window: MainWindow, tmp_path: Path
) -> None:
    """Zones > Events (the dock) and Browse Batch Results' Events tab list the same events:
    their columns have the same names ("Event", "Line or zone"; the dock said "Kind",
    "Name"), the tab's first (the video) aside."""
    rb = window.batch.open_results_browser(str(tmp_path))
    dock = EventsPanel()

    def headers(table: QTableWidget) -> list[str]:
        return [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())]

    assert headers(dock.table) == headers(rb.events.table)[1:]
    assert "Line or zone" in headers(dock.table)
    dock.deleteLater()
    rb.close()


@pytest.fixture(scope="module")
def counted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A batch tracked and counted: a person crossing a door at x = 300 (half size: the
    sample's x = 600, around its frame 440) and entering the zone right of it."""
    footage = tmp_path_factory.mktemp("door")
    cut_clip(PEOPLE, footage / "door.mp4", 415, 50, (384, 216))
    cut_clip(BOTTLES, footage / "bottles.mp4", 0, 10)
    out = tmp_path_factory.mktemp("counted")
    settings = PipelineSettings(model=resolve_model(DEFAULT_MODEL))
    zones = parse_zones(
        {"lines": [{"name": "door", "points": [[300, 216], [300, 100]]}],
         "zones": [{"name": "right", "polygon": [[300, 100], [384, 100], [384, 216],
                                                 [300, 216]]}]},
        labels=settings.model.labels,
    )  # fmt: skip
    summary = run_batch([str(footage)], out, settings, progress=False,
                        tracker=TrackerSettings(), zones=zones)  # fmt: skip
    assert (summary.done, summary.failed) == (2, 0)
    return out


def test_the_events_tab_lists_a_counted_batchs_events_and_opens_one_at_its_frame(
    window: MainWindow, qtbot: QtBot, counted: Path, archive: Path
) -> None:
    rb = window.batch.open_results_browser(str(archive))  # detections only: no events
    assert not rb.tabs.isTabEnabled(1) and rb.tabs.tabText(1) == "Events"
    rb.set_folder(str(counted))
    every = query_events(counted)
    assert [(e.kind, e.name, e.direction) for e in every] == [
        ("cross", "door", "in"), ("enter", "right", "")
    ]  # fmt: skip
    assert rb.tabs.isTabEnabled(1) and rb.tabs.tabText(1) == "Events (2)"
    rb.tabs.setCurrentIndex(1)
    panel = rb.events
    qtbot.waitExposed(panel.table)
    names = [panel.name_combo.itemText(i) for i in range(panel.name_combo.count())]
    assert names == ["All lines and zones", "door", "right"]
    table = panel.table
    cells = [[table.item(r, c).text() for c in range(table.columnCount())]
             for r in range(table.rowCount())]  # fmt: skip
    frame = every[0].frame
    assert cells == [
        ["door.mp4", format_time(every[0].time_s), str(frame + 1), "#1", "person", "cross",
         "door", "in"],
        ["door.mp4", format_time(every[1].time_s), str(frame + 1), "#1", "person", "enter",
         "right", ""],
    ]  # fmt: skip
    assert panel.count_label.text().startswith("Showing 2 of 2 events.")
    qtbot.wait(100)
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert rb.grab().save(str(SHOTS / "results-events.png"))

    # the filters: crossings only, then the other way (none), then entering (no direction)
    panel.kind_combo.setCurrentIndex(panel.kind_combo.findData("cross"))
    assert table.rowCount() == 1 and table.item(0, 5).text() == "cross"
    panel.direction_combo.setCurrentIndex(panel.direction_combo.findData("out"))
    assert table.rowCount() == 0
    assert panel.count_label.text().startswith("Showing 0 of 2 events.")
    panel.kind_combo.setCurrentIndex(panel.kind_combo.findData("enter"))
    assert not panel.direction_combo.isEnabled()
    assert table.rowCount() == 1 and table.item(0, 6).text() == "right"
    panel.name_combo.setCurrentIndex(panel.name_combo.findData("door"))
    assert table.rowCount() == 0
    panel.name_combo.setCurrentIndex(0)
    panel.source_edit.setText("bottles")
    assert table.rowCount() == 0
    panel.source_edit.setText("door")
    assert table.rowCount() == 1

    # double-click the event: the main window shows its video, paused at its frame
    centre = table.visualItemRect(table.item(0, 0)).center()
    qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=centre)
    qtbot.mouseDClick(table.viewport(), Qt.MouseButton.LeftButton, pos=centre)
    qtbot.waitUntil(lambda: window.shown_index == frame, timeout=TIMEOUT_MS)
    assert window.source == every[1].source and not window.state.playing
