"""YOLOX-Nano's INT8 variant, calibrated on the person sample: built once per test
session (the ``yolox_int8`` fixture, tests/conftest.py) for every test that needs an
INT8 graph but does not test the calibration's own cost, so the ~20 s calibration is
paid once, not once per module.

tests/unit/test_precision.py measures this very variant (its agreement, its graph, its
report); the others copy its cache entry into their own cache folder
(``SharedInt8.copy_into``), where FrameLens finds it as it finds any earlier calibration
(the entry's key is the model, the calibration frames and these settings).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from framelens.core.precision import CalibrationSettings

if TYPE_CHECKING:
    from framelens.core.precision import VariantInfo

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = str(ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4")
MODEL = "yolox-nano"
CALIBRATION = CalibrationSettings(frames=16, sensitivity_frames=3, conf=0.3)
"""CI's reduced calibration (the full one, 50 frames, is benchmarks/precision_cpu.py's)."""


@dataclass(frozen=True)
class SharedInt8:
    variant: VariantInfo  # built here, not taken from a cache
    progress: list[tuple[str, float]]  # what prepare_variant reported while building it
    cache_root: Path  # the session's cache folder the variant was built in

    @property
    def settings(self) -> CalibrationSettings:
        return CALIBRATION

    def copy_into(self, cache_root: Path) -> Path:
        """The variant's cache entry copied into ``cache_root`` (once); returns it."""
        entry = self.variant.path.parent
        target = cache_root / "variants" / entry.name
        if not target.exists():
            shutil.copytree(entry, target)
        return target


def build(cache_root: Path) -> SharedInt8:
    from framelens.core.models.catalog import resolve_model
    from framelens.core.precision import prepare_variant

    seen: list[tuple[str, float]] = []
    variant = prepare_variant(
        resolve_model(MODEL),
        "int8",
        source=SAMPLE,
        settings=CALIBRATION,
        on_progress=lambda text, f: seen.append((text, f)),
        cache_dir=cache_root,
    )
    return SharedInt8(variant, seen, cache_root)
