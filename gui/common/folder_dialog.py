"""A folder to write into, existing or new: the report dialogs' chooser.

Qt's "choose a directory" dialog refuses a name that does not exist yet ("Directory not
found"), so a user cannot type the new folder a report should go in. This dialog is a
save dialog for folders: an existing folder, or a new name that the report creates.
"""

from __future__ import annotations

from framelens.gui.common.file_dialogs import file_dialog
from PySide6.QtWidgets import QFileDialog, QWidget

__all__ = ["choose_folder", "folder_dialog"]


def folder_dialog(parent: QWidget | None, title: str, start_dir: str = "") -> QFileDialog:
    """The dialog, not yet shown (tests drive it; ``choose_folder`` runs it)."""
    dialog = file_dialog(parent, title, start_dir, mode="save")  # a name not there yet
    dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
    dialog.setOption(QFileDialog.Option.DontConfirmOverwrite, True)  # a report folder is reused
    dialog.setNameFilter("Folders (*)")
    dialog.setLabelText(QFileDialog.DialogLabel.FileName, "Folder")
    dialog.setLabelText(QFileDialog.DialogLabel.Accept, "Save here")
    return dialog


def choose_folder(parent: QWidget | None, title: str, start_dir: str = "") -> str | None:
    """An existing folder or a new one's path (the report creates it); None if cancelled."""
    dialog = folder_dialog(parent, title, start_dir)
    try:
        files = dialog.selectedFiles() if dialog.exec() else []
    finally:
        dialog.deleteLater()
    return files[0] if files else None
