"""The model panel: model choice, thresholds, class filter and overlay toggles."""

from __future__ import annotations

from framelens.core.api import DeviceChoice, ModelSpec, OverlayStyle, produces_image
from framelens.gui.player.precision_toggle import PrecisionToggle
from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QScrollArea,
    QSlider,
    QVBoxLayout,
    QWidget,
)

OVERLAYS = ("boxes", "labels", "scores", "landmarks", "trails", "heatmap")
IMPORT_ITEM = "Import ONNX…"
NO_MODEL = ""  # the "No model" item's key: frames played as decoded, nothing drawn
NO_MODEL_ITEM = "No model"
SR_HEADER = "Super-resolution"


class ModelPanel(QWidget):
    """Model choice, thresholds, class filter and overlay toggles."""

    modelChosen = Signal(str)  # catalogue name or path
    importRequested = Signal()
    confChanged = Signal(float)
    iouChanged = Signal(float)
    classesChanged = Signal(object)  # frozenset[int] | None
    overlayChanged = Signal(object)  # OverlayStyle
    deviceChosen = Signal(str)  # "auto" | "cpu" | "cuda:N"
    backendChosen = Signal(str)  # "onnxruntime" | "tensorrt"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model_combo = QComboBox()
        self.model_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.model_combo.activated.connect(self._on_model_activated)
        self.device_combo = QComboBox()
        self.device_combo.setToolTip("Where inference runs; Auto takes CUDA when it is usable")
        self.device_combo.activated.connect(
            lambda i: self.deviceChosen.emit(str(self.device_combo.itemData(i)))
        )
        self.backend_combo = QComboBox()
        self.backend_combo.setToolTip("What runs the model: ONNX Runtime, or TensorRT engines")
        self.backend_combo.activated.connect(
            lambda i: self.backendChosen.emit(str(self.backend_combo.itemData(i)))
        )
        self.precision = PrecisionToggle()  # FP32 | FP16 | INT8, its progress and state
        self.model_info = QLabel("")
        self.model_info.setWordWrap(True)
        self.model_info.setObjectName("plotSummary")
        self.conf_slider, self.conf_label = self._threshold("Minimum score to keep a box")
        self.iou_slider, self.iou_label = self._threshold("Overlap above which NMS merges boxes")
        self.conf_slider.valueChanged.connect(lambda v: self._on_threshold(v, "conf"))
        self.iou_slider.valueChanged.connect(lambda v: self._on_threshold(v, "iou"))

        self.search = QLineEdit()
        self.search.setPlaceholderText("Search classes…")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self._filter_list)
        self.class_list = QListWidget()
        self.class_list.setMinimumHeight(90)
        self.class_list.itemChanged.connect(lambda _item: self._emit_classes())
        all_button, none_button = QPushButton("All"), QPushButton("None")
        all_button.clicked.connect(lambda: self._check_all(True))
        none_button.clicked.connect(lambda: self._check_all(False))
        self.class_count = QLabel("")
        self.class_count.setObjectName("plotSummary")

        self.overlay_checks = {name: QCheckBox(name.capitalize()) for name in OVERLAYS}
        self.overlay_checks["trails"].setToolTip(
            "Each tracked object's path: its last centre points (Tracking > Show Trails)"
        )
        self.overlay_checks["heatmap"].setToolTip(
            "Where tracked objects have been (Tracking > Show Heatmap)"
        )
        for check in self.overlay_checks.values():
            check.setChecked(True)
            check.toggled.connect(lambda _on: self.overlayChanged.emit(self.overlay()))

        model_box = QGroupBox("Model")
        ml = QVBoxLayout(model_box)
        ml.addWidget(self.model_combo)
        engine_grid = QGridLayout()
        engine_grid.addWidget(QLabel("Device"), 0, 0)
        engine_grid.addWidget(self.device_combo, 0, 1)
        engine_grid.addWidget(QLabel("Backend"), 1, 0)
        engine_grid.addWidget(self.backend_combo, 1, 1)
        engine_grid.setColumnStretch(1, 1)
        ml.addLayout(engine_grid)
        ml.addWidget(self.precision)
        ml.addWidget(self.model_info)
        thr_box = QGroupBox("Thresholds")
        tl = QGridLayout(thr_box)
        for row, (name, slider, label) in enumerate(
            (
                ("Confidence", self.conf_slider, self.conf_label),
                ("IoU (NMS)", self.iou_slider, self.iou_label),
            )
        ):
            tl.addWidget(QLabel(name), row, 0)
            tl.addWidget(slider, row, 1)
            tl.addWidget(label, row, 2)
        cls_box = QGroupBox("Classes")
        cl = QVBoxLayout(cls_box)
        cl.addWidget(self.search)
        cl.addWidget(self.class_list, 1)
        buttons = QHBoxLayout()
        buttons.addWidget(all_button)
        buttons.addWidget(none_button)
        buttons.addStretch(1)
        buttons.addWidget(self.class_count)
        cl.addLayout(buttons)
        ov_box = QGroupBox("Overlay")
        ol = QGridLayout(ov_box)
        for i, check in enumerate(self.overlay_checks.values()):
            ol.addWidget(check, i // 2, i % 2)

        # what only detectors have: hidden while a super-resolution model is loaded
        self.detection_boxes = (thr_box, cls_box, ov_box)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(6, 6, 6, 6)
        self._layout.addWidget(model_box)
        self._layout.addWidget(thr_box)
        self._layout.addWidget(cls_box, 1)
        self._layout.addWidget(ov_box)

    def add_section(self, widget: QWidget, stretch: int = 0) -> None:
        """Another group under the panel's own (the window's super-resolution sections)."""
        self._layout.addWidget(widget, stretch)

    def show_task(self, superres: bool) -> None:
        """Thresholds, classes and overlay only for detectors."""
        for box in self.detection_boxes:
            box.setVisible(not superres)

    def set_devices(self, choices: list[DeviceChoice], current: str) -> None:
        """Fill the device menu; devices that cannot be used are shown greyed with the reason."""
        self._fill(self.device_combo, choices, current)

    def set_backends(self, choices: list[DeviceChoice], current: str) -> None:
        """Fill the backend menu; TensorRT is greyed, with the reason, where it cannot run."""
        self._fill(self.backend_combo, choices, current)

    @staticmethod
    def _fill(combo: QComboBox, choices: list[DeviceChoice], current: str) -> None:
        combo.blockSignals(True)
        combo.clear()
        model = combo.model()
        for choice in choices:
            label = choice.label if choice.unavailable is None else f"{choice.label} (unavailable)"
            combo.addItem(label, choice.id)
            row = combo.count() - 1
            combo.setItemData(row, choice.unavailable or choice.label, Qt.ItemDataRole.ToolTipRole)
            if choice.unavailable is not None:
                item = model.item(row)  # type: ignore[attr-defined]
                item.setEnabled(False)
        i = combo.findData(current)
        combo.setCurrentIndex(i if i >= 0 else 0)
        combo.blockSignals(False)

    def select_device(self, device: str) -> None:
        self._select(self.device_combo, device)

    def select_backend(self, backend: str) -> None:
        self._select(self.backend_combo, backend)

    @staticmethod
    def _select(combo: QComboBox, value: str) -> None:
        i = combo.findData(value)
        if i >= 0:
            combo.blockSignals(True)
            combo.setCurrentIndex(i)
            combo.blockSignals(False)

    @staticmethod
    def _threshold(tip: str) -> tuple[QSlider, QLabel]:
        slider = QSlider(Qt.Orientation.Horizontal)
        slider.setRange(1, 99)
        slider.setToolTip(tip)
        label = QLabel("")
        label.setObjectName("valueLabel")
        return slider, label

    # ---- model ---------------------------------------------------------------

    def set_models(self, catalog: dict[str, ModelSpec]) -> None:
        """Detectors first, then the super-resolution models under their own heading."""
        self.model_combo.blockSignals(True)
        self.model_combo.clear()
        self.model_combo.addItem(NO_MODEL_ITEM, NO_MODEL)
        self.model_combo.setItemData(
            0, "Play the video as it is, nothing detected or drawn", Qt.ItemDataRole.ToolTipRole
        )
        self.model_combo.insertSeparator(1)
        detectors = {k: v for k, v in catalog.items() if not produces_image(v)}
        upscalers = {k: v for k, v in catalog.items() if produces_image(v)}
        for name, spec in detectors.items():
            self._add_model(name, name, spec)
        if upscalers:
            self.model_combo.insertSeparator(self.model_combo.count())
            self.model_combo.addItem(SR_HEADER, None)
            header = self.model_combo.model().item(self.model_combo.count() - 1)  # type: ignore[attr-defined]
            header.setEnabled(False)  # a heading, not a choice
            for name, spec in upscalers.items():
                self._add_model(f"  {name}  (×{spec.scale})", name, spec)
        self.model_combo.insertSeparator(self.model_combo.count())
        self.model_combo.addItem(IMPORT_ITEM, None)
        self.model_combo.blockSignals(False)

    def _add_model(self, text: str, name: str, spec: ModelSpec) -> None:
        self.model_combo.addItem(text, name)
        self.model_combo.setItemData(
            self.model_combo.count() - 1, spec.description, Qt.ItemDataRole.ToolTipRole
        )

    def show_model(self, key: str, spec: ModelSpec | None) -> None:
        """Select ``key`` (adding it for an imported file) and show its labels; ``spec``
        None: "No model" (no thresholds, classes or overlay to set)."""
        if spec is None:
            self.model_combo.setCurrentIndex(self.model_combo.findData(NO_MODEL))
            self.model_info.setText("no model: frames as decoded")
            self.set_labels(())
            self.show_task(True)
            self.precision.hide()  # no model, no precision to choose
            return
        self.precision.show()
        i = self.model_combo.findData(key)
        if i < 0:
            i = self.model_combo.count() - 2  # before the separator
            self.model_combo.insertItem(i, spec.name, key)
            self.model_combo.setItemData(i, key, Qt.ItemDataRole.ToolTipRole)
        self.model_combo.setCurrentIndex(i)
        h, w = spec.input_size
        if produces_image(spec):
            channels = "Y channel" if spec.channels == 1 else "colour"
            self.model_info.setText(f"super-resolution · ×{spec.scale} · {channels}")
        else:
            self.model_info.setText(
                f"{spec.task} · {spec.layout} · {w}×{h} · {len(spec.labels)} classes"
            )
        self.set_labels(spec.labels)
        self.show_task(produces_image(spec))

    def _on_model_activated(self, index: int) -> None:
        key = self.model_combo.itemData(index)
        if key is None:
            self.importRequested.emit()
        else:
            self.modelChosen.emit(str(key))

    # ---- thresholds -------------------------------------------------------------

    def set_thresholds(self, conf: float, iou: float) -> None:
        self.conf_slider.setValue(round(conf * 100))
        self.iou_slider.setValue(round(iou * 100))
        self.conf_label.setText(f"{conf:.2f}")
        self.iou_label.setText(f"{iou:.2f}")

    def _on_threshold(self, value: int, which: str) -> None:
        v = value / 100.0
        (self.conf_label if which == "conf" else self.iou_label).setText(f"{v:.2f}")
        (self.confChanged if which == "conf" else self.iouChanged).emit(v)

    # ---- classes ------------------------------------------------------------------

    def set_labels(self, labels: tuple[str, ...]) -> None:
        self.class_list.blockSignals(True)
        self.class_list.clear()
        for cid, name in enumerate(labels):
            item = QListWidgetItem(f"{cid:>2}  {name}")
            item.setData(Qt.ItemDataRole.UserRole, cid)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked)
            self.class_list.addItem(item)
        self.class_list.blockSignals(False)
        self._filter_list(self.search.text())
        self._update_count()

    def selected_classes(self) -> frozenset[int] | None:
        """None when every class is checked (no filtering)."""
        items = [self.class_list.item(i) for i in range(self.class_list.count())]
        checked = {
            int(it.data(Qt.ItemDataRole.UserRole))
            for it in items
            if it.checkState() == Qt.CheckState.Checked
        }
        return None if len(checked) == len(items) else frozenset(checked)

    def _check_all(self, on: bool) -> None:
        """Check or uncheck every visible class (all of them when nothing is searched)."""
        state = Qt.CheckState.Checked if on else Qt.CheckState.Unchecked
        self.class_list.blockSignals(True)
        for i in range(self.class_list.count()):
            item = self.class_list.item(i)
            if not item.isHidden():
                item.setCheckState(state)
        self.class_list.blockSignals(False)
        self._emit_classes()

    def _emit_classes(self) -> None:
        self._update_count()
        self.classesChanged.emit(self.selected_classes())

    def _update_count(self) -> None:
        sel = self.selected_classes()
        total = self.class_list.count()
        self.class_count.setText(f"all {total}" if sel is None else f"{len(sel)} of {total}")

    def _filter_list(self, text: str) -> None:
        needle = text.strip().lower()
        for i in range(self.class_list.count()):
            item = self.class_list.item(i)
            item.setHidden(bool(needle) and needle not in item.text().lower())

    # ---- overlay ------------------------------------------------------------------

    def overlay(self) -> OverlayStyle:
        return OverlayStyle(**{n: c.isChecked() for n, c in self.overlay_checks.items()})

    def set_overlay(self, style: OverlayStyle) -> None:
        for name, check in self.overlay_checks.items():
            check.blockSignals(True)
            check.setChecked(bool(getattr(style, name)))
            check.blockSignals(False)


class PanelScroll(QScrollArea):
    """The side panel's scroll area: it scrolls on a short screen, and is never narrower
    than the panel's controls, whose right-hand side (the INT8 button, the layer menu)
    a narrow window would otherwise cut off."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        panel = self.widget()
        if watched is panel and event.type() == QEvent.Type.LayoutRequest:
            # the dock sizes by its content's minimum size, not by its hint
            bar = self.verticalScrollBar().sizeHint().width()
            self.setMinimumWidth(panel.minimumSizeHint().width() + bar)
        return super().eventFilter(watched, event)
