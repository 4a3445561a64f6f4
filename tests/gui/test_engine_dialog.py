"""Analysis > Build TensorRT Engine…: a real TensorRT-RTX build from the window (ahead of
time, no GPU needed), its progress, and a Cancel that stops the builder."""

from __future__ import annotations

from pathlib import Path

import pytest
from framelens.core.stages.engines.tensorrt_flavour import installed_flavours
from framelens.gui.common.engine_dialog import EngineBuildDialog
from framelens.gui.player.main_window import MainWindow
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

pytestmark = pytest.mark.skipif(
    not any(f.name == "tensorrt-rtx" for f in installed_flavours()),
    reason="tensorrt-rtx-cu13 is not installed",
)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FRAMELENS_CACHE_DIR", str(tmp_path / "cache"))


def test_the_window_builds_an_engine_with_progress(
    window: MainWindow, qtbot: QtBot, tmp_path: Path
) -> None:
    window.precision.engine_action.trigger()
    dialog = window.findChild(EngineBuildDialog)
    assert dialog is not None and dialog.isVisible()
    assert dialog.model_combo.count() >= 3  # the catalogue's models
    dialog.model_combo.setCurrentText("yunet")
    precisions = [dialog.precision_combo.itemText(i) for i in range(3)]
    assert precisions == ["FP32", "FP16", "INT8"]  # as the Analysis panel and menu write them
    dialog.precision_combo.setCurrentText("FP16")
    dialog.targets_edit.setText("sm_86")
    seen: list[int] = []
    dialog.job.progressed.connect(lambda _t, f: seen.append(round(1000 * f)))
    qtbot.mouseClick(dialog.build_button, Qt.MouseButton.LeftButton)
    assert dialog.cancel_button.isEnabled() and not dialog.build_button.isEnabled()
    qtbot.waitUntil(lambda: dialog.result_build is not None, timeout=120_000)
    built = dialog.result_build
    assert built is not None and built.model == "yunet" and built.precision == "fp16"
    assert built.built_for == "sm_86" and (built.entry / "engine.plan").stat().st_size > 100_000
    assert dialog.progress.value() == 1000 and seen and seen == sorted(seen)
    assert "yunet fp16: tensorrt-rtx" in dialog.status.text()
    assert dialog.build_button.isEnabled() and not dialog.cancel_button.isEnabled()
    dialog.grab().save(str(tmp_path / "engine-dialog.png"))
    dialog.close()


def test_cancel_stops_the_build_and_caches_nothing(window: MainWindow, qtbot: QtBot) -> None:
    from framelens.core.tools.engine_prebuild import engines_list

    dialog = window.precision.open_engine_builder()
    dialog.model_combo.setCurrentText("yolox-nano")
    dialog.targets_edit.setText("sm_86,sm_89,sm_120")

    def cancel_once_building(text: str, _fraction: float) -> None:
        # in the builder's thread, once TensorRT is building: what Cancel sets
        if text.startswith("engine: "):
            dialog.job.cancel.set()

    dialog.job.progressed.connect(cancel_once_building, Qt.ConnectionType.DirectConnection)
    dialog.start()
    qtbot.waitUntil(lambda: not dialog.building, timeout=120_000)
    qtbot.waitUntil(lambda: "Cancelled" in dialog.status.text(), timeout=5_000)
    assert dialog.result_build is None
    assert engines_list() == []
    dialog.close()
