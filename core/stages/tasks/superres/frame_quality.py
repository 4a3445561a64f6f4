"""PSNR and SSIM of one frame on demand: how much a super-resolution model recovers of a
frame whose original is known, against bicubic (the GUI's "Measure PSNR of this frame").

The method is compare's (core/pipeline/compare/superres_quality.py), for one frame: the
frame is cropped to a multiple of the scale and shrunk by it with bicubic (OpenCV
INTER_CUBIC); the small frame is upscaled by the model and by bicubic; both are measured
against the cropped original by PSNR (dB, BGR uint8, whole frame) and SSIM
(metrics.py). A model output narrower than the original is measured on the part both
cover.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from framelens.core.errors import ConfigError
from framelens.core.stages.tasks.superres.color import (
    bicubic_downscale,
    bicubic_upscale,
    cropped_size,
)
from framelens.core.stages.tasks.superres.metrics import ImageAgreement, image_agreement
from framelens.core.types import Image

__all__ = ["MIN_SIDE", "FrameQuality", "frame_quality"]

MIN_SIDE = 8
"""The shrunk frame's smallest side (pixels): below it the numbers mean little."""


@dataclass(frozen=True, slots=True)
class FrameQuality:
    """One frame's numbers: the model's and bicubic's agreement with the original."""

    scale: int
    width: int  # the original as measured: cropped to a multiple of the scale
    height: int
    model: ImageAgreement
    bicubic: ImageAgreement
    model_ms: float  # the model's upscaling of the shrunk frame

    @property
    def psnr_gain_db(self) -> float:
        """The model's PSNR minus bicubic's (positive: the model is closer)."""
        gain = self.model.psnr_db - self.bicubic.psnr_db
        return gain if math.isfinite(gain) else math.nan


def _agreement(reference: Image, test: Image) -> ImageAgreement:
    h = min(reference.shape[0], test.shape[0])
    w = min(reference.shape[1], test.shape[1])
    return image_agreement(reference[:h, :w], test[:h, :w])


def frame_quality(image: Image, upscale: Callable[[Image], Image], scale: int) -> FrameQuality:
    """Shrink ``image`` by ``scale``, upscale it with ``upscale`` (the model) and with
    bicubic, and measure both against the original. ConfigError for a frame too small."""
    w, h = cropped_size(image.shape[1], image.shape[0], scale)
    if w < scale * MIN_SIDE or h < scale * MIN_SIDE:
        raise ConfigError(
            f"a {image.shape[1]}x{image.shape[0]} frame is too small to shrink by {scale}"
        )
    original = image[:h, :w]
    low = bicubic_downscale(image, scale)
    start = time.perf_counter()
    model_up = upscale(low)
    model_ms = (time.perf_counter() - start) * 1000.0
    return FrameQuality(
        scale,
        w,
        h,
        _agreement(original, model_up),
        _agreement(original, bicubic_upscale(low, scale)),
        model_ms,
    )
