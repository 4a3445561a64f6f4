"""Rough edge 5: the file dialogs' toolbar buttons were blank squares on the dark theme
and their columns cut ("44....KiB", "MP...eo").

Each dialog is opened the way a user opens it (File > Open, Open Several, Import ONNX,
Export's Browse) and looked at while it is up: every toolbar button paints a glyph that
stands out from its background, and the size, type and date columns are as wide as
what they show.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import SAMPLE
from framelens.gui.player.dialogs import ExportDialog
from framelens.gui.player.main_window import MainWindow
from legibility import READABLE, glyph_contrast, painted_glyph_pixels, save_shot, while_open
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QFileDialog, QToolButton, QTreeView
from pytestqt.qtbot import QtBot

pytestmark = pytest.mark.gui

TOOLBAR = (
    "backButton",
    "forwardButton",
    "toParentButton",
    "newFolderButton",
    "listModeButton",
    "detailModeButton",
)
# sizes whose text is long in every locale: "44.80 KiB", "1023.44 KiB", "3.14 MiB"
FILES = {"entrance-cam2.mp4": 45_875, "parking-night.mp4": 1_048_001, "yolox-own.onnx": 3_290_000}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    videos = tmp_path / "Videos"  # apart from the test's settings file
    videos.mkdir()
    for name, size in FILES.items():
        (videos / name).write_bytes(b"\0" * size)
    (videos / "exports").mkdir()
    return videos


def browse_export_video(window: MainWindow) -> None:
    dialog = ExportDialog(window.controller, str(SAMPLE), 100, 0, window)
    dialog._browse_video()  # File > Export…'s Browse: a save dialog
    dialog.deleteLater()


OPENERS: dict[str, Callable[[MainWindow], object]] = {
    "open": lambda w: w.sources.choose_file(),
    "open_several": lambda w: w.wall.choose_several(),
    "import_onnx": lambda w: w.import_model(),
    "export_video": browse_export_video,
}


@pytest.mark.parametrize("opener", sorted(OPENERS))
def test_file_dialog_icons_readable_and_columns_fit(
    window: MainWindow, qtbot: QtBot, folder: Path, opener: str
) -> None:
    window.settings.last_dir = str(folder)
    seen: dict[str, Any] = {}

    def inspect(dialog: QFileDialog) -> None:
        dialog.setNameFilter("All files (*)")  # every file of the folder, whatever the filter
        dialog.setDirectory(str(folder))
        tree = dialog.findChild(QTreeView, "treeView")
        assert tree is not None and tree.isVisible(), "no detail view"
        model = tree.model()

        def loaded() -> bool:
            root = tree.rootIndex()
            rows = [model.index(r, 0, root) for r in range(model.rowCount(root))]
            names = {i.data() for i in rows}
            sizes = [model.index(i.row(), 1, root).data() for i in rows if i.data() in FILES]
            return names >= {*FILES, "exports"} and all(sizes)

        qtbot.waitUntil(loaded, timeout=10_000)
        qtbot.wait(200)  # sizes, types and dates arrive from Qt's file info thread
        header = tree.header()
        seen["columns"] = {
            model.headerData(c, header.orientation()): (
                header.sectionSize(c),
                max(tree.sizeHintForColumn(c), header.sectionSizeHint(c)),
            )
            for c in range(1, header.count())
            if not header.isSectionHidden(c)
        }
        buttons: dict[str, QToolButton] = {}
        for name in TOOLBAR:
            button = dialog.findChild(QToolButton, name)
            assert button is not None, name
            buttons[name] = button
        background = dialog.palette().color(QPalette.ColorRole.Window)
        seen["contrast"] = {n: glyph_contrast(b.icon(), background) for n, b in buttons.items()}
        seen["painted"] = {n: painted_glyph_pixels(b) for n, b in buttons.items() if b.isEnabled()}
        seen["null"] = [n for n, b in buttons.items() if b.icon().isNull()]
        if opener == "open":
            save_shot(dialog.grab(), "file-dialog.png")

    while_open(QFileDialog, inspect, seen)
    OPENERS[opener](window)
    if "error" in seen:
        raise seen["error"]
    assert not seen["null"], f"toolbar buttons without an icon: {seen['null']}"
    faint = {n: round(c, 2) for n, c in seen["contrast"].items() if c < READABLE}
    assert not faint, f"toolbar glyphs too faint on the dark theme (contrast): {faint}"
    blank = {n: p for n, p in seen["painted"].items() if p < 12}
    assert not blank, f"toolbar buttons painted blank (glyph pixels): {blank}"
    cut = {n: wh for n, wh in seen["columns"].items() if wh[0] < wh[1]}
    assert not cut, f"columns narrower than their text (width, needed): {cut}"
