"""Rough edges a new user hit in the main window (issue 26), with the real sample video
and the real model, under Xvfb."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import av
import numpy as np
import pytest
from framelens.core.api import (
    VIDEO_SUFFIXES,
    Detections,
    InputProgress,
    TileState,
    list_cameras,
)
from framelens.core.stages.sources.file import FileSource
from framelens.gui.batch.batch_table import PROGRESS, WORKER, BatchTableModel, ProgressDelegate
from framelens.gui.common.file_dialogs import VIDEO_FILTER
from framelens.gui.display.image_view import ImageView
from framelens.gui.player.dialogs import OpenCameraDialog
from framelens.gui.player.goto_frame import GoToFrameDialog
from framelens.gui.player.main_window import MainWindow
from framelens.gui.player.model_panel import NO_MODEL_ITEM
from framelens.gui.wall.wall_canvas import WallCanvas
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import (
    QApplication,
    QFileDialog,
    QLabel,
    QLineEdit,
    QTableView,
    QTreeView,
)
from pytestqt.qtbot import QtBot
from shots import shots_dir

pytestmark = pytest.mark.gui

RESULTS_TIMEOUT_MS = 60_000
SHOTS = shots_dir("FRAMELENS_EDGES_SCREENSHOTS", "edges")


def shot(widget: object, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert widget.grab().save(str(SHOTS / name))  # type: ignore[attr-defined]


def start(window: MainWindow, qtbot: QtBot, sample: str, frames: int = 3) -> None:
    window.open_source(sample)
    qtbot.waitUntil(lambda: window.results_shown >= frames, timeout=RESULTS_TIMEOUT_MS)


def pause(window: MainWindow, qtbot: QtBot) -> None:
    window.controller.pause()
    qtbot.waitUntil(lambda: not window.state.playing, timeout=10_000)


def last_index(window: MainWindow) -> int:
    result = window.controller.last_result
    return -1 if result is None else result.frame.index


# ---- must-have 5: No model, Go to Frame, a camera list --------------------------------


def test_no_model_plays_the_video_as_decoded(window: MainWindow, qtbot: QtBot, sample: str) -> None:
    """ "No model" in the model list: the video plays on with nothing detected or drawn
    (the frame shown is the frame decoded), and a model chosen again draws again."""
    combo = window.panel.model_combo
    assert combo.itemText(0) == NO_MODEL_ITEM
    start(window, qtbot, sample)
    pause(window, qtbot)
    window.controller.seek(300)  # a person is in the picture there
    qtbot.waitUntil(lambda: last_index(window) == 300, timeout=20_000)
    drawn = window.controller.last_result
    assert drawn is not None and len(drawn.output) > 0  # the model finds the person

    combo.activated.emit(0)  # as a click on "No model"
    qtbot.waitUntil(lambda: window.state.model == "", timeout=20_000)
    window.controller.seek(300)
    qtbot.waitUntil(
        lambda: last_index(window) == 300 and window.controller.last_result is not drawn,
        timeout=20_000,
    )
    plain = window.controller.last_result
    assert plain is not None
    assert isinstance(plain.output, Detections) and len(plain.output) == 0
    assert plain.annotated is not None
    assert np.array_equal(plain.annotated, plain.frame.image)  # nothing drawn on it
    assert window.model_label.text() == "No model"
    assert combo.currentText() == NO_MODEL_ITEM
    # nothing runs a model: no backend named, no earlier model's times in the plots
    assert window.backend_label.text() == ""
    assert "inference" not in window.plots.summary_text()
    shown = window.results_shown
    window.controller.play()
    qtbot.waitUntil(lambda: window.results_shown > shown + 5, timeout=20_000)
    # playing: the player's states keep coming, and none brings the old model back, not
    # even one it sent before it let the model go (as the smoke run saw, at full speed)
    late = replace(window.state, model="yolox-nano", precision="fp32", loading_model=True)
    window.controller.stateChanged.emit(late)
    window.controller.stateChanged.emit(replace(late, loading_model=False))
    assert window.model_label.text() == "No model"
    shot(window, "no-model.png")
    pause(window, qtbot)

    combo.activated.emit(combo.findData(window.controller.default_model()))
    qtbot.waitUntil(lambda: window.state.model != "", timeout=RESULTS_TIMEOUT_MS)
    qtbot.waitUntil(lambda: not window.state.loading_model, timeout=RESULTS_TIMEOUT_MS)
    window.controller.seek(300)
    qtbot.waitUntil(
        lambda: (
            last_index(window) == 300
            and window.controller.last_result is not None
            and len(window.controller.last_result.output) > 0
        ),
        timeout=20_000,
    )


def open_goto(window: MainWindow, qtbot: QtBot) -> GoToFrameDialog:
    window.activateWindow()  # window shortcuts need the active window
    qtbot.waitUntil(window.isActiveWindow, timeout=5000)
    qtbot.keyClick(window, Qt.Key.Key_G, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: isinstance(QApplication.activeModalWidget(), GoToFrameDialog))
    dialog = QApplication.activeModalWidget()
    assert isinstance(dialog, GoToFrameDialog)
    return dialog


def test_ctrl_g_goes_to_the_frame_typed_as_the_counter_numbers_it(
    window: MainWindow, qtbot: QtBot, sample: str
) -> None:
    start(window, qtbot, sample)
    dialog = open_goto(window, qtbot)
    for typed, said in (("abc", "not a frame number"), ("1395", "1 to 1394"), ("0", "no frame 0")):
        dialog.edit.setText(typed)
        qtbot.keyClick(dialog.edit, Qt.Key.Key_Return)
        assert dialog.isVisible(), f"{typed!r} was taken"
        assert said in dialog.message.text() and dialog.message.isVisible()
    shot(dialog, "go-to-frame-invalid.png")
    dialog.edit.setText("1,200")
    qtbot.keyClick(dialog.edit, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: last_index(window) == 1199, timeout=20_000)
    assert not window.state.playing
    assert window.transport.time_label.text().startswith("1200/1394")
    assert window.playback.goto_action.shortcut().toString() == "Ctrl+G"


def test_go_to_frame_without_a_video_says_to_open_one(window: MainWindow, qtbot: QtBot) -> None:
    window.playback.goto_action.trigger()
    qtbot.waitUntil(window.error_box.isVisible, timeout=5000)
    assert "open a video first" in window.error_box.text()
    window.error_box.close()


def fake_sysfs(root: Path, names: dict[str, str]) -> Path:
    for node, name in names.items():
        (root / node).mkdir(parents=True)
        (root / node / "name").write_text(name + "\n", encoding="utf-8")
    return root


def test_open_camera_lists_the_cameras_present_by_name(qtbot: QtBot, tmp_path: Path) -> None:
    sysfs = fake_sysfs(
        tmp_path / "video4linux",
        {
            "video10": "USB Capture HDMI",
            "video0": "Integrated Camera: Integrated C",
            "video2": "C920",
        },
    )
    dialog = OpenCameraDialog(list_cameras(sysfs))
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    texts = [dialog.list.item(i).text() for i in range(dialog.list.count())]
    assert texts == [
        "Integrated Camera: Integrated C (/dev/video0)",
        "C920 (/dev/video2)",
        "USB Capture HDMI (/dev/video10)",
    ]
    assert not dialog.notice.isVisible()
    shot(dialog, "open-camera-list.png")
    assert dialog.spec == "/dev/video0"  # the first, chosen already
    dialog.list.setCurrentRow(1)
    assert dialog.spec == "/dev/video2"
    qtbot.keyClicks(dialog.edit, "rtsp://10.0.0.9/live")
    assert dialog.spec == "rtsp://10.0.0.9/live"


def test_open_camera_with_none_present_says_so_and_takes_a_typed_index(
    window: MainWindow, qtbot: QtBot, tmp_path: Path
) -> None:
    dialog = OpenCameraDialog(list_cameras(tmp_path / "no-such-sysfs"), window)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    assert dialog.notice.isVisible() and "No camera was found" in dialog.notice.text()
    assert dialog.spec == ""
    shot(dialog, "open-camera-none.png")
    qtbot.keyClicks(dialog.edit, "7")
    assert dialog.spec == "7"


# ---- the Open dialogs take every video FrameLens plays, and say what they leave out ----


def write_video(path: Path, frames: int = 8, size: tuple[int, int] = (96, 64)) -> str:
    """A real video (H.264, or an animated GIF by its name), each frame another grey."""
    gif = path.suffix == ".gif"
    width, height = size
    with av.open(str(path), "w") as out:
        stream = out.add_stream("gif" if gif else "libx264", rate=10)
        stream.width, stream.height = width, height
        stream.pix_fmt = "rgb8" if gif else "yuv420p"
        for i in range(frames):
            image = np.full((height, width, 3), 20 + 25 * i, np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return str(path)


def accept_typed(qtbot: QtBot, names: str, listed: int) -> list[str]:
    """Answer the next file dialog by typing ``names`` in its name box, as a user does,
    once it lists ``listed`` files (the folder read), or after 5 s."""
    seen: list[str] = []
    deadline = time.monotonic() + 5

    def answer() -> None:
        dialog = QApplication.activeModalWidget()
        view = dialog.findChild(QTreeView, "treeView") if dialog is not None else None
        if not isinstance(dialog, QFileDialog) or view is None:
            QTimer.singleShot(50, answer)
            return
        if view.model().rowCount(view.rootIndex()) < listed and time.monotonic() < deadline:
            QTimer.singleShot(50, answer)
            return
        seen.append(dialog.nameFilters()[0])
        edit = dialog.findChild(QLineEdit, "fileNameEdit")
        assert edit is not None
        edit.setText(names)
        dialog.accept()

    QTimer.singleShot(0, answer)
    return seen


def test_open_several_opens_a_gif_and_names_what_it_leaves_out(
    window: MainWindow, qtbot: QtBot, tmp_path: Path
) -> None:
    """Four videos typed in Open Several, one a GIF: a wall of four. A file the Videos
    filter does not show is left out by Qt's dialog: the window says which and why."""
    for name in ("a.mp4", "b.mp4", "c.gif", "d.mkv"):
        write_video(tmp_path / name)
    (tmp_path / "notes.txt").write_text("not a video")
    window.settings.last_dir = str(tmp_path)

    seen = accept_typed(qtbot, '"a.mp4" "b.mp4" "c.gif" "d.mkv"', listed=4)
    window.wall.several_action.trigger()
    assert seen and all(f"*{suffix}" in seen[0] for suffix in VIDEO_SUFFIXES)
    wall = window.wall.window
    assert wall is not None
    assert [Path(s).name for s in wall.specs] == ["a.mp4", "b.mp4", "c.gif", "d.mkv"]
    assert not window.error_box.isVisible()
    wall.close()

    accept_typed(qtbot, '"a.mp4" "notes.txt" "c.gif"', listed=4)
    window.wall.several_action.trigger()
    qtbot.waitUntil(window.error_box.isVisible, timeout=5000)
    text = window.error_box.text()
    assert "notes.txt" in text and "Videos filter" in text and "All files" in text
    assert "c.gif" not in text
    shot(window.error_box, "open-several-left-out.png")
    window.error_box.close()
    wall = window.wall.window
    assert wall is not None and [Path(s).name for s in wall.specs] == ["a.mp4", "c.gif"]
    wall.close()


