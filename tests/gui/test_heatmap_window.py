"""Tracking > Show Heatmap (H) in the window (gui/player/main_heatmap.py,
core/sessions/playback/heatmap.py): with the real ByteTrack on the bundled sample, the
heatmap appears on the paused frame where the tracked person has stood, nowhere else,
goes again with H, and is remembered with the other overlay settings, as Heatmap Fades
is. The screenshot goes to a temporary folder (FRAMELENS_HEATMAP_SCREENSHOTS names
another); docs/heatmap-player.png was taken with these steps played on to frame 850."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from framelens.gui.common.screenshots import grab_window
from framelens.gui.common.settings import Settings
from framelens.gui.player.main_window import MainWindow
from PySide6.QtCore import QCoreApplication, QEvent, QSettings, Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot
from shots import shots_dir

pytestmark = pytest.mark.gui

TIMEOUT_MS = 90_000
UNTIL = 150  # the first person comes in (tracked from about frame 64) and stands
SHOTS = shots_dir("FRAMELENS_HEATMAP_SCREENSHOTS", "heatmap")
U8 = npt.NDArray[np.uint8]


def rgb(image: QImage) -> U8:
    img = image.convertToFormat(QImage.Format.Format_RGB888)
    w, h, stride = img.width(), img.height(), img.bytesPerLine()
    data = np.frombuffer(img.constBits(), dtype=np.uint8, count=stride * h)
    return data.reshape(h, stride)[:, : w * 3].reshape(h, w, 3).copy()


@pytest.fixture
def fast(qtbot: QtBot, settings_file: Path) -> Iterator[MainWindow]:
    """A window that plays as fast as it can and tracks with ByteTrack."""
    settings = Settings(QSettings(str(settings_file), QSettings.Format.IniFormat))
    settings.realtime = False
    settings.tracker = "bytetrack"
    win = MainWindow(settings=settings)
    qtbot.addWidget(win)
    win.resize(1360, 860)
    win.show()
    qtbot.waitExposed(win)
    yield win
    win.close()
    win.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


def press_h(window: MainWindow, qtbot: QtBot) -> None:
    window.activateWindow()
    window.canvas.setFocus()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5000)
    qtbot.keyClick(window.canvas, Qt.Key.Key_H)


def test_h_shows_the_heatmap_where_the_tracked_person_stood_and_it_is_remembered(
    fast: MainWindow, qtbot: QtBot, sample: str, settings_file: Path
) -> None:
    window = fast
    assert window.controller.tracker is not None  # ByteTrack, as remembered
    assert not window.heatmap.show_action.isChecked()  # off until asked for
    assert window.heatmap.show_action.shortcut().toString() == "H"
    window.open_source(sample)
    qtbot.waitUntil(lambda: window.shown_index >= UNTIL, timeout=TIMEOUT_MS)
    window.controller.pause()
    qtbot.waitUntil(lambda: not window.state.playing, timeout=10_000)
    qtbot.wait(300)
    at = window.shown_index
    plain = rgb(window.canvas.grab_frame_image())

    press_h(window, qtbot)
    assert window.heatmap.show_action.isChecked()
    assert window.panel.overlay_checks["heatmap"].isChecked()

    def heated() -> bool:
        return bool(np.any(rgb(window.canvas.grab_frame_image()) != plain))

    qtbot.waitUntil(heated, timeout=TIMEOUT_MS)  # the paused frame, redrawn
    assert window.shown_index == at
    shot = rgb(window.canvas.grab_frame_image())
    changed = np.any(np.abs(shot.astype(np.int16) - plain) > 8, axis=2)
    r, size = window.canvas.image_rect(), window.canvas.image_size
    assert size is not None
    ys, xs = np.nonzero(changed)
    # in source pixels: where the person stood, at the table (x 380..520, feet y 350..432)
    sx, sy = size[0] / r.width(), size[1] / r.height()
    fx, fy = (xs - r.x()) * sx, (ys - r.y()) * sy
    assert len(xs) > 300
    assert fx.min() > 300 and fx.max() < 600 and fy.min() > 250, "heat away from the feet"
    reddish = (shot[..., 0].astype(int) - shot[..., 2]) > 80  # JET's hot end (RGB)
    assert (reddish & changed).sum() > 20
    path = SHOTS / "heatmap-window.png"
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert grab_window(window).save(str(path))

    window.heatmap.fades_action.trigger()  # decay from now on, remembered
    assert window.controller.heatmap.mode == "decay"

    press_h(window, qtbot)  # off again: the frame as it was
    qtbot.waitUntil(lambda: not heated(), timeout=TIMEOUT_MS)
    press_h(window, qtbot)
    qtbot.waitUntil(heated, timeout=TIMEOUT_MS)
    window.close()

    again = Settings(QSettings(str(settings_file), QSettings.Format.IniFormat))
    assert again.overlay("heatmap") and again.heatmap_mode == "decay"
