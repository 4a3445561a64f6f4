"""The real trackers in the window: ByteTrack on the bundled sample under Xvfb with the
real YOLOX-Nano. IDs reach the canvas and the lists; stepping back (Left) shows the IDs
the frames had; a seek restarts tracking without showing an ID again for another object.

Screenshots go to a temporary folder; FRAMELENS_TRACKS_SCREENSHOTS=docs writes the docs'.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from framelens.core.api import Detections, ExportRequest, frames_at, track_colour
from framelens.gui.common.screenshots import grab_window
from framelens.gui.player.main_window import MainWindow
from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot
from shots import shots_dir

pytestmark = pytest.mark.gui

TIMEOUT_MS = 60_000
FRAME = 600  # the person walks here
ELSEWHERE = 295  # the person earlier in the video
SHOTS = shots_dir("FRAMELENS_TRACKS_SCREENSHOTS", "tracks")
U8 = npt.NDArray[np.uint8]


def rgb(image: QImage) -> U8:
    img = image.convertToFormat(QImage.Format.Format_RGB888)
    w, h, stride = img.width(), img.height(), img.bytesPerLine()
    data = np.frombuffer(img.constBits(), dtype=np.uint8, count=stride * h)
    return data.reshape(h, stride)[:, : w * 3].reshape(h, w, 3).copy()


def press(window: MainWindow, qtbot: QtBot, key: Qt.Key) -> None:
    window.activateWindow()
    window.canvas.setFocus()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5000)
    qtbot.keyClick(window.canvas, key, Qt.KeyboardModifier.NoModifier)


def on_frame(window: MainWindow, index: int) -> bool:
    return window.shown_index == index and window.detections.panel.frame_index == index


def go(window: MainWindow, qtbot: QtBot, key: Qt.Key) -> int:
    """Right or Left; the frame then shown."""
    target = window.shown_index + (1 if key == Qt.Key.Key_Right else -1)
    press(window, qtbot, key)
    qtbot.waitUntil(lambda: on_frame(window, target), timeout=TIMEOUT_MS)
    return target


def ids_shown(window: MainWindow) -> dict[int, tuple[float, float, float, float]]:
    """The frame's track IDs (>= 1) and their boxes, as the detections list has them."""
    return {r.track_id: r.box for r in window.detections.panel.all_rows() if r.track_id >= 1}


def open_tracked(window: MainWindow, qtbot: QtBot, sample: str) -> None:
    window.detections.action.trigger()
    window.tracking.choose("bytetrack")
    window.open_source(sample)
    qtbot.waitUntil(lambda: window.results_shown >= 2, timeout=TIMEOUT_MS)
    window.controller.pause()
    qtbot.waitUntil(lambda: not window.state.playing, timeout=10_000)
    window.controller.seek(FRAME)
    qtbot.waitUntil(lambda: on_frame(window, FRAME), timeout=TIMEOUT_MS)


