"""Lines and zones on the video wall (core/sessions/wall_zones.py, gui/wall/zones_paint.py):
two clips of the sample, each with its own ``<video>.zones.json`` beside it, played on the
wall with the real YOLOX-Nano and ByteTrack; each tile counts its own line (both named
"door", at different places) and zone, and draws them with its counts. One zones file
for every tile (File > Open Several with Zones…), and a bad one said in one line.
Screenshots go to a temporary folder (FRAMELENS_WALL_ZONES_SCREENSHOTS=docs writes
the docs' wall-zones.png)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import av
import numpy as np
import pytest
from framelens.core.stages.sources.file import FileSource
from framelens.gui.common.screenshots import grab_window
from framelens.gui.common.settings import Settings
from framelens.gui.player.main_window import MainWindow
from framelens.gui.wall.wall_window import WallWindow
from PySide6.QtCore import QCoreApplication, QEvent, QSettings
from PySide6.QtGui import QImage
from pytestqt.qtbot import QtBot
from shots import shots_dir

pytestmark = pytest.mark.gui

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
SHOTS = shots_dir("FRAMELENS_WALL_ZONES_SCREENSHOTS", "wall-zones")
TIMEOUT_MS = 120_000
# frames 100..259 of the sample (768x432, 10 fps): the first person stands at the table,
# then walks to the right edge, crossing x = 600 once, left to right, near frame 190
FIRST, COUNT = 100, 160
GATE = {  # at x = 600: the person crosses it ("in": walking p1 -> p2, from the left)
    "lines": [{"name": "door", "points": [[600, 432], [600, 200]], "classes": ["person"]}],
    "zones": [{"name": "right", "polygon": [[600, 200], [768, 200], [768, 432], [600, 432]]}],
}
FAR = {  # at x = 150: nobody crosses it; the zone round the table where she stands
    "lines": [{"name": "door", "points": [[150, 432], [150, 200]], "classes": ["person"]}],
    "zones": [{"name": "table", "polygon": [[330, 300], [560, 300], [560, 432], [330, 432]]}],
}


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """The same stretch of the sample twice: a.mp4 with GATE, b.mp4 with FAR beside it."""
    images = []
    with FileSource(SAMPLE) as src:
        for frame in src:
            if frame.index >= FIRST:
                images.append(frame.image)
            if len(images) == COUNT:
                break
    folder = tmp_path_factory.mktemp("wall_zones")
    paths = []
    for name, zones in (("a", GATE), ("b", FAR)):
        path = folder / f"{name}.mp4"
        with av.open(str(path), "w") as out:
            stream = out.add_stream("libx264", rate=10)
            stream.width, stream.height, stream.pix_fmt = 768, 432, "yuv420p"
            for image in images:
                for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")):
                    out.mux(packet)
            for packet in stream.encode():
                out.mux(packet)
        (folder / f"{name}.mp4.zones.json").write_text(json.dumps(zones))
        paths.append(str(path))
    return paths[0], paths[1]


@pytest.fixture
def fast(qtbot: QtBot, settings_file: Path) -> Iterator[MainWindow]:
    """A main window whose walls play as fast as they can, tracking off (the wall tracks
    the tiles that have zones with ByteTrack)."""
    settings = Settings(QSettings(str(settings_file), QSettings.Format.IniFormat))
    settings.realtime = False
    win = MainWindow(settings=settings)
    qtbot.addWidget(win)
    win.resize(1360, 860)
    win.show()
    qtbot.waitExposed(win)
    yield win
    win.close()
    win.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


def played(window: MainWindow, qtbot: QtBot, specs: list[str], zones: str | None) -> WallWindow:
    wall = window.open_wall(specs, zones=zones)
    assert wall is not None
    qtbot.addWidget(wall)
    qtbot.waitExposed(wall)
    qtbot.waitUntil(lambda: wall.state.status == "ended", timeout=TIMEOUT_MS)
    qtbot.waitUntil(
        lambda: all(wall.canvas.zones(i) is not None for i in range(len(specs))), timeout=10_000
    )
    qtbot.wait(300)  # the last results drawn
    wall.canvas.update()
    return wall


def image_array(image: QImage) -> np.ndarray:
    img = image.convertToFormat(QImage.Format.Format_RGB888)
    w, h, stride = img.width(), img.height(), img.bytesPerLine()
    data = np.frombuffer(img.constBits(), dtype=np.uint8, count=stride * h)
    return data.reshape(h, stride)[:, : w * 3].reshape(h, w, 3).copy()


def test_each_tile_counts_and_draws_its_own_lines_and_zones(
    fast: MainWindow, qtbot: QtBot, clips: tuple[str, str]
) -> None:
    wall = played(fast, qtbot, list(clips), None)
    a, b = wall.canvas.zones(0), wall.canvas.zones(1)
    assert a is not None and b is not None
    assert a.counts is not None and b.counts is not None
    assert a.counts.lines == (("door", 1, 0),)  # she crossed a.mp4's door once: in
    assert b.counts.lines == (("door", 0, 0),)  # b.mp4's door, elsewhere: nobody crossed
    assert a.counts.zones[0][0] == "right" and a.counts.zones[0][2] == 1  # entered
    assert b.counts.zones[0][0] == "table" and b.counts.zones[0][2] >= 1
    # drawn: the amber line of each tile where its own file puts it
    image = image_array(wall.canvas.grab_frame_image())
    amber = (image[..., 0] > 200) & (image[..., 1] > 170) & (image[..., 2] < 80)
    for tile, x in ((0, 600), (1, 150)):
        r = wall.canvas.image_rect(tile)
        col = round(r.x() + x * r.width() / 768)
        rows = slice(round(r.y() + 300 * r.height() / 432), round(r.y() + 420 * r.height() / 432))
        assert amber[rows, col - 2 : col + 3].any(axis=1).mean() > 0.8, f"tile {tile}'s line"
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert grab_window(wall).save(str(SHOTS / "wall-zones.png"))
    wall.close()


def test_one_zones_file_for_every_tile_and_a_bad_one_is_one_line(
    fast: MainWindow, qtbot: QtBot, clips: tuple[str, str], tmp_path: Path
) -> None:
    shared = tmp_path / "every.json"
    shared.write_text(json.dumps(GATE))
    wall = played(fast, qtbot, list(clips), str(shared))
    for tile in (0, 1):  # the same file, each tile its own count of the same crossing
        picture = wall.canvas.zones(tile)
        assert picture is not None and picture.counts is not None
        assert picture.counts.lines == (("door", 1, 0),)
    wall.close()
    bad = tmp_path / "bad.json"
    bad.write_text('{"lines": [{"name": "x", "points": [[1, 1]]}]}')
    assert fast.open_wall(list(clips), zones=str(bad)) is None
    assert f"{bad}: line 'x': needs 2 points, has 1" in fast.error_box.text()
