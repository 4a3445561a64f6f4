"""Rough edge 6: the Close and Cancel buttons' glyphs were nearly invisible on the dark
theme (Fusion's standard icons are near-black, or dark red, pixmaps for light windows).

The dialogs are opened as a user opens them (File > Export…, File > Open Stream…) and
each button's glyph is measured against the button it sits on.
"""

from __future__ import annotations

from typing import Any

import pytest
from framelens.gui.player.dialogs import OpenUrlDialog
from framelens.gui.player.main_window import MainWindow
from legibility import READABLE, glyph_contrast, save_shot, while_open
from PySide6.QtCore import QPoint
from PySide6.QtGui import QColor, QPainter, QPalette, QPixmap
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QPushButton
from pytestqt.qtbot import QtBot

pytestmark = pytest.mark.gui

SB = QDialogButtonBox.StandardButton


def button_contrast(button: QPushButton) -> float:
    background = button.palette().color(QPalette.ColorRole.Button)
    assert not button.icon().isNull(), f"{button.text()!r} has no icon"
    return glyph_contrast(button.icon(), background, button.iconSize().width())


def stacked(shots: list[QPixmap]) -> QPixmap:
    """The dialogs' grabs one under the other, each framed."""
    gap = 16
    width = max(s.width() for s in shots) + 2 * gap
    height = sum(s.height() for s in shots) + gap * (len(shots) + 1)
    out = QPixmap(width, height)
    out.fill(QColor("#12141a"))
    painter = QPainter(out)
    painter.setPen(QColor("#343a47"))
    y = gap
    for shot in shots:
        painter.drawPixmap(QPoint(gap, y), shot)
        painter.drawRect(gap - 1, y - 1, shot.width() + 1, shot.height() + 1)
        y += shot.height() + gap
    painter.end()
    return out


def test_close_and_cancel_glyphs_are_readable(
    window: MainWindow, qtbot: QtBot, sample: str
) -> None:
    window.open_source(sample)
    qtbot.waitUntil(lambda: window.results_shown >= 3, timeout=60_000)
    export = window.open_export_dialog()
    assert export is not None
    qtbot.waitExposed(export)
    close = export.buttons.button(SB.Close)
    assert close is not None and close.text().replace("&", "") == "Close"
    contrasts = {"Close": button_contrast(close)}
    shots = [export.grab()]
    export.reject()

    seen: dict[str, Any] = {}

    def inspect(dialog: OpenUrlDialog) -> None:
        box = dialog.findChild(QDialogButtonBox)
        assert box is not None
        for which in (SB.Open, SB.Cancel):
            button = box.button(which)
            assert button is not None, which
            seen[button.text().replace("&", "")] = button_contrast(button)
        seen["shot"] = dialog.grab()

    while_open(QDialog, inspect, seen)
    window.sources.choose_url()
    if "error" in seen:
        raise seen["error"]
    shots.append(seen.pop("shot"))
    contrasts.update(seen)
    save_shot(stacked(shots), "dialog-buttons.png")
    faint = {name: round(c, 2) for name, c in contrasts.items() if c < READABLE}
    assert not faint, f"button glyphs too faint on the dark theme (contrast): {faint}"
    assert set(contrasts) == {"Close", "Open", "Cancel"}