def test_a_gif_is_a_video_to_the_open_dialog_and_to_a_batch_folder(tmp_path: Path) -> None:
    """One list of video extensions, from core: what a batch finds in a folder is what
    the Open dialogs show."""
    from framelens.core.sessions.archive import VIDEO_EXTENSIONS

    assert VIDEO_EXTENSIONS == VIDEO_SUFFIXES
    assert {".gif", ".mp4", ".mkv", ".mpg", ".wmv"} <= set(VIDEO_SUFFIXES)
    assert "*.gif" in VIDEO_FILTER.split(";;")[0]


# ---- a failed open leaves the video that was there exactly as it was -------------------


def counter_shows(window: MainWindow, qtbot: QtBot, start: str) -> None:
    label = window.transport.time_label
    qtbot.waitUntil(lambda: label.text().startswith(start), timeout=10_000)


def settle(window: MainWindow, qtbot: QtBot, speed: float) -> None:
    """Wait until the player has run every command sent before this one (it answers a
    speed change with its state, in order)."""
    window.controller.set_speed(speed)
    qtbot.waitUntil(lambda: window.state.speed == speed, timeout=20_000)


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        ("7", "camera 7"),  # no camera 7 here
        ("http://127.0.0.1:9/missing.mp4", "could not open stream"),
        ("fake.mp4", "fake.mp4"),  # text named .mp4
    ],
)
def test_a_failed_open_leaves_the_video_as_it_was(
    window: MainWindow, qtbot: QtBot, tmp_path: Path, bad: str, said: str
) -> None:
    """Paused at a GIF's end, then on its frame 3: a camera that is not there, a URL
    that answers nothing and a text file named .mp4 each say so in one line and change
    nothing: the frame, paused or ended, the title, what a snapshot saves."""
    gif = write_video(tmp_path / "walk.gif", frames=6)
    if bad == "fake.mp4":
        bad = str(tmp_path / "fake.mp4")
        Path(bad).write_text("this is not a video")
    window.open_source(gif)
    qtbot.waitUntil(lambda: window.state.status == "ended", timeout=RESULTS_TIMEOUT_MS)
    for expected_status, index in (("ended", 5), ("paused", 2)):
        if expected_status == "paused":
            window.controller.seek(index)
            qtbot.waitUntil(lambda i=index: last_index(window) == i, timeout=20_000)
        settle(window, qtbot, 0.5)
        before = (window.state.status, window.state.index, last_index(window))
        assert before == (expected_status, index, index)
        counter_shows(window, qtbot, f"{index + 1}/6 ")  # the screen catches up at a tick
        title, counter = window.windowTitle(), window.transport.time_label.text()
        shown = window.results_shown
        window.open_source(bad)
        qtbot.waitUntil(lambda: said in window.error_box.text(), timeout=30_000)
        settle(window, qtbot, 1.0)
        after = (window.state.status, window.state.index, last_index(window))
        assert after == before, f"opening {bad} changed the video"
        assert window.results_shown == shown
        assert window.windowTitle() == title
        assert window.transport.time_label.text() == counter
        assert window.controller.source == gif and window.source == gif
        window.error_box.close()
        window.error_box.setText("")
    snapshot = tmp_path / "after.png"
    window.save_snapshot(str(snapshot))
    qtbot.waitUntil(snapshot.is_file, timeout=10_000)  # the frame on screen is still there
    shot(window, "failed-open-kept.png")


