"""Precision toggle while playing, the INT8 sensitivity chart and the compare view.

Variants go to a temporary cache (FRAMELENS_CACHE_DIR), never the user's. INT8 is
calibrated with a small CalibrationSettings: the point here is the GUI, not the
quality of the calibration (tests/unit/test_precision.py measures that).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from framelens.core.precision import CalibrationSettings
from framelens.gui.compare_view import NONE, CompareWindow
from framelens.gui.main_window import MainWindow
from framelens.gui.sensitivity import SensitivityChart
from framelens.gui.settings import Settings
from pytestqt.qtbot import QtBot

pytestmark = pytest.mark.gui

TIMEOUT_MS = 60_000
SMALL_CALIBRATION = CalibrationSettings(
    frames=8, sensitivity_frames=2, max_search_steps=4, conf=0.3, threads=1
)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("FRAMELENS_CACHE_DIR", str(root))
    return root


def play_fast(window: MainWindow, qtbot: QtBot, sample: str, frames: int = 5) -> None:
    window.transport.realtime_button.setChecked(False)  # as fast as possible
    window.open_source(sample)
    qtbot.waitUntil(
        lambda: window.results_shown >= frames and window.state.playing, timeout=TIMEOUT_MS
    )


def curve_points(curve: object) -> int:
    x, _y = curve.getData()  # type: ignore[attr-defined]
    return 0 if x is None else len(x)


def test_toggling_precision_while_playing_keeps_frames_coming(
    window: MainWindow, qtbot: QtBot, sample: str, cache: Path
) -> None:
    play_fast(window, qtbot, sample)
    statuses: list[str] = []
    window.controller.stateChanged.connect(lambda s: statuses.append(s.status))
    toggle = window.panel.precision
    toggle.buttons["fp16"].click()
    qtbot.waitUntil(
        lambda: window.state.precision == "fp16" and not window.state.loading_model,
        timeout=TIMEOUT_MS,
    )
    switched_at = window.results_shown
    qtbot.waitUntil(lambda: window.results_shown >= switched_at + 10, timeout=TIMEOUT_MS)
    assert set(statuses) == {"playing"}, "playback paused during the switch"
    assert toggle.checked == "fp16"
    assert toggle.state_label.text().startswith("Active: FP16")
    assert window.precision_actions["fp16"].isChecked()
    assert window.model_label.text().endswith("FP16")
    assert window.settings.precision == "fp16"
    assert any(p.name == "model.onnx" for p in cache.rglob("*fp16*/*"))

    window.choose_model("yunet")  # another model: its FP16 variant, still playing
    qtbot.waitUntil(
        lambda: window.state.model == "yunet" and window.state.precision == "fp16",
        timeout=TIMEOUT_MS,
    )
    assert toggle.checked == "fp16" and window.state.playing

    window.precision_actions["fp32"].trigger()  # Ctrl+1
    qtbot.waitUntil(lambda: window.state.precision == "fp32", timeout=TIMEOUT_MS)
    assert toggle.checked == "fp32" and window.state.playing


def test_int8_needs_a_video_and_shows_its_layer_sensitivity(
    window: MainWindow, qtbot: QtBot, sample: str, cache: Path
) -> None:
    window.controller.calibration = SMALL_CALIBRATION
    window.choose_precision("int8")  # nothing open: refused, the toggle stays at FP32
    assert window.panel.precision.checked == "fp32"
    assert "open a video" in window.error_box.text()
    window.error_box.hide()

    window.open_source(sample)
    qtbot.waitUntil(lambda: window.results_shown >= 1, timeout=TIMEOUT_MS)
    window.controller.pause()
    window.panel.precision.buttons["int8"].click()
    qtbot.waitUntil(lambda: window.panel.precision.progress_row.isVisible(), timeout=5000)
    qtbot.waitUntil(lambda: window.state.precision == "int8", timeout=TIMEOUT_MS)
    report = window.controller.report
    assert report is not None
    assert window.panel.precision.layers_button.isEnabled()
    assert f"({100 * report.int8_mac_fraction:.0f}% MACs int8)" in (
        window.panel.precision.state_label.text()
    )
    dialog = window.show_sensitivity()
    assert dialog is not None
    chart: SensitivityChart = dialog.chart
    assert chart.bar_count == len(report.layers) > 50  # one bar per convolution
    assert len(chart.float_bars.opts["x"]) == len(report.kept_float) > 0
    listed = [chart.float_list.item(i).text() for i in range(chart.float_list.count())]
    assert [t.split()[0] for t in listed] == report.kept_float
    assert f"{100 * report.int8_mac_fraction:.1f}%" in chart.summary.text()
    dialog.close()


def test_compare_view_shows_agreement_plots_and_report(
    window: MainWindow, qtbot: QtBot, sample: str, cache: Path, tmp_path: Path
) -> None:
    play_fast(window, qtbot, sample, frames=2)
    window.controller.seek(240)  # people in view
    qtbot.waitUntil(lambda: window.state.index >= 240, timeout=TIMEOUT_MS)
    compare = window.open_compare()
    assert isinstance(compare, CompareWindow)
    qtbot.addWidget(compare)
    qtbot.waitUntil(lambda: not window.state.playing, timeout=10_000)  # the cores go to it
    assert [r.precision for r in compare.requests()] == ["fp32", "fp16"]
    compare.start()
    qtbot.waitUntil(lambda: compare.frames_seen >= 12, timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: compare.table_value(1, "F1") not in ("", NONE), timeout=5000)

    assert compare.table.columnCount() == 2
    assert compare.table_value(0, "F1") == "1.000"  # the reference agrees with itself
    f1 = float(compare.table_value(1, "F1"))
    assert 0.0 <= f1 <= 1.0
    for column in ("Precision", "Recall", "Mean IoU", "Inference ms"):
        assert compare.table_value(1, column) != NONE
    assert compare.table_value(1, "PSNR dB") == NONE  # detectors output no image
    # the plots repaint at 10 Hz: they catch up with the frames seen within a moment
    qtbot.waitUntil(
        lambda: (
            curve_points(compare.latency_curves[1]) >= 10
            and curve_points(compare.f1_curves[1]) >= 10
        ),
        timeout=5000,
    )
    assert all(card.view.has_image for card in compare.cards)
    assert "ms" in compare.cards[1].latency.text()

    compare.diff_action.trigger()  # the difference view
    assert compare.differences and compare.diff_legend_action.isVisible()
    qtbot.wait(300)
    target = Path(os.environ.get("FRAMELENS_COMPARE_SCREENSHOT", tmp_path / "compare.png"))
    target.parent.mkdir(parents=True, exist_ok=True)
    assert compare.grab().save(str(target))

    compare.save_report(str(tmp_path / "report"))
    qtbot.waitUntil(lambda: compare.report_path is not None, timeout=TIMEOUT_MS)
    assert Path(str(compare.report_path)).is_file()

    compare.edit_panes()  # stop, change the panes, start again: a fresh history
    assert compare.cards[0].setup_row.isVisible()
    compare.cards[1].set_precision("fp32")
    compare.start()
    qtbot.waitUntil(lambda: compare.frames_seen >= 3, timeout=TIMEOUT_MS)
    assert compare.labels == ["FP32", "FP32 #2"]
    qtbot.waitUntil(lambda: compare.table_value(1, "F1") == "1.000", timeout=5000)
    compare.close()
    assert not compare.session.running


def test_saved_precision_is_restored_only_when_available(
    qtbot: QtBot, app_settings: Settings, sample: str, cache: Path
) -> None:
    app_settings.precision = "fp16"  # quick to build: restored at start
    first = MainWindow(settings=app_settings)
    qtbot.addWidget(first)
    qtbot.waitUntil(lambda: first.controller.precision == "fp16", timeout=TIMEOUT_MS)
    assert first.panel.precision.checked == "fp16"
    first.close()

    app_settings.precision = "int8"  # calibrated per video: only taken from the cache
    window = MainWindow(settings=app_settings)
    qtbot.addWidget(window)
    window.show()
    window.open_source(sample)
    qtbot.waitUntil(
        lambda: "not prepared for this video" in window.statusBar().currentMessage(),
        timeout=TIMEOUT_MS,
    )
    assert window.controller.precision == "fp32"
    assert window.panel.precision.checked == "fp32"
    assert app_settings.precision == "int8"  # still the user's choice for next time

    window.controller.pause()
    window.panel.precision.buttons["int8"].click()  # a real calibration, cancelled
    qtbot.waitUntil(lambda: window.panel.precision.progress_row.isVisible(), timeout=5000)
    window.panel.precision.cancel_button.click()
    qtbot.waitUntil(lambda: window.controller.preparing is None, timeout=TIMEOUT_MS)
    assert "cancelled" in window.statusBar().currentMessage()
    assert window.panel.precision.checked == "fp32"
    assert not window.panel.precision.progress_row.isVisible()
    assert not [p for p in cache.rglob("*int8*") if not p.name.startswith(".")]
    window.close()
