"""Opening sources in the main window, and saving what it shows.

File, camera and URL dialogs, drag and drop, the Open Recent menu, and the
snapshot and export dialogs.
"""

from __future__ import annotations

from pathlib import Path

from framelens.core.api import (
    WALL_LAYOUT_SUFFIX,
    camera_index,
    list_cameras,
    source_kind,
    writable_folder,
)
from framelens.gui.common.file_dialogs import VIDEO_FILTER, open_file, save_file
from framelens.gui.player.dialogs import ExportDialog, OpenCameraDialog, OpenUrlDialog
from framelens.gui.player.main_window_parts import WindowParts
from PySide6.QtCore import QObject, Qt, QUrl, Signal
from PySide6.QtGui import QAction, QDragEnterEvent, QDropEvent, QKeySequence
from PySide6.QtWidgets import QMenu

__all__ = ["SourceOpening", "camera_spec", "display_name"]


def camera_spec(index: int) -> str:
    """What open_source() reads as a camera: its index."""
    return str(index)


def display_name(spec: str) -> str:
    """What a source is called in the title and the recent menu."""
    index = camera_index(spec)
    if index is not None:
        return f"Camera {index}"
    if source_kind(spec) == "stream":
        return QUrl(spec).fileName() or spec
    return Path(spec).name


