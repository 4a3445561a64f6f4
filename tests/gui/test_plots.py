"""Rough edge 9: the latency plot's log axis never spans less than two decades, so its
labels are decades (0.1, 1, 10, 100 ms), not the minor ticks "2 3 ... 9" piled up."""

from __future__ import annotations

import math

import numpy as np
from framelens.core.types import Detections, Frame, FrameResult, StageTimes
from framelens.gui.plots import StagePlots
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
