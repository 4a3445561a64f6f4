"""File > Batch Analysis… under Xvfb: a folder dropped on the window (two real clips and
a corrupt file) run through the real YOLOX-Nano in this process (api.run_batch, no Ray);
each input's state, progress, fps and error in the table, the batch's progress and
summary; a second Start resumes (what is done is skipped); the folder of an earlier batch
shows its manifest's states; Cancel keeps what finished and nothing of the rest.

Screenshots go to a temporary folder; FRAMELENS_BATCH_SCREENSHOTS=docs writes the one
the user guide shows (docs/batch-window.png).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from archive_clips import BOTTLES, PEOPLE, cut_clip, write_corrupt
from framelens.core.api import InputProgress, read_manifest
from framelens.gui.batch.batch_table import ERROR, INPUT, PROGRESS, STATE_COLOURS
from framelens.gui.batch.batch_window import BatchWindow
from framelens.gui.common.settings import Settings
from framelens.gui.player.main_window import MainWindow
from legibility import contrast
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QColor, QDragEnterEvent, QDropEvent, QPalette
from pytestqt.qtbot import QtBot
from shots import shots_dir

pytestmark = pytest.mark.gui

SHOTS = shots_dir("FRAMELENS_BATCH_SCREENSHOTS", "batch")
TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def footage(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of footage: people (60 frames, in a subfolder), bottles (45) and a file
    whose index was cut off."""
    root = tmp_path_factory.mktemp("footage")
    people = cut_clip(PEOPLE, root / "hall" / "people.mp4", 300, 60, (384, 216))
    cut_clip(BOTTLES, root / "bottles.mp4", 0, 45)
    write_corrupt(people, root / "broken.mp4")
    return root


def open_batch(window: MainWindow, qtbot: QtBot) -> BatchWindow:
    window.batch.batch_action.trigger()  # File > Batch Analysis…
    bw = window.batch.batch_window
    assert bw is not None
    qtbot.waitExposed(bw)
    return bw


