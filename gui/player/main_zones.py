"""The main window's lines and zones: the Zones menu, the editor on the canvas, the Events
dock (counts plot and events list) and the next / previous event keys.

Zones > Draw Line (Ctrl+Alt+L) and Draw Zone (Ctrl+Alt+Z) draw on the canvas
(gui/display/zone_editor.py), then ask for a name and the classes counted
(gui/player/zone_dialog.py); Edit Lines and Zones (Ctrl+Alt+E) drags their points;
Delete…, Load… and Save As… do what they say. Every change is checked as a zones.json
is (one line naming the problem: a polygon that crosses itself, a name used twice),
counted from the frame on screen on (core's ``PlaybackAnalytics``, through the
controller) and saved beside the video (``<video>.zones.json``), which is read again
when the video is opened. Counting needs tracks: drawing a line or a zone turns
tracking on (the tracker chosen last) and says so. Events (Ctrl+Shift+E) is a dock of
the counts over time and the events so far (gui/player/events_panel.py): a click on an
event shows its frame with its track followed; N and Shift+N go to the next and the
previous event.
"""

from __future__ import annotations

from typing import Any

from framelens.core.api import (
    Event,
    FrameLensError,
    FrameResult,
    LineSpec,
    ZonesFile,
    ZoneSpec,
    ZonesPicture,
    error_message,
    parse_zones,
    zones_as_json,
)
from framelens.gui.common.file_dialogs import open_file, save_file
from framelens.gui.display.zone_editor import Point, ZoneEditor
from framelens.gui.player.events_panel import EventsPanel
from framelens.gui.player.main_tracks import TRACKER_NAMES, TrackingFeature
from framelens.gui.player.main_window_parts import WindowParts
from framelens.gui.player.zone_dialog import ShapeProperties, ZoneDialog
from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QDialog, QDockWidget, QInputDialog, QMenu
from shiboken6 import isValid

__all__ = ["ZonesFeature"]

REFRESH_MS = 250  # the events list and the plot while playing, at most this often
_FILTER = "Lines and zones (*.json);;All files (*)"


