"""`framelens compare`: precisions side by side on the same frames, or super-resolution
models against bicubic, into a report folder."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from framelens.cli_options import settings_from_args
from framelens.core.errors import ConfigError
from framelens.core.stages.tasks import task_kind, task_kinds
from framelens.terminal_bars import bars_for

__all__ = ["cmd_compare"]


def cmd_compare(args: argparse.Namespace) -> int:
    from framelens.core.pipeline.compare.variants import parse_precisions, precision_panes
    from framelens.core.precision import CalibrationSettings
    from framelens.core.sessions.compare.to_report import compare_to_report

    if args.frames is not None and args.frames <= 0:
        raise ConfigError("--frames must be positive")
    if args.models or (args.task is not None and task_kind(args.task).produces_image):
        return _compare_superres(args)
    if not args.precisions:
        raise ConfigError("--precisions is required (2 to 4, e.g. fp32,fp16,int8)")
    precisions, reference = parse_precisions(args.precisions, args.reference)
    # The fp32 settings every pane starts from; each precision's model comes from its variant.
    base = settings_from_args(argparse.Namespace(**{**vars(args), "precision": "fp32"}))
    calibration = CalibrationSettings(
        frames=args.calibration_frames, sensitivity_frames=args.sensitivity_frames, conf=args.conf
    )
    calibration.validate()
    summary = compare_to_report(
        args.source,
        # Called once the report directory is known to be writable: INT8 takes minutes.
        lambda: precision_panes(
            base, precisions, source=args.source, progress=bars_for(args), calibration=calibration
        ),
        args.report,
        reference=reference,
        start=args.start,
        frames=args.frames,
        progress=bars_for(args),
    )
    print(json.dumps(summary, indent=2))
    return 0


def _compare_superres(args: argparse.Namespace) -> int:
    from framelens.core.pipeline.compare.superres_quality import (
        superres_quality_report,
        superres_variants,
    )
    from framelens.core.precision import PRECISIONS

    upscaling = [k.name for k in task_kinds() if k.produces_image]
    if args.task is not None and args.task not in upscaling:
        raise ConfigError(f"--models compares super-resolution models: use --task {upscaling[0]}")
    given = [m.strip() for m in (args.models or args.model or "").split(",") if m.strip()]
    if not given:
        raise ConfigError("--task superres needs --models, e.g. espcn-x2,fsrcnn-x2")
    precisions = [p.strip().lower() for p in (args.precisions or "fp32").split(",") if p.strip()]
    unknown = [p for p in precisions if p not in PRECISIONS]
    if unknown or len(set(precisions)) != len(precisions):
        raise ConfigError(f"--precisions: one each of {', '.join(PRECISIONS)}")
    settings, names = [], []
    for model in given:
        task = args.task or upscaling[0]  # an ONNX file without metadata: read as such
        fields = {**vars(args), "model": model, "task": task, "precision": "fp32"}
        one = settings_from_args(argparse.Namespace(**fields))
        settings.append(one)
        names.append(Path(model).stem if model.lower().endswith(".onnx") else model)
    summary = superres_quality_report(
        args.source,
        superres_variants(settings, names, precisions),
        args.report,
        start=args.start,
        frames=args.frames,
        progress=bars_for(args),
    )
    print(json.dumps(summary, indent=2))
    return 0
