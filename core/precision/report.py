"""The INT8 sensitivity report: per-layer sensitivity, what stayed in float, the search.

The GUI charts ``layers`` (sensitivity per Conv, float ones marked); the CLI prints
``table()``. It travels as JSON beside the cached variant.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

REPORT_VERSION = 1

SENSITIVITY_METRIC = "output_nsr"
"""Sensitivity of a layer = noise-to-signal ratio of the model outputs when that Conv
alone is quantized: sum((y_int8 - y_fp32)^2) / sum(y_fp32^2) over the outputs of the
sensitivity frames. 0 = no effect; 0.01 = the outputs moved by 10% of their RMS."""


@dataclass(frozen=True)
class LayerSensitivity:
    """One convolution: its cost, how much quantizing it alone hurts, and where it ended."""

    name: str
    macs: int
    sensitivity: float
    kept_float: bool
    depthwise: bool = False
    equalized: bool = False  # per-channel range equalisation in front of it (see graph.py)


@dataclass(frozen=True)
class SearchStep:
    """One trial of the mixed-precision search: how many layers stayed float, the result."""

    float_layers: int
    added: str | None  # the layer moved to float at this step (None for the all-INT8 start)
    int8_mac_fraction: float
    f1: float  # the agreement at this step: detection F1, or PSNR in dB (agreement_metric)


@dataclass
class SensitivityReport:
    """Everything the analyst sees about an INT8 variant."""

    layers: list[LayerSensitivity]
    agreement_target: float
    agreement_f1: float  # F1 of the final INT8 graph against FP32 on the calibration frames
    agreement_conf: float  # confidence threshold of that comparison
    target_reached: bool
    min_int8_mac_fraction: float
    calibration_frames: int
    sensitivity_frames: int
    method: str
    metric: str = SENSITIVITY_METRIC
    search: list[SearchStep] = field(default_factory=list)
    reference_detections: int = 0  # FP32 detections on the calibration frames at agreement_conf
    # "f1" (detection: agreement_f1 is the F1) or "psnr_db" (super-resolution: it is the
    # PSNR in dB of the INT8 output against FP32's, agreement_target the dB aimed for)
    agreement_metric: str = "f1"

    def agreement_text(self) -> str:
        """The agreement in words: "F1 0.981 at conf 0.3" or "PSNR 43.2 dB"."""
        if self.agreement_metric == "psnr_db":
            return f"PSNR {self.agreement_f1:.1f} dB"
        return f"F1 {self.agreement_f1:.3f} at conf {self.agreement_conf:g}"

    def target_text(self) -> str:
        unit = " dB" if self.agreement_metric == "psnr_db" else ""
        return f"{self.agreement_target:g}{unit}"

    @property
    def total_macs(self) -> int:
        return sum(layer.macs for layer in self.layers)

    @property
    def int8_macs(self) -> int:
        return sum(layer.macs for layer in self.layers if not layer.kept_float)

    @property
    def int8_mac_fraction(self) -> float:
        total = self.total_macs
        return self.int8_macs / total if total else 0.0

    @property
    def kept_float(self) -> list[str]:
        return [layer.name for layer in self.layers if layer.kept_float]

    def ranked(self) -> list[LayerSensitivity]:
        """Layers from the most to the least sensitive."""
        return sorted(self.layers, key=lambda layer: -layer.sensitivity)

    def summary(self) -> dict[str, Any]:
        """The headline numbers (for a run summary or a status line)."""
        return {
            "int8_mac_fraction": round(self.int8_mac_fraction, 4),
            "kept_float": self.kept_float,
            "agreement_f1": round(self.agreement_f1, 4),
            "agreement_metric": self.agreement_metric,
            "agreement_target": self.agreement_target,
            "target_reached": self.target_reached,
            "calibration_frames": self.calibration_frames,
        }

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["version"] = REPORT_VERSION
        data["int8_mac_fraction"] = self.int8_mac_fraction
        data["total_macs"] = self.total_macs
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SensitivityReport:
        if data.get("version") != REPORT_VERSION:
            raise ValueError(f"unsupported sensitivity report version {data.get('version')!r}")
        body = {
            k: v
            for k, v in data.items()
            if k not in ("version", "int8_mac_fraction", "total_macs", "layers", "search")
        }
        return cls(
            layers=[LayerSensitivity(**layer) for layer in data["layers"]],
            search=[SearchStep(**step) for step in data.get("search", [])],
            **body,
        )

    @classmethod
    def from_json(cls, text: str) -> SensitivityReport:
        return cls.from_dict(json.loads(text))

    def table(self, top: int | None = 20) -> str:
        """A text table of the most sensitive layers (all when ``top`` is None), then totals."""
        total = self.total_macs or 1
        rows = self.ranked() if top is None else self.ranked()[:top]
        width = max([len("layer"), *(len(r.name) for r in rows)])
        lines = [f"{'layer':<{width}}  {'MACs %':>7}  {'sensitivity':>11}  precision"]
        for r in rows:
            kind = "float" if r.kept_float else "int8"
            extra = " (depthwise, equalised)" if r.equalized else ""
            sens = f"{r.sensitivity:.3e}" if math.isfinite(r.sensitivity) else "n/a"
            lines.append(
                f"{r.name:<{width}}  {100 * r.macs / total:>6.2f}%  {sens:>11}  {kind}{extra}"
            )
        if top is not None and len(self.layers) > top:
            lines.append(f"... {len(self.layers) - top} less sensitive layers, all int8")
        kept = ", ".join(self.kept_float) or "none"
        reached = (
            "reached"
            if self.target_reached
            else "not reached within the MAC budget: the best agreement found is kept"
        )
        lines.append(
            f"INT8 MACs: {100 * self.int8_mac_fraction:.1f}% of {self.total_macs / 1e6:.0f} M "
            f"(minimum {100 * self.min_int8_mac_fraction:.0f}%); kept in float: {kept}"
        )
        lines.append(
            f"agreement with FP32 on {self.calibration_frames} calibration frames: "
            f"{self.agreement_text()} (target {self.target_text()}, {reached})"
        )
        return "\n".join(lines)
