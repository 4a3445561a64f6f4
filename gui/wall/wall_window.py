"""The video wall window: many sources at once, one GL canvas, throughput plots.

The window owns a WallPlayer (core: every source through one executor, batches across
sources) through a small session object that moves its callbacks onto the GUI thread.
The session hands the GUI thread, each time it wakes up, the newest result of every tile
that has one waiting (one queued signal for many: sixteen sources at 30 fps are 480
results a second, more than a GUI thread woken per result keeps up with while the
pipeline's threads hold the GIL). An older result of a tile still waiting is replaced and
counted with core's drops, so a slow screen costs frames not shown, never a queue that
grows, and the delivery thread never waits for the GUI. The toolbar picks the layout
(saved in the settings) and plays or pauses; a click on a tile asks the main window to
focus that source (``focusRequested``), which plays it in its single-source player with
the usual controls, and brings the wall back after.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from pathlib import Path

import numpy as np
from framelens.core.api import (
    WALL_LAYOUT_SUFFIX,
    FrameLensError,
    FrameResult,
    PipelineSettings,
    SharedWallFrame,
    StageFactory,
    WallLayout,
    WallPlayer,
    WallProcess,
    WallState,
    WallTransport,
    WallZones,
    save_wall_layout,
    wall_in_own_process,
    wall_stages,
)
from framelens.gui.common.file_dialogs import WALL_LAYOUT_FILTER, save_file
from framelens.gui.common.settings import Settings
from framelens.gui.common.widgets import ElidedLabel, icon
from framelens.gui.display.plots import themed_plot
from framelens.gui.wall.wall_canvas import LAYOUTS, WallCanvas
from PySide6.QtCore import QObject, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QAction, QActionGroup, QCloseEvent, QKeySequence
from PySide6.QtWidgets import QHBoxLayout, QLabel, QMainWindow, QSplitter, QWidget

__all__ = ["LAYOUT_SHORTCUTS", "WallPlots", "WallSession", "WallWindow"]

PLOTS_HZ = 4.0  # the plots' refresh at most (states come twice a second)
HISTORY = 240  # state points in the plots (two a second: two minutes)

LAYOUT_SHORTCUTS = {"1": "Alt+1", "2x2": "Alt+2", "3x3": "Alt+3", "4x4": "Alt+4", "auto": "Alt+0"}


class WallSession(QObject):
    """A WallPlayer whose results, states and errors arrive as signals on the GUI thread."""

    resultReady = Signal(object)  # FrameResult; frame.source_id is the tile
    stateChanged = Signal(object)  # WallState
    errorOccurred = Signal(str)

    _deliver = Signal()

    def __init__(
        self, realtime: bool, parent: QObject | None = None, stages: StageFactory | None = None
    ) -> None:
        """``stages``: each tile's per-source stages (the window's tracker)."""
        super().__init__(parent)
        self._waiting: dict[int, FrameResult] = {}  # by tile: the newest not yet taken
        self._lock = threading.Lock()  # waiting results mean a _deliver on its way
        self._closed = False
        self.superseded = 0  # results replaced by a newer one of their tile before drawing
        self._deliver.connect(self._on_deliver)
        self.player = WallPlayer(
            self._from_wall, self.stateChanged.emit, self.errorOccurred.emit, realtime=realtime,
            stages=stages,
        )  # fmt: skip

    def _from_wall(self, result: FrameResult) -> None:
        # on the wall's delivery thread: a tile's older result still waiting is replaced
        # (counted, and its frame let go at once); the GUI thread is woken once for
        # whatever waits when it wakes up
        with self._lock:
            if self._closed:
                return
            wake = not self._waiting  # else the GUI thread is already to be woken
            if self._waiting.pop(result.frame.source_id, None) is not None:
                self.superseded += 1
            self._waiting[result.frame.source_id] = result
        if wake:
            self._deliver.emit()

    @Slot()
    def _on_deliver(self) -> None:
        with self._lock:
            taken, self._waiting = list(self._waiting.values()), {}
            if self._closed:
                return
        for result in taken:
            self.resultReady.emit(result)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._waiting.clear()  # their frames back to their pools
        self.player.close()


class _ProcessControls:
    """A WallProcess under the names the window calls a WallPlayer by."""

    def __init__(self, process: WallProcess) -> None:
        self.process = process
        self.playing = True

    def open(self, specs: list[str], settings: PipelineSettings) -> None:
        self.process.open(specs, settings)

    def play(self) -> None:
        self.playing = True
        self.process.play()

    def pause(self) -> None:
        self.playing = False
        self.process.pause()

    def toggle(self) -> None:
        self.pause() if self.playing else self.play()

    def set_realtime(self, realtime: bool) -> None:
        self.process.set_realtime(realtime)


class WallProcessSession(QObject):
    """The wall's session in a process of its own (core's WallProcess): its pictures,
    states, errors and the transport its pictures come by (core chooses: CUDA IPC or
    shared memory, and says why not IPC) as signals on the GUI thread. A picture waiting
    when a newer one comes is given back at once (its renewed tiles counted in
    ``superseded``)."""

    pictureReady = Signal(object)  # SharedWallFrame
    stateChanged = Signal(object)  # WallState
    errorOccurred = Signal(str)
    transportChanged = Signal(object)  # WallTransport

    _deliver = Signal()

    def __init__(self, realtime: bool, parent: QObject | None = None,
                 stages: StageFactory | None = None) -> None:  # fmt: skip
        super().__init__(parent)
        self._lock = threading.Lock()
        self._waiting: SharedWallFrame | None = None
        self._closed = False
        self._dropped = 0  # results of pictures given back unseen that a newer drew over
        self._replaced = 0  # as the child counted, in the last picture
        self._deliver.connect(self._on_deliver)
        self.process = WallProcess(
            self._from_child, self.stateChanged.emit, self.errorOccurred.emit,
            realtime=realtime, stages=stages, on_transport=self.transportChanged.emit,
        )  # fmt: skip
        self.player = _ProcessControls(self.process)

    @property
    def superseded(self) -> int:
        return self._dropped + self._replaced

    def _from_child(self, frame: SharedWallFrame) -> None:
        # on the reader thread
        with self._lock:
            if self._closed:
                self.process.release(frame.buffer)
                return
            older = self._waiting
            self._replaced = frame.replaced
            if older is not None:  # never shown: the newer carries its tiles on
                self.process.release(older.buffer, unseen_for=frame.version)
                frame, lost = frame.after(older)
                self._dropped += lost
            self._waiting = frame
        if older is None:
            self._deliver.emit()

    @Slot()
    def _on_deliver(self) -> None:
        with self._lock:
            frame, self._waiting = self._waiting, None
        if frame is not None:
            self.pictureReady.emit(frame)

    def release(self, buffer: int, unseen_for: int | None = None) -> None:
        self.process.release(buffer, unseen_for)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._waiting = None
        self.process.close(wait=False)  # a child slow to stop does not hold the window


class WallPlots(QWidget):
    """Aggregate throughput (results/s, all sources) beside the mean batch per engine call."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._t: deque[float] = deque(maxlen=HISTORY)
        self._fps: deque[float] = deque(maxlen=HISTORY)
        self._batch: deque[float] = deque(maxlen=HISTORY)
        self._start = time.perf_counter()
        self._limit = 1
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        self.fps_plot = themed_plot("Throughput, all sources", "fps")
        self.batch_plot = themed_plot("Frames per engine call", "batch")
        self.fps_curve = self.fps_plot.plot(pen="#5aa9e6")
        self.batch_curve = self.batch_plot.plot(pen="#f4a259")
        self.limit_line = self.batch_plot.plot(
            pen={"color": "#3a3f4b", "style": Qt.PenStyle.DashLine}
        )
        row.addWidget(self.fps_plot, 1)
        row.addWidget(self.batch_plot, 1)

    def add_state(self, state: WallState) -> None:
        if not state.playing:
            return
        self._t.append(time.perf_counter() - self._start)
        self._fps.append(state.fps)
        self._batch.append(state.mean_batch)
        self._limit = state.batch

    def refresh(self) -> None:
        if not self._t:
            return
        t = np.fromiter(self._t, float)
        fps, batch = np.fromiter(self._fps, float), np.fromiter(self._batch, float)
        span = (float(t[0]), max(float(t[-1]), float(t[0]) + 1.0))
        self.fps_curve.setData(t, fps)
        self.batch_curve.setData(t, batch)
        self.limit_line.setData(list(span), [self._limit, self._limit])
        self.fps_plot.getPlotItem().setRange(
            xRange=span, yRange=(0, max(1.0, float(fps.max()) * 1.15)), padding=0
        )
        self.batch_plot.getPlotItem().setRange(xRange=span, yRange=(0, self._limit + 1), padding=0)