class ZonesFeature(QObject):
    """The Zones menu, the canvas editor and the Events dock (see the module's doc)."""

    def __init__(
        self, parts: WindowParts, tracking: TrackingFeature, before: QMenu, plots: QDockWidget
    ) -> None:
        super().__init__(parts.window)
        self.parts = parts
        self.tracking = tracking
        self._listed_version = -1
        self._generation = -1  # of the counts the plot holds
        window, a = parts.window, parts.action
        menu = self.menu = QMenu("&Zones", window)
        window.menuBar().insertMenu(before.menuAction(), menu)
        self.draw_line_action = a(
            "Draw &Line", lambda: self.draw("line"), "Ctrl+Alt+L",
            tip="Click two points on the video: crossing from its left to its right is 'in'",
        )  # fmt: skip
        self.draw_zone_action = a(
            "Draw &Zone", lambda: self.draw("zone"), "Ctrl+Alt+Z",
            tip="Click the corners on the video; Enter or a double-click closes it, Esc cancels",
        )  # fmt: skip
        self.edit_action = a(
            "&Edit Lines and Zones", self._edit_toggled, "Ctrl+Alt+E",
            tip="Drag their points; double-click a point for the name and classes",
        )  # fmt: skip
        self.edit_action.setCheckable(True)
        self.delete_action = a("&Delete…", self.delete, tip="Remove a line or a zone")
        self.load_action = a("L&oad…", self.load, tip="Lines and zones from a zones.json")
        self.save_action = a("&Save As…", self.save_as, tip="The lines and zones to a zones.json")
        menu.addActions([self.draw_line_action, self.draw_zone_action, self.edit_action,
                         self.delete_action])  # fmt: skip
        menu.addSeparator()
        menu.addActions([self.load_action, self.save_action])
        menu.addSeparator()
        self.next_action = a("&Next Event", lambda: self.jump_event(1), "N",
                             tip="The next event's frame, its track followed")  # fmt: skip
        self.previous_action = a("&Previous Event", lambda: self.jump_event(-1), "Shift+N",
                                 tip="The previous event's frame")  # fmt: skip

        self.editor = ZoneEditor(parts.canvas)
        self.editor.drawn.connect(self._drawn)
        self.editor.moved.connect(self._moved)
        self.editor.propertiesAsked.connect(self.edit_properties)
        self.editor.refused.connect(lambda text: parts.show_message(text, 5000))
        self.editor.modeChanged.connect(self._mode_changed)

        self.panel = EventsPanel()
        dock = self.dock = QDockWidget("Events", window)
        dock.setObjectName("eventsDock")  # saveState() needs names
        dock.setWidget(self.panel)
        if not window.restoreDockWidget(dock):  # under the video, beside the plots
            window.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, dock)
            window.tabifyDockWidget(plots, dock)
        events_action = self.events_action = dock.toggleViewAction()
        events_action.setText("&Events")
        events_action.setShortcut(QKeySequence("Ctrl+Shift+E"))
        events_action.setStatusTip("The counts over time and every event so far")
        window.addAction(events_action)
        menu.addActions([events_action, self.next_action, self.previous_action])
        dock.setVisible(parts.settings.events_visible)
        events_action.toggled.connect(self._events_toggled)
        events_action.triggered.connect(self._events_asked)
        dock.visibilityChanged.connect(self._events_visible)
        self.panel.eventPicked.connect(self.show_event)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(lambda: self._refresh())

    # ---- what is defined ----------------------------------------------------------------

    @property
    def spec(self) -> ZonesFile:
        return self.parts.controller.analytics.spec

    def _labels(self) -> tuple[str, ...]:
        settings = self.parts.controller.settings
        return tuple(settings.model.labels) if settings is not None else ()

    def _shapes(self) -> list[tuple[str, list[Point]]]:
        spec = self.spec
        return [("line", [s.p1, s.p2]) for s in spec.lines] + [
            ("zone", list(s.polygon)) for s in spec.zones
        ]

    def _data(self) -> dict[str, Any]:
        return zones_as_json(self.spec, self._labels())

    def apply(self, data: dict[str, Any]) -> bool:
        """Count ``data`` (a zones.json's object) from the frame on screen on and save it
        beside the video; False, and one line said, when it cannot be used."""
        analytics = self.parts.controller.analytics
        analytics.set_labels(self._labels())  # the model's now (a file names classes)
        try:
            spec = parse_zones(data, "Zones", self._labels(), analytics.size)
        except FrameLensError as exc:
            self.parts.show_message(error_message(exc), 8000)
            return False
        self.parts.controller.set_zones(spec)
        self.editor.set_shapes(self._shapes())
        self._names_changed()
        said = spec.warnings[0] if spec.warnings else ""
        if analytics.path is not None:
            try:
                analytics.save()
            except FrameLensError as exc:
                said = error_message(exc)
        if spec:
            self._needs_tracks()
        if said:
            self.parts.show_message(said, 8000)
        return True

    def _needs_tracks(self) -> None:
        """Counting needs track IDs: tracking on (the tracker chosen last), said."""
        t = self.tracking
        if t.kind == "off":
            t.choose(t.last_kind)
            if t.kind != "off":
                self.parts.show_message(
                    f"Lines and zones count tracks: tracking with {TRACKER_NAMES[t.kind]}", 5000
                )

    # ---- drawing and editing ----------------------------------------------------------

    def draw(self, kind: str) -> None:
        """Draw a ``kind`` ("line" or "zone") on the canvas."""
        if self.parts.canvas.image_size is None:
            self.parts.show_message("Open a video first: lines and zones are drawn on it", 5000)
            return
        self.edit_action.setChecked(False)
        self.editor.draw(kind)
        how = (
            "click its two points (walking from the first to the second, left to right is 'in')"
            if kind == "line"
            else "click its corners; Enter or a double-click closes it"
        )
        self.parts.show_message(f"Draw a {kind}: {how}; Esc cancels")

    def _mode_changed(self, mode: str) -> None:
        self.edit_action.setChecked(mode == "edit")
        if not mode:
            self.parts.status_bar.clearMessage()

    def _edit_toggled(self) -> None:
        if not self.edit_action.isChecked():
            self.editor.stop()
            return
        if not self.spec:
            self.edit_action.setChecked(False)
            self.parts.show_message("No lines or zones to edit: draw one first", 5000)
            return
        self.editor.edit(self._shapes())
        self.parts.show_message(
            "Drag a point to move it; double-click a point for the name and classes; Esc ends"
        )

    def _new_name(self, kind: str) -> str:
        taken = set(self.spec.names)
        n = 1
        while f"{kind} {n}" in taken:
            n += 1
        return f"{kind} {n}"

    def ask(self, kind: str, props: ShapeProperties) -> ShapeProperties | None:
        """The dialog for a line or zone's name and classes (None: cancelled)."""
        dialog = ZoneDialog(kind, props, self._labels(), self.parts.window)
        try:
            return dialog.properties() if dialog.exec() == QDialog.DialogCode.Accepted else None
        finally:
            dialog.deleteLater()

    def _drawn(self, kind: str, points: list[Point]) -> None:
        name = self._new_name(kind)
        alone: dict[str, list[dict[str, Any]]] = {"lines": [], "zones": []}  # checked first
        alone["lines" if kind == "line" else "zones"].append(
            _item(kind, points, ShapeProperties(name), self._labels())
        )
        try:
            parse_zones(alone, "Zones", self._labels(), self.parts.controller.analytics.size)
        except FrameLensError as exc:
            self.parts.show_error(f"{error_message(exc)}: draw it again")
            return
        props = self.ask(kind, ShapeProperties(name))
        if props is None:
            self.parts.show_message(f"The {kind} was not kept", 3000)
            return
        data = self._data()
        item = _item(kind, points, props, self._labels())
        data["lines" if kind == "line" else "zones"].append(item)
        if self.apply(data):
            self.parts.show_message(f"{kind.capitalize()} {props.name!r} counts from here", 5000)

    def _moved(self, number: int, points: list[Point]) -> None:
        data = self._data()
        kind, index = self._where(number)
        data[kind][index]["points" if kind == "lines" else "polygon"] = [list(p) for p in points]
        if not self.apply(data):
            self.editor.set_shapes(self._shapes())  # back where it was

    def _where(self, number: int) -> tuple[str, int]:
        n = len(self.spec.lines)
        return ("lines", number) if number < n else ("zones", number - n)

    def edit_properties(self, number: int) -> None:
        """The name, classes (and anchor, loitering) of shape ``number``, asked again."""
        kind, index = self._where(number)
        spec: LineSpec | ZoneSpec = (
            self.spec.lines[index] if kind == "lines" else self.spec.zones[index]
        )
        loiter = spec.loiter_s if isinstance(spec, ZoneSpec) else None
        props = self.ask(kind[:-1], ShapeProperties(spec.name, spec.classes, spec.anchor, loiter))
        if props is None:
            return
        data = self._data()
        points = [list(p) for p in self._shapes()[number][1]]
        data[kind][index] = _item(kind[:-1], points, props, self._labels())
        self.apply(data)

    def delete(self, name: str | None = None) -> None:
        """Remove the line or zone ``name`` (None: ask which)."""
        names = list(self.spec.names)
        if not names:
            self.parts.show_message("No lines or zones to delete", 3000)
            return
        if name is None:
            name, ok = QInputDialog.getItem(
                self.parts.window, "Delete", "Line or zone:", names, 0, False
            )
            if not ok:
                return
        data = self._data()
        for kind in ("lines", "zones"):
            data[kind] = [item for item in data[kind] if item["name"] != name]
        if self.apply(data):
            self.parts.show_message(f"Deleted {name!r}", 3000)

    def load(self, path: str | None = None) -> None:
        """Lines and zones from a zones.json (asked for when ``path`` is None)."""
        if path is None:
            path = open_file(self.parts.window, "Load Lines and Zones", "", _FILTER)
            if not path:
                return
        analytics = self.parts.controller.analytics
        try:
            spec = analytics.load(path)
        except FrameLensError as exc:
            self.parts.show_error(error_message(exc))
            return
        if self.apply(zones_as_json(spec, self._labels())):
            self.parts.show_message(f"Lines and zones from {path}", 5000)

    def save_as(self, path: str | None = None) -> None:
        """The lines and zones to a zones.json (asked for when ``path`` is None)."""
        analytics = self.parts.controller.analytics
        if path is None:
            start = str(analytics.path) if analytics.path is not None else "zones.json"
            path = save_file(self.parts.window, "Save Lines and Zones", start, _FILTER, "json")
            if not path:
                return
        try:
            written = analytics.save(path)
        except FrameLensError as exc:
            self.parts.show_error(error_message(exc))
            return
        self.parts.show_message(f"Saved {written}", 5000)

    # ---- a video opened, a frame shown --------------------------------------------------

    def source_opened(self) -> None:
        """Another video: its lines and zones from beside it, when it has them."""
        controller = self.parts.controller
        analytics = controller.analytics
        self.editor.stop()
        analytics.set_labels(self._labels())
        info = controller.state.source
        size = (info.width, info.height) if info is not None else None
        said = analytics.use_video(controller.source, size)
        self._names_changed()
        if analytics.spec:
            controller.set_zones(analytics.spec)
            self._needs_tracks()
        if analytics.unusable:  # an error, said as every error is: a box too
            self.parts.show_error(analytics.unusable)
        elif said:
            self.parts.show_message(said, 8000)

    def _names_changed(self) -> None:
        spec = self.spec
        self.panel.clear_counts(spec.names)
        self._listed_version = -1
        self._refresh(force=True)

    def show(self, result: FrameResult) -> None:
        """A frame on the canvas: its counts kept for the plot."""
        generation = self.parts.controller.analytics.generation
        if generation != self._generation:  # counting started again: a plot afresh
            self._generation = generation
            self.panel.clear_counts(self.spec.names)
        for mark in result.marks:
            if isinstance(mark, ZonesPicture) and mark.counts is not None:
                self.panel.add_counts(mark.counts)
        if not self._timer.isActive():
            playing = self.parts.controller.state.playing
            self._timer.start(REFRESH_MS if playing else 0)

    def _refresh(self, *, force: bool = False) -> None:
        if not isValid(self.dock) or not (self.dock.isVisible() or force):
            return
        analytics = self.parts.controller.analytics
        if analytics.version != self._listed_version or force:
            self._listed_version = analytics.version
            self.panel.show_events(analytics.events(), self._labels())
        self.panel.refresh_plot()

    def _events_asked(self, on: bool) -> None:
        if on:
            self.dock.raise_()  # its tab in front of the plots'

    def _events_visible(self, visible: bool) -> None:
        if visible:
            self._refresh(force=True)

    def _events_toggled(self, on: bool) -> None:
        window = self.parts.window
        if isValid(window) and window.isVisible():
            self.parts.settings.events_visible = on

    # ---- events -------------------------------------------------------------------------

    def show_event(self, event: Event) -> None:
        """The event's frame on screen, its track followed."""
        self.parts.controller.seek(event.frame)
        self.tracking.follow(event.track_id, event.class_id)
        events = self.panel.events
        if event in events:
            self.panel.select(events.index(event))

    def jump_event(self, step: int) -> None:
        """N (``step`` 1): the next event after the frame on screen; Shift+N (-1): the one
        before it."""
        events = self.parts.controller.analytics.events()
        here = self.parts.shown.index
        if step > 0:
            found = next((e for e in events if e.frame > here), None)
        else:
            found = next((e for e in reversed(events) if e.frame < here), None)
        if found is None:
            where = "after" if step > 0 else "before"
            self.parts.show_message(f"No event {where} this frame", 3000)
            return
        if self.panel.events != events:
            self.panel.show_events(events, self._labels())
        self.show_event(found)


def _item(
    kind: str, points: list[Point] | list[list[float]], props: ShapeProperties,
    labels: tuple[str, ...],
) -> dict[str, Any]:  # fmt: skip
    """A zones.json line or zone from the points drawn and the dialog's answers."""
    pts = [[round(float(x), 1), round(float(y), 1)] for x, y in points]
    item: dict[str, Any] = {"name": props.name}
    item["points" if kind == "line" else "polygon"] = pts
    if props.anchor != "bottom_center":
        item["anchor"] = props.anchor
    if props.classes:
        item["classes"] = [labels[c] if 0 <= c < len(labels) else c for c in props.classes]
    if kind == "zone" and props.loiter_s is not None:
        item["loiter_s"] = props.loiter_s
    return item
