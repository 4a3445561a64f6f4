"""Rough edge 13 (in part): Help > Keyboard Shortcuts lists every shortcut, by menu, as
the actions really have them."""

from __future__ import annotations

from pathlib import Path

from framelens.gui.common.shortcuts_dialog import ShortcutsDialog, shortcut_rows
from framelens.gui.player.main_window import MainWindow
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QTreeWidgetItem
from pytestqt.qtbot import QtBot


def test_help_lists_the_shortcuts_of_every_menu(
    window: MainWindow, qtbot: QtBot, tmp_path: Path
) -> None:
    rows = shortcut_rows(window)
    keys = {name: k for _menu, name, k in rows}
    assert keys["Play / Pause"] == "Space"
    assert keys["Measure PSNR of This Frame"] == "Ctrl+M"
    assert keys["Keyboard Shortcuts"] == "Ctrl+/"
    assert {menu for menu, _, _ in rows} >= {"File", "Playback", "View", "Analysis", "Help"}
    assert len(rows) == len({(m, n) for m, n, _ in rows})  # each once
    window.menus.shortcuts_action.trigger()
    dialog = window.findChild(ShortcutsDialog)
    assert dialog is not None and dialog.isVisible()
    shown: list[tuple[str, str]] = []
    for i in range(dialog.tree.topLevelItemCount()):
        group: QTreeWidgetItem = dialog.tree.topLevelItem(i)
        shown += [
            (group.child(j).text(0), group.child(j).text(1)) for j in range(group.childCount())
        ]
    assert sorted(shown) == sorted((n, " or ".join(k.split(", "))) for _m, n, k in rows)
    keys_shown = dict(shown)  # a second key joined by "or": the comma key stays readable
    assert keys_shown["Step Back"] == "Left or ,"
    assert keys_shown["Save Snapshot"] == "F12 or Ctrl+Shift+S"
    dialog.grab().save(str(tmp_path / "shortcuts.png"))
    dialog.close()


def test_no_key_is_bound_to_two_actions_of_the_window(window: MainWindow) -> None:
    """Qt fires neither of two actions sharing a key ("Ambiguous shortcut overload"): every
    key of the window's actions, menus and toolbars, belongs to one action."""
    owners: dict[str, dict[int, str]] = {}
    for action in window.findChildren(QAction):
        for key in action.shortcuts():
            owners.setdefault(key.toString(), {})[id(action)] = action.text()
    shared = {k: sorted(names.values()) for k, names in owners.items() if len(names) > 1}
    assert shared == {}
    rows = {name: k for _m, name, k in shortcut_rows(window)}
    assert rows["Open Several with Zones"] == "Ctrl+Alt+Shift+O"
    assert rows["Open Wall Layout"] == "Ctrl+Alt+W"
    assert rows["Real-time Pacing"] == "Ctrl+R"
