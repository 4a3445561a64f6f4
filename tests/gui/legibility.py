"""What a user can read: contrast of a glyph on its background, labels shown whole; a
modal dialog looked at while it is up; where the screenshots of the dialogs and the
status bar go.

Screenshots go to a temporary folder; FRAMELENS_UI_SCREENSHOTS=docs writes the ones the
docs show (a test run must not rewrite files the repository tracks).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import QRect, QTimer
from PySide6.QtGui import QColor, QIcon, QImage, QPixmap
from PySide6.QtWidgets import QApplication, QDialog, QLabel, QWidget
from shots import shots_dir

SHOTS = shots_dir("FRAMELENS_UI_SCREENSHOTS", "ui")
READABLE = 3.0  # WCAG 2.1 non-text contrast: icons and other graphics against their background


def rgba(image: QImage) -> np.ndarray:
    """An (H, W, 4) uint8 copy of a QImage."""
    img = image.convertToFormat(QImage.Format.Format_RGBA8888)
    w, h, stride = img.width(), img.height(), img.bytesPerLine()
    data = np.frombuffer(img.constBits(), dtype=np.uint8, count=stride * h)
    return data.reshape(h, stride)[:, : w * 4].reshape(h, w, 4).copy()


def luminance(rgb: np.ndarray) -> np.ndarray:
    """WCAG relative luminance of sRGB colours (..., 3) in 0..255."""
    c = np.asarray(rgb, dtype=np.float64) / 255.0
    linear = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    return np.asarray(linear @ np.array([0.2126, 0.7152, 0.0722]))


def contrast(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    la, lb = luminance(a), luminance(b)
    return (np.maximum(la, lb) + 0.05) / (np.minimum(la, lb) + 0.05)


def glyph_contrast(icon: QIcon, background: QColor, size: int = 16) -> float:
    """Contrast of an icon's glyph (its opaque pixels, composited) on ``background``."""
    pixels = rgba(icon.pixmap(size).toImage())
    alpha = pixels[..., 3:4] / 255.0
    bg = np.array([background.red(), background.green(), background.blue()], dtype=np.float64)
    over = pixels[..., :3] * alpha + bg * (1 - alpha)
    ink = pixels[..., 3] > 160
    if not ink.any():
        return 1.0
    return float(np.median(contrast(over[ink], bg)))


def painted_glyph_pixels(widget: QWidget) -> int:
    """How many pixels of the widget as painted stand out (READABLE) from its most common
    colour, its background: a glyph squeezed to a dot or drawn dark on dark has few."""
    pixels = rgba(widget.grab().toImage())[..., :3]
    flat = pixels.reshape(-1, 3)
    colours, counts = np.unique(flat, axis=0, return_counts=True)
    background = colours[np.argmax(counts)]
    return int((contrast(flat, background) >= READABLE).sum())


def painted_text(label: QLabel) -> str:
    """The text a QLabel paints (a status field's text() is what it says)."""
    return QLabel.text(label)


def shown_whole(label: QLabel) -> bool:
    """The label is as wide as its text needs: nothing of it is cut."""
    return label.width() >= label.sizeHint().width()


def overlapping(rects: list[tuple[str, QRect]]) -> list[tuple[str, str]]:
    """Pairs of named rectangles that share pixels."""
    return [
        (na, nb) for i, (na, a) in enumerate(rects) for nb, b in rects[i + 1 :] if a.intersects(b)
    ]


def save_shot(pixmap: QPixmap, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / name
    assert pixmap.save(str(path)), path
    return path


def while_open(kind: type[QDialog], inspect: Callable[[Any], None], seen: dict[str, Any]) -> None:
    """Runs ``inspect`` on the modal dialog of ``kind`` once it is up, then closes it."""
    tries = [0]

    def poll() -> None:
        dialog = QApplication.activeModalWidget()
        if not isinstance(dialog, kind):
            tries[0] += 1
            if tries[0] < 200:
                QTimer.singleShot(50, poll)
            return
        try:
            inspect(dialog)
        except BaseException as exc:  # reported after exec() returns
            seen["error"] = exc
        finally:
            dialog.reject()

    QTimer.singleShot(0, poll)