class WallWindow(QMainWindow):
    """``specs`` played together with ``settings``' model; the layout saved in ``settings``."""

    focusRequested = Signal(str)  # the spec of the tile clicked

    def __init__(
        self,
        specs: list[str],
        settings: PipelineSettings,
        app_settings: Settings,
        parent: QWidget | None = None,
        *,
        realtime: bool = True,
        layout: str | None = None,
        stages: StageFactory | None = None,
        zones: WallZones | None = None,
        processes: bool | None = None,
    ) -> None:
        """``layout``: the grid to open with (a saved wall's), without changing the one
        remembered; None: the one remembered. ``stages``: each source's per-source
        stages (the main window's tracker: every tile its own tracks). ``zones``: each
        tile's lines and zones, counted after its tracker and drawn with the counts
        (ByteTrack tracks a tile with zones when ``stages`` has no tracker).
        ``processes``: decode and inference in a process of their own, the picture
        handed over through CUDA IPC or shared memory, as core chooses (None: as core
        decides for the setting ``wall_process`` and the device)."""
        super().__init__(parent)
        self.setWindowFlag(Qt.WindowType.Window)
        self.setWindowTitle(f"FrameLens — video wall ({len(specs)} sources)")
        self.setWindowIcon(icon("framelens"))
        self.specs = list(specs)
        self.app_settings = app_settings
        self.pipeline_settings = settings
        self.state = WallState()
        self.results_shown = 0
        self.errors: list[str] = []
        self.transport: WallTransport | None = None  # the process's picture: how it comes
        self._plots_dirty = False

        self.canvas = WallCanvas()
        self.canvas.set_sources([f"source {i + 1}" for i in range(len(specs))])
        self.plots = WallPlots()
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.canvas)
        split.addWidget(self.plots)
        split.setStretchFactor(0, 4)
        split.setStretchFactor(1, 1)
        self.setCentralWidget(split)
        # cut with "…" to the window (whole in its tooltip): a long one is never clipped
        self.summary_label = ElidedLabel("Opening…")
        self.summary_label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.statusBar().addPermanentWidget(self.summary_label, 1)
        self._build_toolbar(realtime)

        self.zones = zones
        if processes is None:
            processes = wall_in_own_process(app_settings.wall_process, settings.device)
        self.processes = processes
        self.session: WallSession | WallProcessSession
        if self.processes:
            self.session = WallProcessSession(realtime, self, wall_stages(stages, zones))
            self.session.pictureReady.connect(self._on_picture)
            self.session.transportChanged.connect(self._on_transport)
            self.canvas.release_shared = self.session.release
            self.canvas.device_via_host = self.session.process.display_copies_to_host
        else:
            self.session = WallSession(realtime, self, wall_stages(stages, zones))
            self.session.resultReady.connect(self._on_result)
        self.session.stateChanged.connect(self._on_state)
        self.session.errorOccurred.connect(self._on_error)
        self.canvas.tileClicked.connect(self._on_tile_clicked)
        self._timer = QTimer(self)
        self._timer.timeout.connect(self._tick)
        self._timer.start(round(1000.0 / PLOTS_HZ))
        if self.processes:  # the process draws the picture in its grid ("auto")
            for action in self.layout_actions.values():
                action.setEnabled(False)
                action.setStatusTip("The grid follows the number of sources while the "
                                    "wall plays in a process of its own")  # fmt: skip
        self.layout_path = ""  # where this wall was last saved or opened from
        self.set_layout(layout or app_settings.wall_layout, save=False)
        self.resize(1280, 860)
        self.session.player.open(self.specs, settings)

    def _build_toolbar(self, realtime: bool) -> None:
        bar = self.addToolBar("Wall")
        bar.setObjectName("wallToolBar")
        bar.setMovable(False)
        bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.play_action = QAction(icon("pause"), "Pause", self)
        self.play_action.setShortcut(QKeySequence("Space"))
        self.play_action.triggered.connect(self.toggle_play)
        self.realtime_action = QAction(icon("realtime"), "Real-time", self, checkable=True)
        self.realtime_action.setChecked(realtime)
        self.realtime_action.setShortcut(QKeySequence("Ctrl+R"))
        self.realtime_action.setStatusTip("Play files at their own pace; off: as fast as possible")
        self.realtime_action.toggled.connect(lambda on: self.session.player.set_realtime(on))
        self.save_action = QAction(icon("export"), "Save Layout…", self)
        self.save_action.setShortcut(QKeySequence.StandardKey.Save)
        self.save_action.setStatusTip(
            "Save this wall's sources and grid, to open it again (File > Open Wall Layout…)"
        )
        self.save_action.triggered.connect(lambda: self.save_layout())
        bar.addActions([self.play_action, self.realtime_action, self.save_action])
        bar.addSeparator()
        bar.addWidget(QLabel(" Layout "))
        self.layout_group = QActionGroup(self)
        self.layout_actions: dict[str, QAction] = {}
        for name in LAYOUTS:
            action = QAction("Auto" if name == "auto" else name, self, checkable=True)
            action.setShortcut(QKeySequence(LAYOUT_SHORTCUTS[name]))
            action.setStatusTip(f"Show the wall as {name} tiles ({LAYOUT_SHORTCUTS[name]})")
            action.triggered.connect(lambda _checked=False, n=name: self.set_layout(n))
            self.layout_group.addAction(action)
            self.layout_actions[name] = action
            bar.addAction(action)
        for action in [
            self.play_action,
            self.realtime_action,
            self.save_action,
            *self.layout_actions.values(),
        ]:
            self.addAction(action)

    # ---- intents ---------------------------------------------------------------------

    def set_layout(self, name: str, *, save: bool = True) -> None:
        """Show the wall as ``name`` (see wall_canvas.LAYOUTS); remembered when ``save``."""
        self.canvas.set_layout(name)
        self.layout_actions[name].setChecked(True)
        if save:
            self.app_settings.wall_layout = name

    def save_layout(self, path: str | None = None) -> str:
        """Save the wall's sources and grid (a dialog when ``path`` is None); the path
        written, or "" when cancelled or refused (said in the status bar)."""
        if path is None:
            start = self.layout_path or str(
                Path(self.app_settings.last_dir or Path.home()) / f"wall{WALL_LAYOUT_SUFFIX}"
            )
            path = save_file(
                self, "Save wall layout", start, WALL_LAYOUT_FILTER,
                default_suffix=WALL_LAYOUT_SUFFIX.lstrip("."),
            )  # fmt: skip
            if not path:
                return ""
        if not path.lower().endswith(WALL_LAYOUT_SUFFIX):
            path += WALL_LAYOUT_SUFFIX
        try:
            save_wall_layout(path, WallLayout(tuple(self.specs), self.canvas.layout_name))
        except FrameLensError as exc:
            self._on_error(str(exc))
            return ""
        self.layout_path = path
        self.statusBar().showMessage(
            f"Saved the wall ({len(self.specs)} sources, {self.canvas.layout_name}) to {path}",
            10000,
        )
        return path

    def toggle_play(self) -> None:
        self.session.player.toggle()

    def pause(self) -> None:
        self.session.player.pause()

    def resume(self) -> None:
        self.session.player.play()

    @Slot(int)
    def _on_tile_clicked(self, tile: int) -> None:
        if 0 <= tile < len(self.specs):
            self.focusRequested.emit(self.specs[tile])

    # ---- from the wall ---------------------------------------------------------------

    @Slot(object)
    def _on_result(self, result: FrameResult) -> None:
        s = self.pipeline_settings
        overlay = (result.output, tuple(s.model.labels), s.overlay)
        self.canvas.set_frame(result.frame.source_id, result.frame, overlay, result.marks)
        self.results_shown += 1
        # a repaint per result asked at once, not on a timer: Qt merges the requests of
        # one pass of the event loop into one paint, so paints follow the results (a
        # timer's rate capped every tile at it and left results waiting for its tick)
        self.canvas.update()

    @Slot(object)
    def _on_picture(self, frame: SharedWallFrame) -> None:
        s = self.pipeline_settings
        self.canvas.set_shared(frame, tuple(s.model.labels), s.overlay)
        self.results_shown += frame.shown
        self.canvas.update()

    @Slot(object)
    def _on_state(self, state: WallState) -> None:
        previous, self.state = self.state, state
        if [t.name for t in previous.tiles] != [t.name for t in state.tiles]:
            self.canvas.set_sources([t.name for t in state.tiles])
        self.canvas.set_states(state.tiles)
        self.plots.add_state(state)
        self.play_action.setText("Pause" if state.playing or state.status == "opening" else "Play")
        self.play_action.setIcon(icon("pause" if state.playing else "play"))
        self._show_summary()
        self.canvas.update()  # the captions
        self._plots_dirty = True

    def _show_summary(self) -> None:
        state = self.state
        failed = sum(t.status == "failed" for t in state.tiles)
        parts = [f"{len(state.tiles)} sources"]
        stopped = state.status in ("ended", "paused", "failed")
        frames = sum(t.frames for t in state.tiles)
        if state.playing and state.fps <= 0 and not frames:
            # the first results may be on screen before a state counts them (states come
            # every 0.5 s): not "0 frames analysed" under pictures with boxes
            parts.append("measuring the rate")
        elif stopped or state.fps <= 0:  # no rate (yet): what was done
            parts.append(f"{frames} frames analysed")
        else:
            parts.append(f"{state.fps:.1f} fps in all")
        if state.batches_run:
            parts.append(f"batch {state.mean_batch:.1f} of {state.batch}")
        dropped = sum(t.dropped for t in state.tiles) + self.session.superseded
        if dropped:
            parts.append(f"{dropped} frames not shown")
        if failed:
            parts.append(f"{failed} failed")
        if state.path:
            parts.append(state.path)
        if self.transport is not None:
            parts.append(self.transport.path)
        if self.results_shown:
            parts.append(self.canvas.display_path)
        if stopped:
            parts.append(state.status)
        self.summary_label.setText(" · ".join(parts))

    @Slot(object)
    def _on_transport(self, transport: WallTransport) -> None:
        """How the process's pictures come, in the summary; said once in the status bar
        when CUDA IPC was the way and could not be used (core says which)."""
        self.transport = transport
        if self.state.tiles:  # else "Opening…" until the first state
            self._show_summary()
        if transport.fell_back:
            self.statusBar().showMessage(f"The wall's {transport.path}", 10000)

    @Slot(str)
    def _on_error(self, message: str) -> None:
        self.errors.append(message)
        self.statusBar().showMessage(message, 10000)

    def _tick(self) -> None:
        """The plots, when a state has added to them (not per result: their data changes
        only with the states, and each refresh repaints them)."""
        if self._plots_dirty and self.isVisible():
            self._plots_dirty = False
            self.plots.refresh()

    def closeEvent(self, event: QCloseEvent) -> None:
        self._timer.stop()
        self.canvas.drop_shared()
        self.session.close()
        self.canvas.close_picture()
        super().closeEvent(event)
