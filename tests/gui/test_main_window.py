"""The main window with the real sample video and the real model, under Xvfb."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import av
import numpy as np
import onnx
import pytest
from framelens.core.pipeline.devices import cuda_available
from framelens.gui.common.screenshots import grab_window
from framelens.gui.common.settings import Settings
from framelens.gui.player.dialogs import ImportModelDialog
from framelens.gui.player.main_window import MainWindow
from PySide6.QtCore import QMimeData, QPointF, QSettings, Qt, QUrl
from PySide6.QtGui import QDropEvent, QImage
from PySide6.QtWidgets import QDialog, QMessageBox, QPushButton
from pytestqt.qtbot import QtBot

pytestmark = pytest.mark.gui

ROOT = Path(__file__).resolve().parents[2]
RESULTS_TIMEOUT_MS = 60_000


def image_array(image: QImage) -> np.ndarray:
    """An (H, W, 3) uint8 copy of a QImage."""
    img = image.convertToFormat(QImage.Format.Format_RGB888)
    w, h, stride = img.width(), img.height(), img.bytesPerLine()
    data = np.frombuffer(img.constBits(), dtype=np.uint8, count=stride * h)
    return data.reshape(h, stride)[:, : w * 3].reshape(h, w, 3).copy()


def curve_length(curve: object) -> int:
    x, _y = curve.getData()  # type: ignore[attr-defined]
    return 0 if x is None else len(x)


def start(window: MainWindow, qtbot: QtBot, sample: str, frames: int = 20) -> None:
    window.open_source(sample)
    qtbot.waitUntil(lambda: window.results_shown >= frames, timeout=RESULTS_TIMEOUT_MS)


def pause(window: MainWindow, qtbot: QtBot) -> None:
    window.controller.pause()
    qtbot.waitUntil(lambda: not window.state.playing, timeout=10_000)


def last_index(window: MainWindow) -> int:
    result = window.controller.last_result
    return -1 if result is None else result.frame.index


def test_plays_video_draws_canvas_and_fills_plots(
    window: MainWindow, qtbot: QtBot, sample: str
) -> None:
    start(window, qtbot, sample)
    pixels = image_array(window.canvas.grab_frame_image())
    assert pixels.std() > 10, "canvas looks blank"
    qtbot.waitUntil(lambda: curve_length(window.plots.fps_curve) > 0, timeout=5000)
    x, y = window.plots.stage_curves["inference"].getData()
    assert x is not None and len(x) > 0
    assert np.nanmax(y) > 0
    assert window.windowTitle() == "FrameLens — one-by-one-person-detection.mp4"
    assert "768×432" in window.source_label.text()
    assert "onnxruntime" in window.backend_label.text()
    assert window.settings.recent[0] == sample


def test_clicking_the_seek_track_seeks_where_it_was_clicked(
    window: MainWindow, qtbot: QtBot, sample: str
) -> None:
    """Rough edge 2: a click on the track seeks there, as in every video player (a plain
    QSlider pages by a fixed step instead)."""
    from PySide6.QtCore import QPoint

    start(window, qtbot, sample, frames=3)
    pause(window, qtbot)
    window.show()
    slider = window.transport.slider
    qtbot.waitExposed(slider)
    before = last_index(window)
    for fraction in (0.75, 0.25):
        target = round(fraction * slider.maximum())
        qtbot.mouseClick(
            slider,
            Qt.MouseButton.LeftButton,
            pos=QPoint(round(fraction * slider.width()), slider.height() // 2),
        )
        qtbot.waitUntil(
            lambda t=target: abs(last_index(window) - t) <= 0.04 * slider.maximum(), timeout=20_000
        )  # type: ignore[misc]
    assert abs(last_index(window) - before) > 100  # it moved far, not a page step


def test_slider_seek_shows_requested_frame(window: MainWindow, qtbot: QtBot, sample: str) -> None:
    start(window, qtbot, sample, frames=3)
    pause(window, qtbot)
    window.transport.slider.setValue(500)
    qtbot.waitUntil(lambda: last_index(window) == 500, timeout=20_000)
    # rough edge 3: the counter and the status bar count the same way (frame 501 of 1394)
    assert window.transport.time_label.text().startswith("501/1394")
    assert "1394 frames" in window.source_label.text()
    window.playback.back_action.trigger()
    qtbot.waitUntil(lambda: last_index(window) == 499, timeout=20_000)
    window.playback.forward_action.trigger()
    qtbot.waitUntil(lambda: last_index(window) == 500, timeout=20_000)
    assert window.transport.slider.value() == 500


def test_overlay_toggle_changes_canvas(window: MainWindow, qtbot: QtBot, sample: str) -> None:
    start(window, qtbot, sample, frames=3)
    pause(window, qtbot)
    window.controller.seek(300)  # a frame with a person in it
    qtbot.waitUntil(lambda: last_index(window) == 300, timeout=20_000)
    assert window.controller.last_result is not None
    assert len(window.controller.last_result.output) > 0
    qtbot.wait(200)
    before = image_array(window.canvas.grab_frame_image())
    shown = window.results_shown
    window.panel.overlay_checks["boxes"].setChecked(False)
    window.panel.overlay_checks["labels"].setChecked(False)
    window.panel.overlay_checks["scores"].setChecked(False)
    qtbot.waitUntil(lambda: window.results_shown >= shown + 3, timeout=20_000)
    qtbot.wait(200)
    after = image_array(window.canvas.grab_frame_image())
    assert last_index(window) == 300
    assert np.abs(before.astype(int) - after).sum() > 1000
    assert window.settings.overlay("boxes") is False


def test_confidence_slider_refilters_paused_frame(
    window: MainWindow, qtbot: QtBot, sample: str
) -> None:
    start(window, qtbot, sample, frames=3)
    pause(window, qtbot)
    window.controller.seek(300)
    qtbot.waitUntil(lambda: last_index(window) == 300, timeout=20_000)
    window.panel.conf_slider.setValue(99)
    qtbot.waitUntil(
        lambda: (
            window.controller.last_result is not None
            and len(window.controller.last_result.output) == 0
        ),
        timeout=20_000,
    )
    assert window.panel.conf_label.text() == "0.99"


def test_bad_file_shows_one_line_error(window: MainWindow, qtbot: QtBot, tmp_path: Path) -> None:
    bad = tmp_path / "not-a-video.mp4"
    bad.write_bytes(b"this is not a video")
    window.open_source(str(bad))
    qtbot.waitUntil(window.error_box.isVisible, timeout=20_000)
    text = window.error_box.text()
    assert text and "\n" not in text and "Traceback" not in text
    assert str(bad) not in window.settings.recent
    window.error_box.close()


def test_space_toggles_playback(window: MainWindow, qtbot: QtBot, sample: str) -> None:
    start(window, qtbot, sample, frames=3)
    assert window.state.playing
    window.activateWindow()  # window shortcuts need the active window
    qtbot.waitUntil(window.isActiveWindow, timeout=5000)
    qtbot.keyClick(window, Qt.Key.Key_Space)
    qtbot.waitUntil(lambda: not window.state.playing, timeout=10_000)
    qtbot.keyClick(window, Qt.Key.Key_Space)
    qtbot.waitUntil(lambda: window.state.playing, timeout=10_000)


def test_export_dialog_writes_twenty_frames(
    window: MainWindow, qtbot: QtBot, sample: str, tmp_path: Path
) -> None:
    start(window, qtbot, sample, frames=3)
    pause(window, qtbot)
    window.controller.seek(100)
    qtbot.waitUntil(lambda: window.shown_index == 100, timeout=20_000)
    dialog = window.open_export_dialog()
    assert dialog is not None
    out = tmp_path / "export.mp4"
    dets = tmp_path / "new folder" / "export.json"  # typed in, not there yet: made
    dialog.video_edit.setText(str(out))
    dialog.dets_check.setChecked(True)
    dialog.dets_edit.setText(str(dets))
    # rough edge 3: the range counts frames as the transport does ("101/1394" on screen)
    assert dialog.end_spin.value() == 1394  # the whole video: 1 to 1394
    next(b for b in dialog.findChildren(QPushButton) if b.text() == "From current frame").click()
    assert window.transport.time_label.text().startswith("101/1394")
    assert dialog.start_spin.value() == 101
    dialog.end_spin.setValue(120)
    with qtbot.waitSignal(window.controller.exportFinished, timeout=120_000) as finished:
        dialog.export_button.click()
    assert finished.args == [[str(out), str(dets)]]
    with av.open(str(out)) as container:
        frames = sum(1 for _ in container.decode(video=0))
    assert frames == 20
    assert dets.is_file() and dets.stat().st_size > 0
    indexes = [f["index"] for f in json.loads(dets.read_text())["frames"]]
    assert indexes == list(range(100, 120))  # frames 101 to 120: indexes 100 to 119
    qtbot.waitUntil(lambda: dialog.progress.value() == 20, timeout=5000)
    # rough edge 13: the message names every file written, each one there
    lines = dialog.status.text().splitlines()
    assert lines[0] == "Saved 2 files:"
    assert [Path(line.strip()) for line in lines[1:]] == [out, dets]
    assert all(Path(line.strip()).is_file() for line in lines[1:])
    dialog.close()


def test_a_second_export_does_not_replace_the_first_unasked(
    window: MainWindow, qtbot: QtBot, sample: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The suggested names are numbered past an earlier export's, and a name that exists
    is replaced only once the user says so (Cancel keeps the file as it was)."""
    video = tmp_path / "clip.mp4"
    shutil.copy(sample, video)
    start(window, qtbot, str(video), frames=3)
    pause(window, qtbot)
    first = window.open_export_dialog()
    assert first is not None
    assert first.video_edit.text() == str(tmp_path / "clip_annotated.mp4")
    assert first.dets_edit.text() == str(tmp_path / "clip_detections.json")
    first.dets_check.setChecked(True)
    first.end_spin.setValue(4)
    with qtbot.waitSignal(window.controller.exportFinished, timeout=120_000):
        first.export_button.click()
    first.close()
    second = window.open_export_dialog()
    assert second is not None
    assert second.video_edit.text() == str(tmp_path / "clip_annotated-2.mp4")
    assert second.dets_edit.text() == str(tmp_path / "clip_detections-2.json")
    exported = tmp_path / "clip_annotated.mp4"
    second.video_edit.setText(str(exported))  # back to the first one's name
    second.end_spin.setValue(8)
    before = exported.read_bytes()
    asked: list[str] = []

    def answer(choice: str | None) -> None:
        def exec_(box: QMessageBox) -> int:
            asked.append(box.text())
            for button in box.buttons():
                if button.text() == choice:
                    button.click()
            return 0

        monkeypatch.setattr(QMessageBox, "exec", exec_)

    answer(None)  # the box closed: as Cancel
    second.export_button.click()
    assert asked and "clip_annotated.mp4" in asked[0] and exported.read_bytes() == before
    assert not second._running
    monkeypatch.setenv("HOME", str(tmp_path))  # the same file typed from home: asked too
    second.video_edit.setText("~/clip_annotated.mp4")
    second.export_button.click()
    assert len(asked) == 2 and exported.read_bytes() == before
    second.dets_check.setChecked(True)  # one name for both outputs: refused, not asked
    second.dets_edit.setText(str(exported))
    second.export_button.click()
    assert len(asked) == 2 and "two different names" in second.status.text()
    second.dets_check.setChecked(False)
    second.video_edit.setText(str(video))  # over the video it is made from: refused
    second.export_button.click()
    assert len(asked) == 2 and "replace the video it is made from" in second.status.text()
    second.video_edit.setText(str(exported))
    answer("Replace")
    with qtbot.waitSignal(window.controller.exportFinished, timeout=120_000):
        second.export_button.click()
    assert len(asked) == 3
    with av.open(str(exported)) as container:
        assert sum(1 for _ in container.decode(video=0)) == 8
    second.close()


