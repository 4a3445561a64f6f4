"""The application's style: Fusion, with standard icons drawn for the dark theme.

Fusion's own standard icons (a file dialog's back / up / new folder / view buttons, a
dialog's Close, Cancel, OK) are near-black pixmaps meant for a light window: on the
dark palette they are all but invisible. ``ThemeStyle`` answers those with FrameLens's
line icons (``resources/icons``) in the theme's light colour, and dims disabled icons
by opacity (Fusion greys them towards white, which on a dark window reads as enabled).
Every dialog built by Qt (QFileDialog, QDialogButtonBox, QMessageBox) asks the style,
so this one place covers them all.
"""

from __future__ import annotations

from framelens.gui.common.widgets import icon
from PySide6.QtCore import Qt
from PySide6.QtGui import QIcon, QImage, QPainter, QPixmap
from PySide6.QtWidgets import QProxyStyle, QStyle, QStyleFactory, QStyleOption, QWidget

__all__ = ["DISABLED_OPACITY", "THEMED_ICONS", "ThemeStyle"]

SP = QStyle.StandardPixmap

# standard pixmap -> icon in resources/icons
THEMED_ICONS: dict[QStyle.StandardPixmap, str] = {
    SP.SP_ArrowBack: "arrow-left",
    SP.SP_ArrowLeft: "arrow-left",
    SP.SP_FileDialogBack: "arrow-left",
    SP.SP_ArrowForward: "arrow-right",
    SP.SP_ArrowRight: "arrow-right",
    SP.SP_ArrowUp: "arrow-up",
    SP.SP_FileDialogToParent: "arrow-up",
    SP.SP_FileDialogNewFolder: "folder-new",
    SP.SP_FileDialogListView: "view-list",
    SP.SP_FileDialogDetailedView: "view-details",
    SP.SP_DialogCloseButton: "close",
    SP.SP_DialogCancelButton: "cancel",
    SP.SP_DialogNoButton: "cancel",
    SP.SP_DialogOkButton: "ok",
    SP.SP_DialogYesButton: "ok",
    SP.SP_DialogApplyButton: "ok",
    SP.SP_DialogOpenButton: "open",
    SP.SP_DialogSaveButton: "save",
    SP.SP_DialogDiscardButton: "discard",
    SP.SP_DialogResetButton: "reset",
    SP.SP_DialogHelpButton: "help",
}

DISABLED_OPACITY = 0.38


class ThemeStyle(QProxyStyle):
    """Fusion with the themed standard icons and dimmed disabled icons."""

    def __init__(self) -> None:
        super().__init__(QStyleFactory.create("Fusion"))
        self._icons: dict[str, QIcon] = {}

    def standardIcon(
        self,
        standardIcon: QStyle.StandardPixmap,
        option: QStyleOption | None = None,
        widget: QWidget | None = None,
    ) -> QIcon:
        name = THEMED_ICONS.get(standardIcon)
        if name is None:
            return super().standardIcon(standardIcon, option, widget)
        themed = self._icons.get(name)
        if themed is None:
            themed = self._icons[name] = icon(name)
        return themed

    def generatedIconPixmap(
        self, iconMode: QIcon.Mode, pixmap: QPixmap | QImage, opt: QStyleOption, /
    ) -> QPixmap:
        if iconMode != QIcon.Mode.Disabled:
            return super().generatedIconPixmap(iconMode, pixmap, opt)
        if isinstance(pixmap, QImage):
            pixmap = QPixmap.fromImage(pixmap)
        if pixmap.isNull():
            return pixmap
        dimmed = QPixmap(pixmap.size())
        dimmed.setDevicePixelRatio(pixmap.devicePixelRatio())
        dimmed.fill(Qt.GlobalColor.transparent)
        painter = QPainter(dimmed)
        painter.setOpacity(DISABLED_OPACITY)
        painter.drawPixmap(0, 0, pixmap)
        painter.end()
        return dimmed
