"""The video wall under Xvfb: real clips cut from the sample, the real YOLOX-Nano, one GL
canvas drawing every tile, the layout choice saved, a tile focused in the player."""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np
import pytest
from framelens.core.api import DEFAULT_STYLE, Detections, Frame, TileState, WallState, layout
from framelens.core.stages.sources.file import FileSource
from framelens.gui.common.screenshots import grab_window
from framelens.gui.common.settings import Settings
from framelens.gui.player.main_window import MainWindow
from framelens.gui.wall.wall_canvas import WallCanvas
from framelens.gui.wall.wall_window import WallWindow
from PySide6.QtCore import QPoint, QSettings, Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot
from shots import shots_dir

from tests.unit.media_factory import encode_frames

pytestmark = pytest.mark.gui

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
# screenshots go to a temporary folder; FRAMELENS_WALL_SCREENSHOTS=docs writes the ones
# the README shows (a test run must not rewrite files the repository tracks)
SHOTS = shots_dir("FRAMELENS_WALL_SCREENSHOTS", "wall")
STARTS = (40, 300, 640, 1000)  # four places in the sample: four different pictures
FRAMES = 150
TIMEOUT_MS = 90_000


# Each clip carries its number in a strip of four cells in its bottom-left corner, the
# clip's own cell lit: the sample is one fixed camera, and clips of it look alike
# whenever nobody walks through (whole tiles compared alike by chance under load)
MARK_CELLS = 4
MARK_CELL = (16, 10)  # width, height in the clip's pixels
MARK_ORIGIN = (6, 216 - 6 - MARK_CELL[1])  # its top-left corner in the 384x216 clip


def mark(image: np.ndarray, n: int) -> np.ndarray:
    """``image`` (384x216) with clip ``n``'s cell lit white, the others black."""
    (x0, y0), (w, h) = MARK_ORIGIN, MARK_CELL
    for cell in range(MARK_CELLS):
        image[y0 : y0 + h, x0 + cell * w : x0 + (cell + 1) * w] = 255 if cell == n else 0
    return image


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Four clips of the sample (384x216, 15 fps, 10 s), each from another place, each
    with its mark."""
    wanted = {s + k: n for n, s in enumerate(STARTS) for k in range(FRAMES)}
    frames: dict[int, list[np.ndarray]] = {n: [] for n in range(len(STARTS))}
    with FileSource(SAMPLE) as src:
        for frame in src:
            if frame.index in wanted:
                n = wanted[frame.index]
                frames[n].append(mark(cv2.resize(frame.image, (384, 216)), n))
            if frame.index > max(wanted):
                break
    folder = tmp_path_factory.mktemp("wall_gui")
    paths = [
        encode_frames(folder / f"cam{n + 1}.mp4", images, rate=15) for n, images in frames.items()
    ]
    return [str(p) for p in paths]


def image_array(image: QImage) -> np.ndarray:
    img = image.convertToFormat(QImage.Format.Format_RGB888)
    w, h, stride = img.width(), img.height(), img.bytesPerLine()
    data = np.frombuffer(img.constBits(), dtype=np.uint8, count=stride * h)
    return data.reshape(h, stride)[:, : w * 3].reshape(h, w, 3).copy()


def open_wall(window: MainWindow, qtbot: QtBot, specs: list[str], shown: int = 2) -> WallWindow:
    wall = window.open_wall(specs)
    assert wall is not None
    qtbot.addWidget(wall)
    qtbot.waitExposed(wall)
    qtbot.waitUntil(
        lambda: (
            len(wall.state.tiles) == len(specs)
            and all(t.shown >= shown or t.status == "failed" for t in wall.state.tiles)
        ),
        timeout=TIMEOUT_MS,
    )
    return wall


def tiles_pixels(wall: WallWindow) -> list[np.ndarray]:
    """Each tile's frame as the canvas rendered it (inside its letterbox, captions off)."""
    canvas = wall.canvas
    wall.canvas.update()
    pixels = image_array(canvas.grab_frame_image())
    ratio = pixels.shape[1] / canvas.width()
    out = []
    for i in range(canvas.tile_count):
        r = canvas.image_rect(i)
        x0, x1 = int((r.left() + 2) * ratio), int((r.right() - 2) * ratio)
        y0, y1 = int((r.top() + 24) * ratio), int((r.bottom() - 2) * ratio)
        out.append(pixels[y0:y1, x0:x1].astype(np.int16))
    return out


