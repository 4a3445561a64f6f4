"""Tracks in the compare window: with Tracks on every pane tracks its own boxes, the
table gains each pane's tracks against the reference's (the numbers the report gives),
and Save Report writes them. FRAMELENS_COMPARE_SCREENSHOTS=docs writes the screenshot
the user guide shows; else it goes to a temporary folder.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from framelens.gui.compare.compare_agreement import METRICS, TRACK_METRICS, TRACKS_PENDING
from framelens.gui.compare.compare_controller import CompareFrame
from framelens.gui.compare.compare_view import CompareWindow
from framelens.gui.player.main_window import MainWindow
from pytestqt.qtbot import QtBot
from shots import shots_dir

pytestmark = pytest.mark.gui

SHOTS = shots_dir("FRAMELENS_COMPARE_SCREENSHOTS", "compare")
TIMEOUT_MS = 60_000


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("FRAMELENS_CACHE_DIR", str(root))
    return root


def compare_at(window: MainWindow, qtbot: QtBot, sample: str, index: int) -> CompareWindow:
    """The compare window opened on the main window's (paused) frame ``index``."""
    window.transport.realtime_button.setChecked(False)
    window.open_source(sample)
    qtbot.waitUntil(lambda: window.results_shown >= 1, timeout=TIMEOUT_MS)
    window.controller.pause()
    qtbot.waitUntil(lambda: not window.state.playing, timeout=10_000)
    window.controller.seek(index)
    qtbot.waitUntil(lambda: window.state.index == index, timeout=TIMEOUT_MS)
    compare = window.open_compare()
    assert isinstance(compare, CompareWindow)
    qtbot.addWidget(compare)
    return compare


def track_rows_hidden(compare: CompareWindow) -> list[bool]:
    return [compare.table.isRowHidden(METRICS.index(m)) for m in TRACK_METRICS]


def test_tracks_in_the_window_and_its_report(
    window: MainWindow, qtbot: QtBot, sample: str, cache: Path, tmp_path: Path
) -> None:
    compare = compare_at(window, qtbot, sample, 540)  # a person walking, scored ~0.85
    assert not compare.tracks_action.isChecked()  # the main window gave no tracker
    assert track_rows_hidden(compare) == [True] * len(TRACK_METRICS)
    compare.tracks_action.trigger()
    compare.cards[1].set_precision("fp16")
    frames: list[CompareFrame] = []
    compare.session.frameReady.connect(frames.append)
    compare.start()
    assert not compare.tracks_action.isEnabled()  # chosen before Start
    qtbot.waitUntil(
        lambda: len(frames) >= 25 and frames[-1].tracks is not None
        and frames[-1].tracks.frames >= 20,
        timeout=3 * TIMEOUT_MS,
    )  # fmt: skip
    compare.pause()
    qtbot.waitUntil(lambda: compare.session.state == "paused", timeout=10_000)
    qtbot.wait(300)  # what was in flight lands, the 10 Hz repaint catches up
    assert track_rows_hidden(compare) == [False] * len(TRACK_METRICS)
    last = frames[-1].tracks
    assert last is not None
    for pane in range(2):
        shown = [compare.table_value(pane, m) for m in TRACK_METRICS]
        assert TRACKS_PENDING not in shown
        assert int(shown[0]) == last.panes[pane]["tracks"] >= 1
    assert [compare.table_value(0, m) for m in TRACK_METRICS[1:]] == ["0", "1.000", "1.000"]
    idf1 = float(compare.table_value(1, "Track IDF1"))
    assert idf1 == pytest.approx(last.panes[1]["idf1"], abs=5e-4) and 0.0 <= idf1 <= 1.0
    header = compare.table.verticalHeaderItem(METRICS.index("Track IDF1"))
    assert header is not None and f"over the {last.frames} frames compared" in header.toolTip()

    SHOTS.mkdir(parents=True, exist_ok=True)
    assert compare.grab().save(str(SHOTS / "compare-tracks.png"))

    compare.save_report(str(tmp_path / "report"))
    qtbot.waitUntil(lambda: compare.report_path is not None, timeout=TIMEOUT_MS)
    report = Path(str(compare.report_path)).parent
    summary = json.loads((report / "summary.json").read_text())
    assert summary["tracker"] == "bytetrack"
    ref, fp16 = summary["variants"]["FP32"]["tracking"], summary["variants"]["FP16"]["tracking"]
    assert ref["idf1"] == 1.0 and ref["id_switches"] == 0 and fp16["tracks"] >= 1
    assert "<h2>Tracks (bytetrack)</h2>" in (report / "index.html").read_text()
    compare.close()


