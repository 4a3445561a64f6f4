"""GUI test setup: a real X server (Xvfb via pytest-xvfb) and isolated settings.

QOpenGLWidget does not work with QT_QPA_PLATFORM=offscreen, so these tests use
the xcb platform on the Xvfb display that pytest-xvfb starts (Mesa llvmpipe).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ["QT_QPA_PLATFORM"] = "xcb"  # before any QApplication exists

from framelens.gui.app import apply_theme
from framelens.gui.common.gc_guard import collect_on_gui_thread
from framelens.gui.common.settings import Settings
from framelens.gui.player.main_window import MainWindow
from PySide6.QtCore import QCoreApplication, QEvent, QSettings, Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

QCoreApplication.setAttribute(Qt.ApplicationAttribute.AA_ShareOpenGLContexts)

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"

pytestmark = pytest.mark.gui


@pytest.fixture(scope="session")
def qapp_args() -> list[str]:
    return ["framelens-tests"]


@pytest.fixture(scope="session", autouse=True)
def _isolated_settings_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every QSettings of the session, even a default one, lands in a temporary folder
    (Qt's file dialog keeps its state in a native-format one: ~/.config/QtProject.conf)."""
    root = tmp_path_factory.mktemp("qsettings")
    QSettings.setDefaultFormat(QSettings.Format.IniFormat)
    for scope in (QSettings.Scope.UserScope, QSettings.Scope.SystemScope):
        for fmt in (QSettings.Format.IniFormat, QSettings.Format.NativeFormat):
            QSettings.setPath(fmt, scope, str(root))
    yield root


@pytest.fixture(autouse=True)
def _collected_on_the_gui_thread(qapp: QApplication) -> Iterator[None]:
    """As the application does (gui/app.py): cyclic garbage is collected on the GUI
    thread only, never by a worker thread that happens to allocate (gc_guard.py). Only
    while a GUI test runs: the tests after them spin no Qt event loop, so the collector's
    timer would never fire and nothing in a reference cycle would ever be freed (the
    players, sources and frames of every unit test after them)."""
    collector = collect_on_gui_thread(qapp)
    yield
    collector.stop()


@pytest.fixture(autouse=True)
def _themed(qapp: QApplication) -> None:
    QCoreApplication.setOrganizationName("FrameLensTests")
    QCoreApplication.setApplicationName("FrameLensTests")
    apply_theme(qapp)


@pytest.fixture
def settings_file(tmp_path: Path) -> Path:
    return tmp_path / "framelens.ini"


@pytest.fixture
def app_settings(settings_file: Path) -> Settings:
    return Settings(QSettings(str(settings_file), QSettings.Format.IniFormat))


@pytest.fixture
def window(qtbot: QtBot, app_settings: Settings) -> Iterator[MainWindow]:
    win = MainWindow(settings=app_settings)
    qtbot.addWidget(win)
    win.resize(1360, 860)
    win.show()
    qtbot.waitExposed(win)
    yield win
    win.close()  # stops the player threads (closeEvent -> controller.shutdown)
    # deleted now, on this thread, rather than whenever a later test's event loop runs
    win.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


@pytest.fixture
def sample() -> str:
    assert SAMPLE.is_file(), f"missing sample video {SAMPLE}"
    return str(SAMPLE)
