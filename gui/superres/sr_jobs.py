"""PSNR of the frame on screen, measured on a thread (building the model and upscaling
take a few hundred milliseconds on a laptop CPU): the result comes back by a signal."""

from __future__ import annotations

import threading

from framelens.core.api import (
    FrameQuality,
    Image,
    PipelineSettings,
    error_message,
    measure_frame_quality,
)
from PySide6.QtCore import QObject, Signal

__all__ = ["QualityJob"]


class QualityJob(QObject):
    """One measurement at a time; ``running`` while it runs."""

    finished = Signal(object, str, str)  # FrameQuality, model, precision
    failed = Signal(str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.running = False
        self._thread: threading.Thread | None = None

    def start(self, image: Image, settings: PipelineSettings) -> bool:
        """Measure ``image`` with ``settings``' model (the whole frame, whatever region
        of interest the settings hold: measure_frame_quality's); False when busy."""
        if self.running:
            return False
        self.running = True
        self._thread = threading.Thread(
            target=self._run, args=(image.copy(), settings), name="fl-psnr", daemon=True
        )
        self._thread.start()
        return True

    def _run(self, image: Image, settings: PipelineSettings) -> None:
        try:
            quality: FrameQuality = measure_frame_quality(image, settings)
        except Exception as exc:  # any failure is one line for the user
            self.running = False
            self.failed.emit(error_message(exc))
        else:
            self.running = False
            self.finished.emit(quality, settings.model.name, settings.precision)

    def wait(self, timeout: float = 30.0) -> None:
        if self._thread is not None:
            self._thread.join(timeout)
