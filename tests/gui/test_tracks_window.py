"""Tracks in the window: the Tracking menu (remembered), IDs and trails on the canvas, the
detections list's ID column, Follow This ID with its lost and found messages, and the
track list with its jumps. The real YOLOX-Nano on the bundled sample under Xvfb; the
tracker here is a scripted stand-in that gives the person track 12 (and none on frames
``LOST``), so what the window does with IDs is checked frame by frame. The real trackers
in the window: tests/gui/test_tracks_playback.py.

Screenshots go to a temporary folder (FRAMELENS_TRACKS_SCREENSHOTS names another); the docs'
are the real tracker's (tests/gui/test_tracks_playback.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from framelens.core.api import (
    Detections,
    FrameResult,
    PlaybackTracking,
    TrackerSettings,
    layout,
    track_colour,
)
from framelens.core.stages.source_stages import SourceStage, StageFactory
from framelens.gui.common.controller import Controller
from framelens.gui.common.screenshots import grab_window
from framelens.gui.common.settings import Settings
from framelens.gui.player.main_window import MainWindow
from PySide6.QtCore import QCoreApplication, QEvent, QRect, QSettings, Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot
from shiboken6 import isValid
from shots import shots_dir

pytestmark = pytest.mark.gui

TIMEOUT_MS = 60_000
FRAME = 600  # the person and two skateboards
PERSON = 12
LOST = {603, 604}  # the stand-in loses the person here
TAGGED = 191  # the walker lower in the frame: their tag above their box, not inside it
SHOTS = shots_dir("FRAMELENS_TRACKS_SCREENSHOTS", "tracks")
U8 = npt.NDArray[np.uint8]


class ScriptedIds:
    """The person is track 12 (not on frames LOST), the other boxes 20, 21... by their
    left edge; each tracked box's trail a line from 150 px left of and 60 px below its
    centre to the centre."""

    def __call__(self, result: FrameResult) -> None:
        dets = result.output
        assert isinstance(dets, Detections)
        n = len(dets)
        ids = np.full(n, -1, np.int64)
        others = sorted((i for i in range(n) if dets.class_ids[i] != 0),
                        key=lambda i: float(dets.boxes[i, 0]))  # fmt: skip
        for k, i in enumerate(others):
            ids[i] = 20 + k
        if result.frame.index not in LOST:
            ids[dets.class_ids == 0] = PERSON
        centres = (dets.boxes[:, :2] + dets.boxes[:, 2:]) / 2
        trails = tuple(
            np.array([c + np.float32([-150.0, 60.0]), c], np.float32)
            if t >= 1
            else np.zeros((0, 2), np.float32)
            for c, t in zip(centres, ids.tolist(), strict=True)
        )
        result.output = Detections(dets.boxes, dets.scores, dets.class_ids, dets.landmarks,
                                   ids, trails)  # fmt: skip

    def reset(self) -> None:
        pass


def scripted(settings: TrackerSettings) -> StageFactory:
    del settings

    def chain(_source: int) -> Sequence[SourceStage]:
        return [ScriptedIds()]

    return chain


def make_window(qtbot: QtBot, settings: Settings) -> MainWindow:
    controller = Controller(tracking=PlaybackTracking(scripted))
    win = MainWindow(controller=controller, settings=settings)
    qtbot.addWidget(win)
    win.resize(1360, 860)
    win.show()
    qtbot.waitExposed(win)
    return win


def close_window(win: MainWindow) -> None:
    if not isValid(win):
        return
    if win.isVisible():  # else closed by the test already
        win.close()
    win.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


@pytest.fixture
def tracked(qtbot: QtBot, app_settings: Settings) -> Iterator[MainWindow]:
    win = make_window(qtbot, app_settings)
    yield win
    close_window(win)


def rgb(image: QImage) -> U8:
    img = image.convertToFormat(QImage.Format.Format_RGB888)
    w, h, stride = img.width(), img.height(), img.bytesPerLine()
    data = np.frombuffer(img.constBits(), dtype=np.uint8, count=stride * h)
    return data.reshape(h, stride)[:, : w * 3].reshape(h, w, 3).copy()


def near(img: U8, bgr: tuple[int, int, int], tolerance: int = 30) -> npt.NDArray[np.bool_]:
    b, g, r = bgr
    return np.all(np.abs(img.astype(np.int16) - np.array([r, g, b])) <= tolerance, axis=2)


def view_rect(window: MainWindow, box: tuple[float, float, float, float]) -> QRect:
    r = window.canvas.image_rect()
    size = window.canvas.image_size
    assert size is not None
    sx, sy = r.width() / size[0], r.height() / size[1]
    x1, y1 = round(r.x() + box[0] * sx), round(r.y() + box[1] * sy)
    x2, y2 = round(r.x() + box[2] * sx), round(r.y() + box[3] * sy)
    return QRect(x1, y1, x2 - x1, y2 - y1)


def press(window: MainWindow, qtbot: QtBot, key: Qt.Key, mods: Qt.KeyboardModifier) -> None:
    window.activateWindow()
    window.canvas.setFocus()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5000)
    qtbot.keyClick(window.canvas, key, mods)


def on_frame(window: MainWindow, index: int) -> bool:
    return window.shown_index == index and window.detections.panel.frame_index == index


def open_paused(window: MainWindow, qtbot: QtBot, sample: str, frame: int = FRAME) -> None:
    if not window.detections.dock.isVisible():
        window.detections.action.trigger()
    window.open_source(sample)
    qtbot.waitUntil(lambda: window.results_shown >= 3, timeout=TIMEOUT_MS)
    window.controller.pause()
    qtbot.waitUntil(lambda: not window.state.playing, timeout=10_000)
    window.controller.seek(frame)
    qtbot.waitUntil(lambda: on_frame(window, frame), timeout=TIMEOUT_MS)


def person_row_id(window: MainWindow) -> int:
    rows = [r for r in window.detections.panel.all_rows() if r.label == "person"]
    assert len(rows) == 1
    return rows[0].track_id


def step(window: MainWindow, qtbot: QtBot, key: Qt.Key = Qt.Key.Key_Right) -> None:
    before = window.shown_index
    press(window, qtbot, key, Qt.KeyboardModifier.NoModifier)
    delta = 1 if key == Qt.Key.Key_Right else -1
    qtbot.waitUntil(lambda: on_frame(window, before + delta), timeout=TIMEOUT_MS)


def save_screenshot(window: MainWindow, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / name
    assert grab_window(window).save(str(path))
    return path


def test_the_tracking_menu_puts_ids_and_trails_on_the_canvas_and_is_remembered(
    tracked: MainWindow, qtbot: QtBot, sample: str, app_settings: Settings, settings_file: Path
) -> None:
    window = tracked
    open_paused(window, qtbot, sample)
    assert window.tracking.kind_actions["off"].isChecked() and person_row_id(window) == -1
    person = next(r for r in window.detections.panel.all_rows() if r.label == "person")
    colour = track_colour(PERSON)
    box = view_rect(window, person.box)
    plain = rgb(window.canvas.grab_frame_image())
    edge = box.adjusted(-4, 20, 4 - box.width() + 8, -20)  # the box's left edge
    assert near(plain, colour)[edge.top() : edge.bottom(), edge.left() : edge.right()].sum() < 20

    window.tracking.kind_actions["bytetrack"].trigger()  # the paused frame, tracked
    qtbot.waitUntil(lambda: person_row_id(window) == PERSON, timeout=TIMEOUT_MS)
    qtbot.wait(200)
    # the ID column shown, the box column's header still fits it (it was cut at both ends)
    header = window.detections.panel.table.horizontalHeader()
    assert header.sectionSize(3) >= header.sectionSizeHint(3), header.sectionSizeHint(3)
    shot = rgb(window.canvas.grab_frame_image())
    region = near(shot, colour)[edge.top() : edge.bottom(), edge.left() : edge.right()]
    assert region.sum() > 50, "the person's box is not in its track's colour"
    # its trail: from 150 px left of and 60 px below its centre to the centre
    cx, cy = (person.box[0] + person.box[2]) / 2, (person.box[1] + person.box[3]) / 2
    trail = view_rect(window, (cx - 140, cy + 25, person.box[0] - 5, cy + 58))  # left of it
    in_trail = near(shot, colour)[trail.top() : trail.bottom(), trail.left() : trail.right()]
    assert in_trail.sum() > 10
    save_screenshot(window, "scripted-tracks.png")
    # the tracker's time is a stage of the performance plots, named as users read it
    assert "tracking" in window.plots.summary_text()
    assert app_settings.tracker == "bytetrack"
    assert window.controller.tracker is not None and window.controller.tracker.kind == "bytetrack"

    # Show Trails (Shift+T) off: the same frame redrawn without them, IDs kept
    press(window, qtbot, Qt.Key.Key_T, Qt.KeyboardModifier.ShiftModifier)
    assert not window.panel.overlay_checks["trails"].isChecked()
    assert not window.tracking.trails_action.isChecked()

    def trail_gone() -> bool:
        img = rgb(window.canvas.grab_frame_image())
        return (
            near(img, colour)[trail.top() : trail.bottom(), trail.left() : trail.right()].sum() < 3
        )

    qtbot.waitUntil(trail_gone, timeout=TIMEOUT_MS)
    assert person_row_id(window) == PERSON
    assert not app_settings.overlay("trails")  # saved with the other overlay toggles

    # Ctrl+T: off, and on again with the tracker chosen last
    press(window, qtbot, Qt.Key.Key_T, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: person_row_id(window) == -1, timeout=TIMEOUT_MS)
    assert window.tracking.kind_actions["off"].isChecked() and app_settings.tracker == "off"
    window.tracking.kind_actions["ocsort"].trigger()
    qtbot.waitUntil(lambda: person_row_id(window) == PERSON, timeout=TIMEOUT_MS)
    window.close()  # the session ends (its choices saved); the fixture deletes it

    # the next session tracks with OC-SORT from the start
    again = make_window(qtbot, Settings(QSettings(str(settings_file), QSettings.Format.IniFormat)))
    try:
        assert again.tracking.kind_actions["ocsort"].isChecked()
        tracker = again.controller.tracker
        assert tracker is not None and tracker.kind == "ocsort"
        open_paused(again, qtbot, sample)
        assert person_row_id(again) == PERSON
    finally:
        again.close()  # qtbot deletes it


def test_the_detections_list_has_an_id_column_and_follow_says_lost_and_found(
    tracked: MainWindow, qtbot: QtBot, sample: str
) -> None:
    window = tracked
    open_paused(window, qtbot, sample)
    window.tracking.choose("bytetrack")
    qtbot.waitUntil(lambda: person_row_id(window) == PERSON, timeout=TIMEOUT_MS)
    panel = window.detections.panel
    model = panel.table.model()
    assert model.headerData(1, Qt.Orientation.Horizontal) == "ID"
    shown = {model.index(r, 0).data(): model.index(r, 1).data() for r in range(model.rowCount())}
    assert shown["person"] == str(PERSON) and set(shown.values()) <= {"12", "20", "21"}

    # the row's context menu: Follow This ID
    rows = panel.visible_rows()
    view_row = next(i for i, r in enumerate(rows) if r.label == "person")
    centre = panel.table.visualRect(model.index(view_row, 0)).center()
    panel._context_menu(centre)
    follow = next(a for a in panel.menu.actions() if a.text().startswith("Follow This ID"))
    assert follow.text() == f"Follow This ID (person #{PERSON})" and follow.isEnabled()
    follow.trigger()
    panel.menu.close()
    canvas = window.canvas
    assert window.tracking.following is not None and canvas.follow is not None
    assert canvas.follow[0] == pytest.approx(rows[view_row].box[0])  # the person's box
    qtbot.wait(200)
    marked = rgb(canvas.grab_frame_image())
    box = view_rect(window, rows[view_row].box)
    # the thick outline in the track's colour, just outside the box's right edge
    ring = marked[box.top() + 40 : box.bottom() - 40, box.right() + 5 : box.right() + 13]
    assert near(ring, track_colour(PERSON)).sum() > 100
    save_screenshot(window, "scripted-follow.png")

    for _ in range(FRAME + 1, 603):
        step(window, qtbot)
        assert canvas.follow is not None
    step(window, qtbot)  # frame 603: the stand-in lost it
    assert canvas.follow is None
    assert window.status_bar.currentMessage() == f"person #{PERSON} lost at frame 604"
    step(window, qtbot)  # still lost: the message stays
    assert window.status_bar.currentMessage() == f"person #{PERSON} lost at frame 604"
    save_screenshot(window, "scripted-lost.png")
    step(window, qtbot)  # frame 605: back
    assert canvas.follow is not None
    assert window.status_bar.currentMessage() == f"person #{PERSON} found again at frame 606"
    # F stops following
    press(window, qtbot, Qt.Key.Key_F, Qt.KeyboardModifier.NoModifier)
    assert window.tracking.following is None and canvas.follow is None
    # F with the person picked in the list follows it again
    panel.pick(next(i for i, r in enumerate(panel.visible_rows()) if r.label == "person"))
    press(window, qtbot, Qt.Key.Key_F, Qt.KeyboardModifier.NoModifier)
    assert window.tracking.following is not None
    assert window.tracking.following.track_id == PERSON


def tag_on_screen(window: MainWindow, track_id: int) -> QRect:
    """Where the canvas shows the tag of track ``track_id``'s box, which core draws above
    the box (its layout for the style and size the frame is drawn with)."""
    result, settings = window.controller.last_result, window.controller.settings
    assert result is not None and settings is not None
    assert isinstance(result.output, Detections)
    frame = result.frame
    overlay = layout(
        result.output, settings.model.labels, settings.overlay, frame.width, frame.height
    )
    tags = [m for m in overlay.boxes if m.tag is not None and f"#{track_id} " in m.tag.text]
    assert len(tags) == 1
    mark, tag = tags[0], tags[0].tag
    assert tag is not None
    t = tag.rect
    assert t.y2 < mark.box.y1, "this frame's tag is not above its box"
    return view_rect(window, (t.x1, t.y1, t.x2 + 1, t.y2 + 1))


def overdrawn(before: U8, after: U8, rect: QRect) -> int:
    """Pixels of ``rect`` (widget pixels) that changed from ``before`` to ``after``."""
    ys, xs = slice(rect.top(), rect.bottom() + 1), slice(rect.left(), rect.right() + 1)
    diff = np.abs(before[ys, xs].astype(np.int16) - after[ys, xs].astype(np.int16))
    return int((diff.max(axis=2) > 12).sum())


def repainted(window: MainWindow, qtbot: QtBot, before: U8) -> U8:
    """The canvas as it shows once it differs from ``before``."""
    shots: list[U8] = []

    def differs() -> bool:
        shots[:] = [rgb(window.canvas.grab_frame_image())]
        return bool(np.any(shots[0] != before))

    qtbot.waitUntil(differs, timeout=10_000)
    return shots[0]


def test_the_followed_or_picked_box_is_marked_around_its_tag_which_stays_readable(
    tracked: MainWindow, qtbot: QtBot, sample: str
) -> None:
    window = tracked
    open_paused(window, qtbot, sample, TAGGED)
    window.tracking.choose("bytetrack")
    qtbot.waitUntil(lambda: person_row_id(window) == PERSON, timeout=TIMEOUT_MS)
    canvas, colour = window.canvas, track_colour(PERSON)
    tag = tag_on_screen(window, PERSON)
    inside = tag.adjusted(1, 1, -1, -1)
    # the follow outline (6 px wide, 7 px out) runs around the tag: beside it, its height
    beside = QRect(tag.left() - 9, tag.top(), 4, tag.height())

    # frames drawn by core (the host path): the mark painted over the frame's pixels
    plain = rgb(canvas.grab_frame_image())
    window.tracking.follow(PERSON, 0)
    followed = repainted(window, qtbot, plain)
    save_screenshot(window, "follow-label.png")
    assert overdrawn(plain, followed, inside) == 0, "the follow mark covers the tag"
    ring = near(followed, colour)[beside.top() : beside.bottom(), beside.left() : beside.right()]
    assert ring.mean() > 0.9, "the follow outline does not run around the tag"

    # frames kept on the GPU: the canvas paints the overlay, then the mark
    result, settings = window.controller.last_result, window.controller.settings
    assert result is not None and settings is not None
    overlay = (result.output, settings.model.labels, settings.overlay)
    with qtbot.waitSignal(canvas.drawTimeMs, timeout=10_000):
        canvas.set_image(result.frame.image, overlay)  # as the window shows device frames
    followed = rgb(canvas.grab_frame_image())
    save_screenshot(window, "follow-label-painted.png")
    window.tracking.stop_following()
    plain = repainted(window, qtbot, followed)
    assert overdrawn(plain, followed, inside) == 0, "the follow mark covers the painted tag"
    ring = near(followed, colour)[beside.top() : beside.bottom(), beside.left() : beside.right()]
    assert ring.mean() > 0.9, "the follow outline does not run around the painted tag"

    # the box picked in the detections list: the rest dimmed, the tag not
    panel = window.detections.panel
    panel.pick(next(i for i, r in enumerate(panel.visible_rows()) if r.label == "person"))
    picked = repainted(window, qtbot, plain)
    save_screenshot(window, "pick-label.png")
    assert overdrawn(plain, picked, inside) == 0, "the picked box's tag is dimmed or covered"
    assert panel.picked is not None
    box, shown = view_rect(window, panel.picked.box), canvas.image_rect()
    left = (slice(box.top(), box.bottom()), slice(round(shown.left()) + 2, box.left() - 20))
    dimmed = picked[left].astype(float).mean() / plain[left].astype(float).mean()
    assert dimmed < 0.7, "the rest of the frame is not dimmed"


def test_the_track_list_lists_each_track_and_jumps_to_its_first_and_last_frame(
    tracked: MainWindow, qtbot: QtBot, sample: str
) -> None:
    window = tracked
    open_paused(window, qtbot, sample)
    window.tracking.choose("bytetrack")
    qtbot.waitUntil(lambda: person_row_id(window) == PERSON, timeout=TIMEOUT_MS)
    for _ in range(8):  # frames 601..608
        step(window, qtbot)
    press(
        window,
        qtbot,
        Qt.Key.Key_T,
        Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier,
    )
    tracks = window.tracking
    assert tracks.dock.isVisible() and window.settings.track_list_visible
    tracks.dock.raise_()
    qtbot.waitUntil(lambda: len(tracks.panel.rows()) >= 2, timeout=TIMEOUT_MS)
    rows = {r.track_id: r for r in tracks.panel.rows()}
    person = rows[PERSON]
    # seen on 600..608 but for the two frames the stand-in lost it
    assert (person.first_frame, person.last_frame, person.observations) == (600, 608, 7)
    table = tracks.panel.table
    model = table.model()
    row = next(r for r in range(model.rowCount()) if model.index(r, 0).data() == f"#{PERSON}")
    texts = [model.index(row, c).data() for c in range(model.columnCount())]
    assert texts[:4] == [f"#{PERSON}", "person", "601", "609"]
    assert texts[4] == "0.8 s"  # frames 601 to 609 at 10 fps
    save_screenshot(window, "scripted-list.png")

    where = table.visualRect(model.index(row, 1)).center()
    qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=where)
    qtbot.waitUntil(lambda: window.shown_index == 600, timeout=TIMEOUT_MS)
    qtbot.mouseDClick(table.viewport(), Qt.MouseButton.LeftButton, pos=where)
    qtbot.waitUntil(lambda: window.shown_index == 608, timeout=TIMEOUT_MS)
    # another video: its own tracks
    window.tracking.choose("off")
    qtbot.waitUntil(lambda: tracks.panel.rows() == [], timeout=TIMEOUT_MS)
    assert tracks.panel.caption.text().startswith("Tracking is off")


def test_a_tracker_that_cannot_run_is_said_and_the_choice_stays(
    qtbot: QtBot, app_settings: Settings
) -> None:
    def unavailable(settings: TrackerSettings) -> StageFactory:
        def chain(_source: int) -> Sequence[SourceStage]:
            raise ValueError(f"the {settings.kind} tracker is not available here")

        return chain

    controller = Controller(tracking=PlaybackTracking(unavailable))
    win = MainWindow(controller=controller, settings=app_settings)
    qtbot.addWidget(win)
    try:
        with qtbot.waitSignal(controller.errorOccurred, timeout=5000) as said:
            win.tracking.kind_actions["botsort"].trigger()
        assert said.args == ["the botsort tracker is not available here"]
        assert win.tracking.kind_actions["off"].isChecked() and win.tracking.kind == "off"
        assert controller.tracker is None and app_settings.tracker == "off"
    finally:
        win.close()
