"""Panes that differ only in numeric precision: `framelens compare --precisions ...`."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace

from framelens.core.errors import ConfigError
from framelens.core.pipeline.compare.panes import MAX_PANES, MIN_PANES, PaneSpec
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.pipeline.variant import prepare_precision
from framelens.core.precision import PRECISIONS, CalibrationSettings
from framelens.core.progress import Progress

__all__ = ["PRECISIONS", "parse_precisions", "precision_panes"]


def parse_precisions(text: str, reference: str | None = None) -> tuple[list[str], str]:
    """``"fp32,fp16"`` -> (["fp32", "fp16"], reference); the reference defaults to the first.

    ConfigError (one line) for an unknown or repeated precision, fewer than 2 or
    more than 4, or a reference not among them.
    """
    names = [p.strip().lower() for p in text.split(",") if p.strip()]
    unknown = [p for p in names if p not in PRECISIONS]
    if unknown:
        raise ConfigError(
            f"unknown precision {', '.join(unknown)} (known: {', '.join(PRECISIONS)})"
        )
    repeated = sorted({p for p in names if names.count(p) > 1})
    if repeated:
        raise ConfigError(f"precision {', '.join(repeated)} is listed more than once")
    if not MIN_PANES <= len(names) <= MAX_PANES:
        raise ConfigError(
            f"--precisions needs {MIN_PANES} to {MAX_PANES} variants, got {len(names)}"
        )
    ref = (reference or names[0]).strip().lower()
    if ref not in names:
        raise ConfigError(f"reference {ref} is not among the precisions {', '.join(names)}")
    return names, ref


def precision_panes(
    base: PipelineSettings,
    precisions: Sequence[str],
    *,
    source: str,
    progress: Progress = False,
    on_prepare: Callable[[str, float], None] | None = None,
    cancel: threading.Event | None = None,
    calibration: CalibrationSettings | None = None,
) -> list[PaneSpec]:
    """One pane per precision of ``base``'s model, labelled with the precision.

    Each variant comes from the precision cache or is built now (INT8 calibrates on
    ``source``, which takes a while): see framelens.core.sessions.runs.prepare_precision.
    ``on_prepare(text, 0..1)`` texts start with the precision; ``cancel`` stops with
    Cancelled and leaves nothing cached.
    """
    return [
        prepare_pane(
            precision,
            replace(base, precision=precision),
            source=source,
            progress=progress,
            on_prepare=on_prepare,
            cancel=cancel,
            calibration=calibration,
        )
        for precision in precisions
    ]


def prepare_pane(
    label: str,
    settings: PipelineSettings,
    *,
    source: str,
    progress: Progress = False,
    on_prepare: Callable[[str, float], None] | None = None,
    cancel: threading.Event | None = None,
    calibration: CalibrationSettings | None = None,
) -> PaneSpec:
    """One pane: ``settings`` with its precision's variant, from the cache or built now.

    ``on_prepare(text, 0..1)`` texts start with ``label``.
    """

    def report(text: str, fraction: float) -> None:
        if on_prepare is not None:
            on_prepare(f"{label}: {text}", fraction)

    prepared, _ = prepare_precision(
        source,
        settings,
        progress=progress,
        on_prepare=report,
        cancel=cancel,
        calibration=calibration,
    )
    return PaneSpec(label, prepared)
