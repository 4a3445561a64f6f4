"""The main window's precision switching: FP32 / FP16 / INT8 from the panel's toggle,
Analysis > Run at … (Ctrl+1/2/3), the sensitivity dialog, the TensorRT engine builder,
and what the status bar says while a variant is prepared or its engine loads."""

from __future__ import annotations

from framelens.core.api import (
    PlayerState,
    SensitivityReport,
    bundled_sample,
    tensorrt_kept_float,
)
from framelens.gui.common.engine_dialog import EngineBuildDialog
from framelens.gui.common.widgets import set_text
from framelens.gui.compare.sensitivity import SensitivityDialog
from framelens.gui.player.main_window_parts import WindowParts
from framelens.gui.player.precision_toggle import PRECISION_NAMES
from PySide6.QtCore import QObject, Slot
from PySide6.QtGui import QAction, QActionGroup

__all__ = ["PrecisionSwitching"]


class PrecisionSwitching(QObject):
    """Toggle, menu and Ctrl+1/2/3 switch precision while playing; progress and failures."""

    def __init__(self, parts: WindowParts) -> None:
        super().__init__(parts.window)
        self.parts = parts
        self._state = PlayerState()
        self.sensitivity_dialog: SensitivityDialog | None = None
        a = parts.action
        self.group = QActionGroup(self)
        self.group.setExclusive(True)
        self.actions: dict[str, QAction] = {}
        for i, name in enumerate(PRECISION_NAMES):
            action = a(
                f"Run at {name.upper()}",
                lambda _checked=False, p=name: self.choose_precision(p),
                f"Ctrl+{i + 1}",
                tip=f"Switch the model to its {name.upper()} variant while playing",
            )
            action.setCheckable(True)
            self.group.addAction(action)
            self.actions[name] = action
        self.actions["fp32"].setChecked(True)
        self.sensitivity_action = a(
            "INT8 Layer &Sensitivity…",
            self.show_sensitivity,
            tip="Sensitivity per layer of the active INT8 variant, and the layers kept in float",
        )
        self.sensitivity_action.setEnabled(False)
        self.engine_action = a(
            "Build TensorRT &Engine…",
            self.open_engine_builder,
            tip="Build a TensorRT plan of a model before playing (ahead of time with TensorRT-RTX)",
        )
        c, toggle = parts.controller, parts.panel.precision
        toggle.precisionChosen.connect(self.choose_precision)
        toggle.cancelRequested.connect(c.cancel_precision)
        toggle.sensitivityRequested.connect(self.show_sensitivity)
        c.precisionProgress.connect(self._on_progress)
        c.precisionChanged.connect(self._on_changed)
        c.precisionFailed.connect(self._on_failed)
        c.stateChanged.connect(self._on_state)

    def restore(self) -> None:
        """The last session's precision: FP16 at once, INT8 once a video opens whose
        calibration is cached (PlaybackChoice.restore_precision)."""
        self.parts.controller.restore_precision(self.parts.settings.precision)
        self.sync()

    def source_opening(self, _spec: str) -> None:
        """A video is opening: the last session's INT8 may be being looked up for it."""
        if self.parts.controller.preparing is not None:
            self.sync()

    def choose_precision(self, precision: str) -> None:
        """FP32 / FP16 / INT8 from the toggle, the menu or Ctrl+1/2/3; playback goes on."""
        self.parts.controller.choose_precision(precision)
        self.sync()

    def sync(self) -> None:
        """Toggle, menu and sensitivity action show the active variant (or the one coming)."""
        c, toggle, state = self.parts.controller, self.parts.panel.precision, self._state
        preparing = c.preparing
        if preparing is not None:
            if toggle.progress_row.isHidden():
                toggle.show_preparing(preparing)
        else:
            loading = state.loading_model and state.precision != c.precision
            toggle.show_active(c.precision, c.report, loading=loading)
        shown = preparing or c.precision
        self.actions[shown].setChecked(True)
        self.sensitivity_action.setEnabled(c.precision == "int8" and c.report is not None)
        self.show_busy()

    @Slot(object)
    def _on_state(self, state: PlayerState) -> None:
        previous, self._state = self._state, state
        if (state.precision, state.loading_model) != (previous.precision, previous.loading_model):
            self.sync()
        else:
            self.show_busy()

    def show_busy(self, progress: str = "") -> None:
        """The status bar's job field (loading a model, preparing a variant) and the model
        field with the precision that runs."""
        c, bar, state = self.parts.controller, self.parts.status_bar, self._state
        if state.loading_model:
            text = "Loading model…"
        elif c.preparing is not None:
            coming = f"Preparing {c.preparing.upper()}"
            if not progress and bar.job.text().startswith(f"{coming} "):
                progress = bar.job.text()  # its last percentage, until the next
            text = progress or f"{coming}…"
        else:
            text = ""
        set_text(bar.job, text)  # shown while it says something
        if c.settings is None:
            # no model chosen: a state the player sent before it let the model go still
            # names it, and must not write it back over "No model"
            set_text(bar.model, "No model")
        elif state.model:
            set_text(bar.model, self._model_text(state))

    def _model_text(self, state: PlayerState) -> str:
        """The model and the precision that runs; while another is prepared (a restored
        INT8 calibrating, say) or its engine loads, that one too, as the panel says."""
        running = state.precision.upper()
        preparing = self.parts.controller.preparing
        # prepared, the player still building its engine: the panel says INT8 then
        coming = preparing or self.parts.controller.precision
        if running and coming.upper() != running:
            doing = "preparing" if preparing is not None else "loading"
            return f"{state.model} · {running} → {coming.upper()} ({doing})"
        return f"{state.model} · {running}"

    @Slot(str, float)
    def _on_progress(self, text: str, fraction: float) -> None:
        self.parts.panel.precision.show_progress(text, fraction)
        self.show_busy(f"Preparing {text.split(':')[0]} {100 * fraction:.0f}%")

    @Slot(str, object, bool)
    def _on_changed(self, precision: str, report: SensitivityReport | None, chosen: bool) -> None:
        if chosen:  # the user's choice (or the last session's) is active: remembered
            self.parts.settings.precision = precision
        self.sync()
        if report is not None and self.sensitivity_dialog is not None:
            self.sensitivity_dialog.set_report(report, self._state.model)
        self.parts.show_message(f"Running at {precision.upper()}", 3000)

    @Slot(str, str, bool)
    def _on_failed(self, precision: str, message: str, restoring: bool) -> None:
        self.sync()
        self.parts.panel.precision.show_failed()
        name = precision.upper()
        if message == "cancelled":
            still = self.parts.controller.precision.upper()
            self.parts.show_message(f"{name} cancelled; still at {still}", 5000)
        elif restoring:
            self.parts.show_message(
                f"{name} of the last session is not prepared for this video: "
                f"press {name} to calibrate it",
                10000,
            )
        else:
            self.parts.show_error(message if name in message else f"{name}: {message}")

    def open_engine_builder(self) -> EngineBuildDialog:
        """Analysis > Build TensorRT Engine…: the current model preselected; INT8
        calibrates on the open video (else the bundled sample)."""
        c = self.parts.controller
        model = c.settings.model.name if c.settings is not None else ""
        source = c.state.source
        calibration = source.uri if source is not None and source.kind == "file" else None
        dialog = EngineBuildDialog(
            sorted(c.catalog()), model, calibration or bundled_sample(), self.parts.window
        )
        dialog.show()
        return dialog

    def show_sensitivity(self) -> SensitivityDialog | None:
        """The INT8 variant's sensitivity per layer (non-modal)."""
        c = self.parts.controller
        report = c.report
        if report is None:
            self.parts.show_message("Switch to INT8 to see its layer sensitivity", 5000)
            return None
        settings = c.settings
        model = self._state.model or (settings.model.name if settings else "")
        # where a GPU ran a TensorRT engine of this graph: the layers it kept in float
        by_trt = tensorrt_kept_float(report, settings.model.path) if settings else set()
        if self.sensitivity_dialog is None:
            self.sensitivity_dialog = SensitivityDialog(report, model, self.parts.window)
        self.sensitivity_dialog.set_report(report, model, by_trt)
        self.sensitivity_dialog.show()
        self.sensitivity_dialog.raise_()
        return self.sensitivity_dialog

    def close(self) -> None:
        if self.sensitivity_dialog is not None:
            self.sensitivity_dialog.close()
