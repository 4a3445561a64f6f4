"""The main window's model-loading glue: model, device and backend choice, ONNX import."""

from __future__ import annotations

from framelens.core.api import FrameLensError, ModelSpec, error_message, produces_image
from framelens.gui.common.file_dialogs import ONNX_FILTER, open_file
from framelens.gui.common.widgets import set_text
from framelens.gui.player.dialogs import ImportModelDialog
from framelens.gui.player.main_window_parts import MainWindowParts
from framelens.gui.player.model_panel import NO_MODEL
from PySide6.QtCore import Slot

__all__ = ["ModelChoice"]


class ModelChoice(MainWindowParts):
    """Load the model chosen in the panel (or imported), on the device and backend chosen."""

    def _load_model(
        self,
        key: str,
        layout: str | None = None,
        labels: str | None = None,
        task: str | None = None,
        quiet: bool = False,
    ) -> bool:
        if key == NO_MODEL:  # for this session: the next start loads the last model
            self._model_key = key
            self.controller.clear_model()
            return True
        try:
            spec = self.controller.resolve(key, layout, labels, task)
        except FrameLensError as exc:
            if not quiet:
                self.show_error(error_message(exc))
            return False
        self._model_key = key
        self.settings.model = key
        self.settings.set_model_options(layout, labels, task)
        self.controller.use_model(spec)
        return True

    def choose_device(self, device: str) -> None:
        if self.controller.set_device(device):
            self.settings.device = device
        else:
            self.panel.select_device(self.settings.device)

    def choose_backend(self, backend: str) -> None:
        if self.controller.set_backend(backend):
            self.settings.backend = backend
        else:
            self.panel.select_backend(self.settings.backend)

    def choose_model(self, key: str) -> None:
        if key != self._model_key and not self._load_model(key):
            self._reselect_model()

    def import_model(self, path: str | None = None) -> None:
        """Ask for an ONNX file; ask for layout and labels when it is not recognised."""
        if path is None:
            path = open_file(self, "Import ONNX model", self.settings.last_dir, ONNX_FILTER)
        if not path:
            self._reselect_model()
            return
        try:
            self.controller.resolve(path)
        except FrameLensError as exc:
            dialog = ImportModelDialog(path, error_message(exc), self)
            while dialog.exec() == ImportModelDialog.DialogCode.Accepted:
                args = (dialog.model_path, dialog.layout_name, dialog.labels_file, dialog.task)
                try:
                    self.controller.resolve(*args)
                except FrameLensError as again:
                    dialog.show_message(error_message(again))
                    continue
                self._load_model(*args)
                return
            self._reselect_model()
            return
        self._load_model(path)

    def _reselect_model(self) -> None:
        i = self.panel.model_combo.findData(self._model_key)
        if i >= 0:
            self.panel.model_combo.setCurrentIndex(i)

    @Slot(object)
    def _on_model(self, spec: ModelSpec | None) -> None:
        if spec is None:
            self.panel.show_model(NO_MODEL, None)
            set_text(self.model_label, "No model")
            self._sync_superres(None)
            return
        self.panel.show_model(self._model_key or spec.name, spec)
        set_text(self.model_label, spec.name)
        if not produces_image(spec):  # back from super-resolution: the saved thresholds
            s = self.settings
            self.controller.configure(conf=s.conf, iou=s.iou, overlay=self.panel.overlay())
        self._sync_superres(spec)
