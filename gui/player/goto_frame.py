"""Playback > Go to Frame… (Ctrl+G): a frame number typed as the counter shows it."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QFormLayout, QLabel, QLineEdit, QWidget

__all__ = ["GoToFrameDialog", "parse_frame"]


def parse_frame(text: str, frame_count: int | None) -> int:
    """The 0-based index of frame ``text``, numbered 1 to ``frame_count`` as the counter
    shows them ("501/1394"); ValueError with one line saying what is wrong."""
    typed = text.strip().replace(",", "").replace("_", "")
    span = f"1 to {frame_count}" if frame_count else "1 or more"
    if not typed:
        raise ValueError(f"type a frame number ({span})")
    if not typed.isdigit():
        raise ValueError(f"{text.strip()!r} is not a frame number: type a whole number, {span}")
    number = int(typed)
    if number < 1 or (frame_count and number > frame_count):
        raise ValueError(f"there is no frame {number}: this video has frames {span}")
    return number - 1


class GoToFrameDialog(QDialog):
    """Asks for a frame number; a wrong one is explained here and the box stays open."""

    def __init__(
        self, frame_count: int | None, current: int, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Go to frame")
        self.frame_count = frame_count
        self.index = -1  # the frame chosen, 0-based, once accepted
        self.edit = QLineEdit(str(current + 1) if current >= 0 else "")
        self.edit.selectAll()
        span = f"1 to {frame_count}" if frame_count else "1 or more"
        self.edit.setPlaceholderText(span)
        self.edit.setToolTip(f"A frame number as the counter shows it ({span})")
        self.message = QLabel("")
        self.message.setObjectName("dialogError")
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message.hide()
        self.edit.textEdited.connect(lambda _text: self.message.hide())
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Go")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form = QFormLayout(self)
        form.addRow(f"Frame ({span})", self.edit)
        form.addRow(self.message)
        form.addRow(buttons)
        self.setMinimumWidth(360)

    def accept(self) -> None:
        try:
            self.index = parse_frame(self.edit.text(), self.frame_count)
        except ValueError as exc:
            self.message.setText(str(exc))
            self.message.show()
            self.adjustSize()  # room for the whole message
            self.edit.setFocus()
            self.edit.selectAll()
            return
        super().accept()
