"""Zones > a line or zone's name, the classes it counts, the point of a box it tests and,
for a zone, the seconds after which a stay is loitering: the small dialog the editor
opens when a shape is drawn (and on a double-click of its handle while editing)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from framelens.core.api import ANCHORS
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QWidget,
)

__all__ = ["ShapeProperties", "ZoneDialog"]


@dataclass(frozen=True)
class ShapeProperties:
    """What the dialog asks: ``classes`` class IDs (empty: every class), ``loiter_s``
    None: no loitering event."""

    name: str
    classes: tuple[int, ...] = ()
    anchor: str = ANCHORS[0]
    loiter_s: float | None = None


class ZoneDialog(QDialog):
    """Name, classes, anchor (and loitering, for a zone) of one line or zone."""

    def __init__(
        self,
        kind: str,
        props: ShapeProperties,
        labels: Sequence[str],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.kind = kind
        self.setWindowTitle(f"{'Line' if kind == 'line' else 'Zone'}: {props.name}")
        form = QFormLayout(self)
        self.name_edit = QLineEdit(props.name)
        self.name_edit.selectAll()
        form.addRow("Name:", self.name_edit)
        self.class_list = QListWidget()
        self.class_list.setToolTip("The classes it counts; none ticked: every class")
        self.class_list.setMaximumHeight(160)
        for cid, label in enumerate(labels):
            item = QListWidgetItem(label)
            item.setData(Qt.ItemDataRole.UserRole, cid)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            checked = cid in props.classes
            item.setCheckState(Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)
            self.class_list.addItem(item)
        form.addRow("Classes:", self.class_list)
        self.anchor_box = QComboBox()
        for anchor in ANCHORS:
            self.anchor_box.addItem(anchor.replace("_", " "), anchor)
        self.anchor_box.setCurrentIndex(ANCHORS.index(props.anchor))
        self.anchor_box.setToolTip("The point of each box that is tested")
        form.addRow("Point of a box:", self.anchor_box)
        self.loiter_box = QDoubleSpinBox()
        self.loiter_box.setRange(0.0, 86400.0)
        self.loiter_box.setDecimals(1)
        self.loiter_box.setSuffix(" s")
        self.loiter_box.setSpecialValueText("no loitering")
        self.loiter_box.setValue(props.loiter_s or 0.0)
        self.loiter_box.setToolTip("A stay this long in the zone is a loiter event (0: none)")
        if kind == "zone":
            form.addRow("Loitering after:", self.loiter_box)
        else:
            self.loiter_box.hide()
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    def properties(self) -> ShapeProperties:
        """What the dialog holds now."""
        classes = []
        for row in range(self.class_list.count()):
            item = self.class_list.item(row)
            if item.checkState() == Qt.CheckState.Checked:
                classes.append(int(item.data(Qt.ItemDataRole.UserRole)))
        loiter = self.loiter_box.value() if self.kind == "zone" else 0.0
        return ShapeProperties(
            self.name_edit.text().strip(),
            tuple(classes),
            str(self.anchor_box.currentData()),
            loiter if loiter > 0 else None,
        )

    def check(self, name: str, on: bool = True) -> None:
        """Tick (or untick) class ``name`` (tests and scripts)."""
        for row in range(self.class_list.count()):
            item = self.class_list.item(row)
            if item.text() == name:
                item.setCheckState(Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)