# ---- a file cut short says so, and counts the frames it holds -------------------------


def decodable_frames(path: Path) -> int:
    """How many frames the file source decodes from ``path`` before its data ends (the
    CLI's count: ``framelens run`` writes as many)."""
    with FileSource(path) as source:
        return sum(1 for _ in source)


def test_a_file_cut_short_says_so_and_counts_the_frames_there(
    window: MainWindow, qtbot: QtBot, tmp_path: Path
) -> None:
    """An MP4 whose index says 377 frames, cut after 40% of its bytes (a download that
    stopped): played to its end, the window says what was found, the counter and the
    slider count the frames really there, and Space plays them again."""
    full = tmp_path / "full.mp4"
    with av.open(str(full), "w", options={"movflags": "faststart"}) as out:
        stream = out.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 128, 96, "yuv420p"
        stream.codec_context.gop_size = 10
        rng = np.random.default_rng(7)
        for i in range(377):
            image = rng.integers(0, 255, (96, 128, 3), np.uint8)  # hard to compress
            image[:8, : (i % 128)] = 255
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    cut = tmp_path / "download.mp4"
    data = full.read_bytes()
    cut.write_bytes(data[: int(len(data) * 0.4)])
    there = decodable_frames(cut)
    with av.open(str(cut)) as container:
        assert container.streams.video[0].frames == 377  # what the index claims
    assert 2 < there < 377

    window.transport.realtime_button.setChecked(False)  # every frame shown, none late
    window.open_source(str(cut))
    qtbot.waitUntil(lambda: window.state.status == "ended", timeout=RESULTS_TIMEOUT_MS)
    qtbot.waitUntil(window.error_box.isVisible, timeout=10_000)
    text = window.error_box.text()
    assert "download.mp4" in text and "cut short" in text and "of 377" in text
    assert f"the {there} frames there play" in text
    assert window.state.frame_count == there
    counter_shows(window, qtbot, f"{there}/{there} ")  # the screen catches up at a tick
    assert window.transport.slider.maximum() == there - 1
    assert f"{there} frames" in window.source_label.text()
    shot(window, "cut-short.png")
    shot(window.error_box, "cut-short-message.png")
    window.error_box.close()

    shown = window.results_shown
    window.activateWindow()  # window shortcuts need the active window
    qtbot.waitUntil(window.isActiveWindow, timeout=5000)
    qtbot.keyClick(window, Qt.Key.Key_Space)  # plays the frames there again
    qtbot.waitUntil(lambda: window.results_shown > shown + 2, timeout=20_000)
    qtbot.waitUntil(lambda: window.state.status == "ended", timeout=RESULTS_TIMEOUT_MS)
    # the last frame's result reaches the window at its next tick, after the state that
    # says ended (as above): a loaded machine showed 146 of 0..147 at the moment of "ended"
    qtbot.waitUntil(lambda: last_index(window) == there - 1, timeout=10_000)
    assert window.state.frame_count == there


