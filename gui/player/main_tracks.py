"""The main window's tracking: the Tracking menu, following one ID, and the track list.

Tracking > Off / ByteTrack / OC-SORT / BoT-SORT chooses the tracker playback runs (the
player's per-source stages, core/sessions/playback/tracking.py); it takes effect on the
frame on screen, without reopening the video, and is remembered (Settings.tracker).
Track Objects (Ctrl+T) turns tracking on with the tracker chosen last, or off. Show
Trails (Shift+T) is the Analysis panel's Trails box (an overlay setting, saved with the
others). Follow This ID (F, or a row's context menu in the Detections or Track list)
keeps one track marked on the canvas (around its box and its tag, so the tag stays
readable) and says in the status bar when it is lost and found again
(core/sessions/playback/follow.py); F again stops. Track List (Ctrl+Shift+T) is a dock
of every track seen so far (gui/player/track_list.py): a click jumps to a track's first
frame, a double-click to its last.
"""

from __future__ import annotations

from framelens.core.api import (
    TRACKER_KINDS,
    Detections,
    FrameResult,
    OverlayStyle,
    TrackerSettings,
    TrackFollow,
    TrackRecord,
    track_colour,
)
from framelens.gui.player.detections_dock import DetectionRow
from framelens.gui.player.main_detections import DetectionsList
from framelens.gui.player.main_window_parts import WindowParts
from framelens.gui.player.track_list import TrackListPanel
from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QDockWidget, QMenu
from shiboken6 import isValid

__all__ = ["TRACKER_NAMES", "TrackingFeature"]

TRACKER_NAMES = {"off": "Off", "bytetrack": "ByteTrack", "ocsort": "OC-SORT", "botsort": "BoT-SORT"}
LIST_REFRESH_MS = 250  # the track list while playing, at most this often