def test_bytetrack_in_the_window_keeps_ids_on_step_back_and_restarts_on_a_seek(
    window: MainWindow, qtbot: QtBot, sample: str
) -> None:
    open_tracked(window, qtbot, sample)
    seen: dict[int, dict[int, tuple[float, float, float, float]]] = {FRAME: ids_shown(window)}
    for _ in range(6):
        index = go(window, qtbot, Qt.Key.Key_Right)
        seen[index] = ids_shown(window)
    person = [r for r in window.detections.panel.all_rows() if r.label == "person"]
    assert len(person) == 1 and person[0].track_id >= 1, "the person has no track ID"
    pid = person[0].track_id
    assert all(pid in ids for frame, ids in seen.items() if frame > FRAME)  # one ID throughout

    # the canvas: the person's box in its track's colour, its tag "person #ID"
    qtbot.wait(200)
    shot = rgb(window.canvas.grab_frame_image())
    r, size = window.canvas.image_rect(), window.canvas.image_size
    assert size is not None
    sx = r.width() / size[0]
    x1, y1, _x2, y2 = person[0].box
    edge = QRect(round(r.x() + x1 * sx) - 4, round(r.y() + (y1 + 40) * sx), 8,
                 round((y2 - y1 - 80) * sx))  # fmt: skip
    b, g, red = track_colour(pid)
    band = shot[edge.top() : edge.bottom(), edge.left() : edge.right()].astype(np.int16)
    hits = np.all(np.abs(band - np.array([red, g, b])) <= 30, axis=2)
    assert hits.sum() > 50, "the person's box is not in its track's colour"

    # stepping back shows each frame with the IDs it had
    for _ in range(4):
        index = go(window, qtbot, Qt.Key.Key_Left)
        assert ids_shown(window).keys() == seen[index].keys(), f"frame {index}"
        for tid, box in ids_shown(window).items():
            assert box == pytest.approx(seen[index][tid], abs=0.01)

    # a seek elsewhere: tracking starts again, and no ID shown before names a new object
    before = set().union(*(ids.keys() for ids in seen.values()))
    window.controller.seek(ELSEWHERE)
    qtbot.waitUntil(lambda: on_frame(window, ELSEWHERE), timeout=TIMEOUT_MS)
    after: set[int] = set(ids_shown(window))
    for _ in range(3):
        go(window, qtbot, Qt.Key.Key_Right)
        after |= set(ids_shown(window))
    assert after, "nothing tracked after the seek"
    assert not after & before, f"IDs {sorted(after & before)} shown for other objects"
    assert min(after) > max(before)  # numbered on

    # the track list knows both stretches
    window.tracking.list_action.trigger()
    qtbot.waitUntil(lambda: len(window.tracking.panel.rows()) >= 2, timeout=TIMEOUT_MS)
    rows = {t.track_id: t for t in window.tracking.panel.rows()}
    assert rows[pid].first_frame == FRAME and rows[pid].last_frame == FRAME + 6
    assert window.controller.track_log.get(pid) == rows[pid]


def test_export_with_tracking_on_writes_ids_and_draws_them(
    window: MainWindow, qtbot: QtBot, sample: str, tmp_path: Path
) -> None:
    """File > Export tracks as the window does: each box's track_id in the detections
    file, and the annotated video shows the person's box in its track's colour."""
    open_tracked(window, qtbot, sample)
    video, dets = tmp_path / "tracked.mp4", tmp_path / "tracked.json"
    with qtbot.waitSignal(window.controller.exportFinished, timeout=120_000):
        window.controller.start_export(ExportRequest(sample, str(video), str(dets), FRAME, 5))
    frames = json.loads(dets.read_text())["frames"]
    assert [f["index"] for f in frames] == list(range(FRAME, FRAME + 5))
    people = [[d for d in f["detections"] if d["label"] == "person"] for f in frames]
    ids = {d["track_id"] for found in people for d in found}
    assert len(ids) == 1 and min(ids) >= 1, ids  # one person, one ID, in every frame
    (tid,) = ids
    last = people[-1][0]
    (_index, picture), *_ = frames_at(video, [4])
    x1, y1, _x2, y2 = (round(v) for v in last["box"])
    band = picture[y1 + 40 : y2 - 40, max(0, x1 - 2) : x1 + 3].astype(np.int16)
    close = np.all(np.abs(band - np.array(track_colour(tid))) <= 40, axis=2)
    assert close.mean() > 0.5, "the exported person's box is not in its track's colour"


WALK_IN = 1236  # the person walks in from the bottom left