def drop(widget: BatchWindow, paths: list[Path]) -> None:
    """Files or folders dragged onto the window and dropped, as a file manager does."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    args = (Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton)
    enter = QDragEnterEvent(QPoint(100, 100), *args, Qt.KeyboardModifier.NoModifier)
    widget.dragEnterEvent(enter)
    assert enter.isAccepted()
    event = QDropEvent(QPointF(100, 100), *args, Qt.KeyboardModifier.NoModifier)
    widget.dropEvent(event)
    assert event.isAccepted()


def run(bw: BatchWindow, qtbot: QtBot) -> list[InputProgress]:
    """Start pressed; every event the window got, once the batch has ended."""
    events: list[InputProgress] = []
    bw.runner.progressed.connect(events.append)
    qtbot.mouseClick(bw.start_button, Qt.MouseButton.LeftButton)
    assert bw.runner.running and not bw.start_button.isEnabled()
    qtbot.waitUntil(lambda: bw.summary is not None, timeout=TIMEOUT_MS)
    bw.runner.progressed.disconnect(events.append)
    return events


def cell(bw: BatchWindow, name: str, column: int, role: int = Qt.ItemDataRole.DisplayRole) -> str:
    (row,) = [i for i, r in enumerate(bw.model.rows) if Path(r.path).name == name]
    return str(bw.model.data(bw.model.index(row, column), role) or "")


def states(bw: BatchWindow) -> dict[str, str]:
    return {Path(r.path).name: r.state for r in bw.model.rows}


def test_a_dropped_folder_runs_with_states_progress_errors_and_resumes(
    window: MainWindow, qtbot: QtBot, footage: Path, tmp_path: Path, app_settings: Settings
) -> None:
    assert window.batch.batch_action.shortcut().toString() == "Ctrl+Shift+B"
    bw = open_batch(window, qtbot)
    assert "yolox-nano · detect · FP32 · CPU" in bw.options.settings_label.text()
    drop(bw, [footage])  # the folder: its videos, found recursively
    assert states(bw) == dict.fromkeys(["bottles.mp4", "broken.mp4", "people.mp4"], "pending")
    assert cell(bw, "people.mp4", INPUT) == os.path.join("hall", "people.mp4")
    out = tmp_path / "archive" / "first"  # not there yet: Start creates it
    bw.set_output(str(out))

    events = run(bw, qtbot)
    assert states(bw) == {"bottles.mp4": "done", "broken.mp4": "failed", "people.mp4": "done"}
    # it was followed while it ran: frames counted up on a running row, by the local worker
    assert any(e.state == "running" and 0 < e.frames_done < e.frames_total for e in events)
    assert cell(bw, "people.mp4", PROGRESS) == "60/60"
    assert cell(bw, "bottles.mp4", PROGRESS) == "45/45"
    for row in bw.model.rows:
        if row.state == "done":
            assert row.fps > 0 and row.worker == "local"
    error = cell(bw, "broken.mp4", ERROR)
    assert error.startswith("broken.mp4 is not a readable video")  # the path shortened
    assert str(footage / "broken.mp4") in cell(bw, "broken.mp4", ERROR, Qt.ItemDataRole.ToolTipRole)
    assert bw.progress.value() == bw.progress.maximum()  # 100%
    assert bw.summary_label.text().startswith("Done: 2 analysed, 1 failed · 105 frames")
    # said in the main window too (the Batch window may have been closed meanwhile)
    assert window.status_bar.currentMessage() == f"Batch analysis: {bw.summary_label.text()}"
    assert bw.start_button.isEnabled() and not bw.cancel_button.isEnabled()
    assert bw.browse_button.isEnabled()
    # what the table says is what the folder holds
    assert {Path(s.path).name: s.state for s in read_manifest(out)} == states(bw)
    assert sorted(p.name for p in (out / "detections").glob("*.parquet")) == [
        "bottles.parquet",
        "people.parquet",
    ]
    assert app_settings.batch_output == str(out)

    # every state legible on the table's dark background (WCAG AA, 4.5:1)
    base = bw.table.palette().color(QPalette.ColorRole.Base)
    for colour in STATE_COLOURS.values():
        c = QColor(colour)
        ratio = contrast(np.array([c.red(), c.green(), c.blue()]), np.array(base.getRgb()[:3]))
        assert float(ratio) >= 4.5, colour
    qtbot.wait(100)
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert bw.grab().save(str(SHOTS / "batch-window.png"))

    # Start again into the same folder: the done inputs are skipped, the failed retried
    events = run(bw, qtbot)
    assert states(bw) == {"bottles.mp4": "skipped", "broken.mp4": "failed", "people.mp4": "skipped"}
    assert cell(bw, "people.mp4", PROGRESS) == "done before"
    assert bw.summary is not None and bw.summary.frames == 0
    assert "0 analysed, 2 skipped (done before), 1 failed" in bw.summary_label.text()

    # the choices are remembered; a new window opens on the folder with its states
    bw.options.mode_combo.setCurrentIndex(bw.options.mode_combo.findData("ray-cluster"))
    assert bw.options.address_edit.isVisible()
    bw.options.address_edit.setText("ray://head:10001")
    bw.options.address_edit.editingFinished.emit()
    bw.options.export_check.setChecked(True)
    request = bw.request()
    assert request is not None and request.ray == "ray://head:10001" and request.export_video
    again = BatchWindow(lambda: window.controller.settings, app_settings)
    qtbot.addWidget(again)
    assert again.options.output == str(out)
    assert again.options.mode == "ray-cluster" and again.options.ray == "ray://head:10001"
    assert again.options.export_video
    assert states(again) == {"bottles.mp4": "done", "broken.mp4": "failed", "people.mp4": "done"}
    assert again.summary_label.text().startswith("This folder holds an earlier batch: 2 of 3")
    again.options.mode_combo.setCurrentIndex(again.options.mode_combo.findData("ray-local"))
    assert again.options.ray == "local" and app_settings.batch_run_mode == "ray-local"
    again.close()


def test_cancel_keeps_what_finished_and_nothing_of_the_rest(
    window: MainWindow, qtbot: QtBot, tmp_path: Path
) -> None:
    footage = tmp_path / "footage"
    cut_clip(PEOPLE, footage / "a-short.mp4", 300, 30, (384, 216))
    long = cut_clip(PEOPLE, footage / "b-long.mp4", 0, 300, (384, 216))
    bw = open_batch(window, qtbot)
    bw.clear_inputs()
    assert bw.add_inputs([str(footage)]) == 2
    out = tmp_path / "out"
    bw.set_output(str(out))

    def cancel_once_long_runs(event: InputProgress) -> None:
        if event.path == str(long) and event.state == "running" and event.frames_done > 0:
            qtbot.mouseClick(bw.cancel_button, Qt.MouseButton.LeftButton)

    bw.runner.progressed.connect(cancel_once_long_runs)
    run(bw, qtbot)
    assert bw.summary is not None and bw.summary.cancelled
    assert states(bw) == {"a-short.mp4": "done", "b-long.mp4": "pending"}
    text = bw.summary_label.text()
    assert text.startswith("Cancelled after")
    assert "kept the outputs of 1 finished input; 1 unfinished input left no files" in text
    assert bw.progress.value() < bw.progress.maximum()
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert not [name for name in written if "b-long" in name or "partial" in name], written
    assert os.path.join("detections", "a-short.parquet") in written
    assert bw.start_button.isEnabled() and not bw.cancel_button.isEnabled()