class TrackingFeature(QObject):
    """The Tracking menu, Follow This ID and the Track List dock (see the module doc)."""

    def __init__(
        self, parts: WindowParts, detections: DetectionsList, before: QMenu, plots: QDockWidget
    ) -> None:
        """The menu goes before ``before`` (Help); the dock is a tab beside ``plots``."""
        super().__init__(parts.window)
        self.parts = parts
        self.detections = detections
        self.kind = "off"  # the tracker running ("off": none)
        self.last_kind = "bytetrack"  # what Track Objects turns on
        self.following: TrackFollow | None = None
        self._fps = 0.0  # the open source's, for the tracker's buffer
        self._listed_version = -1
        window, a = parts.window, parts.action
        menu = self.menu = QMenu("&Tracking", window)
        window.menuBar().insertMenu(before.menuAction(), menu)
        self.kind_group = QActionGroup(self)
        self.kind_actions: dict[str, QAction] = {}
        for kind in ("off", *TRACKER_KINDS):
            action = QAction(TRACKER_NAMES[kind], self.kind_group)
            action.setCheckable(True)
            action.setStatusTip(
                "Play without tracking"
                if kind == "off"
                else f"Give every box a track ID with {TRACKER_NAMES[kind]}"
            )
            action.triggered.connect(lambda _on=False, k=kind: self.choose(k))
            self.kind_actions[kind] = action
            menu.addAction(action)
        self.kind_actions["off"].setChecked(True)
        menu.addSeparator()
        self.toggle_action = a(
            "Track &Objects",
            self.toggle,
            "Ctrl+T",
            tip="Tracking on (the tracker chosen last) or off",
        )
        trails = parts.panel.overlay_checks["trails"]
        self.trails_action = a(
            "Show &Trails", trails.toggle, "Shift+T", tip="Each track's last centre points"
        )
        self.trails_action.setCheckable(True)
        self.trails_action.setChecked(trails.isChecked())
        trails.toggled.connect(self._trails_shown)
        self.follow_action = a(
            "&Follow This ID",
            self.toggle_follow,
            "F",
            tip="Keep the box picked in the Detections or Track list marked; F again stops",
        )
        menu.addActions([self.toggle_action, self.trails_action])
        menu.addSeparator()
        menu.addAction(self.follow_action)

        self.panel = TrackListPanel()
        dock = self.dock = QDockWidget("Tracks", window)
        dock.setObjectName("tracksDock")  # saveState() needs names
        dock.setWidget(self.panel)
        dock.setFeatures(
            QDockWidget.DockWidgetFeature.DockWidgetMovable
            | QDockWidget.DockWidgetFeature.DockWidgetFloatable
            | QDockWidget.DockWidgetFeature.DockWidgetClosable
        )
        if not window.restoreDockWidget(dock):  # under the video, beside the plots: room
            window.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, dock)
            window.tabifyDockWidget(plots, dock)
        list_action = self.list_action = dock.toggleViewAction()
        list_action.setText("Track &List")
        list_action.setShortcut(QKeySequence("Ctrl+Shift+T"))
        list_action.setStatusTip("Every track of the video so far: class, first and last frame")
        window.addAction(list_action)
        menu.addAction(list_action)
        dock.setVisible(parts.settings.track_list_visible)
        list_action.toggled.connect(self._list_toggled)
        list_action.triggered.connect(self._list_asked)
        dock.visibilityChanged.connect(self._list_visible)
        self.panel.jumpRequested.connect(self.jump)
        self.panel.followRequested.connect(self._follow_record)
        detections.panel.followRequested.connect(self._follow_row)
        self._list_timer = QTimer(self)
        self._list_timer.setSingleShot(True)
        self._list_timer.timeout.connect(lambda: self._refresh_list())

    # ---- the tracker ------------------------------------------------------------------

    def restore(self) -> None:
        """The tracker chosen last time."""
        self.choose(self.parts.settings.tracker, save=False)

    def choose(self, kind: str, *, save: bool = True) -> None:
        """Track with ``kind`` ("off": no tracking), from the frame on screen on."""
        if kind not in TRACKER_NAMES:
            kind = "off"
        running = kind == "off" or self.parts.controller.tracker is not None
        if kind == self.kind and running:
            self.kind_actions[kind].setChecked(True)
            return
        if not self.parts.controller.set_tracking(self._settings(kind)):
            self.kind_actions[self.kind].setChecked(True)  # as it was (the error is said)
            return
        self.kind_actions[kind].setChecked(True)
        if save:
            self.parts.settings.tracker = kind
        if kind != "off":
            self.last_kind = kind
        self.kind = kind
        self.stop_following()  # the IDs are numbered afresh
        self._listed_version = -1
        self._refresh_list(force=True)
        if save:
            said = "Tracking off" if kind == "off" else f"Tracking with {TRACKER_NAMES[kind]}"
            self.parts.show_message(said, 3000)

    @property
    def chosen(self) -> TrackerSettings | None:
        """The tracker running now (compare's panes track with it), None when off."""
        return self._settings()

    def _settings(self, kind: str | None = None) -> TrackerSettings | None:
        """``kind``'s settings (the running one's by default) with its published
        defaults, its buffer in the open video's frames."""
        kind = self.kind if kind is None else kind
        if kind not in TRACKER_KINDS:
            return None
        rate = {"frame_rate": self._fps} if self._fps > 0 else {}
        return TrackerSettings.for_kind(kind, **rate)

    def toggle(self) -> None:
        """Ctrl+T: tracking on (the tracker chosen last) or off."""
        self.choose("off" if self.kind != "off" else self.last_kind)

    def source_opened(self) -> None:
        """Another video: its own tracks (the log starts afresh with its first frame)."""
        self.stop_following()
        info = self.parts.controller.state.source
        fps = info.fps if info is not None and info.fps > 0 else 0.0
        if fps != self._fps:
            self._fps = fps
            if self.kind != "off":  # the tracker's buffer in this video's frames
                self.parts.controller.set_tracking(self._settings())
        self._listed_version = -1
        self._refresh_list(force=True)

    def _trails_shown(self, on: bool) -> None:
        self.trails_action.setChecked(on)

    # ---- what is shown ----------------------------------------------------------------

    def show(self, result: FrameResult) -> None:
        """The frame just put on the canvas: the followed track marked, lost or found."""
        follow, output = self.following, result.output
        if follow is not None and isinstance(output, Detections):
            step = follow.see(result.frame.index, output, *self._drawn_on(result))
            self.parts.canvas.set_follow(step.box, track_colour(follow.track_id), step.region)
            if step.event == "lost":
                self.parts.show_message(step.message)  # until it is found again
            elif step.event == "found":
                self.parts.show_message(step.message, 5000)
        if not self._list_timer.isActive():
            self._list_timer.start(
                0 if not self.parts.controller.state.playing else LIST_REFRESH_MS
            )

    def _refresh_list(self, *, force: bool = False) -> None:
        if not isValid(self.dock) or not (self.dock.isVisible() or force):
            return
        log = self.parts.controller.track_log
        if log.version == self._listed_version and not force:
            return
        self._listed_version = log.version
        settings = self.parts.controller.settings
        labels = settings.model.labels if settings is not None else ()
        on = self.kind != "off"
        self.panel.show_tracks(log.tracks() if on else [], labels, on)

    def _list_asked(self, on: bool) -> None:
        if on:
            self.dock.raise_()  # its tab in front of the plots'

    def _list_visible(self, visible: bool) -> None:
        if visible:
            self._refresh_list(force=True)

    def _list_toggled(self, on: bool) -> None:
        window = self.parts.window
        if isValid(window) and window.isVisible():
            self.parts.settings.track_list_visible = on

    def jump(self, frame: int) -> None:
        """Show frame ``frame`` (a track's first or last)."""
        self.parts.controller.seek(frame)

    # ---- following ----------------------------------------------------------------------

    def toggle_follow(self) -> None:
        """F: follow the track of the box picked in the Detections list (else of the row
        selected in the Track list); F again, or with nothing new picked, stops."""
        picked = self.detections.panel.picked
        record = self.panel.selected()
        wanted: tuple[int, int] | None = None
        if picked is not None and picked.track_id >= 1:
            wanted = (picked.track_id, picked.class_id)
        elif record is not None:
            wanted = (record.track_id, record.class_id)
        now = self.following.track_id if self.following is not None else None
        if wanted is not None and wanted[0] != now:
            self.follow(*wanted)
        elif self.following is not None:
            self.stop_following(say=True)
        elif self.kind == "off":
            self.parts.show_message("Tracking is off: choose a tracker in the Tracking menu", 5000)
        else:
            self.parts.show_message(
                "Pick a box with an ID in the Detections list (Ctrl+D), or a track in the "
                "Track list, then press F to follow it",
                6000,
            )

    def _follow_row(self, row: DetectionRow) -> None:
        if row.track_id >= 1:
            self.follow(row.track_id, row.class_id)

    def _follow_record(self, record: TrackRecord) -> None:
        self.follow(record.track_id, record.class_id)

    def follow(self, track_id: int, class_id: int) -> None:
        """Keep track ``track_id`` marked from the frame on screen on."""
        settings = self.parts.controller.settings
        labels = settings.model.labels if settings is not None else ()
        follow = self.following = TrackFollow(track_id, class_id, labels)
        last = self.parts.controller.last_result
        box = region = None
        if last is not None and isinstance(last.output, Detections):
            step = follow.see(last.frame.index, last.output, *self._drawn_on(last))
            box, region = step.box, step.region
        self.parts.canvas.set_follow(box, track_colour(track_id), region)
        where = "" if box is not None else " (not in this frame)"
        self.parts.show_message(f"Following {follow.name}{where}: F stops", 5000)

    def _drawn_on(self, result: FrameResult) -> tuple[tuple[int, int], OverlayStyle]:
        """The size of ``result``'s frame and the overlay style drawn on it: the mark
        goes around the followed box's tag as well (core's ``mark_region``)."""
        settings = self.parts.controller.settings
        style = settings.overlay if settings is not None else OverlayStyle()
        return (result.frame.width, result.frame.height), style

    def stop_following(self, *, say: bool = False) -> None:
        if self.following is None:
            return
        name, self.following = self.following.name, None
        self.parts.canvas.set_follow(None, (0, 0, 0))
        if say:
            self.parts.show_message(f"Stopped following {name}", 3000)