def test_a_walking_persons_trail_follows_their_path_and_can_be_followed(
    window: MainWindow, qtbot: QtBot, sample: str
) -> None:
    """The trail on the canvas is the person's path over the last frames; Follow This ID
    and the track list on the real tracker (the docs' screenshots)."""
    window.detections.action.trigger()
    window.tracking.choose("bytetrack")
    window.open_source(sample)
    qtbot.waitUntil(lambda: window.results_shown >= 2, timeout=TIMEOUT_MS)
    window.controller.pause()
    qtbot.waitUntil(lambda: not window.state.playing, timeout=10_000)
    window.controller.seek(WALK_IN)
    qtbot.waitUntil(lambda: on_frame(window, WALK_IN), timeout=TIMEOUT_MS)
    for _ in range(22):
        go(window, qtbot, Qt.Key.Key_Right)
    result = window.controller.last_result
    assert result is not None
    dets = result.output
    assert isinstance(dets, Detections) and dets.track_ids is not None and dets.trails
    (person,) = (i for i in range(len(dets)) if int(dets.class_ids[i]) == 0)
    trail, pid = dets.trails[person], int(dets.track_ids[person])
    assert pid >= 1 and len(trail) >= 15  # the frames it was seen in, oldest first
    assert trail[-1] == pytest.approx((dets.boxes[person, :2] + dets.boxes[person, 2:]) / 2)
    assert trail[-1][0] - trail[0][0] > 100  # it walked right, and up
    assert trail[0][1] - trail[-1][1] > 60
    # on the canvas: the trail's start, far from the box, in the track's colour
    qtbot.wait(200)
    shot = rgb(window.canvas.grab_frame_image())
    r, size = window.canvas.image_rect(), window.canvas.image_size
    assert size is not None
    s = r.width() / size[0]
    x, y = round(r.x() + float(trail[1][0]) * s), round(r.y() + float(trail[1][1]) * s)
    b, g, red = track_colour(pid)
    near = shot[y - 3 : y + 4, x - 3 : x + 4].astype(np.int16)
    assert np.any(np.all(np.abs(near - np.array([red, g, b])) <= 30, axis=2))
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert grab_window(window).save(str(SHOTS / "tracks-window.png"))

    # follow it (the row picked, F): marked; the track list shows where it began
    panel = window.detections.panel
    panel.pick(next(i for i, row in enumerate(panel.visible_rows()) if row.track_id == pid))
    press(window, qtbot, Qt.Key.Key_F)
    following = window.tracking.following
    assert following is not None and following.track_id == pid
    assert window.canvas.follow is not None
    window.tracking.list_action.trigger()
    qtbot.waitUntil(lambda: bool(window.tracking.panel.rows()), timeout=TIMEOUT_MS)
    record = next(t for t in window.tracking.panel.rows() if t.track_id == pid)
    assert WALK_IN <= record.first_frame <= WALK_IN + 3 and record.last_frame == WALK_IN + 22
    window.tracking.panel.select(pid)
    qtbot.wait(200)
    assert grab_window(window).save(str(SHOTS / "tracks-follow.png"))


def test_the_wall_tracks_each_tile_on_its_own_when_tracking_is_on(
    window: MainWindow, qtbot: QtBot, sample: str, tmp_path: Path
) -> None:
    """With tracking on, Open Several's wall gives every tile a tracker of its own: the
    person in each of two tiles is its tile's first track, ID 1, drawn as such."""
    from tests.unit.media_factory import sample_clips

    clips = sample_clips(tmp_path, Path(sample), (600, 1240), 12)
    window.tracking.choose("bytetrack")
    window.settings.realtime = False  # the wall as fast as it goes
    seen: dict[int, set[int]] = {0: set(), 1: set()}

    def record(result: object) -> None:
        out = getattr(result, "output", None)
        if isinstance(out, Detections) and out.track_ids is not None:
            tile = result.frame.source_id  # type: ignore[attr-defined]
            seen[tile] |= {int(i) for i in out.track_ids if i >= 1}

    wall = window.open_wall(clips)
    assert wall is not None
    qtbot.addWidget(wall)
    wall.session.resultReady.connect(record)
    qtbot.waitUntil(lambda: all(1 in ids for ids in seen.values()), timeout=TIMEOUT_MS)
    assert wall.results_shown > 0
    qtbot.waitUntil(lambda: wall.state.status == "ended", timeout=TIMEOUT_MS)
    qtbot.wait(300)
    assert "frames analysed" in wall.summary_label.text()  # ended: no rate, what was done
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert grab_window(wall).save(str(SHOTS / "tracks-wall.png"))
    wall.close()


@pytest.mark.parametrize("kind", ["ocsort", "botsort"])
def test_oc_sort_and_bot_sort_run_in_the_window(
    window: MainWindow, qtbot: QtBot, sample: str, kind: str
) -> None:
    """The other trackers of the menu on the same frames: the person gets an ID (OC-SORT
    confirms a track on its third frame, BoT-SORT compensates the camera's motion from
    the frames' pixels)."""
    open_tracked(window, qtbot, sample)
    window.tracking.kind_actions[kind].trigger()
    tracker = window.controller.tracker
    assert tracker is not None and tracker.kind == kind
    for _ in range(3):
        go(window, qtbot, Qt.Key.Key_Right)
    person = [r for r in window.detections.panel.all_rows() if r.label == "person"]
    assert len(person) == 1 and person[0].track_id >= 1
    assert not window.error_box.isVisible()
