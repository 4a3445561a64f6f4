"""The compare view: 2 to 4 panes playing the same frames in lock-step, side by side.

Each pane is a precision (and optionally another model or device) of the detector;
the first pane is the reference. The view shows each pane's annotated frame and
its inference latency (this frame's and the median), the agreement of every pane
with the reference (a table and plots of latency and running F1), and a difference
view that marks the detections present in one pane only. Start plays from the frame
on the main window's screen, Home from the first frame. All the work happens in a
CompareSession's worker; this window only draws, at most ten times a second. Save
Report writes what the session computed (see compare_controller). With Tracks on
(on from the start when the window is given the main window's tracker settings) every
pane tracks its own boxes, and the table and the report add each pane's tracks against
the reference's.
"""

from __future__ import annotations

import math
from pathlib import Path

import pyqtgraph as pg
from framelens.core.api import (
    MAX_PANES,
    MIN_PANES,
    FrameLensError,
    Image,
    PaneSpec,
    TrackerSettings,
    ZonesFile,
    produces_image,
)
from framelens.gui.common.controller import Controller
from framelens.gui.common.folder_dialog import choose_folder
from framelens.gui.common.widgets import ElidedLabel, icon, set_text
from framelens.gui.compare.compare_agreement import (
    NONE,
    AgreementPlots,
    AgreementTable,
    PaneStats,
    above,
    scope_text,
)
from framelens.gui.compare.compare_controller import (
    CompareFrame,
    CompareSession,
    PaneRequest,
    report_plan,
    report_saved,
)
from framelens.gui.compare.compare_panes import (
    PaneCard,
    diff_note,
    fit_cards,
    grid_height,
    latency_text,
)
from framelens.gui.compare.compare_toolbar import CompareToolbar
from PySide6.QtCore import Qt, QTimer, QUrl, Slot
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QGridLayout,
    QLabel,
    QMainWindow,
    QSplitter,
    QWidget,
)

__all__ = ["NONE", "CompareWindow"]

REFRESH_MS = 100  # panes, table and plots repaint at most 10 times a second
END_TEXT = "End of video — Play compares it again from the start."


