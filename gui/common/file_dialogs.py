"""Every file dialog of the app, built one way: Qt's own dialog, themed and with columns
that fit what they show.

The platform's dialog would follow the desktop's theme, not FrameLens's, and would
ignore what the folder chooser asks of it (gui/common/folder_dialog.py), so the app always
uses Qt's dialog, styled by the application's style: its toolbar icons come from
``ThemeStyle`` (gui/common/theme_style.py) and its buttons from ``style.qss``. Qt sizes the
detail view's columns once for an average name ("44....KiB", "MP...eo" cut): here the
size, type and date columns follow their contents and the name takes the rest.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from framelens.core.api import VIDEO_SUFFIXES
from PySide6.QtCore import QSize
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QFileDialog, QHeaderView, QLineEdit, QTreeView, QWidget

__all__ = [
    "DEFAULT_SIZE",
    "DialogMode",
    "file_dialog",
    "fit_columns",
    "open_file",
    "open_files_telling",
    "open_folder",
    "save_file",
]

DialogMode = Literal["open", "open_many", "save", "folder"]
DEFAULT_SIZE = QSize(920, 560)  # room for the name next to size, type and date

# the filters of every file dialog
VIDEO_FILTER = (
    f"Videos ({' '.join('*' + suffix for suffix in VIDEO_SUFFIXES)});;"
    "Wall layouts (*.flwall);;All files (*)"
)  # the extensions core takes for a video: one list (core/stages/sources/suffixes.py)
WALL_LAYOUT_FILTER = "FrameLens wall layout (*.flwall)"
ZONES_FILTER = "Lines and zones (*.zones.json *.json);;All files (*)"
EXPORT_VIDEO_FILTER = "MP4 video (*.mp4);;Matroska (*.mkv);;QuickTime (*.mov);;AVI (*.avi)"
DETECTIONS_FILTER = "JSON (*.json);;CSV (*.csv)"
ONNX_FILTER = "ONNX models (*.onnx);;All files (*)"
LABELS_FILTER = "Label lists (*.txt *.names *.yaml *.yml *.json);;All files (*)"


def file_dialog(
    parent: QWidget | None,
    title: str,
    directory: str = "",
    name_filter: str = "",
    mode: DialogMode = "open",
) -> QFileDialog:
    """The dialog, not yet shown: tests drive it, the functions below run it."""
    dialog = QFileDialog(parent, title, directory, name_filter)
    dialog.setOption(QFileDialog.Option.DontUseNativeDialog, True)
    if mode == "save":
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        dialog.setFileMode(QFileDialog.FileMode.AnyFile)
    elif mode == "folder":  # an existing folder (a new one to write into: folder_dialog)
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptOpen)
        dialog.setFileMode(QFileDialog.FileMode.Directory)
        dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
    else:
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptOpen)
        many = mode == "open_many"
        dialog.setFileMode(
            QFileDialog.FileMode.ExistingFiles if many else QFileDialog.FileMode.ExistingFile
        )
    dialog.setViewMode(QFileDialog.ViewMode.Detail)
    fit_columns(dialog)
    dialog.resize(_initial_size(dialog))
    return dialog


def fit_columns(dialog: QFileDialog) -> None:
    """Size, type and date as wide as their longest visible text; the name the rest."""
    tree = dialog.findChild(QTreeView, "treeView")
    if tree is None:  # a platform dialog: nothing of Qt's to size
        return
    header = tree.header()
    header.setStretchLastSection(False)
    header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
    for column in range(1, header.count()):
        header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)


def _initial_size(dialog: QFileDialog) -> QSize:
    size = dialog.size().expandedTo(DEFAULT_SIZE)
    screen = dialog.screen() or QGuiApplication.primaryScreen()
    if screen is not None:
        size = size.boundedTo(screen.availableGeometry().size() * 0.9)
    return size


def _run(dialog: QFileDialog) -> list[str]:
    try:
        return dialog.selectedFiles() if dialog.exec() else []
    finally:
        dialog.deleteLater()


def open_file(
    parent: QWidget | None, title: str, directory: str = "", name_filter: str = ""
) -> str:
    """An existing file's path, or "" if cancelled (as QFileDialog.getOpenFileName)."""
    files = _run(file_dialog(parent, title, directory, name_filter, "open"))
    return files[0] if files else ""


def open_files_telling(
    parent: QWidget | None, title: str, directory: str = "", name_filter: str = ""
) -> tuple[list[str], str]:
    """Existing files' paths, or [] if cancelled (as QFileDialog.getOpenFileNames), and one
    line naming the files typed that the dialog left out (Qt
    drops, silently, a typed name its file filter hides), or "" when none was."""
    dialog = file_dialog(parent, title, directory, name_filter, "open_many")
    try:
        if not dialog.exec():
            return [], ""
        chosen = dialog.selectedFiles()
        typed = _typed_files(dialog)
        kind = dialog.selectedNameFilter().split(" (")[0] or "the filter"
    finally:
        dialog.deleteLater()
    kept = {Path(p) for p in chosen}
    left = [p for p in typed if p not in kept and p.is_file()]
    if not left:
        return chosen, ""
    names = ", ".join(p.name for p in left)
    them = "it" if len(left) == 1 else "them"
    return chosen, (
        f"left out {names}: the {kind} filter does not show {them} "
        f"(choose All files in the dialog to open {them} anyway)"
    )


def _typed_files(dialog: QFileDialog) -> list[Path]:
    """The paths typed in the dialog's name box ("a.mp4" "b.gif", or one bare name)."""
    edit = dialog.findChild(QLineEdit, "fileNameEdit")
    text = edit.text().strip() if edit is not None else ""
    names = re.findall(r'"([^"]+)"', text) if text.startswith('"') else [text] if text else []
    folder = Path(dialog.directory().absolutePath())
    return [Path(n) if Path(n).is_absolute() else folder / n for n in names]


def save_file(
    parent: QWidget | None,
    title: str,
    path: str = "",
    name_filter: str = "",
    default_suffix: str = "",
) -> str:
    """A path to write (overwriting is confirmed), or "" if cancelled. ``default_suffix``
    ("flwall") is added to a name typed without one, before the overwrite question."""
    dialog = file_dialog(parent, title, path, name_filter, "save")
    if default_suffix:
        dialog.setDefaultSuffix(default_suffix)
    files = _run(dialog)
    return files[0] if files else ""


def open_folder(parent: QWidget | None, title: str, directory: str = "") -> str:
    """An existing folder's path, or "" if cancelled (as getExistingDirectory)."""
    files = _run(file_dialog(parent, title, directory, mode="folder"))
    return files[0] if files else ""
