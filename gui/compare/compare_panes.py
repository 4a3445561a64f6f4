"""The compare view's panes: each one's set-up, header and frame.

A PaneCard is one pane of the compare window: while setting up, its precision,
model and device; while comparing, its title (precision, "reference") and what
runs it (model, backend, device), its inference time on this frame and the median,
over its frame (a FrameView), with a note of the differences against the reference.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from framelens.core.api import (
    PRECISIONS,
    DeviceChoice,
    Image,
    PaneRequest,
    PipelineSettings,
    difference_colours,
)
from framelens.gui.common.widgets import set_text
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QImage, QPainter, QPaintEvent, QTextDocumentFragment
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

__all__ = [
    "PANE_COLOURS",
    "FrameView",
    "PaneCard",
    "diff_note",
    "grid_height",
    "latency_text",
    "runs_on",
]

PANE_COLOURS = ("#5aa9e6", "#4cc9a0", "#f4a259", "#c58fe0")
BACKENDS = {"onnxruntime": "ONNX Runtime", "tensorrt": "TensorRT"}


def runs_on(settings: PipelineSettings) -> str:
    """What computes a pane, for its header: "yolox-nano · ONNX Runtime · CPU"."""
    device = "CPU" if settings.device == "cpu" else settings.device.upper()
    backend = BACKENDS.get(settings.backend, settings.backend)
    return f"{settings.model.name} · {backend} · {device}"


def latency_text(frame_ms: float, median_ms: float) -> str:
    """The pane header's latency: this frame's, and the median the report gives."""

    def ms(value: float) -> str:
        return f"{value:.1f}" if math.isfinite(value) else "—"

    return f"Inference {ms(frame_ms)} ms (median {ms(median_ms)})"


def diff_note(counts: tuple[int, int], reference: str) -> str:
    """The difference view's header note: what this frame's pane lacks and adds."""
    missed, extra = counts
    if not missed and not extra:
        same = f"same boxes as {reference or 'the reference'}"
        return f'<span style="color:#8a93a3">{same}</span>'
    colours = difference_colours()
    parts = []
    if missed:
        parts.append(f'<span style="color:{colours.ref_only}">{missed} only in {reference}</span>')
    if extra:
        parts.append(f'<span style="color:{colours.test_only}">{extra} only here</span>')
    return " · ".join(parts)


class FrameView(QWidget):
    """A BGR frame scaled to fit (aspect kept) with plain QPainter: cheap under llvmpipe."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("frameView")
        self.setMinimumSize(240, 150)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self._image: QImage | None = None
        self._array: Image | None = None  # keeps the QImage's memory alive
        self.placeholder = ""  # drawn over a dimmed image, or alone
        self.dimmed = False

    def set_image(self, image: Image | None) -> None:
        if image is None:
            self._image = self._array = None
        else:
            array = np.ascontiguousarray(image)
            h, w = array.shape[:2]
            self._array = array
            self._image = QImage(array.data, w, h, array.strides[0], QImage.Format.Format_BGR888)
        self.update()

    @property
    def has_image(self) -> bool:
        return self._image is not None

    def show_placeholder(self, text: str, dimmed: bool = True) -> None:
        """``text`` over the (dimmed) image on screen, e.g. a preview before the start."""
        self.placeholder, self.dimmed = text, dimmed
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.fillRect(self.rect(), QColor("#0f1115"))
        if self._image is not None:
            w, h = self._image.width(), self._image.height()
            scale = min(self.width() / w, self.height() / h)
            tw, th = w * scale, h * scale
            target = QRectF((self.width() - tw) / 2, (self.height() - th) / 2, tw, th)
            p.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
            p.drawImage(target, self._image)
            if self.dimmed:
                p.fillRect(target, QColor(15, 17, 21, 175))
        if self.placeholder and (self._image is None or self.dimmed):
            p.setPen(QColor("#aab2bf") if self._image is not None else QColor("#6b7382"))
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, self.placeholder)


MIN_CARD_WIDTH = 280  # a frame view (240) and the card's margins


