"""The main window's status bar: a message area and one field per thing it reports.

QStatusBar draws a temporary message in whatever width its permanent widgets leave,
so with the source, model, backend and display path showing, "End of video" shrank to
"End of v…" beside "Preparing INT8 5%", and the last field was cut. Here every text
has a widget of its own in one row, and the row is fitted, not squeezed: when the bar
is too narrow for all of them, the least important field first shows its short form
(the reason in its tooltip), then steps aside, until the rest fit whole. A field never
overlaps another and is never cut; the message is elided only when nothing is left to
give way (its full text is then its tooltip).

Messages: whatever calls ``showMessage`` (code, menus' status tips) shows in the
message area. An error (``show_error``) outranks them: a tip or a notice shown over it
hides it only for its own time, and the error comes back until its time is up.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from framelens.gui.common.widgets import ElidedLabel
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QPainter, QPaintEvent, QResizeEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QStatusBar,
    QStyle,
    QStyleOption,
    QWidget,
)

__all__ = ["FIELD_SPACING", "MainStatusBar", "StatusField"]

FIELD_SPACING = 0  # fields carry their own padding and separator (style.qss)


def before_reason(text: str) -> str:
    """ "texture upload (OpenGL runs on llvmpipe, …)" -> "texture upload"."""
    return text.split(" (", 1)[0]


def widest_progress(text: str) -> str:
    """ "Preparing INT8 7%" -> "Preparing INT8 100%": the width a progress keeps while its
    digits change, so that neither it nor the fields beside it move as it counts."""
    return re.sub(r"\d+%$", "100%", text)


def compact_source(text: str) -> str:
    """ "768×432 · 10 fps · h264 · 1394 frames" -> "768×432 · 10 fps" (a state such as
    "reconnecting…" stays)."""
    parts = text.split(" · ")
    return " · ".join(parts[:2] + [p for p in parts[2:] if p.endswith("…")])


class StatusField(QLabel):
    """A label of the status bar. ``text()`` is what it says; what shows is fitted.

    ``priority``: the lower, the sooner it gives way. ``short``: a shorter form to show
    before hiding. ``reserve``: keeps its place while empty (the fps counter, so the
    other fields do not jump when playback pauses). ``required``: never hidden.
    ``widest``: the text whose width it takes for a text (``widest_progress``: a
    progress keeps the width of 100% as it counts, never laid out again digit by digit,
    never cut for the moment between a new digit and the layout).
    """

    def __init__(
        self,
        name: str,
        priority: int,
        *,
        short: Callable[[str], str] | None = None,
        reserve: bool = False,
        required: bool = False,
        widest: Callable[[str], str] | None = None,
    ) -> None:
        super().__init__()
        self.setObjectName(name)
        self.setProperty("statusField", True)
        self.priority = priority
        self.required = required
        self.reserve = reserve
        self._short = short
        self._widest = widest
        self._held_for: str | None = None  # the text whose width it holds (``widest``)
        self._text = ""
        self._tip = ""
        self.level = 0  # 0: full, 1: short, 2: hidden
        self.on_change: Callable[[], None] = lambda: None
        self.setTextFormat(Qt.TextFormat.PlainText)
        super().setVisible(False)

    # the logical text and tooltip; QLabel's own hold what is shown
    def text(self) -> str:
        return self._text

    def setText(self, text: str) -> None:
        if text != self._text:
            self._text = text
            self.on_change()

    def toolTip(self) -> str:
        return self._tip

    def setToolTip(self, tip: str) -> None:
        self._tip = tip
        self._show_tip()

    def shown_text(self) -> str:
        """What the label paints now ("" while it is hidden)."""
        return "" if self.isHidden() else QLabel.text(self)

    def forms(self) -> list[str]:
        """What it can show, longest first; [] when it has nothing to show."""
        if not self._text:
            return [""] if self.reserve else []
        forms = [self._text]
        if self._short is not None:
            short = self._short(self._text)
            if short and short != self._text:
                forms.append(short)
        return forms

    def width_of(self, text: str) -> int:
        """The width the label needs to show ``text`` whole (as ``widest`` has it)."""
        if self._widest is not None:
            text = self._widest(text)
        margins = self.contentsMargins()
        extra = margins.left() + margins.right() + 2 * self.margin()
        width = self.fontMetrics().horizontalAdvance(text) + extra + 2  # QLabel's own slack
        # (a field with ``widest`` holds its own minimum, _hold_width: not counted again)
        return width if self._widest is not None else max(width, self.minimumWidth())

    def show_form(self, level: int) -> None:
        forms = self.forms()
        self.level = level
        if level >= len(forms):
            super().setVisible(False)
            return
        if self._widest is not None:  # its width held whatever the digits say
            self._hold_width(forms[level])
        if QLabel.text(self) != forms[level]:
            super().setText(forms[level])
        self._show_tip()
        super().setVisible(True)

    def _hold_width(self, text: str) -> None:
        """Its minimum width: what QLabel asks to show ``widest`` of ``text`` (measured with
        that text set for the moment, nothing painted meanwhile)."""
        assert self._widest is not None
        widest = self._widest(text) if text else ""
        if widest != self._held_for:
            self._held_for = widest
            self.setMinimumWidth(0)  # QLabel's size hint is never less than its minimum
            super().setText(widest)
            self.setMinimumWidth(self.sizeHint().width() if widest else 0)

    def _show_tip(self) -> None:
        shortened = self.level > 0 and bool(self._text)
        tip = "\n".join(t for t in (self._text if shortened else "", self._tip) if t)
        super().setToolTip(tip)


class _Row(QWidget):
    """The message and the fields in one row; fitted again whenever its width changes."""

    def __init__(self, bar: MainStatusBar) -> None:
        super().__init__()
        self._bar = bar
        # the bar gives the row what is left beside the size grip; the row never asks more
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.layout_ = QHBoxLayout(self)
        self.layout_.setContentsMargins(0, 0, 0, 0)
        self.layout_.setSpacing(FIELD_SPACING)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._bar.fit()


class MainStatusBar(QStatusBar):
    """The message area (left, takes the rest) and the fields: job progress, source,
    model and precision, backend, display path, frame rate."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.row = _Row(self)
        self.message_label = ElidedLabel("")  # "…" at its own width, the rest in its tooltip
        self.message_label.setObjectName("statusMessage")
        self.row.layout_.addWidget(self.message_label, 1)
        self.job = self._field(  # "Preparing INT8 12%", as wide as at 100%
            "statusBusy", 60, required=True, widest=widest_progress
        )
        self.source = self._field("statusSource", 30, short=compact_source)
        self.model = self._field("statusModel", 50)
        self.backend = self._field("statusBackend", 20)
        self.display = self._field("statusDisplay", 10, short=before_reason)
        self.fps = self._field("statusFps", 40, reserve=True)
        self.fields = [self.job, self.source, self.model, self.backend, self.display, self.fps]
        self.addPermanentWidget(self.row, 1)
        self._message = ""  # the message as given; the label may show it elided
        self._error = ""  # the error shown last, until _error_until (time.monotonic)
        self._error_until = 0.0
        self.messageChanged.connect(self._on_message)

    def _field(
        self,
        name: str,
        priority: int,
        *,
        short: Callable[[str], str] | None = None,
        reserve: bool = False,
        required: bool = False,
        widest: Callable[[str], str] | None = None,
    ) -> StatusField:
        field = StatusField(
            name, priority, short=short, reserve=reserve, required=required, widest=widest
        )
        field.on_change = self.fit
        self.row.layout_.addWidget(field)
        return field

    # ---- messages ------------------------------------------------------------------

    def show_error(self, message: str, timeout_ms: int = 10_000) -> None:
        """An error: shown now, and again after anything shown over it, for its time."""
        self._error = message
        self._error_until = time.monotonic() + timeout_ms / 1000
        self.showMessage(message, timeout_ms)

    def clearMessage(self) -> None:
        """The app's own clear (a new source opened, say) dismisses an error too; Qt's
        (a message's time up, a status tip gone) goes through QStatusBar and does not."""
        self._error = ""
        super().clearMessage()

    def _on_message(self, message: str) -> None:
        if not message and self._error:
            left_ms = round(1000 * (self._error_until - time.monotonic()))
            if left_ms > 100:  # what covered the error is gone: the error again
                # with the bar as context: a bar deleted meanwhile cancels it
                QTimer.singleShot(0, self, lambda: self._restore_error(left_ms))
        if message != self._message:
            self._message = message
            self.fit()

    def _restore_error(self, left_ms: int) -> None:
        if self._error and not self.currentMessage():
            self.showMessage(self._error, left_ms)

    # ---- fitting -------------------------------------------------------------------

    def fit(self) -> None:
        """Show each field whole (or its short form, or not at all) so that the message
        and the fields fit the row: the least important field gives way first."""
        available = self.row.width()
        message = self._message
        message_width = self._message_width(message) if message else 0
        levels = {field: 0 for field in self.fields}

        def needed() -> int:
            widths = [message_width] if message else []
            for field in self.fields:
                forms = field.forms()
                if levels[field] < len(forms):
                    widths.append(field.width_of(forms[levels[field]]))
            return sum(widths) + FIELD_SPACING * max(0, len(widths) - 1)

        while needed() > available:
            yielding = [
                f
                for f in self.fields
                if not f.required and levels[f] < len(f.forms()) and f.forms() != [""]
            ]
            if not yielding:
                break
            field = min(yielding, key=lambda f: f.priority)
            levels[field] += 1
        for field in self.fields:
            field.show_form(levels[field])
        self._show_message(message)

    def _message_width(self, text: str) -> int:
        margins = self.message_label.contentsMargins()
        return (
            self.message_label.fontMetrics().horizontalAdvance(text)
            + margins.left()
            + margins.right()
            + 2
        )

    def _show_message(self, message: str) -> None:
        """The message in what the fields leave: the label ends it in "…" at the width
        the row gives it, its style's padding counted (the whole of it in its tooltip)."""
        self.message_label.setText(message)

    def paintEvent(self, event: QPaintEvent) -> None:
        """The panel only: the message is the message label's to paint, not QStatusBar's
        (which would draw it again, clipped, under the fields)."""
        painter = QPainter(self)
        option = QStyleOption()
        option.initFrom(self)
        self.style().drawPrimitive(QStyle.PrimitiveElement.PE_PanelStatusBar, option, painter, self)
