"""The main window's precision switching: FP32 / FP16 / INT8 and the sensitivity dialog."""

from __future__ import annotations

from framelens.core.api import SensitivityReport, bundled_sample, tensorrt_kept_float
from framelens.gui.common.engine_dialog import EngineBuildDialog
from framelens.gui.compare.sensitivity import SensitivityDialog
from framelens.gui.player.main_window_parts import MainWindowParts
from PySide6.QtCore import Slot

__all__ = ["PrecisionSwitching"]


class PrecisionSwitching(MainWindowParts):
    """Toggle, menu and Ctrl+1/2/3 switch precision while playing; progress and failures."""

    def choose_precision(self, precision: str) -> None:
        """FP32 / FP16 / INT8 from the toggle, the menu or Ctrl+1/2/3; playback goes on."""
        self._asked_precision = precision
        self._restore_precision = None  # the user's choice now
        self.controller.set_precision(precision)
        self._sync_precision()

    def _sync_precision(self) -> None:
        """Toggle, menu and sensitivity action show the active variant (or the one coming)."""
        c, toggle = self.controller, self.panel.precision
        preparing = c.preparing
        if preparing is not None:
            if toggle.progress_row.isHidden():
                toggle.show_preparing(preparing)
        else:
            loading = self.state.loading_model and self.state.precision != c.precision
            toggle.show_active(c.precision, c.report, loading=loading)
        shown = preparing or c.precision
        self.precision_actions[shown].setChecked(True)
        self.sensitivity_action.setEnabled(c.precision == "int8" and c.report is not None)
        self._update_busy()

    @Slot(str, float)
    def _on_precision_progress(self, text: str, fraction: float) -> None:
        self.panel.precision.show_progress(text, fraction)
        self._update_busy(f"Preparing {text.split(':')[0]} {100 * fraction:.0f}%")

    @Slot(str, object)
    def _on_precision_changed(self, precision: str, report: SensitivityReport | None) -> None:
        if precision == self._asked_precision or precision == self._restore_precision:
            self.settings.precision = precision
            self._asked_precision = self._restore_precision = None
        self._sync_precision()
        if report is not None and self.sensitivity_dialog is not None:
            self.sensitivity_dialog.set_report(report, self.state.model)
        self.statusBar().showMessage(f"Running at {precision.upper()}", 3000)

    @Slot(str, str)
    def _on_precision_failed(self, precision: str, message: str) -> None:
        restoring = precision == self._restore_precision
        self._asked_precision = self._restore_precision = None
        self._sync_precision()
        self.panel.precision.show_failed()
        name = precision.upper()
        if message == "cancelled":
            self.statusBar().showMessage(
                f"{name} cancelled; still at {self.controller.precision.upper()}", 5000
            )
        elif restoring:
            self.statusBar().showMessage(
                f"{name} of the last session is not prepared for this video: "
                f"press {name} to calibrate it",
                10000,
            )
        else:
            self.show_error(message if name in message else f"{name}: {message}")

    def open_engine_builder(self) -> EngineBuildDialog:
        """Analysis > Build TensorRT Engine…: the current model preselected; INT8
        calibrates on the open video (else the bundled sample)."""
        settings = self.controller.settings
        model = settings.model.name if settings is not None else ""
        source = self.state.source
        calibration = source.uri if source is not None and source.kind == "file" else None
        dialog = EngineBuildDialog(
            sorted(self.controller.catalog()), model, calibration or bundled_sample(), self
        )
        dialog.show()
        return dialog

    def show_sensitivity(self) -> SensitivityDialog | None:
        """The INT8 variant's sensitivity per layer (non-modal)."""
        report = self.controller.report
        if report is None:
            self.statusBar().showMessage("Switch to INT8 to see its layer sensitivity", 5000)
            return None
        model = self.state.model or (
            self.controller.settings.model.name if self.controller.settings else ""
        )
        # where a GPU ran a TensorRT engine of this graph: the layers it kept in float
        settings = self.controller.settings
        by_trt = tensorrt_kept_float(report, settings.model.path) if settings else set()
        if self.sensitivity_dialog is None:
            self.sensitivity_dialog = SensitivityDialog(report, model, self)
        self.sensitivity_dialog.set_report(report, model, by_trt)
        self.sensitivity_dialog.show()
        self.sensitivity_dialog.raise_()
        return self.sensitivity_dialog
