"""The main window's model choice: the Analysis panel's model, device and backend, its
thresholds, classes and overlay, and ONNX import."""

from __future__ import annotations

from framelens.core.api import (
    FrameLensError,
    ModelSpec,
    OverlayStyle,
    error_message,
    produces_image,
)
from framelens.gui.common.file_dialogs import ONNX_FILTER, open_file
from framelens.gui.common.widgets import set_text
from framelens.gui.player.dialogs import ImportModelDialog
from framelens.gui.player.main_window_parts import WindowParts
from framelens.gui.player.model_panel import NO_MODEL, OVERLAYS
from PySide6.QtCore import QObject, Slot

__all__ = ["ModelChoice"]


class ModelChoice(QObject):
    """Load the model chosen in the panel (or imported), on the device and backend chosen,
    with the thresholds and overlay set there (each choice saved)."""

    def __init__(self, parts: WindowParts) -> None:
        super().__init__(parts.window)
        self.parts = parts
        self.key = ""  # the panel's entry of the model loaded: a catalogue name or a path
        p, c = parts.panel, parts.controller
        p.modelChosen.connect(self.choose_model)
        p.importRequested.connect(lambda: self.import_model())
        p.confChanged.connect(self._on_conf)
        p.iouChanged.connect(self._on_iou)
        p.classesChanged.connect(c.set_classes)
        p.overlayChanged.connect(self._on_overlay)
        p.deviceChosen.connect(self.choose_device)
        p.backendChosen.connect(self.choose_backend)
        c.modelChanged.connect(self._on_model)

    def restore(self) -> None:
        """The saved thresholds, overlay, device, backend and model (else the default)."""
        s, c, panel = self.parts.settings, self.parts.controller, self.parts.panel
        panel.set_thresholds(s.conf, s.iou)
        panel.set_overlay(OverlayStyle(**{n: s.overlay(n) for n in OVERLAYS}))
        try:
            catalog = c.catalog()
        except FrameLensError as exc:
            catalog = {}
            self.parts.show_error(error_message(exc))
        panel.set_models(catalog)
        device = s.device
        if not c.set_device(device):  # saved on a machine with a GPU, say
            device = s.device = "auto"
            c.set_device(device)
        panel.set_devices(c.device_choices(), device)
        backend = s.backend
        if backend != "onnxruntime" and not c.set_backend(backend):
            backend = s.backend = "onnxruntime"  # saved where TensorRT was installed, say
        panel.set_backends(c.backend_choices(), backend)
        wanted = s.model or c.default_model()
        layout, labels, task = s.model_options() if s.model else (None, None, None)
        if not self._load_model(wanted, layout, labels, task, quiet=True):
            self._load_model(c.default_model())
        c.configure(conf=s.conf, iou=s.iou, overlay=panel.overlay())

    def _load_model(
        self,
        key: str,
        layout: str | None = None,
        labels: str | None = None,
        task: str | None = None,
        quiet: bool = False,
    ) -> bool:
        c = self.parts.controller
        if key == NO_MODEL:  # for this session: the next start loads the last model
            self.key = key
            c.clear_model()
            return True
        try:
            spec = c.resolve(key, layout, labels, task)
        except FrameLensError as exc:
            if not quiet:
                self.parts.show_error(error_message(exc))
            return False
        self.key = key
        self.parts.settings.model = key
        self.parts.settings.set_model_options(layout, labels, task)
        c.use_model(spec)
        return True

    def choose_device(self, device: str) -> None:
        if self.parts.controller.set_device(device):
            self.parts.settings.device = device
        else:
            self.parts.panel.select_device(self.parts.settings.device)

    def choose_backend(self, backend: str) -> None:
        if self.parts.controller.set_backend(backend):
            self.parts.settings.backend = backend
        else:
            self.parts.panel.select_backend(self.parts.settings.backend)

    def choose_model(self, key: str) -> None:
        if key != self.key and not self._load_model(key):
            self._reselect_model()

    def import_model(self, path: str | None = None) -> None:
        """Ask for an ONNX file; ask for layout and labels when it is not recognised."""
        window, c = self.parts.window, self.parts.controller
        if path is None:
            path = open_file(window, "Import ONNX model", self.parts.settings.last_dir, ONNX_FILTER)
        if not path:
            self._reselect_model()
            return
        try:
            c.resolve(path)
        except FrameLensError as exc:
            dialog = ImportModelDialog(path, error_message(exc), window)
            while dialog.exec() == ImportModelDialog.DialogCode.Accepted:
                args = (dialog.model_path, dialog.layout_name, dialog.labels_file, dialog.task)
                try:
                    c.resolve(*args)
                except FrameLensError as again:
                    dialog.show_message(error_message(again))
                    continue
                self._load_model(*args)
                return
            self._reselect_model()
            return
        self._load_model(path)

    def _reselect_model(self) -> None:
        combo = self.parts.panel.model_combo
        i = combo.findData(self.key)
        if i >= 0:
            combo.setCurrentIndex(i)

    @Slot(object)
    def _on_model(self, spec: ModelSpec | None) -> None:
        panel, label = self.parts.panel, self.parts.status_bar.model
        if spec is None:
            panel.show_model(NO_MODEL, None)
            set_text(label, "No model")
            return
        panel.show_model(self.key or spec.name, spec)
        set_text(label, spec.name)
        if not produces_image(spec):  # back from super-resolution: the saved thresholds
            s = self.parts.settings
            self.parts.controller.configure(conf=s.conf, iou=s.iou, overlay=panel.overlay())

    # ---- thresholds and overlay, saved as they change --------------------------------

    def _on_conf(self, value: float) -> None:
        self.parts.settings.conf = value
        self.parts.controller.set_conf(value)

    def _on_iou(self, value: float) -> None:
        self.parts.settings.iou = value
        self.parts.controller.set_iou(value)

    def _on_overlay(self, style: OverlayStyle) -> None:
        for name in OVERLAYS:
            self.parts.settings.set_overlay(name, bool(getattr(style, name)))
        self.parts.controller.set_overlay(style)
