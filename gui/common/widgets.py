"""Small helpers shared by the window's widgets: icons, time text, cheap label updates,
one-line labels that end in "…" where their text does not fit."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetrics, QIcon, QResizeEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

ICONS = Path(__file__).resolve().parents[2] / "resources" / "icons"


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


def elide(text: str, metrics: QFontMetrics, width: float) -> str:
    """``text`` cut to ``width`` pixels with "…" at the end (unchanged when it fits)."""
    return metrics.elidedText(text, Qt.TextElideMode.ElideRight, max(0, int(width)))


class ElidedLabel(QLabel):
    """A one-line plain-text label that ends in "…" where its width cuts the text; the
    whole text is then its tooltip. ``text()`` is the whole text, ``shown_text()`` what
    is shown; it never asks for the width of its text (a long one must not widen a
    panel)."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setWordWrap(False)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self._full = ""
        self.setText(text)

    def setText(self, text: str) -> None:
        self._full = text
        self._elide()

    def text(self) -> str:
        return self._full

    def shown_text(self) -> str:
        return super().text()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        shown = elide(self._full, self.fontMetrics(), self.contentsRect().width())
        if super().text() != shown:
            super().setText(shown)
        self.setToolTip(self._full if shown != self._full else "")
