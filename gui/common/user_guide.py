"""Help > User Guide: docs/user-guide.md, rendered from the copy shipped in the package.

The guide is written in docs/user-guide.md and shipped as
``framelens/resources/user-guide.md`` (resources/user-guide.md in the checkout, which a
test holds equal to docs/), so an installed FrameLens has it without the checkout.
QTextBrowser renders its Markdown; Find (Ctrl+F) searches it.
"""

from __future__ import annotations

from importlib.resources import files

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence, QShortcut, QTextDocument
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

__all__ = ["GUIDE_RESOURCE", "UserGuideDialog", "guide_markdown"]

GUIDE_RESOURCE = "user-guide.md"


def guide_markdown() -> str:
    """The user guide's Markdown, as shipped in ``framelens.resources``."""
    return (files("framelens.resources") / GUIDE_RESOURCE).read_text(encoding="utf-8")


class UserGuideDialog(QDialog):
    """The guide in a browser with a find box; links to the web open outside."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("FrameLens User Guide")
        self.setObjectName("userGuide")
        self.resize(820, 760)
        self.browser = QTextBrowser()
        self.browser.setObjectName("userGuideText")
        self.browser.setOpenExternalLinks(True)
        self.browser.document().setDocumentMargin(16)
        self.browser.setMarkdown(guide_markdown())
        self.find_edit = QLineEdit()
        self.find_edit.setPlaceholderText("Find in the guide (Enter: next)")
        self.find_edit.setClearButtonEnabled(True)
        self.find_edit.returnPressed.connect(self.find_next)
        self.find_edit.textChanged.connect(lambda _text: self.find_next(from_top=True))
        self.find_status = QLabel("")
        self.find_status.setObjectName("plotSummary")
        QShortcut(QKeySequence.StandardKey.Find, self, self.find_edit.setFocus)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        find_row = QHBoxLayout()
        find_row.addWidget(self.find_edit, 1)
        find_row.addWidget(self.find_status)
        layout = QVBoxLayout(self)
        layout.addLayout(find_row)
        layout.addWidget(self.browser, 1)
        layout.addWidget(buttons)
        self.browser.setFocus(Qt.FocusReason.OtherFocusReason)

    def find_next(self, from_top: bool = False) -> bool:
        """Select the next place the find text occurs (from the top, then wrapping)."""
        text = self.find_edit.text()
        if not text:
            cursor = self.browser.textCursor()
            cursor.clearSelection()  # nothing looked for: nothing marked
            self.browser.setTextCursor(cursor)
            self.find_status.setText("")
            return False
        if from_top:
            self.browser.moveCursor(self.browser.textCursor().MoveOperation.Start)
        found = self.browser.find(text)
        if not found:  # wrap around once
            self.browser.moveCursor(self.browser.textCursor().MoveOperation.Start)
            found = self.browser.find(text)
        self.find_status.setText("" if found else "not found")
        return bool(found)

    def headings(self) -> list[str]:
        """The guide's section titles, as rendered (for tests and a quick look)."""
        doc: QTextDocument = self.browser.document()
        titles = []
        block = doc.begin()
        while block.isValid():
            if block.blockFormat().headingLevel() > 0:
                titles.append(block.text())
            block = block.next()
        return titles
