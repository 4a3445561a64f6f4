"""Detect + super-resolution: the "Enlarge detections" strip under the video.

While a detector plays, the boxes of the chosen classes in the frame on screen are cut
out (with a margin) and upscaled by a super-resolution model (core's CropUpscaler, via
core.api.crop_upscaler), best scores first, at most eight. The upscaling runs on a
thread of its own, always on the newest frame handed to it (older ones are dropped), so
neither the GUI nor playback waits for it; the crops come back by a queued signal.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from framelens.core.api import (
    CropUpscaler,
    Detections,
    EnlargedCrop,
    FrameLensError,
    Image,
    PipelineSettings,
    crop_upscaler,
    error_message,
)
from framelens.gui.display.image_view import to_qimage
from PySide6.QtCore import QObject, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QImage, QPainter, QPaintEvent
from PySide6.QtWidgets import QSizePolicy, QWidget

__all__ = ["CropStrip", "CropWorker"]

_Job = tuple[Image, Detections, int]


class CropWorker(QObject):
    """Upscales the detections of the newest frame submitted, on its own thread."""

    cropsReady = Signal(object, int)  # list[EnlargedCrop], frame index
    failed = Signal(str)  # one line: the model could not be built or run

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._cond = threading.Condition()
        self._job: _Job | None = None
        self._settings: PipelineSettings | None = None
        self._closed = False
        self._thread: threading.Thread | None = None
        self.busy = False  # a job is being upscaled (tests wait on it)

    @property
    def settings(self) -> PipelineSettings | None:
        return self._settings

    def configure(self, settings: PipelineSettings | None) -> None:
        """The super-resolution model to enlarge with (None: stop enlarging)."""
        with self._cond:
            self._settings = settings
            self._job = None
            if settings is not None and self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name="fl-crops", daemon=True)
                self._thread.start()
            self._cond.notify()

    def submit(self, image: Image, detections: Detections, index: int) -> None:
        """Enlarge ``detections`` of ``image`` (replaces a job not yet started)."""
        with self._cond:
            if self._settings is None:
                return
            self._job = (image, detections, index)
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        upscaler: CropUpscaler | None = None
        built_for: PipelineSettings | None = None
        try:
            while True:
                with self._cond:
                    while not self._closed and (self._job is None or self._settings is None):
                        self._cond.wait()
                    if self._closed:
                        return
                    job, self._job = self._job, None
                    settings = self._settings
                    self.busy = True
                assert job is not None and settings is not None
                try:
                    if upscaler is None or built_for != settings:
                        if upscaler is not None:
                            upscaler.close()
                            upscaler = None
                        built_for = settings
                        upscaler = crop_upscaler(settings)
                    image, dets, index = job
                    crops = upscaler.upscale(image, dets.boxes, dets.scores, dets.class_ids)
                except FrameLensError as exc:
                    self.failed.emit(error_message(exc))
                    with self._cond:
                        self._settings = None  # no retry on every frame
                else:
                    self.cropsReady.emit(crops, index)
                finally:
                    self.busy = False
        finally:
            if upscaler is not None:
                upscaler.close()


class CropStrip(QWidget):
    """The enlarged detections in a row, each fitted to the strip's height, captioned."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.placeholder = "Enlarged detections appear here"
        self.crops: list[EnlargedCrop] = []
        self.captions: list[str] = []
        self._images: list[QImage] = []
        self.setMinimumHeight(110)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)

    def sizeHint(self) -> QSize:
        return QSize(800, 220)

    def set_crops(self, crops: Sequence[EnlargedCrop], labels: Sequence[str]) -> None:
        self.crops = list(crops)
        self._images = [to_qimage(c.image) for c in crops]
        self.captions = [
            f"{labels[c.class_id] if 0 <= c.class_id < len(labels) else c.class_id} "
            f"{c.score:.2f} · {c.image.shape[1]}×{c.image.shape[0]}"
            for c in crops
        ]
        self.update()

    def tile_rects(self) -> list[QRectF]:
        """Where each crop is painted: fitted to the height, shrunk together to the width."""
        gap, caption = 8.0, self.fontMetrics().height() + 6
        height = max(1.0, self.height() - caption - 8)
        widths = [img.width() * height / img.height() for img in self._images]
        total = sum(widths) + gap * max(0, len(widths) - 1)
        shrink = min(1.0, (self.width() - 8) / total) if total > 0 else 1.0
        x, rects = 4.0, []
        for w in widths:
            rects.append(QRectF(round(x), 4, w * shrink, height * shrink))
            x += w * shrink + gap
        return rects

    def paintEvent(self, event: QPaintEvent) -> None:
        del event
        painter = QPainter(self)
        painter.fillRect(self.rect(), QColor(19, 21, 25))
        if not self._images:
            painter.setPen(QColor(150, 158, 172))
            painter.drawText(self.rect(), int(Qt.AlignmentFlag.AlignCenter), self.placeholder)
            painter.end()
            return
        for image, rect, caption in zip(
            self._images, self.tile_rects(), self.captions, strict=True
        ):
            painter.setRenderHint(
                QPainter.RenderHint.SmoothPixmapTransform, rect.width() < image.width()
            )
            painter.drawImage(rect, image)
            painter.setPen(QColor(200, 206, 216))
            width = max(rect.width(), painter.fontMetrics().horizontalAdvance(caption) + 4)
            text = QRectF(rect.left(), rect.bottom() + 2, width, 18)
            painter.drawText(text, int(Qt.AlignmentFlag.AlignLeft), caption)
        painter.end()
