"""Rough edge 13: Help > User Guide (F1) shows docs/user-guide.md, from the copy the
package ships (so it works installed), rendered; and the guide names what the program
has: every menu shortcut, every command and every command-line option.

Screenshots go to a temporary folder; FRAMELENS_GUIDE_SCREENSHOTS=docs writes the
README's (docs/user-guide.png).
"""

from __future__ import annotations

import argparse
from importlib.resources import files
from pathlib import Path

import pytest
from framelens.cli import build_parser
from framelens.gui.common.shortcuts_dialog import shortcut_rows
from framelens.gui.common.user_guide import GUIDE_RESOURCE, UserGuideDialog, guide_markdown
from framelens.gui.player.main_window import MainWindow
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextTable
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot
from shots import shots_dir

pytestmark = pytest.mark.gui

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "user-guide.md"
SHOTS = shots_dir("FRAMELENS_GUIDE_SCREENSHOTS", "guide")


def open_guide(window: MainWindow, qtbot: QtBot) -> UserGuideDialog:
    """F1, as the user presses it."""
    window.activateWindow()
    window.canvas.setFocus()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5000)
    qtbot.keyClick(window.canvas, Qt.Key.Key_F1)
    dialog = window.findChild(UserGuideDialog)
    assert dialog is not None
    qtbot.waitExposed(dialog)
    return dialog


def test_the_package_ships_the_guide_of_docs() -> None:
    shipped = files("framelens.resources") / GUIDE_RESOURCE
    assert shipped.is_file()
    # resources/user-guide.md is a copy: `cp docs/user-guide.md resources/` after an edit
    assert guide_markdown() == GUIDE.read_text(encoding="utf-8")


def test_f1_shows_the_guide_rendered(window: MainWindow, qtbot: QtBot) -> None:
    assert window.menus.user_guide_action.shortcut().toString() == "F1"
    dialog = open_guide(window, qtbot)
    assert dialog.isVisible() and dialog.windowTitle() == "FrameLens User Guide"
    headings = dialog.headings()
    for title in (
        "FrameLens User Guide",
        "Opening videos, cameras and streams",
        "The detections list",
        "Precision: FP32, FP16 and INT8",
        "Super-resolution",
        "The video wall",
        "The command line",
        "Keyboard shortcuts",
    ):
        assert title in headings
    text = dialog.browser.toPlainText()
    assert "## " not in text and "**" not in text and "|---|" not in text  # rendered
    doc = dialog.browser.document()
    tables = {
        frame
        for block in (doc.findBlockByNumber(i) for i in range(doc.blockCount()))
        if isinstance(frame := doc.frameAt(block.position()), QTextTable)
    }
    assert len(tables) >= 3  # playing, the super-resolution views, the shortcuts
    # Find: the next place the text occurs is selected; what is not there is said
    dialog.find_edit.setText("export-dir")
    assert dialog.browser.textCursor().selectedText() == "export-dir"
    dialog.find_edit.setText("no such words here")
    assert dialog.find_status.text() == "not found"
    dialog.find_edit.setText("Ctrl+D")
    qtbot.wait(100)
    SHOTS.mkdir(parents=True, exist_ok=True)
    dialog.find_edit.clear()
    dialog.browser.verticalScrollBar().setValue(0)
    qtbot.wait(100)
    assert dialog.grab().save(str(SHOTS / "user-guide.png"))
    dialog.close()


def test_the_guide_names_every_shortcut_command_and_option(window: MainWindow) -> None:
    guide = GUIDE.read_text(encoding="utf-8")
    for menu, action, keys in shortcut_rows(window):
        for key in keys.split(", "):
            assert key in guide, f"{menu} > {action}: {key} is not in the guide"
    parser = build_parser()
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    stack = list(commands.choices.items())
    while stack:
        name, sub = stack.pop()
        assert f"framelens {name}" in guide, f"the command {name} is not in the guide"
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                stack += [(f"{name} {n}", p) for n, p in action.choices.items()]
            for option in action.option_strings:
                if option.startswith("--") and option != "--help":
                    assert option in guide, f"framelens {name} {option} is not in the guide"
