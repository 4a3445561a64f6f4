"""Opening sources in the main window, and saving what it shows.

File, camera and URL dialogs, drag and drop, the Open Recent menu, and the
snapshot and export dialogs.
"""

from __future__ import annotations

from pathlib import Path

from framelens.core.api import WALL_LAYOUT_SUFFIX, list_cameras, writable_folder
from framelens.gui.common.file_dialogs import VIDEO_FILTER, open_file, save_file
from framelens.gui.player.dialogs import ExportDialog, OpenCameraDialog, OpenUrlDialog
from framelens.gui.player.main_window_parts import MainWindowParts
from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent

__all__ = ["SourceOpening", "camera_spec", "display_name"]


def camera_spec(index: int) -> str:
    """What open_source() reads as a camera: its index."""
    return str(index)


def display_name(spec: str) -> str:
    """What a source is called in the title and the recent menu."""
    if spec.isdigit():
        return f"Camera {spec}"
    if spec.startswith("/dev/video"):
        return f"Camera {spec.removeprefix('/dev/video')}"
    if "://" in spec:
        return QUrl(spec).fileName() or spec
    return Path(spec).name


class SourceOpening(MainWindowParts):
    """Open a file, camera or stream (dialogs, drops, recent files); snapshot and export."""

    def open_source(self, spec: str, *, play: bool = True) -> None:
        """Open a file, URL or camera spec and start playing it (``play`` False: paused
        on its first frame, as a seek after it wants). A saved wall layout opens its wall."""
        if spec.lower().endswith(WALL_LAYOUT_SUFFIX):
            self.open_wall_layout(spec)
            return
        self.source = spec
        self._pending_recent = spec  # the view and plots start afresh once it has opened
        self.setWindowTitle(f"FrameLens — {display_name(spec)}")
        self.statusBar().showMessage(f"Opening {spec}…")
        self.controller.open_source(spec, play=play)  # played only once it has opened
        if self._restore_precision is not None and self.controller.preparing is None:
            # the last session's INT8, if this video's calibration is cached
            self.controller.set_precision(self._restore_precision, cached_only=True)
            self._sync_precision()

    def open_at(self, spec: str, frame: int) -> None:
        """Open a video file paused at ``frame`` (a batch result's hit, say)."""
        if self.source == spec and self.state.source is not None:
            self.controller.pause()  # the same video: no reopening, only the seek
        else:
            self.open_source(spec, play=False)
        self.controller.seek(max(0, frame))

    def choose_file(self) -> None:
        path = open_file(self, "Open video", self.settings.last_dir, VIDEO_FILTER)
        if path:
            self.settings.last_dir = str(Path(path).parent)
            self.open_source(path)

    def choose_camera(self) -> None:
        dialog = OpenCameraDialog(list_cameras(), self)
        if dialog.exec() == OpenCameraDialog.DialogCode.Accepted and dialog.spec:
            self.open_source(dialog.spec)

    def choose_url(self) -> None:
        dialog = OpenUrlDialog(self.settings.recent, self)
        if dialog.exec() == OpenUrlDialog.DialogCode.Accepted and dialog.url:
            self.open_source(dialog.url)

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
        self.settings.clear_recent()
        self._rebuild_recent([])

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        urls = event.mimeData().urls()
        if len(urls) > 1:  # several files: a video wall
            specs = [u.toLocalFile() if u.isLocalFile() else u.toString() for u in urls]
            if any(s.lower().endswith(WALL_LAYOUT_SUFFIX) for s in specs):
                self.show_error("drop a wall layout on its own, not with videos")
                return
            self.open_wall(specs)
            event.acceptProposedAction()
        elif urls:
            url = urls[0]
            self.open_source(url.toLocalFile() if url.isLocalFile() else url.toString())
            event.acceptProposedAction()

    def save_snapshot(self, path: str | None = None) -> None:
        if self.controller.last_result is None:
            self.show_error("nothing to save: open a video first")
            return
        if path is None:
            index = self.controller.last_result.frame.index
            stem = Path(display_name(self.source or "frame")).stem or "frame"
            folder = self._snapshot_folder()
            suggested = str(folder / f"{stem}_{index:06d}.png")
            path = save_file(self, "Save snapshot", suggested, "PNG image (*.png)")
            if not path:
                return
            self.settings.snapshot_dir = str(Path(path).parent)
        self.controller.save_snapshot(path)

    def _snapshot_folder(self) -> Path:
        """Where the last snapshot went, else the video's folder (where Export writes)
        when it can be written, else the folder files were last opened from."""
        info = self.state.source
        video = Path(info.uri).absolute().parent if info and info.kind == "file" else None
        usable = writable_folder(self.settings.snapshot_dir) or writable_folder(video)
        return usable or Path(self.settings.last_dir or Path.home())

    def open_export_dialog(self) -> ExportDialog | None:
        if self.source is None or self.state.source is None:
            self.show_error("nothing to export: open a video first")
            return None
        if not self.state.source.seekable and self.state.source.kind != "file":
            self.show_error("export works on files; record a camera or stream first")
            return None
        # the frame on screen, as the transport counts it: the player's state can trail
        # the picture by a moment after a seek (the dialog said 3 while 101 was shown)
        current = self.shown_index if self.shown_index >= 0 else max(0, self.state.index)
        dialog = ExportDialog(self.controller, self.source, self.state.frame_count, current, self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()
        return dialog