def test_the_main_window_s_tracker_turns_tracks_on(
    window: MainWindow, qtbot: QtBot, sample: str
) -> None:
    """Compare opened while the window tracks with OC-SORT starts with Tracks on, with
    OC-SORT; turned off there, its panes do not track."""
    window.tracking.choose("ocsort", save=False)
    try:
        compare = compare_at(window, qtbot, sample, 10)
        chosen = compare.tracker_settings()
        assert compare.tracks_action.isChecked()
        assert chosen is not None and chosen.kind == "ocsort"
        compare.tracks_action.trigger()  # off: the panes do not track
        assert compare.tracker_settings() is None
        compare.close()
    finally:
        window.tracking.choose("off", save=False)


def test_counts_of_the_lines_and_zones_saved_beside_the_video(
    window: MainWindow, qtbot: QtBot, sample: str, cache: Path, tmp_path: Path
) -> None:
    """A video with lines and zones beside it (``clip.mp4.zones.json``): with Tracks on,
    each pane counts its tracks against them, the table gains a row per count with its
    change from the reference's, and Save Report writes the counts. Frames 160.. of the
    sample: a person crosses x = 600 around frame 190."""
    video = tmp_path / "door.mp4"
    shutil.copyfile(sample, video)
    zones = {
        "lines": [{"name": "door", "points": [[600, 432], [600, 200]]}],
        "zones": [{"name": "right", "polygon": [[600, 200], [768, 200], [768, 432],
                                                [600, 432]]}],
    }  # fmt: skip
    Path(f"{video}.zones.json").write_text(json.dumps(zones))
    compare = compare_at(window, qtbot, str(video), 160)
    if not compare.tracks_action.isChecked():  # the window's zones may have turned it on
        compare.tracks_action.trigger()
    assert compare.tracker_settings() is not None
    compare.cards[1].set_precision("fp16")
    frames: list[CompareFrame] = []
    compare.session.frameReady.connect(frames.append)
    compare.start()
    qtbot.waitUntil(
        lambda: bool(frames) and frames[-1].tracks is not None
        and frames[-1].tracks.frames >= 45,
        timeout=3 * TIMEOUT_MS,
    )  # fmt: skip
    compare.pause()
    qtbot.waitUntil(lambda: compare.session.state == "paused", timeout=10_000)
    qtbot.wait(300)  # what was in flight lands, the 10 Hz repaint catches up
    last = frames[-1].tracks
    assert last is not None and len(last.counts) == 2
    rows = {"door in / out": ("lines", "door", ("in", "out")),
            "right enter / exit": ("zones", "right", ("enter", "exit"))}  # fmt: skip
    assert [compare.table_value(0, r) for r in rows] == ["1 / 0", "1 / 0"]  # the crossing
    fp16 = last.counts[1]
    for row, (table, name, keys) in rows.items():
        values = " / ".join(str(fp16["counts"][table][name][k]) for k in keys)
        changes = [fp16["vs_reference"]["count_changes"][name][k] for k in keys]
        signed = " / ".join(f"{c:+d}" for c in changes)
        assert compare.table_value(1, row) == (f"{values} ({signed})" if any(changes) else values)
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert compare.grab().save(str(SHOTS / "compare-counts-window.png"))

    compare.save_report(str(tmp_path / "report"))
    qtbot.waitUntil(lambda: compare.report_path is not None, timeout=TIMEOUT_MS)
    report = Path(str(compare.report_path)).parent
    summary = json.loads((report / "summary.json").read_text())
    assert summary["variants"]["FP32"]["analytics"]["counts"]["lines"]["door"]["in"] == 1
    assert "<h2>Counts (lines and zones)</h2>" in (report / "index.html").read_text()
    compare.close()


def test_lines_and_zones_beside_the_video_that_cannot_be_used_are_said_in_one_line(
    window: MainWindow, qtbot: QtBot, sample: str, tmp_path: Path
) -> None:
    video = tmp_path / "door.mp4"
    shutil.copyfile(sample, video)
    beside = Path(f"{video}.zones.json")
    beside.write_text('{"lines": [{"name": "door", "points": [[600, 432]]}]}')
    compare = compare_at(window, qtbot, str(video), 0)
    assert compare.session.zones is None  # the comparison counts nothing
    assert window.error_box.text() == f"{beside}: line 'door': needs 2 points, has 1"
    window.error_box.hide()
    compare.close()
