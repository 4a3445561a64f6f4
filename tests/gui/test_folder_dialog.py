"""Rough edge 5: Save Report's folder dialog takes a new folder's name (Qt's directory
chooser answers "Directory not found"), and the report is then written there."""

from __future__ import annotations

from pathlib import Path

from framelens.gui.common.folder_dialog import folder_dialog
from PySide6.QtWidgets import QDialog, QFileDialog
from pytestqt.qtbot import QtBot


def test_a_new_folder_name_is_accepted(qtbot: QtBot, tmp_path: Path) -> None:
    dialog = folder_dialog(None, "Save compare report in", str(tmp_path))
    dialog.setOption(QFileDialog.Option.DontUseNativeDialog, True)
    qtbot.addWidget(dialog)
    dialog.show()
    new = tmp_path / "report of tuesday"
    dialog.selectFile(str(new))
    dialog.accept()
    assert dialog.result() == QDialog.DialogCode.Accepted
    assert Path(dialog.selectedFiles()[0]) == new
