"""The settings of an INT8 calibration and its progress reporting (stages, cancellation)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from framelens.core.errors import Cancelled, ConfigError

METHODS = ("minmax", "percentile", "entropy")


@dataclass(frozen=True)
class CalibrationSettings:
    """How an INT8 variant is calibrated and how much float it may keep.

    frames: calibration frames spread over the source. sensitivity_frames: how many
    of them score each layer. agreement_target: detection F1 against FP32 on the
    calibration frames (at ``conf``, NMS at ``nms_iou``) that mixed precision aims
    for (when the MAC budget runs out first, the best agreement seen is kept).
    min_int8_mac_fraction: share of the convolutions' MACs that must stay INT8.
    max_search_steps: at most this many layers are tried in float. threads: ONNX
    Runtime threads for the calibration work (None = one per core); it does not
    change the result, so it is not part of the cache key.

    Super-resolution models are measured by PSNR instead of F1: ``psnr_target_db`` of
    the INT8 output against the FP32 output (8-bit levels) on ``patch`` x ``patch``
    patches of the calibration frames (the most detailed square of each frame: the
    models are fully convolutional, so patches calibrate them as whole frames do, at a
    fraction of the cost).
    """

    frames: int = 50
    method: str = "minmax"
    agreement_target: float = 0.95
    conf: float = 0.3
    nms_iou: float = 0.45
    min_int8_mac_fraction: float = 0.9
    sensitivity_frames: int = 8
    max_search_steps: int = 24
    equalize_depthwise: bool = True
    psnr_target_db: float = 40.0
    patch: int = 128
    threads: int | None = None

    def validate(self) -> None:
        if self.frames < 2:
            raise ConfigError(f"INT8 calibration needs at least 2 frames, got {self.frames}")
        if self.method not in METHODS:
            raise ConfigError(
                f"unknown calibration method {self.method!r} (known: {', '.join(METHODS)})"
            )
        if self.sensitivity_frames < 1:
            raise ConfigError("sensitivity_frames must be at least 1")
        for name in ("agreement_target", "conf", "nms_iou", "min_int8_mac_fraction"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"{name} must be between 0 and 1, got {value}")
        if not 10.0 <= self.psnr_target_db <= 100.0:
            raise ConfigError(f"psnr_target_db must be 10 to 100 dB, got {self.psnr_target_db}")
        if self.patch < 16:
            raise ConfigError(f"patch must be at least 16 px, got {self.patch}")
        if self.max_search_steps < 0:
            raise ConfigError("max_search_steps must not be negative")
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"threads must be at least 1, got {self.threads}")

    def analysis_key(self) -> dict[str, Any]:
        """What the calibrated ranges and the sensitivity scores depend on."""
        return {
            "method": self.method,
            "sensitivity_frames": self.sensitivity_frames,
            "equalize_depthwise": self.equalize_depthwise,
            "patch": self.patch,
        }

    def variant_key(self) -> dict[str, Any]:
        """What the final graph depends on (everything but threads)."""
        data = asdict(self)
        data.pop("threads")
        return data


Progress = Callable[[str, float], None]


class StageProgress:
    """Maps each stage's own 0..1 onto the overall 0..1, and checks for cancellation."""

    STAGES: ClassVar[dict[str, tuple[str, float, float]]] = {
        "frames": ("reading calibration frames", 0.0, 0.05),
        "calibrate": ("calibrating activation ranges", 0.05, 0.2),
        "sensitivity": ("measuring layer sensitivity", 0.2, 0.75),
        "search": ("choosing layers to keep in float", 0.75, 0.95),
        "quantize": ("writing the INT8 graph", 0.95, 1.0),
    }

    def __init__(self, on_progress: Progress | None, cancel: threading.Event | None) -> None:
        self.on_progress = on_progress
        self.cancel = cancel

    def check(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled("INT8 calibration cancelled")

    def __call__(self, stage: str, fraction: float, detail: str = "") -> None:
        self.check()
        if self.on_progress is None:
            return
        label, lo, hi = self.STAGES[stage]
        text = f"{label} ({detail})" if detail else label
        self.on_progress(text, lo + (hi - lo) * min(1.0, max(0.0, fraction)))