def test_export_of_png_frames_names_the_folder_and_what_it_holds(
    window: MainWindow, qtbot: QtBot, sample: str, tmp_path: Path
) -> None:
    start(window, qtbot, sample, frames=3)
    pause(window, qtbot)
    dialog = window.open_export_dialog()
    assert dialog is not None
    folder = tmp_path / "frames"
    dialog.video_edit.setText(f"{folder}/")  # DIR/: one PNG per frame
    dialog.start_spin.setValue(11)  # frames 11 to 15 as the transport counts them
    dialog.end_spin.setValue(15)
    with qtbot.waitSignal(window.controller.exportFinished, timeout=120_000):
        dialog.export_button.click()
    written = sorted(p.name for p in folder.iterdir())
    # named by the frame's index in the video (frames 11 to 15: indexes 10 to 14)
    assert written == [f"frame_{i:06d}.png" for i in range(10, 15)] + ["provenance.json"]
    assert json.loads((folder / "provenance.json").read_text())["index"] == list(range(10, 15))
    assert dialog.status.text() == (
        f"Saved {folder}/ (5 PNG frames: frame_000010.png … frame_000014.png and provenance.json)"
    )
    dialog.close()


def test_cancelled_export_leaves_no_file(
    window: MainWindow, qtbot: QtBot, sample: str, tmp_path: Path
) -> None:
    start(window, qtbot, sample, frames=3)
    pause(window, qtbot)
    dialog = window.open_export_dialog()
    assert dialog is not None
    folder = tmp_path / "exports"
    folder.mkdir()
    out = folder / "cancelled.mp4"
    dialog.video_edit.setText(str(out))
    dialog.export_button.click()
    # what the user sees before cancelling: the bar moving (not a pytest-qt blocker on the
    # progress signal, which the export's thread emits every frame: one such wait ended
    # in a segfault inside pytest-qt under a loaded CI run, its queued calls outliving it)
    qtbot.waitUntil(lambda: dialog.progress.value() > 0, timeout=120_000)
    with qtbot.waitSignal(window.controller.exportFailed, timeout=60_000) as failed:
        dialog.cancel_button.click()
    assert failed.args == ["cancelled"]
    assert not out.exists()
    assert list(folder.iterdir()) == []  # no partial file either
    dialog.close()


