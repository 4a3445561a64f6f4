"""Help > Keyboard Shortcuts: every action of the window that has a shortcut, by menu."""

from __future__ import annotations

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QMainWindow,
    QMenu,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
)

__all__ = ["ShortcutsDialog", "shortcut_rows"]


def shortcut_rows(window: QMainWindow) -> list[tuple[str, str, str]]:
    """(menu, action, keys) for every menu action with a shortcut, in menu order."""
    rows: list[tuple[str, str, str]] = []
    seen: set[int] = set()
    for menu_action in window.menuBar().actions():
        menu = menu_action.menu()
        if not isinstance(menu, QMenu):
            continue
        title = menu_action.text().replace("&", "")
        stack = list(menu.actions())
        while stack:
            action = stack.pop(0)
            sub = action.menu()
            if isinstance(sub, QMenu):
                stack[:0] = list(sub.actions())
                continue
            keys = ", ".join(
                k.toString(QKeySequence.SequenceFormat.NativeText) for k in action.shortcuts()
            )
            if keys and id(action) not in seen and isinstance(action, QAction):
                seen.add(id(action))
                rows.append((title, action.text().replace("&", "").rstrip("…"), keys))
    return rows


class ShortcutsDialog(QDialog):
    """A table of the shortcuts, grouped by menu."""

    def __init__(self, window: QMainWindow) -> None:
        super().__init__(window)
        self.setWindowTitle("Keyboard Shortcuts")
        self.resize(520, 560)
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Action", "Keys"])
        self.tree.setRootIsDecorated(False)
        groups: dict[str, QTreeWidgetItem] = {}
        for menu, name, keys in shortcut_rows(window):
            group = groups.get(menu)
            if group is None:
                group = groups[menu] = QTreeWidgetItem(self.tree, [menu, ""])
                group.setFirstColumnSpanned(True)
                font = group.font(0)
                font.setBold(True)
                group.setFont(0, font)
            # "Left or ," rather than "Left, ,": a comma key reads as a key, not a separator
            QTreeWidgetItem(group, [name, " or ".join(keys.split(", "))])
        self.tree.expandAll()
        self.tree.header().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.tree.header().setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.tree)
        layout.addWidget(buttons)
