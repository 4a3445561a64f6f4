"""Application entry point: ``framelens gui`` (or ``python -m framelens.gui.app``)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from framelens.gui.common.gc_guard import collect_on_gui_thread
from framelens.gui.common.settings import APPLICATION, ORGANISATION
from framelens.gui.common.theme_style import ThemeStyle
from PySide6.QtCore import QCoreApplication, QDir, Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication

RESOURCES = Path(__file__).resolve().parents[1] / "resources"
STYLE_SHEET = RESOURCES / "style.qss"


def dark_palette() -> QPalette:
    """Colours for what the style sheet does not reach (native dialogs, plots' menus)."""
    p = QPalette()
    roles = {
        QPalette.ColorRole.Window: "#1b1e24",
        QPalette.ColorRole.WindowText: "#d7dce4",
        QPalette.ColorRole.Base: "#14161b",
        QPalette.ColorRole.AlternateBase: "#20242c",
        QPalette.ColorRole.Text: "#d7dce4",
        QPalette.ColorRole.Button: "#262b35",
        QPalette.ColorRole.ButtonText: "#d7dce4",
        QPalette.ColorRole.Highlight: "#2f5f52",
        QPalette.ColorRole.HighlightedText: "#ffffff",
        QPalette.ColorRole.ToolTipBase: "#20242c",
        QPalette.ColorRole.ToolTipText: "#d7dce4",
        QPalette.ColorRole.PlaceholderText: "#6b7382",
        QPalette.ColorRole.Link: "#4cc9a0",
    }
    for role, colour in roles.items():
        p.setColor(role, QColor(colour))
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text, QColor("#5f6776"))
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.ButtonText, QColor("#5f6776"))
    return p


def create_application(argv: list[str] | None = None) -> QApplication:
    """The QApplication with FrameLens's names, style and theme (reused if one exists)."""
    QCoreApplication.setOrganizationName(ORGANISATION)
    QCoreApplication.setApplicationName(APPLICATION)
    QCoreApplication.setAttribute(Qt.ApplicationAttribute.AA_ShareOpenGLContexts)
    app = QApplication.instance()
    if not isinstance(app, QApplication):
        app = QApplication(sys.argv if argv is None else [sys.argv[0], *argv])
    collect_on_gui_thread(app)  # Qt objects in cycles die on this thread, not a worker's
    apply_theme(app)
    return app


def apply_theme(app: QApplication) -> None:
    icons = str(RESOURCES / "icons")
    if icons not in QDir.searchPaths("icons"):
        QDir.addSearchPath("icons", icons)  # for url(icons:...) in the style sheet
    if app.property("framelensStyle") is not True:  # once: restyling repolishes every widget
        app.setStyle(ThemeStyle())  # Fusion, with standard icons readable on the dark theme
        app.setProperty("framelensStyle", True)
    app.setPalette(dark_palette())
    if STYLE_SHEET.is_file():
        app.setStyleSheet(STYLE_SHEET.read_text(encoding="utf-8"))


def main(argv: list[str] | None = None, source: str | None = None) -> int:
    """Run the desktop application; ``source`` (or the first argument) is opened at start."""
    app = create_application(argv)
    from framelens.gui.player.main_window import MainWindow  # after QApplication: widgets need it

    args = [a for a in (argv if argv is not None else sys.argv[1:]) if not a.startswith("-")]
    window = MainWindow()
    window.show()
    if source is None and args:
        source = args[0]
    if source:
        window.open_source(source)
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl+C in the terminal quits
    return int(app.exec())


if __name__ == "__main__":
    raise SystemExit(main())
