"""Small helpers shared by the window's widgets: icons, time text, cheap label updates."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import (
    QIcon,
)
from PySide6.QtWidgets import (
    QLabel,
)

ICONS = Path(__file__).resolve().parent.parent / "resources" / "icons"


def icon(name: str) -> QIcon:
    return QIcon(str(ICONS / f"{name}.svg"))


def format_time(seconds: float) -> str:
    seconds = max(0.0, seconds)
    m, s = divmod(seconds, 60.0)
    h, m = divmod(int(m), 60)
    return f"{h}:{m:02d}:{s:04.1f}" if h else f"{m:02d}:{s:04.1f}"


def set_text(label: QLabel, text: str) -> None:
    """Change a label only when its text changes: every repaint recomposites the window."""
    if label.text() != text:
        label.setText(text)