# ---- text too long for its place ends in "…", the whole of it in the tooltip ----------


def shows_whole_or_ellipsis(label: QLabel, full: str) -> str:
    """What ``label`` paints (QLabel's own text), checked to fit its width and to end in
    "…" where it is not the whole text."""
    shown = QLabel.text(label)
    assert label.fontMetrics().horizontalAdvance(shown) <= label.contentsRect().width()
    if shown != full:
        assert shown.endswith("…") and label.toolTip() == full
    return shown


def test_a_status_message_too_long_for_the_bar_ends_in_an_ellipsis(
    window: MainWindow, qtbot: QtBot, sample: str
) -> None:
    """ "Space plays it aga": the message was cut by the style's padding, no ellipsis."""
    start(window, qtbot, sample)
    pause(window, qtbot)
    window.resize(720, 600)
    message = "End of video — Space plays it again; " + "a long explanation " * 6
    window.statusBar().showMessage(message, 10_000)
    label = window.status_bar.message_label
    qtbot.waitUntil(lambda: label.width() < 700, timeout=5000)
    qtbot.waitUntil(lambda: QLabel.text(label).endswith("…"), timeout=5000)
    shows_whole_or_ellipsis(label, message)
    shot(window.statusBar(), "status-ellipsis.png")


def test_an_int8_progress_line_too_long_for_the_panel_ends_in_an_ellipsis(
    window: MainWindow, qtbot: QtBot
) -> None:
    toggle = window.panel.precision
    text = "INT8: calibrating on frame 37 of 50 of one-by-one-person-detection.mp4"
    toggle.show_progress(text, 0.74)
    label = toggle.progress_text
    qtbot.waitUntil(label.isVisible, timeout=5000)
    shown = shows_whole_or_ellipsis(label, label.text())
    assert shown.endswith("…") and "74%" in label.toolTip()
    assert label.height() <= 2 * label.fontMetrics().height()  # one line, not a wrap
    shot(window.panel, "int8-progress-ellipsis.png")


