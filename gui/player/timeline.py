"""The timeline under the seek bar: marks at frames (the A-B loop's ends, and whatever
another feature marks: events, bookmarks), each kind in its own colour, placed where the
seek bar's handle stands on that frame."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QSlider, QStyle, QStyleOptionSlider, QWidget

__all__ = ["BOOKMARK", "LOOP", "Timeline"]

LOOP = "loop"  # the A-B loop's ends: labelled A and B, the span between shaded
BOOKMARK = "bookmark"
_COLOURS = {LOOP: "#f0b429", "event": "#e5534b", BOOKMARK: "#57ab5a"}
_OTHER = "#6cb6ff"


class Timeline(QWidget):
    """Marks under ``slider``: ``set_marks(frames, kind)`` replaces a kind's marks."""

    def __init__(self, slider: QSlider, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("timeline")
        self._slider = slider
        self._marks: dict[str, tuple[int, ...]] = {}
        self.setFixedHeight(14)
        slider.rangeChanged.connect(lambda _lo, _hi: self.update())

    def sizeHint(self) -> QSize:
        return QSize(100, 14)

    def set_marks(self, frames: Sequence[int], kind: str) -> None:
        """The frames (source indices) of one kind of mark; empty: none of that kind."""
        marks = tuple(sorted(int(f) for f in frames))
        if marks != self._marks.get(kind, ()):
            self._marks[kind] = marks
            self.update()

    def marks(self, kind: str) -> tuple[int, ...]:
        return self._marks.get(kind, ())

    def x_of(self, frame: int) -> int:
        """Where the seek bar's handle centre stands on ``frame``, in this widget."""
        s = self._slider
        opt = QStyleOptionSlider()
        s.initStyleOption(opt)
        style = s.style()
        groove = style.subControlRect(
            QStyle.ComplexControl.CC_Slider, opt, QStyle.SubControl.SC_SliderGroove, s
        )
        handle = style.subControlRect(
            QStyle.ComplexControl.CC_Slider, opt, QStyle.SubControl.SC_SliderHandle, s
        )
        span = max(1, groove.width() - handle.width())
        pos = QStyle.sliderPositionFromValue(s.minimum(), s.maximum(), frame, span)
        x_in_slider = groove.x() + pos + handle.width() // 2
        return self.mapFromGlobal(s.mapToGlobal(s.rect().topLeft())).x() + x_in_slider

    def paintEvent(self, event: QPaintEvent) -> None:
        if self._slider.maximum() <= self._slider.minimum() or not any(self._marks.values()):
            return
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        h = self.height()
        loop = self._marks.get(LOOP, ())
        colour = QColor(_COLOURS[LOOP])
        if len(loop) == 2:
            band = QColor(colour)
            band.setAlpha(70)
            a, b = self.x_of(loop[0]), self.x_of(loop[1])
            p.fillRect(QRect(a, 0, max(1, b - a), h // 2), band)
        for kind, frames in self._marks.items():
            if kind == LOOP:
                continue
            p.setPen(QPen(QColor(_COLOURS.get(kind, _OTHER)), 2))
            for f in frames:
                x = self.x_of(f)
                p.drawLine(x, 0, x, h - 1)
        font = p.font()
        font.setPixelSize(max(8, h - 4))
        font.setBold(True)
        p.setFont(font)
        for label, f in zip("AB", loop, strict=False):
            x = self.x_of(f)
            p.setPen(colour)
            p.drawLine(x, 0, x, h - 1)
            # outside the span: A left of its line, B right of its line, never on each other
            side = Qt.AlignmentFlag.AlignRight if label == "A" else Qt.AlignmentFlag.AlignLeft
            box = QRect(x - 14, 0, 12, h) if label == "A" else QRect(x + 2, 0, 12, h)
            p.drawText(box, side | Qt.AlignmentFlag.AlignVCenter, label)
        p.end()
