"""The main window's display: the results and the player's state on screen.

Every result feeds the performance plots; the canvas shows the latest one at each
tick (a window holding a GL widget is composited as a whole on each repaint, so the
video, the position and the plots share one tick at the rates of REFRESH_RATES while
playing). A result a view of its own takes (the super-resolution views: a model whose
output is an image) goes to it; any other is drawn on the canvas, its overlays painted
there on the GPU path. The status bar's source, backend (the plan in its tooltip) and
fps fields, the transport's position and play button, and "End of video" follow the
player's state. ``resultShown`` says which result reached the screen (the detections
list and the enlarged detections follow it); ``sourceOpened`` that a source asked for
has opened.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import cast

from framelens.core.api import (
    DeviceFrame,
    FrameResult,
    OverlayStyle,
    PlayerState,
    ZonesPicture,
    heat_layer,
)
from framelens.gui.common.widgets import set_text
from framelens.gui.display.plots import StagePlots
from framelens.gui.player.main_window_parts import WindowParts
from PySide6.QtCore import QObject, Qt, QTimer, Signal, Slot

__all__ = ["REFRESH_RATES", "ResultDisplay", "ResultView"]

ResultView = Callable[[FrameResult], bool]
"""A view that shows some results its own way (the super-resolution views): shows the
result and says True when it is one of its own, else False (the canvas draws it)."""

# Repaint rates while playing: (video Hz, plots Hz). A window holding a GL widget is
# composited as a whole on each repaint: ~1 ms on a GPU, but ~25 ms of CPU for a
# 1360x860 window on Mesa's llvmpipe, CPU the pipeline needs. Real-time playback shows
# every frame up to 30 Hz; "max speed" is a throughput mode and previews more sparsely,
# the more so with software OpenGL.
REFRESH_RATES = {
    # (realtime, software GL)
    (True, False): (30.0, 10.0),
    (True, True): (30.0, 4.0),
    (False, False): (30.0, 10.0),
    (False, True): (10.0, 1.0),
}


class ResultDisplay(QObject):
    """Results and state on screen: canvas, plots, position and status fields."""

    sourceOpened = Signal()  # the source asked for has opened (its first state)
    resultShown = Signal(object)  # FrameResult: the one now on screen

    def __init__(self, parts: WindowParts, views: Sequence[ResultView] = ()) -> None:
        super().__init__(parts.window)
        self.parts = parts
        self.views = tuple(views)
        self.state = PlayerState()
        self.results_shown = 0
        self.plots = StagePlots(auto_refresh=False)  # refreshed by _tick
        self._latest: FrameResult | None = None
        self._plots_at = 0.0
        self._plots_interval_s = 0.1
        self._ui_timer = QTimer(self)
        self._ui_timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._ui_timer.timeout.connect(self._tick)
        c, canvas, bar = parts.controller, parts.canvas, parts.status_bar
        bar.source.setText("No source")
        c.resultReady.connect(self._on_result)
        c.stateChanged.connect(self._on_state)
        canvas.drawTimeMs.connect(self.plots.add_display_time)
        canvas.zoomChanged.connect(lambda z: bar.showMessage(f"Zoom {z * 100:.0f}%", 1500))

    # ---- results -------------------------------------------------------------------

    @Slot(object)
    def _on_result(self, result: FrameResult) -> None:
        """Every result feeds the plots; the screen shows the latest one at each tick."""
        self.results_shown += 1
        self.plots.add_result(result)
        self._latest = result
        if not self.state.playing:
            self._tick()  # a seek or a step: show it now
        elif not self._ui_timer.isActive():
            self._start_ticks()

    def _start_ticks(self) -> None:
        video_hz, plots_hz = REFRESH_RATES[(self.state.realtime, self.parts.canvas.software_gl)]
        self._plots_interval_s = 1.0 / plots_hz
        self._ui_timer.start(round(1000.0 / video_hz))

    def _tick(self) -> None:
        """One repaint of everything that changed: video, position, plots."""
        result, self._latest = self._latest, None
        if result is not None:
            if not any(view(result) for view in self.views):
                self._draw(result)
            self.parts.transport.show_position(result.frame.index, result.frame.pts)
            self.parts.shown.index = result.frame.index
            self.resultShown.emit(result)
        now = time.perf_counter()
        if now - self._plots_at >= self._plots_interval_s or not self.state.playing:
            self._plots_at = now
            self.plots.refresh()
        if result is None and not self.state.playing:
            self._ui_timer.stop()

    def _draw(self, result: FrameResult) -> None:
        canvas, frame = self.parts.canvas, result.frame
        if result.annotated is None and frame.device is not None:
            # the GPU path: the display kernel's RGBA frame goes to the canvas on the
            # device (CUDA-GL interop when possible); the canvas paints the overlays
            settings = self.parts.controller.settings
            labels = settings.model.labels if settings is not None else ()
            style = settings.overlay if settings is not None else OverlayStyle()
            marks = tuple(m for m in result.marks if isinstance(m, ZonesPicture))
            heat = heat_layer(result.layers) if style.heatmap else None
            canvas.set_image(
                cast(DeviceFrame, frame.device), (result.output, labels, style), marks, heat
            )
        else:
            canvas.set_image(result.annotated if result.annotated is not None else frame.image)

    # ---- state ---------------------------------------------------------------------------

    @Slot(object)
    def _on_state(self, state: PlayerState) -> None:
        previous, self.state = self.state, state
        bar, transport = self.parts.status_bar, self.parts.transport
        info = state.source
        if info is not None and (previous.source is None or previous.source != info):
            transport.set_source(state.frame_count, info.fps, info.duration)
            set_text(bar.source, describe_source(state))
            # a source opened (a failed open publishes none): what the old one showed goes
            self.results_shown = 0
            self.parts.canvas.reset_view()
            self.plots.clear()
            self.sourceOpened.emit()  # Open Recent takes it (main_sources.py)
            bar.clearMessage()
        elif info is not None and state.frame_count != previous.frame_count:
            transport.set_count(state.frame_count)  # a file found cut short
            set_text(bar.source, describe_source(state))
        if info is None and state.status == "empty":
            set_text(bar.source, "No source")
        if info is not None and state.reconnecting != previous.reconnecting:
            text = describe_source(state)  # a stream down: backoff until it is back
            set_text(bar.source, f"{text} · reconnecting…" if state.reconnecting else text)
        if info is not None and state.model != previous.model:
            self.plots.clear()  # another model's (or no model's) times: not the old one's
        if state.playing != previous.playing:
            transport.show_playing(state.playing)
            self.plots.reset_rate()
        if state.realtime != previous.realtime and self._ui_timer.isActive():
            self._start_ticks()
        cut_short = info is not None and state.frame_count != previous.frame_count
        if state.status == "ended" and previous.status != "ended" and not cut_short:
            bar.showMessage("End of video — Space plays it again", 4000)
        self.plots.set_dropped(state.dropped)
        self._show_backend(state)
        set_text(bar.fps, f"{state.fps:.1f} fps" if state.playing and state.fps else "")
        # the model field and what is being prepared: main_precision.py, on the same signal

    def _show_backend(self, state: PlayerState) -> None:
        device = state.device.upper() if state.device == "cpu" else state.device
        backend = f"{state.backend} · {device}" if state.backend else ""
        if backend and state.decoder.startswith("nvdec"):
            backend += " · NVDEC"
        label = self.parts.status_bar.backend
        set_text(label, backend)
        tip = [*state.plan, *([f"decoding: {state.decoder}"] if state.decoder else [])]
        label.setToolTip("\n".join(tip))  # the plan: each choice and why


def describe_source(state: PlayerState) -> str:
    """The status bar's source field: size, rate, codec, frames."""
    info = state.source
    if info is None:
        return ""
    parts = [f"{info.width}×{info.height}"]
    if info.fps > 0:
        parts.append(f"{round(info.fps, 2):g} fps")  # an average: 11.78, 29.97, 25
    if info.codec:
        parts.append(info.codec)
    if state.frame_count:
        parts.append(f"{state.frame_count} frames")
    return " · ".join(parts)
