"""Preparing a precision variant in the background, for the controller (no Qt).

A PrecisionJob is one preparation the controller started (Controller.set_precision);
``prepare_job`` runs on its thread and reports through callbacks, which the
controller turns into queued signals.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from framelens.core.errors import Cancelled, error_message
from framelens.core.models.spec import ModelSpec
from framelens.core.precision import VariantInfo, cached_variant, prepare_variant
from framelens.core.precision.int8_settings import CalibrationSettings

__all__ = ["PrecisionJob", "prepare_job"]


@dataclass
class PrecisionJob:
    """One background preparation of a precision variant (see Controller.set_precision)."""

    precision: str
    token: int
    cancel: threading.Event
    cached_only: bool = False
    fallback: bool = False  # a model switch waits on it: on failure, switch at FP32


def prepare_job(
    job: PrecisionJob,
    spec: ModelSpec,
    source: str | None,
    calibration: CalibrationSettings,
    *,
    on_progress: Callable[[str, float], None],
    on_ready: Callable[[VariantInfo | None], None],
    on_failed: Callable[[str], None],
) -> None:
    """The variant of ``spec``, from the cache or built, on the caller's thread.

    ``on_progress("INT8: calibrating …", 0..1)`` while building; then ``on_ready``
    with the variant (None: ``cached_only`` and not cached) or ``on_failed`` with one
    line ("cancelled" when ``job.cancel`` was set).
    """
    name = job.precision.upper()

    def progress(text: str, fraction: float) -> None:
        on_progress(f"{name}: {text}", float(fraction))

    try:
        if job.cached_only:
            variant: VariantInfo | None = cached_variant(
                spec, job.precision, source=source, settings=calibration, cancel=job.cancel
            )
        else:
            progress("preparing", 0.0)
            variant = prepare_variant(
                spec,
                job.precision,
                source=source,
                settings=calibration,
                on_progress=progress,
                cancel=job.cancel,
            )
    except Cancelled:
        on_failed("cancelled")
    except BaseException as exc:
        on_failed(error_message(exc))
    else:
        on_ready(variant)