def test_a_region_caption_and_a_wall_tile_label_end_in_an_ellipsis(qtbot: QtBot) -> None:
    view = ImageView()
    qtbot.addWidget(view)
    view.resize(220, 160)
    caption = "Region 312×188 at (1024, 640) → 1248×752 · ×4"
    view.set_image(np.zeros((40, 60, 3), np.uint8), caption)
    view.show()
    qtbot.waitExposed(view)
    shown = view.shown_caption()
    assert shown.endswith("…") and view.toolTip() == caption
    assert view.fontMetrics().horizontalAdvance(shown) <= view.width() - 8
    shot(view, "region-caption-ellipsis.png")

    canvas = WallCanvas()
    qtbot.addWidget(canvas)
    canvas.resize(400, 240)
    canvas.set_sources(["bottles-warehouse-aisle-3", "entrance", "loading bay", "car park"])
    canvas.set_states(
        [
            TileState("bottles-warehouse-aisle-3", "a.mp4", "playing", fps=14.9, latency_ms=212),
            TileState("entrance", "b.mp4", "playing", fps=15.0, latency_ms=198),
        ]
    )
    canvas.show()
    qtbot.waitExposed(canvas)
    whole = canvas.caption(0)
    shown = canvas.shown_caption(0)
    assert whole.startswith("bottles-warehouse-aisle-3 · 14.9 fps")
    assert shown != whole and shown.endswith("…") and shown.startswith("bott")
    metrics = QFontMetrics(canvas.caption_font())
    assert metrics.horizontalAdvance(shown) <= canvas.cell_rect(0).width() - 12
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert canvas.grab_frame_image().save(str(SHOTS / "wall-tile-ellipsis.png"))


def test_a_batch_row_s_worker_and_progress_cut_in_their_columns_are_whole_in_tooltips(
    qtbot: QtBot, tmp_path: Path
) -> None:
    """The Ray worker column and the progress bar's text were cut without an ellipsis."""
    model = BatchTableModel()
    table = QTableView()
    qtbot.addWidget(table)
    table.setModel(model)
    table.setItemDelegateForColumn(PROGRESS, ProgressDelegate(table))
    path = str(tmp_path / "cam-entrance-2024-03-01.mp4")
    model.add_paths([path])
    worker = "ray-worker-7 (node 10.0.4.21, pid 48211)"
    model.apply(InputProgress(path, "running", 123456, 987654, 41.5, worker))
    index = model.index(0, WORKER)
    assert model.data(index, Qt.ItemDataRole.ToolTipRole) == worker
    progress = model.index(0, PROGRESS)
    assert model.data(progress, Qt.ItemDataRole.ToolTipRole) == "123456/987654"
    table.setColumnWidth(PROGRESS, 48)
    table.setColumnWidth(WORKER, 60)
    table.resize(500, 120)
    table.show()
    qtbot.waitExposed(table)
    shot(table, "batch-row-ellipsis.png")