class PaneCard(QFrame):
    """One pane: a header (its set-up, or its label and latency) over its frame."""

    def __init__(
        self,
        index: int,
        models: Sequence[tuple[str, str | None]],
        devices: Sequence[DeviceChoice],
        device: str,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("paneCard")
        # every pane as wide as the others, whatever its header says (the reference's
        # was narrower), and a note shown over a frame (Differences) never widens the
        # window: the width comes from the grid, not from the texts
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setMinimumWidth(MIN_CARD_WIDTH)
        self.index = index
        self.chip = QLabel("●")
        self.chip.setObjectName("paneChip")
        self.title = QLabel("")
        self.title.setObjectName("paneTitle")
        self.detail = QLabel("")  # model · backend · device
        self.detail.setObjectName("paneDetail")
        self.note = QLabel("")
        self.note.setObjectName("paneNote")
        self.note.setTextFormat(Qt.TextFormat.RichText)
        # the room the detail leaves, no more: shown or not, it changes no width
        self.note.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.note.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.note.hide()
        self.latency = QLabel("")
        self.latency.setObjectName("paneLatency")
        self.latency.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)

        self.precision_combo = QComboBox()
        for p in PRECISIONS:
            self.precision_combo.addItem(p.upper(), p)
        self.precision_combo.setToolTip("Precision variant (INT8 is calibrated on this video)")
        self.model_combo = QComboBox()
        for text, key in models:
            self.model_combo.addItem(text, key)
        self.model_combo.setToolTip("Model from the catalogue")
        self.device_combo = QComboBox()
        for choice in devices:
            self.device_combo.addItem(choice.label, choice.id)
            if choice.unavailable is not None:
                row = self.device_combo.count() - 1
                self.device_combo.model().item(row).setEnabled(False)  # type: ignore[attr-defined]
                self.device_combo.setItemData(row, choice.unavailable, Qt.ItemDataRole.ToolTipRole)
        i = self.device_combo.findData(device)
        self.device_combo.setCurrentIndex(max(0, i))
        self.device_combo.setToolTip("Where this pane's inference runs")
        for combo, chars in ((self.model_combo, 6), (self.device_combo, 3)):
            combo.setSizeAdjustPolicy(
                QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
            )
            combo.setMinimumContentsLength(chars)
        self.remove_button = QToolButton()
        self.remove_button.setText("✕")
        self.remove_button.setObjectName("removeButton")
        self.remove_button.setToolTip("Remove this pane")
        self.remove_button.setFixedSize(26, 26)
        self.setup_row = QWidget()
        sl = QHBoxLayout(self.setup_row)
        sl.setContentsMargins(0, 0, 0, 0)
        sl.setSpacing(4)
        sl.addWidget(self.precision_combo)
        sl.addWidget(self.model_combo, 1)
        sl.addWidget(self.device_combo)
        sl.addWidget(self.remove_button)

        self.view = FrameView()
        header = QHBoxLayout()
        header.setSpacing(10)
        header.addWidget(self.chip)
        header.addWidget(self.title)
        header.addWidget(self.setup_row, 1)
        header.addStretch(0)
        header.addWidget(self.latency)
        self.detail_row = QWidget()
        info = QHBoxLayout(self.detail_row)
        info.setContentsMargins(0, 0, 0, 0)
        info.setSpacing(6)
        info.addWidget(self.detail)
        info.addWidget(self.note, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 4, 8, 6)
        lay.setSpacing(2)
        lay.addLayout(header)
        lay.addWidget(self.detail_row)
        lay.addSpacing(2)
        lay.addWidget(self.view, 1)
        self.set_index(index)
        self.set_editing(True)

    def set_index(self, index: int) -> None:
        self.index = index
        colour = PANE_COLOURS[index % len(PANE_COLOURS)]
        self.chip.setStyleSheet(f"color: {colour};")
        if self.setup_row.isVisible() or not self.title.text():
            self.title.setText("Reference" if index == 0 else f"Pane {index + 1}")

    def set_editing(self, editing: bool) -> None:
        self.setup_row.setVisible(editing)
        self.latency.setVisible(not editing)
        self.detail_row.setVisible(not editing)
        if editing:
            self.title.setText("Reference" if self.index == 0 else f"Pane {self.index + 1}")
            self.view.show_placeholder("Press Start to compare")

    def show_pane(self, label: str, settings: PipelineSettings) -> None:
        """The header of a pane that compares: its label (the precision), whether it is
        the reference, and what computes it."""
        self.title.setText(f"{label} · reference" if self.index == 0 else label)
        self.title.setToolTip(f"{settings.model.name} · {settings.precision.upper()}")
        set_text(self.detail, runs_on(settings))
        self.detail.setToolTip(f"{settings.model.path}")

    def show_note(self, note: str) -> None:
        """The differences note (rich text); the room left may cut it: its tooltip has it."""
        set_text(self.note, note)
        self.note.setToolTip(f"On this frame: {QTextDocumentFragment.fromHtml(note).toPlainText()}")

    def fit_width(self, width: int) -> None:
        """As wide as ``width`` at least (the widest header of the panes compared)."""
        self.setMinimumWidth(max(MIN_CARD_WIDTH, width))

    def request(self) -> PaneRequest:
        key = self.model_combo.currentData()
        return PaneRequest(
            precision=str(self.precision_combo.currentData()),
            model=None if key is None else str(key),
            device=str(self.device_combo.currentData()),
        )

    def set_precision(self, precision: str) -> None:
        self.precision_combo.setCurrentIndex(max(0, self.precision_combo.findData(precision)))


def fit_cards(cards: Sequence[PaneCard], width: int) -> int:
    """One width for every pane, the widest header whole: the width they have now (the
    ``width`` given, or more). A note shown over a frame (Differences) takes the room
    left and widens nothing."""
    widest = max((card.minimumSizeHint().width() for card in cards), default=0)
    if widest > width:
        for card in cards:
            card.fit_width(widest)
    return max(width, widest)


def grid_height(
    grid: QGridLayout, width: int, cards: Sequence[PaneCard], frame_w: int, frame_h: int
) -> int:
    """The height a grid ``width`` wide needs so that frames of ``frame_w`` x ``frame_h``
    fill their panes' width (3 panes side by side, else 2 a row)."""
    n = len(cards)
    columns = 3 if n == 3 else 2
    rows = (n + columns - 1) // columns
    margins = grid.contentsMargins()
    spacing = grid.spacing()
    inner = width - margins.left() - margins.right()
    card_w = (inner - (columns - 1) * spacing) / columns - 16
    # what a card holds above its frame: the header rows, spacing and margins
    header = max((c.height() - c.view.height() for c in cards), default=40)
    card_h = card_w * frame_h / max(1, frame_w) + header
    return int(rows * card_h + (rows - 1) * spacing + margins.top() + margins.bottom())
