"""The window counts an animated GIF's frames as they are stored, whatever its delays:
a GIF of 8 and 9 centisecond delays played to its end reads 41/41 at the time of its
last frame out of its real duration, the status bar gives its average rate, and Left
at the end goes back a frame (before: 43/41, "00:03.3 / 00:03.2", "12.5 fps", and Left
did nothing)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import cv2
import pytest
from framelens.core.stages.sources.file import FileSource
from framelens.gui.common.screenshots import grab_window
from framelens.gui.player.main_window import MainWindow
from pytestqt.qtbot import QtBot

pytestmark = pytest.mark.gui

ROOT = Path(__file__).resolve().parents[2]
PEOPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
FRAMES = 41


def uneven_gif(path: Path) -> Path:
    """41 frames of people walking, shown for 8, 9, 8, 9... centiseconds (3.48 s)."""
    with FileSource(PEOPLE) as src, av.open(str(path), "w") as out:
        stream = out.add_stream("gif", rate=12)
        stream.width, stream.height, stream.pix_fmt = 384, 216, "rgb8"
        stream.codec_context.time_base = stream.time_base = Fraction(1, 100)
        src.seek(290)
        at = 0
        for i in range(FRAMES):
            frame = src.read()
            assert frame is not None
            picture = av.VideoFrame.from_ndarray(cv2.resize(frame.image, (384, 216)), "bgr24")
            picture = picture.reformat(format="rgb8")
            picture.pts, picture.time_base = at, Fraction(1, 100)
            out.mux(stream.encode(picture))
            at += 8 + i % 2
        out.mux(stream.encode(None))
    return path


def test_a_gif_with_uneven_delays_plays_to_41_of_41(
    window: MainWindow, qtbot: QtBot, tmp_path: Path
) -> None:
    gif = uneven_gif(tmp_path / "uneven.gif")
    window.open_source(str(gif))
    qtbot.waitUntil(lambda: window.results_shown >= 1, timeout=60_000)
    assert "41 frames" in window.source_label.text()
    assert "11.78 fps" in window.source_label.text()  # 41 frames in 3.48 s
    window.controller.play()
    qtbot.waitUntil(lambda: window.state.status == "ended", timeout=60_000)
    # frame 41 of 41, shown at 3.40 s of 3.48 s
    label = window.transport.time_label
    qtbot.waitUntil(lambda: label.text().startswith("41/"), timeout=20_000)
    assert label.text() == "41/41  00:03.4 / 00:03.5"
    shot = tmp_path / "gif-at-its-end.png"
    grab_window(window).save(str(shot))
    window.playback.back_action.trigger()  # Left
    qtbot.waitUntil(lambda: window.transport.time_label.text().startswith("40/41"), timeout=20_000)