class SourceOpening(QObject):
    """Open a file, camera or stream (dialogs, drops, recent files); snapshot and export."""

    opening = Signal(str)  # a source asked for (the player opens it next)
    wallRequested = Signal(list)  # several files dropped: a video wall of them
    layoutRequested = Signal(str)  # a saved wall layout opened as a source

    def __init__(self, parts: WindowParts) -> None:
        super().__init__(parts.window)
        self.parts = parts
        self._pending_recent: str | None = None  # added to Recent once it has opened
        a = parts.action
        self.open_action = a("&Open Video…", self.choose_file, "Ctrl+O", "open")
        self.camera_action = a("Open &Camera…", self.choose_camera, "Ctrl+Shift+O", "camera")
        self.url_action = a("Open &URL…", self.choose_url, "Ctrl+U", "stream")
        self.export_action = a(
            "&Export…",
            self.open_export_dialog,
            "Ctrl+E",
            "export",
            "Export annotated video and detections",
        )
        self.snapshot_action = a(
            "Save &Snapshot…",
            lambda: self.save_snapshot(),
            "F12",
            "snapshot",
            "Save the annotated frame as PNG",
        )
        self.snapshot_action.setShortcuts([QKeySequence("F12"), QKeySequence("Ctrl+Shift+S")])
        self.quick_snapshot_action = a(
            "&Quick Snapshot",
            self.quick_snapshot,
            "S",
            tip="Save the annotated frame as PNG at once, no dialog (as mpv's s)",
        )
        self.quick_snapshot_action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        self.recent_menu = QMenu("Open &Recent", parts.window)
        self._rebuild_recent(parts.settings.recent)
        parts.controller.openFailed.connect(self._on_open_failed)
        parts.controller.snapshotSaved.connect(
            lambda path: parts.show_message(f"Saved {path}", 5000)
        )

    @property
    def source_actions(self) -> list[QAction]:
        """File's ways in, in the menu's order."""
        return [self.open_action, self.camera_action, self.url_action]

    def open_source(self, spec: str, *, play: bool = True) -> None:
        """Open a file, URL or camera spec and start playing it (``play`` False: paused
        on its first frame, as a seek after it wants). A saved wall layout opens its wall."""
        if spec.lower().endswith(WALL_LAYOUT_SUFFIX):
            self.layoutRequested.emit(spec)
            return
        self.parts.shown.source = spec
        self._pending_recent = spec  # the view and plots start afresh once it has opened
        self.parts.window.setWindowTitle(f"FrameLens — {display_name(spec)}")
        self.parts.show_message(f"Opening {spec}…")
        self.parts.controller.open_source(spec, play=play)  # played only once it has opened
        self.opening.emit(spec)

    def open_at(self, spec: str, frame: int) -> None:
        """Open a video file paused at ``frame`` (a batch result's hit, say)."""
        c = self.parts.controller
        if self.parts.shown.source == spec and c.state.source is not None:
            c.pause()  # the same video: no reopening, only the seek
        else:
            self.open_source(spec, play=False)
        c.seek(max(0, frame))

    def source_opened(self) -> None:
        """The source asked for has opened: it goes to the top of Open Recent."""
        if self._pending_recent is not None:
            self.add_recent(self._pending_recent)
            self._pending_recent = None

    def _on_open_failed(self, spec: str) -> None:
        if self._pending_recent != spec:
            return  # another open was asked for since: it is the one pending
        # the open failed: the title and the recent list stay with what plays
        self._pending_recent = None
        current = self.parts.controller.state.source
        self.parts.shown.source = current.uri if current is not None else None
        self.parts.window.setWindowTitle(
            f"FrameLens — {display_name(current.uri)}" if current is not None else "FrameLens"
        )

    def choose_file(self) -> None:
        s = self.parts.settings
        path = open_file(self.parts.window, "Open video", s.last_dir, VIDEO_FILTER)
        if path:
            s.last_dir = str(Path(path).parent)
            self.open_source(path)

    def choose_camera(self) -> None:
        dialog = OpenCameraDialog(list_cameras(), self.parts.window)
        if dialog.exec() == OpenCameraDialog.DialogCode.Accepted and dialog.spec:
            self.open_source(dialog.spec)

    def choose_url(self) -> None:
        dialog = OpenUrlDialog(self.parts.settings.recent, self.parts.window)
        if dialog.exec() == OpenUrlDialog.DialogCode.Accepted and dialog.url:
            self.open_source(dialog.url)

    def add_recent(self, spec: str) -> None:
        self._rebuild_recent(self.parts.settings.add_recent(spec))

    def _rebuild_recent(self, items: list[str]) -> None:
        menu = self.recent_menu
        menu.clear()
        for i, spec in enumerate(items):
            label = f"&{i + 1}  {display_name(spec)}" if i < 9 else display_name(spec)
            action = menu.addAction(label)
            action.setToolTip(spec)
            action.setStatusTip(spec)
            action.triggered.connect(lambda _checked=False, s=spec: self.open_source(s))
        if items:
            menu.addSeparator()
            menu.addAction("Clear Recent", self._clear_recent)
        menu.setEnabled(bool(items))

    def _clear_recent(self) -> None:
        self.parts.settings.clear_recent()
        self._rebuild_recent([])

    @staticmethod
    def drag_enter(event: QDragEnterEvent) -> None:
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def drop(self, event: QDropEvent) -> None:
        urls = event.mimeData().urls()
        if len(urls) > 1:  # several files: a video wall
            specs = [u.toLocalFile() if u.isLocalFile() else u.toString() for u in urls]
            if any(s.lower().endswith(WALL_LAYOUT_SUFFIX) for s in specs):
                self.parts.show_error("drop a wall layout on its own, not with videos")
                return
            self.wallRequested.emit(specs)
            event.acceptProposedAction()
        elif urls:
            url = urls[0]
            self.open_source(url.toLocalFile() if url.isLocalFile() else url.toString())
            event.acceptProposedAction()

    def save_snapshot(self, path: str | None = None) -> None:
        c, s = self.parts.controller, self.parts.settings
        refusal, on_screen = c.snapshot_refusal(), c.last_result
        if refusal is not None:
            self.parts.show_error(refusal)
            return
        if path is None:
            index = on_screen.frame.index if on_screen is not None else 0
            suggested = str(self._snapshot_folder() / self._snapshot_name(index))
            path = save_file(self.parts.window, "Save snapshot", suggested, "PNG image (*.png)")
            if not path:
                return
            s.snapshot_dir = str(Path(path).parent)
        c.save_snapshot(path)

    def quick_snapshot(self) -> None:
        """``S``: the snapshot Save Snapshot… suggests, saved without asking (a name
        taken already gets a number: no snapshot overwrites another)."""
        on_screen = self.parts.controller.last_result
        if on_screen is None or self.parts.controller.snapshot_refusal() is not None:
            self.save_snapshot()  # says why there is none
            return
        folder, name, n = self._snapshot_folder(), self._snapshot_name(on_screen.frame.index), 1
        path = folder / name
        while path.exists():
            n += 1
            path = folder / f"{Path(name).stem}_{n}.png"
        self.save_snapshot(str(path))

    def _snapshot_name(self, index: int) -> str:
        """The video's name and the frame's index: ``clip_000042.png``."""
        stem = Path(display_name(self.parts.shown.source or "frame")).stem or "frame"
        return f"{stem}_{index:06d}.png"

    def _snapshot_folder(self) -> Path:
        """Where the last snapshot went, else the video's folder (where Export writes)
        when it can be written, else the folder files were last opened from."""
        info, s = self.parts.controller.state.source, self.parts.settings
        video = Path(info.uri).absolute().parent if info and info.kind == "file" else None
        usable = writable_folder(s.snapshot_dir) or writable_folder(video)
        return usable or Path(s.last_dir or Path.home())

    def open_export_dialog(self) -> ExportDialog | None:
        c, shown = self.parts.controller, self.parts.shown
        state, refusal = c.state, c.export_refusal()
        if refusal is not None:
            self.parts.show_error(refusal)
            return None
        source = shown.source or (state.source.uri if state.source is not None else "")
        # the frame on screen, as the transport counts it: the player's state can trail
        # the picture by a moment after a seek (the dialog said 3 while 101 was shown)
        current = shown.index if shown.index >= 0 else max(0, state.index)
        dialog = ExportDialog(c, source, state.frame_count, current, self.parts.window)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()
        return dialog
