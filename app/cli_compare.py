"""`framelens compare`: precisions side by side on the same frames, or super-resolution
models against bicubic, into a report folder."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from framelens.cli_options import settings_from_args
from framelens.core.errors import ConfigError
from framelens.core.stages.tasks import task_kind, task_kinds
from framelens.terminal_bars import bars_for

if TYPE_CHECKING:
    from collections.abc import Sequence

    from framelens.core.stages.analytics.zones import ZonesFile
    from framelens.core.stages.tracking.mot import MotSequence
    from framelens.core.stages.tracking.settings import TrackerSettings

__all__ = ["add_tracking_args", "cmd_compare"]


def add_tracking_args(parser: argparse.ArgumentParser) -> None:
    """--track, --gt, --zones and --event-tolerance: every pane tracks (and counts), and
    the report scores the tracks (and compares the counts)."""
    parser.add_argument(
        "--track",
        nargs="?",
        const="bytetrack",  # the trackers' package is imported when tracking starts
        default=None,
        metavar="bytetrack|ocsort|botsort",
        help="every pane tracks its own boxes (default tracker: %(const)s); the report adds "
        "tracks, ID switches and IDF1/HOTA against the reference pane's tracks",
    )
    parser.add_argument(
        "--gt",
        metavar="GT.txt",
        default=None,
        help="with --track: MOT Challenge ground truth for the frames compared (frame 1 = "
        "the --start frame); the report adds HOTA, IDF1, MOTA per pane against it",
    )
    parser.add_argument(
        "--zones",
        metavar="ZONES.json",
        default=None,
        help="with --track: every pane counts its tracks against these lines and zones "
        "(docs/analytics.md); the report adds each pane's counts per line and zone, their "
        "difference from the reference's, the events a pane lacks or adds, and events.csv",
    )
    parser.add_argument(
        "--event-tolerance",
        type=int,
        default=None,
        metavar="FRAMES",
        help="with --zones: a pane's event and the reference's are the same when kind, line "
        "or zone, direction and class agree and their frames are at most this far apart "
        "(default 5)",
    )


def _zones(args: argparse.Namespace, labels: Sequence[str]) -> ZonesFile | None:
    """The lines and zones every pane counts, checked before any work (one line)."""
    from framelens.cli_options import zones_from_args

    if args.event_tolerance is not None:
        if args.zones is None:
            raise ConfigError("--event-tolerance matches the events of --zones: add --zones")
        if args.event_tolerance < 0:
            raise ConfigError("--event-tolerance must not be negative")
    args.events = None  # the report holds the events (events.csv)
    zones: ZonesFile | None = zones_from_args(
        args, labels, source=args.source, tracked=args.track is not None
    )
    return zones


def _tracking(args: argparse.Namespace) -> tuple[TrackerSettings | None, MotSequence | None]:
    """The tracker every pane runs and the ground truth, both checked before any work."""
    from framelens.core.stages.tracking.mot import read_ground_truth
    from framelens.core.stages.tracking.registry import make_tracker
    from framelens.core.stages.tracking.settings import TrackerSettings

    if args.track is None:
        if args.gt is not None:
            raise ConfigError("--gt scores tracks: add --track")
        if args.zones is not None:
            raise ConfigError("--zones counts tracks: add --track")
        return None, None
    try:
        make_tracker(TrackerSettings.for_kind(args.track))  # unknown, or not built yet
    except ValueError as exc:
        raise ConfigError(f"--track: {exc}") from None
    tracking = TrackerSettings.for_kind(args.track)
    return tracking, None if args.gt is None else read_ground_truth(args.gt)


def cmd_compare(args: argparse.Namespace) -> int:
    from framelens.core.pipeline.compare.events import EVENT_TOLERANCE
    from framelens.core.pipeline.compare.variants import parse_precisions, precision_panes
    from framelens.core.precision import CalibrationSettings
    from framelens.core.sessions.compare.to_report import compare_to_report

    if args.frames is not None and args.frames <= 0:
        raise ConfigError("--frames must be positive")
    if args.models or (args.task is not None and task_kind(args.task).produces_image):
        if args.track is not None or args.gt is not None or args.zones is not None:
            raise ConfigError("--track compares detectors' tracks, not super-resolution")
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
    tracking, ground_truth = _tracking(args)
    zones = _zones(args, base.model.labels)
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
        tracking=tracking,
        ground_truth=ground_truth,
        zones=zones,
        event_tolerance=EVENT_TOLERANCE if args.event_tolerance is None else args.event_tolerance,
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