class CompareWindow(QMainWindow):
    """Compare… (Ctrl+K): set up the panes, press Start; closing stops the worker."""

    def __init__(
        self,
        controller: Controller,
        source: str,
        start: int = 0,
        *,
        model_key: str = "",
        preview: Image | None = None,
        parent: QWidget | None = None,
        tracking: TrackerSettings | None = None,
        zones: ZonesFile | None = None,
    ) -> None:
        """``preview``: the frame on the main window's screen, shown dimmed before the start.
        ``tracking``: the main window's tracker, when it tracks: Tracks starts on, with it.
        ``zones``: the video's lines and zones: with Tracks on, every pane counts its
        tracks against them (the table's count rows, and the saved report's counts)."""
        super().__init__(parent)
        self.setWindowFlag(Qt.WindowType.Window)
        self.setWindowTitle(f"Compare — {Path(source).name or source}")
        self.setObjectName("compareWindow")
        self.controller = controller
        self.source = source
        self.start_index = max(0, start)
        base = controller.base_settings()
        if base is None:
            raise ValueError("the compare view needs a model")
        self.session = CompareSession(base, controller.resolve, controller.calibration, self)
        self.session.zones = zones
        self.labels: list[str] = []
        self.frames_seen = 0
        self._stats: list[PaneStats] = []
        self._latest: CompareFrame | None = None
        self._run = 0
        self._pass: set[int] = set()  # source indices compared in this pass (run)
        self._card_width = 0  # every pane's minimum width: the widest header's
        self._dirty = False
        self.report_path: str | None = None
        self.report_computed = 0  # frames the last report had to compute
        self.preview = preview
        self._fitted = False

        try:  # detectors: panes measure detection agreement (core's check_panes)
            catalog = [n for n, m in controller.catalog().items() if not produces_image(m)]
        except FrameLensError:
            catalog = []
        current = model_key or base.model.name
        self._models: list[tuple[str, str | None]] = [(base.model.name, None)]
        self._models += [(name, name) for name in catalog if name != current]
        self._devices = controller.device_choices()
        self._device = base.device

        self.tracking = tracking
        self._build_toolbar()
        self.tracks_action.setChecked(tracking is not None)
        self.cards: list[PaneCard] = []
        self.grid_host = QWidget()
        self.grid = QGridLayout(self.grid_host)
        self.grid.setContentsMargins(6, 6, 6, 6)
        self.grid.setSpacing(6)
        first = controller.precision if controller.precision != "fp32" else "fp16"
        for precision in ("fp32", first):
            self.add_pane(precision)

        self.table = AgreementTable()
        self.plots = AgreementPlots()
        self.latency_plot, self.f1_plot = self.plots.latency_plot, self.plots.f1_plot
        # over which frames the table's figures are (this pass) and the report's (every
        # frame from the first compared to the last): two figures that differ, said why
        self.scope = ElidedLabel("")
        self.scope.setObjectName("plotSummary")
        bottom = QSplitter(Qt.Orientation.Horizontal)
        bottom.addWidget(above(self.table, self.scope))
        bottom.addWidget(self.latency_plot)
        bottom.addWidget(self.f1_plot)
        bottom.setSizes([520, 400, 400])
        split = self.split = QSplitter(Qt.Orientation.Vertical)
        split.setObjectName("compareSplit")
        split.addWidget(self.grid_host)
        split.addWidget(bottom)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 1)
        split.setSizes([540, 290])
        self.setCentralWidget(split)
        self.status = QLabel("")
        self.status.setObjectName("compareStatus")
        self.status.setOpenExternalLinks(True)
        self.statusBar().addWidget(self.status, 1)
        self.frame_label = QLabel("")
        self.frame_label.setObjectName("compareFrame")
        self.statusBar().addPermanentWidget(self.frame_label)

        s = self.session
        s.ready.connect(self._on_ready)
        s.frameReady.connect(self._on_frame)
        s.stateChanged.connect(self._on_state)
        s.prepareProgress.connect(self._on_progress)
        s.errorOccurred.connect(self._on_error)
        s.reportProgress.connect(self._on_report_progress)
        s.reportFinished.connect(self._on_report_finished)
        s.reportFailed.connect(self._on_report_failed)
        self._timer = QTimer(self)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self.refresh)
        self._set_mode("setup")
        self.resize(1320, 900)

    # ---- construction ---------------------------------------------------------------

    def _build_toolbar(self) -> None:
        bar = self.toolbar = CompareToolbar(
            self,
            start=self.start,
            toggle=self.session_toggle,
            home=self.home,
            edit=self.edit_panes,
            add=lambda: self.add_pane(),
            differences=self._on_differences,
            report=lambda: self.save_report(),
            cancel=self.cancel,
        )
        self.addToolBar(bar)
        self.start_action, self.play_action = bar.start_action, bar.play_action
        self.home_action = bar.home_action
        self.edit_action, self.add_action = bar.edit_action, bar.add_action
        self.diff_action, self.report_action = bar.diff_action, bar.report_action
        self.tracks_action = bar.tracks_action
        self.diff_legend_action = bar.diff_legend_action

    # ---- panes ---------------------------------------------------------------------

    def add_pane(self, precision: str | None = None) -> PaneCard | None:
        """A pane more, while the panes are set up (Edit Panes first once started)."""
        if len(self.cards) >= MAX_PANES or getattr(self, "_mode", "setup") != "setup":
            return None
        card = PaneCard(len(self.cards), self._models, self._devices, self._device)
        if precision is None:
            used = {c.request().precision for c in self.cards}
            precision = next((p for p in ("fp16", "int8", "fp32") if p not in used), "fp32")
        card.set_precision(precision)
        card.view.set_image(self.preview)
        card.remove_button.clicked.connect(lambda: self.remove_pane(card))
        self.cards.append(card)
        self._relayout()
        return card

    def remove_pane(self, card: PaneCard) -> None:
        if len(self.cards) <= MIN_PANES or card not in self.cards:
            return
        self.cards.remove(card)
        card.setParent(None)
        card.deleteLater()
        for i, c in enumerate(self.cards):
            c.set_index(i)
        self._relayout()

    def _relayout(self) -> None:
        for card in self.cards:
            self.grid.removeWidget(card)
        columns = 3 if len(self.cards) == 3 else 2
        for i, card in enumerate(self.cards):
            self.grid.addWidget(card, i // columns, i % columns)
        rows = (len(self.cards) + columns - 1) // columns
        for r in range(2):
            self.grid.setRowStretch(r, 1 if r < rows else 0)
        for c in range(3):
            self.grid.setColumnStretch(c, 1 if c < columns else 0)
        editing = getattr(self, "_mode", "setup") == "setup"
        for card in self.cards:
            card.remove_button.setEnabled(editing and len(self.cards) > MIN_PANES)
        if hasattr(self, "add_action"):
            self.add_action.setVisible(editing)
            self.add_action.setEnabled(len(self.cards) < MAX_PANES)

    def requests(self) -> list[PaneRequest]:
        return [card.request() for card in self.cards]

    # ---- intents --------------------------------------------------------------------

    def start(self) -> None:
        """Prepare the panes as set up and play them from the main window's frame.

        The frame is the one on the main window's screen now (the window may have
        been opened at another: Home there, then Start here, starts at frame 0).
        """
        c = self.controller
        shown = c.last_result if c.source == self.source else None
        if shown is not None:
            c.pause()  # the comparison gets the cores
            self.start_index = max(0, shown.frame.index)
            self.preview = shown.frame.image
        self._clear()
        self.session.tracking = self.tracker_settings()
        self.session.start(self.source, self.start_index, self.requests())

    def tracker_settings(self) -> TrackerSettings | None:
        """What every pane tracks with: None when Tracks is off; the main window's
        tracker when given, else ByteTrack."""
        if not self.tracks_action.isChecked():
            return None
        return self.tracking or TrackerSettings()

    def home(self) -> None:
        """Back to the first frame (Home): the next frame shown is frame 0."""
        if self._mode in ("playing", "paused", "ended"):
            self.session.home()

    def session_toggle(self) -> None:
        if self._mode == "setup":
            self.start()
        else:
            self.session.toggle()

    def play(self) -> None:
        self.session.play()

    def pause(self) -> None:
        self.session.pause()

    def edit_panes(self) -> None:
        self.session.stop()
        self._set_mode("setup")

    def cancel(self) -> None:
        if self.session.reporting:
            self.session.cancel_report()
        elif self._mode == "preparing":
            self.session.stop()
            self._set_mode("setup")
            set_text(self.status, "Cancelled.")

    def save_report(self, folder: str | None = None) -> None:
        """Ask for a folder (empty, or an earlier report; else a subfolder is made)."""
        if folder is None:
            start_dir = str(Path(self.source).parent) if Path(self.source).exists() else ""
            # an existing folder, or a new name typed in: the report creates it
            chosen = choose_folder(self, "Save compare report in", start_dir)
            if not chosen:
                return
            folder = chosen
        first, last = self.session.compared
        missing = self.session.missing
        if first >= 0:
            set_text(self.status, report_plan(first, last, missing))
        self.session.save_report(folder)
        if self.session.reporting:
            self._show_progress(
                f"Report: computing {missing} frames" if missing else "Report: writing", 0.0
            )

    @Slot()
    def _on_differences(self) -> None:
        self.diff_legend_action.setVisible(self.diff_action.isChecked())
        self._dirty = True
        self.refresh()

    @property
    def differences(self) -> bool:
        return self.diff_action.isChecked()

    # ---- what the session says ------------------------------------------------------

    def _set_mode(self, mode: str) -> None:
        """setup | preparing | playing | paused | ended | stopped."""
        self._mode = mode
        editing = mode == "setup"
        for card in self.cards:
            card.set_editing(editing)
        self._relayout()
        self.start_action.setVisible(editing)
        self.tracks_action.setEnabled(editing)
        self.play_action.setVisible(not editing)
        self.play_action.setEnabled(mode in ("playing", "paused", "ended"))
        self.home_action.setVisible(not editing)
        self.home_action.setEnabled(mode in ("playing", "paused", "ended"))
        self.edit_action.setVisible(not editing)
        self.report_action.setEnabled(mode in ("playing", "paused", "ended", "stopped"))
        playing = mode == "playing"
        self.play_action.setText("Pause" if playing else "Play")
        self.play_action.setIcon(icon("pause" if playing else "play"))
        if mode != "preparing" and not self.session.reporting:
            self._hide_progress()
        if playing and not self._timer.isActive():
            self._timer.start()

    @Slot(object)
    def _on_ready(self, panes: list[PaneSpec]) -> None:
        self.labels = [p.label for p in panes]
        self._stats = [PaneStats() for _ in panes]
        for card, pane in zip(self.cards, panes, strict=False):
            card.show_pane(pane.label, pane.settings)
            card.view.show_placeholder("Waiting for the first frame…")
        self._card_width = fit_cards(self.cards, 0)
        self.table.set_panes(panes, self.session.tracking is not None, self.session.zones)
        self.plots.set_labels(self.labels)

    @Slot(object)
    def _on_frame(self, frame: CompareFrame) -> None:
        """Every frame feeds the history; the screen catches up at the next tick."""
        if frame.run != self._run:
            self._run = frame.run
            self._stats = [PaneStats() for _ in self._stats]
            self._pass.clear()
        self._pass.add(frame.step.frame.index)
        self.frames_seen += 1
        index = float(frame.step.frame.index + 1)  # the plots' frames as the label counts
        for i, (stats, pane) in enumerate(zip(self._stats, frame.step.panes, strict=False)):
            stats.x.append(index)
            stats.latency.append(pane.times.inference)
            stats.last_latency = pane.times.inference
            stats.median = frame.medians[i] if i < len(frame.medians) else math.nan
            stats.f1.append(pane.running.f1)
            if pane.image is not None:
                stats.psnr.append(pane.image.psnr_db)
                stats.ssim.append(pane.image.ssim)
        self._latest = frame
        self._dirty = True
        if not self._timer.isActive():  # a frame while paused (Home): shown too
            self._timer.start()
        if not self._fitted:
            self._fitted = True
            self._fit_panes(frame.step.frame.width, frame.step.frame.height)

    def _fit_panes(self, width: int, height: int) -> None:
        """Give the panes the height their frames need; the table and plots the rest."""
        top = grid_height(self.grid, self.grid_host.width(), self.cards, width, height)
        total = sum(self.split.sizes())
        low = self.table.minimumHeight() + 8
        bottom = min(max(low, total - top), max(low, 400))  # spare height goes to the panes
        self.split.setSizes([max(200, total - bottom), bottom])

    @Slot(str)
    def _on_state(self, state: str) -> None:
        if state == "preparing":
            self._set_mode("preparing")
            self._show_progress("Preparing the panes", 0.0)
        elif state in ("playing", "paused", "ended"):
            self._set_mode(state)
            if state == "ended":
                set_text(self.status, END_TEXT)
            elif state == "playing" and self.status.text() == END_TEXT:
                set_text(self.status, "")  # playing again: the end is not where it is
            self.refresh()
        elif state == "stopped" and self._mode == "preparing":
            self._set_mode("setup")  # failed or cancelled: the panes stay as they were set
        elif state == "stopped" and self._mode != "setup":
            self._set_mode("stopped")  # an error while playing: Edit Panes starts again

    @Slot(str, float)
    def _on_progress(self, text: str, fraction: float) -> None:
        self._show_progress(text, fraction)

    @Slot(str)
    def _on_error(self, message: str) -> None:
        set_text(self.status, f"⚠ {message}")
        self.status.setToolTip(message)

    @Slot(int, int)
    def _on_report_progress(self, done: int, total: int) -> None:
        """Frames not compared before, computed for the report."""
        text = f"Report: computing frame {done} of {total} not compared yet"
        self._show_progress(text if total else "Report", done / total if total else 0)

    @Slot(str, int)
    def _on_report_finished(self, path: str, computed: int) -> None:
        self.report_path = path
        self.report_computed = computed
        self._hide_progress()
        url = QUrl.fromLocalFile(path).toString()
        self.status.setText(
            f'{report_saved(computed)}: <a href="{url}" style="color:#4cc9a0">{path}</a>'
        )

    @Slot(str)
    def _on_report_failed(self, message: str) -> None:
        self._hide_progress()
        text = "Report cancelled." if message == "cancelled" else f"⚠ Report: {message}"
        set_text(self.status, text)

    def _show_progress(self, text: str, fraction: float) -> None:
        self.toolbar.show_progress(text, fraction)

    def _hide_progress(self) -> None:
        self.toolbar.hide_progress()

    # ---- drawing ----------------------------------------------------------------------

    def _clear(self) -> None:
        self._latest = None
        self._fitted = False
        self.frames_seen = 0
        self._stats = []
        self.table.setColumnCount(0)
        for card in self.cards:
            card.view.set_image(self.preview)
            card.view.show_placeholder("Preparing…")
        set_text(self.status, "")
        set_text(self.frame_label, "")

    def refresh(self) -> None:
        """One repaint of what changed: panes, titles, table, plots."""
        if not self._dirty:
            if self._mode != "playing":
                self._timer.stop()
            return
        self._dirty = False
        frame = self._latest
        if frame is None:
            return
        step = frame.step
        for i, (card, pane) in enumerate(zip(self.cards, step.panes, strict=False)):
            diff = frame.differences[i] if i < len(frame.differences) else None
            image = diff if self.differences and diff is not None else pane.result.annotated
            card.view.set_image(image if image is not None else step.frame.image)
            if card.view.placeholder:
                card.view.show_placeholder("", dimmed=False)
            if i < len(self._stats):
                stats = self._stats[i]
                set_text(card.latency, latency_text(stats.last_latency, stats.median))
            counts = frame.diff_counts[i] if i < len(frame.diff_counts) else None
            card.note.setVisible(self.differences and counts is not None)
            if self.differences and counts is not None:
                card.show_note(diff_note(counts, self.labels[0] if self.labels else ""))
        self._card_width = fit_cards(self.cards, self._card_width)  # with their latency now
        self.table.fill(frame.step, self._stats, frame.tracks)
        self.table.tracks_tip(frame.tracks)
        set_text(self.scope, scope_text(self._pass, self.session.compared))
        self.plots.refresh(self._stats)
        # one convention with the main window: frame N of the count (1-based)
        count = f"/{frame.frame_count}" if frame.frame_count else ""
        kept = self.session.kept
        compared = len(kept) if kept is not None else self.frames_seen
        set_text(self.frame_label, f"frame {step.frame.index + 1}{count} · {compared} compared")

    # ---- numbers for tests and the report ----------------------------------------------

    @property
    def latency_curves(self) -> list[pg.PlotDataItem]:
        """The latency plot's curves, one per pane."""
        return self.plots.latency_curves

    @property
    def f1_curves(self) -> list[pg.PlotDataItem]:
        """The running F1 plot's curves, one per pane."""
        return self.plots.f1_curves

    def table_value(self, pane: int, metric: str) -> str:
        """The agreement table's cell for ``pane`` (0 = reference) and a METRICS name."""
        return self.table.value(pane, metric)

    def closeEvent(self, event: QCloseEvent) -> None:
        self._timer.stop()
        self.session.shutdown()
        super().closeEvent(event)