def save_screenshot(wall: WallWindow, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / name
    shot = grab_window(wall)  # the canvas's overlays and captions included
    shot.save(str(path))
    while path.stat().st_size > 300_000:
        shot = shot.scaledToWidth(
            int(shot.width() * 0.85), Qt.TransformationMode.SmoothTransformation
        )
        shot.save(str(path))
    return path


def marks_shown(wall: WallWindow) -> list[list[float]]:
    """Each tile's mark as the canvas rendered it: the brightness of each of its cells
    (the median of the cell's middle, so that a box's outline over it does not count)."""
    canvas = wall.canvas
    canvas.update()
    pixels = image_array(canvas.grab_frame_image()).mean(axis=2)
    ratio = pixels.shape[0] / canvas.height()
    (x0, y0), (w, h) = MARK_ORIGIN, MARK_CELL
    cells = []
    for i in range(canvas.tile_count):
        r = canvas.image_rect(i)
        s = r.width() / 384 * ratio  # clip pixels to grabbed pixels
        left, top = r.left() * ratio, r.top() * ratio
        row = []
        for cell in range(MARK_CELLS):
            cx, cy = left + (x0 + (cell + 0.5) * w) * s, top + (y0 + 0.5 * h) * s
            dx, dy = max(1, round(w * s * 0.2)), max(1, round(h * s * 0.2))
            middle = pixels[round(cy) - dy : round(cy) + dy, round(cx) - dx : round(cx) + dx]
            row.append(float(np.median(middle)))
        cells.append(row)
    return cells


def assert_tiles_show_their_sources(wall: WallWindow, source_of: list[int]) -> None:
    """Each tile shows a picture, and the picture is its own source's (its mark)."""
    for i, tile in enumerate(tiles_pixels(wall)):
        assert tile.size and tile.std() > 12, f"tile {i} looks blank"
    for i, cells in enumerate(marks_shown(wall)):
        lit = int(np.argmax(cells))
        others = max(c for k, c in enumerate(cells) if k != lit)
        assert (lit, cells[lit] - others > 100) == (source_of[i], True), (
            f"tile {i} shows cam{lit + 1}'s mark {[round(c) for c in cells]}, "
            f"not cam{source_of[i] + 1}'s"
        )


def test_a_wall_of_four_draws_each_source_in_its_tile(
    window: MainWindow, qtbot: QtBot, clips: list[str]
) -> None:
    wall = open_wall(window, qtbot, clips, shown=4)
    try:
        assert wall.canvas.layout_name == "auto" and wall.canvas.grid() == (2, 2)
        assert wall.canvas.tile_count == 4
        assert [t.name for t in wall.state.tiles] == ["cam1", "cam2", "cam3", "cam4"]
        qtbot.waitUntil(lambda: all(t.fps > 0 for t in wall.state.tiles), timeout=TIMEOUT_MS)
        assert_tiles_show_their_sources(wall, [0, 1, 2, 3])
        canvas = wall.canvas  # one picture, of the canvas's own shape: no bars around it
        qtbot.waitUntil(
            lambda: (
                canvas.picture_rect().width() >= canvas.width() - 2
                and canvas.picture_rect().height() >= canvas.height() - 2
            ),
            timeout=5_000,
        )
        assert wall.state.batch == 8 and wall.state.frames_run >= 16
        # named as the main window's transport names it (the wall said "Real time")
        assert wall.realtime_action.text() == "Real-time"
        assert window.transport.realtime_button.isChecked()
        assert window.transport.realtime_button.text() == wall.realtime_action.text()
        qtbot.waitUntil(lambda: wall.plots.fps_curve.getData()[0] is not None, timeout=10_000)
        assert "4 sources" in wall.summary_label.text()
        qtbot.waitUntil(lambda: wall.state.fps > 0, timeout=TIMEOUT_MS)
        if os.environ.get("FRAMELENS_WALL_SCREENSHOTS"):
            qtbot.wait(2500)  # the README's: a few points in the throughput plot
        save_screenshot(wall, "wall-4.png")
    finally:
        wall.close()


def test_a_wall_of_sixteen_draws_sixteen_tiles_in_one_canvas(
    window: MainWindow, qtbot: QtBot, clips: list[str]
) -> None:
    specs = clips * 4  # tile k shows clip k % 4
    wall = open_wall(window, qtbot, specs, shown=1)
    try:
        assert wall.canvas.grid() == (4, 4) and wall.canvas.tile_count == 16
        assert [t.name for t in wall.state.tiles][:6] == [
            "cam1", "cam2", "cam3", "cam4", "cam1-2", "cam2-2",
        ]  # fmt: skip
        assert_tiles_show_their_sources(wall, [k % 4 for k in range(16)])
        assert wall.state.batch == 16  # one slot per source
        if os.environ.get("FRAMELENS_WALL_SCREENSHOTS"):  # the docs': the plots drawn
            qtbot.waitUntil(lambda: wall.state.fps > 0, timeout=TIMEOUT_MS)
            qtbot.wait(2500)
        save_screenshot(wall, "wall-16.png")
        # a summary longer than the window is cut with "…", whole in its tooltip, never
        # clipped at the window's edge (it was cut mid-word there)
        label = wall.summary_label
        wall.resize(640, wall.height())
        qtbot.waitUntil(lambda: wall.width() <= 700)
        qtbot.wait(100)
        assert label.fontMetrics().horizontalAdvance(label.text()) > wall.width()
        assert label.mapTo(wall, label.rect().topRight()).x() < wall.width()
        shown = QLabel.text(label)  # what the label paints
        assert label.fontMetrics().horizontalAdvance(shown) <= label.width()
        assert shown.endswith("…") and label.toolTip() == label.text()
    finally:
        wall.close()


def test_the_layout_switch_changes_the_tiles_and_is_remembered(
    window: MainWindow, qtbot: QtBot, clips: list[str], settings_file: Path
) -> None:
    wall = open_wall(window, qtbot, clips, shown=1)
    try:
        wall.layout_actions["1"].trigger()
        assert wall.canvas.tile_count == 1
        assert_tiles_show_their_sources(wall, [0])  # the one tile fills the canvas
        assert wall.canvas.image_rect(0).width() > wall.canvas.width() * 0.6
        wall.layout_actions["3x3"].trigger()
        assert wall.canvas.grid() == (3, 3) and wall.canvas.tile_count == 4
    finally:
        wall.close()
    window.settings.sync()
    assert Settings(QSettings(str(settings_file), QSettings.Format.IniFormat)).wall_layout == "3x3"
    again = open_wall(window, qtbot, clips[:2], shown=1)
    try:
        assert again.canvas.layout_name == "3x3" and again.layout_actions["3x3"].isChecked()
    finally:
        again.close()


def test_clicking_a_tile_plays_that_source_in_the_player_and_esc_returns(
    window: MainWindow, qtbot: QtBot, clips: list[str]
) -> None:
    wall = open_wall(window, qtbot, clips, shown=1)
    try:
        centre = wall.canvas.cell_rect(2).center()
        qtbot.mouseClick(
            wall.canvas, Qt.MouseButton.LeftButton, pos=QPoint(int(centre.x()), int(centre.y()))
        )
        assert window.source == clips[2] and not wall.isVisible()
        qtbot.waitUntil(lambda: window.results_shown >= 3, timeout=TIMEOUT_MS)
        assert window.state.source is not None and window.state.source.uri.endswith("cam3.mp4")
        assert window.wall.back_action.isEnabled()
        window.wall.back_action.trigger()
        qtbot.waitUntil(lambda: wall.isVisible() and wall.state.playing, timeout=10_000)
        qtbot.waitUntil(lambda: not window.state.playing, timeout=10_000)
    finally:
        wall.close()


def test_a_source_that_cannot_be_opened_says_so_on_its_tile(
    window: MainWindow, qtbot: QtBot, clips: list[str], tmp_path: Path
) -> None:
    missing = str(tmp_path / "door.mp4")
    wall = open_wall(window, qtbot, [clips[0], missing], shown=2)
    try:
        tile = wall.state.tiles[1]
        assert tile.status == "failed" and tile.reason.startswith("cannot open")
        assert any(e.startswith("door (") for e in wall.errors)
        assert wall.state.tiles[0].status == "playing"
        pixels = tiles_pixels(wall)
        assert pixels[0].std() > 12  # the other source plays on
        assert "1 failed" in wall.summary_label.text()
    finally:
        wall.close()


def test_a_wall_that_ended_says_how_many_frames_it_analysed_not_a_rate(
    window: MainWindow, qtbot: QtBot, clips: list[str]
) -> None:
    """Played as fast as possible to the clips' ends: the summary says the frames done
    (every frame of both clips) and "ended", where it said "0.0 fps in all"."""
    wall = open_wall(window, qtbot, clips[:2], shown=1)
    try:
        wall.realtime_action.setChecked(False)
        qtbot.waitUntil(lambda: wall.state.status == "ended", timeout=TIMEOUT_MS)
        assert [t.frames for t in wall.state.tiles] == [FRAMES, FRAMES]
        text = wall.summary_label.text()
        assert text.startswith(f"2 sources · {2 * FRAMES} frames analysed")
        assert text.endswith("ended") and "fps" not in text
    finally:
        wall.close()


def test_a_playing_wall_never_says_0_frames_analysed_under_its_first_results(
    window: MainWindow, qtbot: QtBot, clips: list[str]
) -> None:
    """The first results can be on screen before a state counts them (states come every
    0.5 s; the wall-process screenshot caught it): the summary says the rate is being
    measured, not "0 frames analysed"; once frames are counted it says how many."""
    wall = open_wall(window, qtbot, clips[:2], shown=1)
    try:
        tiles = tuple(TileState(f"cam{k}", clips[k], "playing") for k in range(2))
        wall.session.stateChanged.emit(WallState(status="playing", tiles=tiles))
        text = wall.summary_label.text()
        assert "measuring the rate" in text and "frames analysed" not in text
        counted = tuple(TileState(t.name, t.spec, "playing", frames=3) for t in tiles)
        wall.session.stateChanged.emit(WallState(status="playing", tiles=counted))
        assert "6 frames analysed" in wall.summary_label.text()
    finally:
        wall.close()


def test_a_saved_wall_opens_again_with_its_sources_and_grid(
    window: MainWindow, qtbot: QtBot, clips: list[str], tmp_path: Path, sample: str
) -> None:
    """Save Layout… (Ctrl+S) in the wall, then Open (or Recent) on the .flwall file: the
    same sources in the same grid, whatever grid the wall was last left in; a file that
    is not a layout is one message and the video playing goes on."""
    wall = open_wall(window, qtbot, clips[:3], shown=1)
    try:
        wall.layout_actions["1"].trigger()
        saved = wall.save_layout(str(tmp_path / "entrance"))
        assert saved.endswith("entrance.flwall") and Path(saved).is_file()
        assert "Saved the wall (3 sources, 1)" in wall.statusBar().currentMessage()
        wall.layout_actions["2x2"].trigger()  # remembered from now on, not the saved one
    finally:
        wall.close()
    window.open_source(saved)
    again = window.wall.window
    assert again is not None
    qtbot.addWidget(again)
    qtbot.waitUntil(lambda: len(again.state.tiles) == 3, timeout=TIMEOUT_MS)
    try:
        assert again.specs == [str(Path(c).resolve()) for c in clips[:3]]
        assert again.canvas.layout_name == "1" and again.canvas.tile_count == 1
        assert window.settings.wall_layout == "2x2"
        assert saved in window.settings.recent
    finally:
        again.close()
    window.open_source(sample)
    qtbot.waitUntil(lambda: window.results_shown >= 2, timeout=TIMEOUT_MS)
    broken = tmp_path / "notes.flwall"
    broken.write_text("shopping list")
    window.open_source(str(broken))
    qtbot.waitUntil(window.error_box.isVisible, timeout=10_000)
    assert "not a FrameLens wall layout" in window.error_box.text()
    assert window.source == sample and window.state.source is not None
    window.error_box.close()


def test_a_gui_thread_woken_late_takes_every_tile_s_newest_result_at_once(
    qtbot: QtBot,
) -> None:
    """Sixteen sources at 30 fps hand the GUI 480 results a second. A GUI thread that
    wakes up late (the pipeline's threads hold the GIL) must then take the newest result
    of every tile in one go, not a few results a wake-up (which left 16 tiles renewed
    about 8 times a second on the H200); the older ones are not drawn, are counted as
    not shown, and the wall never waits for the GUI; after close nothing is handed on."""
    import threading
    import time

    from framelens.core.types import Detections, Frame, FrameResult, StageTimes
    from framelens.gui.wall.wall_window import WallSession
    from PySide6.QtWidgets import QApplication

    with FileSource(SAMPLE) as src:
        image = src.read()
    assert image is not None
    session = WallSession(realtime=False)
    taken: list[tuple[int, int]] = []
    session.resultReady.connect(lambda r: taken.append((r.frame.source_id, r.frame.index)))
    tiles = 16

    def send(first: int, count: int) -> None:  # the wall's delivery thread: round robin
        for k in range(first, first + count):
            session._from_wall(
                FrameResult(
                    Frame(image.image, k, 0.0, source_id=k % tiles),
                    Detections.empty(),
                    StageTimes(),
                )
            )

    try:
        thread = threading.Thread(target=send, args=(0, 3 * tiles))
        thread.start()
        thread.join(5)  # the GUI thread busy elsewhere meanwhile: the wall did not wait
        assert not thread.is_alive()
        QApplication.processEvents()  # one wake-up
        assert len(taken) == tiles, f"one wake-up took {len(taken)} of {tiles} tiles' results"
        assert sorted(taken) == [(k % tiles, k) for k in range(2 * tiles, 3 * tiles)]
        assert session.superseded == 2 * tiles  # the older ones: counted, not drawn
        session.close()
        send(3 * tiles, tiles)
        QApplication.processEvents()
        time.sleep(0.05)
        QApplication.processEvents()
        assert len(taken) == tiles  # a closed wall hands nothing on
    finally:
        session.close()


def test_the_canvas_counts_each_result_shown_or_drawn_over_before_a_paint(
    qtbot: QtBot,
) -> None:
    """What the wall benchmark reads (benchmarks/wall_screen.py): a tile's result that a
    paint showed counts as shown; one drawn over by the tile's next result before any
    paint counts as replaced, never as shown; a shown result of a live source records
    its time from the frame's release to that paint."""
    from framelens.core.stages.timing import now_ms
    from framelens.core.types import Frame
    from framelens.gui.wall.wall_canvas import WallCanvas

    with FileSource(SAMPLE) as src:
        image = src.read()
    assert image is not None
    canvas = WallCanvas()
    qtbot.addWidget(canvas)
    canvas.resize(640, 360)
    canvas.show()
    qtbot.waitExposed(canvas)
    canvas.set_sources(["a", "b"])
    painted = canvas.frames_painted
    canvas.set_frame(0, Frame(image.image, 0, 0.0, source_id=0))
    canvas.set_frame(0, Frame(image.image, 1, 0.0, source_id=0))  # before any paint
    live = Frame(image.image, 0, 0.0, source_id=1)
    live.arrived = now_ms() - 40.0  # a live source released it 40 ms ago
    canvas.set_frame(1, live)
    canvas.repaint()
    qtbot.waitUntil(lambda: canvas.frames_painted > painted, timeout=5_000)
    assert (canvas.tiles_shown, canvas.tiles_replaced) == (2, 1)
    # the live result's time from its release to the paint that showed it; tile 0's
    # frames were read when asked for (no release time), so they give none
    assert len(canvas.shown_latency_ms) == 1
    assert 40.0 <= canvas.shown_latency_ms[0] < 40.0 + 5_000
    canvas.repaint()  # a paint with nothing new shows nothing more
    assert canvas.tiles_shown == 2
    assert len(canvas.shown_latency_ms) == 1


def test_paints_follow_the_results_not_a_timer(
    window: MainWindow, qtbot: QtBot, clips: list[str]
) -> None:
    """Each result asks for a repaint (Qt merges the asks of one pass of its event loop
    into one paint): with the window's timer stopped the tiles still reach the screen. A
    repaint timer capped every tile at its rate (25 Hz: 16 sources at 30 fps could never
    all be shown) and held each result back until its tick."""
    wall = open_wall(window, qtbot, clips[:2], shown=1)
    try:
        wall._timer.stop()  # what is left to paint the canvas: the results themselves
        shown = wall.canvas.tiles_shown
        qtbot.waitUntil(lambda: wall.canvas.tiles_shown >= shown + 6, timeout=TIMEOUT_MS)
    finally:
        wall.close()


def test_a_wall_played_in_a_process_of_its_own_shows_its_tiles_and_stops_with_the_window(
    qtbot: QtBot, clips: list[str], app_settings: Settings
) -> None:
    """With "Own Process" chosen, decode and inference run in a child process and the window
    uploads the child's picture from shared memory: each tile shows its own source with
    its detections, results are counted as shown with their latency from release to the
    screen, closing the window stops the child, and a child that dies is one message."""
    import signal

    from framelens.core.api import PipelineSettings, resolve_model

    app_settings.wall_process = "own"
    settings = PipelineSettings(model=resolve_model("yolox_nano"))
    wall = WallWindow(clips[:2], settings, app_settings)
    qtbot.addWidget(wall)
    wall.show()
    qtbot.waitExposed(wall)
    try:
        assert wall.processes
        qtbot.waitUntil(lambda: wall.canvas.tiles_shown >= 10, timeout=TIMEOUT_MS)
        qtbot.waitUntil(
            lambda: [t.name for t in wall.state.tiles] == ["cam1", "cam2"], timeout=TIMEOUT_MS
        )
        assert_tiles_show_their_sources(wall, [0, 1])
        # the tiles' frames were released by the child's paced sources: each shown result
        # has its time from release to the paint in this process (one clock for both)
        latencies = list(wall.canvas.shown_latency_ms)
        assert len(latencies) >= 10
        assert all(0.0 < ms < TIMEOUT_MS for ms in latencies), latencies
        assert not wall.layout_actions["4x4"].isEnabled()
        # core chose the transport (on the CPU: shared memory) and the window says why, in
        # the summary only: nothing fell back
        assert wall.transport is not None and wall.transport.kind == "shared memory"
        qtbot.waitUntil(
            lambda: (
                "picture through shared memory (the wall runs on the CPU)"
                in wall.summary_label.text()
            ),
            timeout=TIMEOUT_MS,
        )
        assert "The wall's picture" not in wall.statusBar().currentMessage()
        child = wall.session.process._process  # type: ignore[union-attr]
        assert child.is_alive() and child.pid != os.getpid()
        save_screenshot(wall, "wall-process.png")
        os.kill(child.pid, signal.SIGKILL)
        qtbot.waitUntil(lambda: bool(wall.errors), timeout=30_000)
        qtbot.wait(300)
        assert len(wall.errors) == 1 and "stopped unexpectedly" in wall.errors[0]
        # the window says the wall stopped, not its last rates as if it played on
        qtbot.waitUntil(lambda: "failed" in wall.summary_label.text(), timeout=5000)
        assert "fps" not in wall.summary_label.text(), wall.summary_label.text()
        save_screenshot(wall, "wall-process-killed.png")
    finally:
        wall.close()
    assert wall.session.process.ended.wait(30)  # type: ignore[union-attr]  # behind the window
    assert not child.is_alive()


def test_the_wall_process_is_chosen_in_the_file_menu_and_remembered(
    window: MainWindow, qtbot: QtBot, clips: list[str], settings_file: Path
) -> None:
    """File > Wall Process: Automatic by default (on the CPU: this process, where the
    child would take the cores inference needs); Own Process is remembered and the next
    wall plays in a process of its own."""
    menu = window.wall.process_menu
    assert menu.title().replace("&", "") == "Wall Process"
    file_menu = window.menuBar().actions()[0].menu()
    assert menu.menuAction() in file_menu.actions()
    actions = window.wall.process_actions
    assert actions["auto"].isChecked() and not actions["own"].isChecked()
    wall = open_wall(window, qtbot, clips[:2], shown=1)
    try:
        assert not wall.processes  # automatic, on the CPU
    finally:
        wall.close()
    actions["own"].trigger()
    assert actions["own"].isChecked() and not actions["auto"].isChecked()
    again = Settings(QSettings(str(settings_file), QSettings.Format.IniFormat))
    assert again.wall_process == "own"
    wall = open_wall(window, qtbot, clips[:2], shown=1)
    try:
        assert wall.processes
        assert wall.session.process._process.is_alive()  # type: ignore[union-attr]
    finally:
        wall.close()


def test_closing_a_wall_window_stops_its_process(
    qtbot: QtBot, clips: list[str], app_settings: Settings
) -> None:
    from framelens.core.api import PipelineSettings, resolve_model

    settings = PipelineSettings(model=resolve_model("yolox_nano"))
    wall = WallWindow(clips[:2], settings, app_settings, processes=True)
    qtbot.addWidget(wall)
    wall.show()
    qtbot.waitUntil(lambda: wall.canvas.tiles_shown >= 2, timeout=TIMEOUT_MS)
    process = wall.session.process  # type: ignore[union-attr]
    child = process._process
    wall.close()  # returns without waiting for the child: it stops behind the window
    assert process.ended.wait(30)
    assert not child.is_alive() and child.exitcode == 0  # stopped, not killed
    assert not wall.errors


def test_a_label_under_a_tile_s_caption_is_painted_over_its_strip(qtbot: QtBot) -> None:
    """A box touching the top of a tile's frame has its label there, where the tile's
    caption strip lies: the label is painted over the strip's shade, as bright as
    anywhere else (it was drawn under it, dimmed to unreadable)."""
    canvas = WallCanvas()
    qtbot.addWidget(canvas)
    canvas.resize(640, 360)  # 16:9 tiles of a 16:9 frame: no bars above the frame
    canvas.set_sources(["cam1"])
    canvas.set_states([TileState("cam1", "cam1.mp4", "playing", fps=15.0, latency_ms=80)])
    canvas.show()
    qtbot.waitExposed(canvas)
    image = np.full((360, 640, 3), 200, np.uint8)
    dets = Detections(  # the second box's label lies under the caption's text
        np.array([[400, 0, 560, 300], [2, 0, 120, 200]], np.float32),
        np.array([0.9, 0.8], np.float32),
        np.array([0, 0], np.int32),
    )
    labels = ("person",)
    canvas.set_frame(0, Frame(image, 0, 0.0), (dets, labels, DEFAULT_STYLE))
    tag = layout(dets, labels, DEFAULT_STYLE, 640, 360).boxes[0].tag
    assert tag is not None and tag.rect.y1 < 20  # the label lies under the caption strip
    x, y = tag.rect.x2 - 2, tag.rect.y1 + 2  # its background, right of its text
    b, g, r = tag.colour
    painted_before = canvas.frames_painted
    canvas.update()
    qtbot.waitUntil(lambda: canvas.frames_painted > painted_before)
    shot = canvas.grab_frame_image()
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot.save(str(SHOTS / "wall-label-under-caption.png"))
    painted = shot.pixelColor(x, y)
    assert abs(painted.red() - r) + abs(painted.green() - g) + abs(painted.blue() - b) < 30
    # under the caption's text a label stays shaded: the text is read over it
    under = layout(dets, labels, DEFAULT_STYLE, 640, 360).boxes[1].tag
    assert under is not None and under.rect.x2 < 100  # within "cam1 · 15.0 fps · 80 ms"
    dim = shot.pixelColor(under.rect.x1 + 1, under.rect.y1 + 1)
    assert dim.red() + dim.green() + dim.blue() < 0.6 * (r + g + b)
