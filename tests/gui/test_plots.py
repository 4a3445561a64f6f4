"""Rough edge 9: the latency plot's log axis never spans less than two decades, so its
labels are decades (0.1, 1, 10, 100 ms), not the minor ticks "2 3 ... 9" piled up."""

from __future__ import annotations

import math

import numpy as np
from framelens.core.types import Detections, Frame, FrameResult, StageTimes
from framelens.gui.display.plots import StagePlots
from pytestqt.qtbot import QtBot


def y_span(plots: StagePlots) -> float:
    (_lo, _hi), (lo, hi) = plots.latency_plot.getPlotItem().getViewBox().viewRange()
    return hi - lo


def test_an_empty_latency_plot_spans_decades_and_so_does_a_narrow_one(qtbot: QtBot) -> None:
    plots = StagePlots(auto_refresh=False)
    qtbot.addWidget(plots)
    plots.resize(600, 300)
    plots.show()
    qtbot.waitExposed(plots)
    assert y_span(plots) >= 2.0  # before any frame: 0.1 .. 1000 ms
    frame = Frame(np.zeros((4, 4, 3), np.uint8), 0, 0.0)
    for i in range(20):  # every stage within 5..8 ms: less than a decade of data
        t = StageTimes(decode=5.0, preprocess=6.0, inference=7.0 + i % 2, postprocess=5.5, e2e=8.0)
        plots.add_result(FrameResult(frame, Detections.empty(), t))
    plots.refresh()
    assert y_span(plots) >= 2.0 - 1e-6
    (_x, (lo, hi)) = plots.latency_plot.getPlotItem().getViewBox().viewRange()
    assert lo < math.log10(5.0) and hi > math.log10(8.0)  # the data is in view


def test_dropped_frames_show_as_a_rate_and_a_count(qtbot: QtBot) -> None:
    """Rough edge 8: real-time playback drops late frames; the throughput plot draws
    their rate beside the shown rate and the summary counts them."""
    import time

    plots = StagePlots(auto_refresh=False)
    qtbot.addWidget(plots)
    plots.resize(600, 300)
    plots.show()
    qtbot.waitExposed(plots)
    frame = Frame(np.zeros((4, 4, 3), np.uint8), 0, 0.0)
    for i in range(20):
        plots.set_dropped(3 * i)  # the player's reports: 3 more dropped each time
        plots.add_result(FrameResult(frame, Detections.empty(), StageTimes(e2e=8.0)))
        time.sleep(0.01)
    plots.refresh()
    _x, rates = plots.dropped_curve.getData()
    assert rates is not None and np.nanmax(rates) > 0  # dropped per second, drawn
    assert "57 dropped" in plots.summary.text()
    plots.clear()  # a new source: the count starts again
    assert "dropped" not in plots.summary.text()


def test_the_summary_of_one_frame_says_this_frame(qtbot: QtBot) -> None:
    """After a seek while paused one frame has been processed: "This frame: ...", not
    "Median of last 1 frames"."""
    plots = StagePlots(auto_refresh=False)
    qtbot.addWidget(plots)
    plots.show()
    qtbot.waitExposed(plots)
    frame = Frame(np.zeros((4, 4, 3), np.uint8), 0, 0.0)
    t = StageTimes(decode=1.0, inference=20.0, e2e=22.0)
    plots.add_result(FrameResult(frame, Detections.empty(), t))
    plots.refresh()
    text = plots.summary.text()
    assert text.startswith("This frame: ") and "frames" not in text
    # end to end comes first: a narrow dock cuts the line's end, not what users read
    assert text.index("end to end") < text.index("decode") < text.index("inference")
    assert plots.summary.toolTip() == text
    plots.add_result(FrameResult(frame, Detections.empty(), t))
    assert plots.summary_text().startswith("Median of last 2 frames: ")  # label: throttled


def test_a_summary_too_long_for_its_dock_ends_with_an_ellipsis(qtbot: QtBot) -> None:
    """Issue 26: "· 4 dro" was the end of the line in a narrow dock. The line now stops
    after the last stage that fits, with "…", and the tooltip holds all of it."""
    plots = StagePlots(auto_refresh=False)
    qtbot.addWidget(plots)
    plots.resize(420, 260)
    plots.show()
    qtbot.waitExposed(plots)
    frame = Frame(np.zeros((4, 4, 3), np.uint8), 0, 0.0)
    t = StageTimes(decode=3.0, preprocess=5.0, inference=80.0, postprocess=0.5, draw=0.2, e2e=90.0)
    plots.set_dropped(4)
    for _ in range(3):
        plots.add_result(FrameResult(frame, Detections.empty(), t))
    plots.refresh()
    shown, full = plots.summary.text(), plots.summary.toolTip()
    assert shown.endswith(" …") and "end to end" in shown
    assert "4 dropped" in full and "postprocess" in full and "4 dro" not in shown
    assert plots.summary.sizeHint().width() <= plots.summary.contentsRect().width()
    plots.resize(1400, 260)  # room again: the whole line
    qtbot.waitUntil(lambda: plots.summary.text() == full, timeout=5000)


def test_the_throughput_plot_reads_from_the_third_frame(qtbot: QtBot) -> None:
    """Issue 26: the throughput plot stayed empty for the first 15 frames while the
    latency medians already read."""
    import time

    plots = StagePlots(auto_refresh=False)
    qtbot.addWidget(plots)
    plots.show()
    qtbot.waitExposed(plots)
    frame = Frame(np.zeros((4, 4, 3), np.uint8), 0, 0.0)
    for _ in range(3):
        plots.add_result(FrameResult(frame, Detections.empty(), StageTimes(e2e=8.0)))
        time.sleep(0.02)  # frames 20 ms apart: the rate is what it measures, not a race
    plots.refresh()
    _x, fps = plots.fps_curve.getData()
    assert fps is not None and np.isfinite(fps[-1]) and 0 < fps[-1] <= 51


def test_results_arriving_together_read_no_spike_of_thousands_of_fps(qtbot: QtBot) -> None:
    """A smoke run saw the first throughput point at 2,400 fps (15,000 after real time
    was turned off) on a 10 fps video: results queued while the GUI thread was busy reach
    it microseconds apart, and a rate over those flattened the plot's useful range."""
    import time

    plots = StagePlots(auto_refresh=False)
    qtbot.addWidget(plots)
    plots.show()
    qtbot.waitExposed(plots)
    frame = Frame(np.zeros((4, 4, 3), np.uint8), 0, 0.0)
    for _ in range(4):  # a burst: no time between them
        plots.add_result(FrameResult(frame, Detections.empty(), StageTimes(e2e=8.0)))
    for _ in range(3):  # then the video's pace, 100 ms a frame
        time.sleep(0.1)
        plots.add_result(FrameResult(frame, Detections.empty(), StageTimes(e2e=8.0)))
    plots.refresh()
    _x, fps = plots.fps_curve.getData()
    assert fps is not None
    assert not np.isfinite(fps[:4]).any()  # no rate from the burst alone
    assert np.nanmax(fps) < 40  # 6 intervals over ~0.3 s: ~20 fps, not thousands