def test_snapshot_saves_png(window: MainWindow, qtbot: QtBot, sample: str, tmp_path: Path) -> None:
    start(window, qtbot, sample, frames=3)
    pause(window, qtbot)
    path = tmp_path / "frame.png"
    with qtbot.waitSignal(window.controller.snapshotSaved, timeout=10_000):
        window.save_snapshot(str(path))
    image = QImage(str(path))
    assert (image.width(), image.height()) == (768, 432)


def test_snapshot_suggests_the_videos_folder_then_where_the_last_one_went(
    window: MainWindow, qtbot: QtBot, sample: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The save dialog starts where Export writes (the video's folder), not in the home
    folder; once a snapshot went elsewhere, there."""
    from framelens.gui.player import main_sources

    video = tmp_path / "footage" / "clip.mp4"
    video.parent.mkdir()
    shutil.copy(sample, video)
    elsewhere = tmp_path / "shots"
    elsewhere.mkdir()
    suggested: list[str] = []

    def save_file(parent: object, title: str, path: str, name_filter: str) -> str:
        suggested.append(path)
        return str(elsewhere / Path(path).name)

    monkeypatch.setattr(main_sources, "save_file", save_file)
    start(window, qtbot, str(video), frames=3)
    pause(window, qtbot)
    for _ in range(2):
        with qtbot.waitSignal(window.controller.snapshotSaved, timeout=10_000):
            window.save_snapshot()
    index = window.controller.last_result.frame.index
    assert suggested == [
        str(video.parent / f"clip_{index:06d}.png"),
        str(elsewhere / f"clip_{index:06d}.png"),
    ]
    assert (elsewhere / f"clip_{index:06d}.png").is_file()


def test_settings_persist_between_windows(
    qtbot: QtBot, settings_file: Path, app_settings: Settings
) -> None:
    first = MainWindow(settings=app_settings)
    qtbot.addWidget(first)
    first.panel.conf_slider.setValue(40)
    first.panel.overlay_checks["scores"].setChecked(False)
    first.transport.realtime_button.setChecked(False)
    first.close()
    again = Settings(QSettings(str(settings_file), QSettings.Format.IniFormat))
    second = MainWindow(settings=again)
    qtbot.addWidget(second)
    assert second.panel.conf_label.text() == "0.40"
    assert not second.panel.overlay_checks["scores"].isChecked()
    assert not second.transport.realtime_button.isChecked()
    second.close()


def test_device_menu_persists_and_explains_missing_cuda(
    qtbot: QtBot, settings_file: Path, app_settings: Settings
) -> None:
    first = MainWindow(settings=app_settings)
    qtbot.addWidget(first)
    combo = first.panel.device_combo
    ids = [combo.itemData(i) for i in range(combo.count())]
    assert ids[:2] == ["auto", "cpu"] and any(i.startswith("cuda") for i in ids)
    cuda_row = next(i for i, d in enumerate(ids) if d.startswith("cuda"))
    if not cuda_available():  # this machine: shown, greyed, with the reason as tooltip
        assert not combo.model().item(cuda_row).isEnabled()
        assert "CUDA provider" in combo.itemData(cuda_row, Qt.ItemDataRole.ToolTipRole)
        messages: list[str] = []
        first.controller.errorOccurred.connect(messages.append)
        first.choose_device("cuda:0")  # as if chosen anyway: refused with one line
        assert messages and "CUDA is not usable here" in messages[-1]
        assert combo.currentData() == "auto"
    first.choose_device("cpu")
    assert first.controller.settings is None or first.controller.settings.device == "cpu"
    first.close()
    again = Settings(QSettings(str(settings_file), QSettings.Format.IniFormat))
    second = MainWindow(settings=again)
    qtbot.addWidget(second)
    assert second.panel.device_combo.currentData() == "cpu"
    second.close()


def test_backend_menu_offers_tensorrt_only_where_it_runs(
    qtbot: QtBot, settings_file: Path, app_settings: Settings
) -> None:
    from framelens.core.pipeline.devices import backend_choices

    why = next(c.unavailable for c in backend_choices() if c.id == "tensorrt")
    app_settings.backend = "tensorrt"  # saved on a machine that had TensorRT, say
    first = MainWindow(settings=app_settings)
    qtbot.addWidget(first)
    combo = first.panel.backend_combo
    ids = [combo.itemData(i) for i in range(combo.count())]
    assert ids == ["onnxruntime", "tensorrt"]
    if why is not None:  # this machine (no GPU): greyed, the reason as tooltip
        assert not combo.model().item(1).isEnabled()
        assert combo.itemData(1, Qt.ItemDataRole.ToolTipRole) == why
        assert combo.currentData() == "onnxruntime"  # the saved choice fell back
        messages: list[str] = []
        first.controller.errorOccurred.connect(messages.append)
        first.choose_backend("tensorrt")  # as if chosen anyway: refused with one line
        assert messages and messages[-1].startswith("TensorRT cannot be used")
        assert combo.currentData() == "onnxruntime"
    assert first.controller.settings is None or first.controller.settings.backend == "onnxruntime"
    first.close()
    again = Settings(QSettings(str(settings_file), QSettings.Format.IniFormat))
    assert again.backend == "onnxruntime"


def test_canvas_zoom_and_reset(window: MainWindow, qtbot: QtBot, sample: str) -> None:
    start(window, qtbot, sample, frames=3)
    pause(window, qtbot)
    canvas = window.canvas
    fitted = canvas.image_rect()
    centre = fitted.center()
    canvas.zoom_at(2.0, centre)
    zoomed = canvas.image_rect()
    assert zoomed.width() == pytest.approx(fitted.width() * 2)
    assert zoomed.center().x() == pytest.approx(centre.x(), abs=1)
    canvas.setFocus()
    qtbot.keyClick(canvas, Qt.Key.Key_0)
    assert canvas.image_rect().width() == pytest.approx(fitted.width())


def test_window_screenshot(window: MainWindow, qtbot: QtBot, sample: str, tmp_path: Path) -> None:
    """Grab the whole window while playing, tracking people across a counting line
    saved beside the video; FRAMELENS_SCREENSHOT=path keeps a copy (the README's)."""
    keep = os.environ.get("FRAMELENS_SCREENSHOT")
    video = tmp_path / "walkers.mp4"
    shutil.copy(sample, video)
    door = {"name": "door", "points": [[600, 431], [600, 200]], "classes": ["person"]}
    Path(f"{video}.zones.json").write_text(json.dumps({"lines": [door], "zones": []}))
    window.transport.realtime_button.setChecked(False)
    window.tracking.kind_actions["bytetrack"].trigger()
    start(window, qtbot, str(video), frames=3)
    window.controller.seek(150)  # the first walker crosses the door near frame 190
    # the README's copy shows plots well filled, their median line drawn (it refreshes
    # once a second); the grab itself needs only the video playing past the seek
    shown = 120 if keep else 13
    qtbot.waitUntil(lambda: window.results_shown >= shown, timeout=RESULTS_TIMEOUT_MS)
    if keep:
        qtbot.wait(1200)
    target = Path(keep or tmp_path / "screenshot.png")
    target.parent.mkdir(parents=True, exist_ok=True)
    assert grab_window(window).save(str(target))  # the canvas's overlays included
    canvas = image_array(window.canvas.grab_frame_image())
    assert canvas.std() > 10
    shown = window.controller.last_result
    assert shown is not None and getattr(shown.output, "track_ids", None) is not None


def drop(window: MainWindow, *paths: str) -> None:
    """Files dropped on the window, as a file manager drops them."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(p) for p in paths])
    event = QDropEvent(
        QPointF(200, 200),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    window.dropEvent(event)


def test_dropping_a_file_opens_it(window: MainWindow, qtbot: QtBot, sample: str) -> None:
    drop(window, sample)
    qtbot.waitUntil(lambda: window.results_shown >= 3, timeout=RESULTS_TIMEOUT_MS)
    assert window.source == sample
    assert window.sources.recent_menu.actions()[0].toolTip() == sample


def test_a_wall_layout_dropped_with_videos_is_one_message(
    window: MainWindow, qtbot: QtBot, sample: str, tmp_path: Path
) -> None:
    layout = tmp_path / "site.flwall"
    layout.write_text('{"framelens_wall": 1, "sources": ["a.mp4"]}')
    drop(window, sample, str(layout))
    qtbot.waitUntil(window.error_box.isVisible, timeout=10_000)
    assert "wall layout on its own" in window.error_box.text()
    assert window.wall.window is None
    window.error_box.close()


def test_import_onnx_asks_layout_and_adds_it_to_the_model_list(
    window: MainWindow, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(ROOT / "models" / "yolox_nano.onnx")  # YOLOX or YOLOv5? the shape cannot tell

    def choose_yolox(dialog: ImportModelDialog) -> int:
        assert dialog.message.text()
        dialog.layout_combo.setCurrentText("yolox")
        return int(QDialog.DialogCode.Accepted)

    monkeypatch.setattr(ImportModelDialog, "exec", choose_yolox)
    window.import_model(path)
    assert window.panel.model_combo.currentData() == path
    assert window.settings.model == path
    assert window.settings.model_options()[0] == "yolox"
    assert window.controller.settings is not None
    assert window.controller.settings.model.layout == "yolox"


def test_import_unrecognised_onnx_asks_for_layout(
    window: MainWindow, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["images"], ["output"])],
        "identity",
        [onnx.helper.make_tensor_value_info("images", onnx.TensorProto.FLOAT, [1, 3, 64, 64])],
        [onnx.helper.make_tensor_value_info("output", onnx.TensorProto.FLOAT, [1, 3, 64, 64])],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])
    path = tmp_path / "mystery.onnx"
    onnx.save(model, str(path))
    before = window.panel.model_combo.currentData()
    seen: list[str] = []

    def cancel(dialog: ImportModelDialog) -> int:
        seen.append(dialog.message.text())
        return int(QDialog.DialogCode.Rejected)

    monkeypatch.setattr(ImportModelDialog, "exec", cancel)
    window.import_model(str(path))
    assert seen and seen[0]  # the dialog explained why it needs help
    assert window.panel.model_combo.currentData() == before


def test_a_camera_that_fails_to_open_leaves_the_video_playing(
    window: MainWindow, qtbot: QtBot, sample: str
) -> None:
    """Rough edge 1: opening a camera that is not there reports it and leaves the loaded
    video as it was: its title, source line and slider, its zoom and the history of its
    plots, still playing, Space still works."""
    start(window, qtbot, sample, frames=3)
    title, label = window.windowTitle(), window.source_label.text()
    window.canvas.zoom_at(2.0, QPointF(10, 10))
    zoom, plotted = window.canvas.zoom, len(window.plots._x)
    assert zoom > 1 and plotted >= 3
    window.open_source("7")  # no camera 7 here
    qtbot.waitUntil(lambda: "camera 7" in window.error_box.text().lower(), timeout=20_000)
    assert window.windowTitle() == title and window.source_label.text() == label
    assert window.canvas.zoom == zoom and len(window.plots._x) >= plotted
    assert window.source == sample and window.settings.recent[0] == sample
    shown = window.results_shown
    qtbot.waitUntil(lambda: window.results_shown > shown + 3, timeout=20_000)  # still playing
    window.playback.play_action.trigger()  # Space
    qtbot.waitUntil(lambda: not window.state.playing, timeout=10_000)


def test_the_status_bar_says_which_precision_runs_and_which_is_coming(
    window: MainWindow, qtbot: QtBot, sample: str
) -> None:
    """Rough edge 10: while INT8 is prepared (a restored INT8 calibrating at start, or
    one just chosen), the status bar does not claim FP32 alone while the panel says
    INT8: it says FP32 runs and INT8 is coming."""
    start(window, qtbot, sample, frames=3)
    assert window.model_label.text().endswith("· FP32")
    window.choose_precision("int8")
    qtbot.waitUntil(lambda: window.controller.preparing == "int8", timeout=10_000)
    qtbot.waitUntil(lambda: "FP32 → INT8 (preparing)" in window.model_label.text(), timeout=10_000)
    window.controller.cancel_precision()
    qtbot.waitUntil(lambda: window.controller.preparing is None, timeout=60_000)
    qtbot.waitUntil(lambda: window.model_label.text().endswith("· FP32"), timeout=10_000)


def test_in_a_narrow_window_the_seek_bar_and_the_panel_keep_their_size(
    window: MainWindow, qtbot: QtBot, sample: str
) -> None:
    """Half a 1920-pixel screen: the seek bar has a row of its own, the video's whole
    width (beside the buttons it shrank to its knob below ~1000 pixels), and the side
    panel is never narrower than its controls (it cut off the INT8 button)."""
    from tests.gui.shots import shots_dir

    start(window, qtbot, sample, frames=3)
    pause(window, qtbot)
    window.resize(960, 700)
    qtbot.waitUntil(lambda: window.width() <= 1000, timeout=5000)
    qtbot.wait(200)  # the layouts settle
    slider, central = window.transport.slider, window.centralWidget()
    assert slider.width() >= 0.9 * central.width(), (slider.width(), central.width())
    panel = window.panel
    assert panel.width() >= panel.minimumSizeHint().width()
    # the INT8 button lies wholly inside the dock's visible part
    dock = window.panel_dock
    int8 = window.panel.precision.buttons["int8"]
    right = int8.mapTo(dock, int8.rect().topRight()).x()
    assert right <= dock.width(), (right, dock.width())
    grab_window(window).save(str(shots_dir("FRAMELENS_SHOTS", "window") / "narrow-960.png"))
