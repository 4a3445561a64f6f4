"""A run's precision variant, prepared before anything is built: FP16 converted, INT8
calibrated on the run's own source (core/precision), cached either way."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.progress import Progress, make_bar

if TYPE_CHECKING:
    from framelens.core.precision import CalibrationSettings, VariantInfo

__all__ = ["prepare_precision"]


def prepare_precision(
    source_spec: str,
    settings: PipelineSettings,
    *,
    progress: Progress = False,
    on_prepare: Callable[[str, float], None] | None = None,
    cancel: threading.Event | None = None,
    calibration: CalibrationSettings | None = None,
) -> tuple[PipelineSettings, VariantInfo | None]:
    """Settings whose model is the FP16/INT8 variant (cached, or built now: INT8 is
    calibrated on ``source_spec``), and the variant; fp32 settings come back as they are.

    ``progress`` draws a terminal bar while calibrating; ``on_prepare(text, 0..1)``
    reports the stages; ``cancel`` stops with Cancelled and leaves nothing cached;
    ``calibration`` overrides the default INT8 CalibrationSettings (whose agreement
    is measured at the run's confidence threshold).
    """
    from framelens.core.precision import CalibrationSettings, prepare_variant, variant_precision

    if settings.precision == "fp32" or variant_precision(settings.model.path) == settings.precision:
        return settings, None
    bar = make_bar(progress, total=100, unit="%", leave=False)

    def report(text: str, fraction: float) -> None:
        bar.set_description_str(f"{settings.precision}: {text}", refresh=False)
        bar.update(round(100 * fraction) - bar.n)
        if on_prepare is not None:
            on_prepare(text, fraction)

    try:
        model, precision = settings.model, settings.precision
        conf = getattr(settings.params, "conf", CalibrationSettings().conf)
        calibration = calibration or CalibrationSettings(conf=conf)
        variant = prepare_variant(
            model,
            precision,
            source=source_spec,
            settings=calibration,
            on_progress=report,
            cancel=cancel,
        )
    finally:
        bar.close()
    return replace(settings, model=variant.spec), variant
