"""`framelens track` and `framelens evaluate`: tracking without a video, and tracks
scored against ground truth.

    framelens track DETECTIONS --output TRACKS.txt [--tracker bytetrack|ocsort|botsort]
                    [--frame-size WxH] [--fps N] [tracker parameters]
    framelens evaluate TRACKS --gt GT.txt [--report DIR] [--benchmark MOT16|MOT17|MOT20]
                       [--no-preprocess]

DETECTIONS is MOT Challenge detections text (id -1) or a FrameLens detections JSON; the
tracker alone runs over it frame by frame (frames without a detection too) and the
tracks are written as MOT Challenge text, complete or not at all. A summary (the
tracker's settings, frames, tracks, milliseconds per frame) goes to stdout as JSON.

TRACKS is MOT Challenge text or a FrameLens detections JSON of a run that tracked; GT is
MOT Challenge text. The metrics (TrackEval's HOTA, CLEAR and Identity) go to stdout as
JSON; --report writes a folder with the same JSON, plots and index.html. MOT16/17/20
ground truth (a class on each line) gets the MOT Challenge's preprocessing, as the
official evaluation does: track boxes on distractors removed, only pedestrians counted
(the benchmark's rules: --benchmark, else the one GT's path names, else MOT17);
--no-preprocess counts every considered row instead. The JSON's "protocol" says which. A file that
cannot be read is one line naming it and the line (exit 2), and nothing is written.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

from framelens.core.errors import ConfigError

__all__ = ["add_parsers", "cmd_evaluate", "cmd_track"]


def add_parsers(sub: Any) -> None:
    from framelens.core.stages.tracking.evaluation import BENCHMARKS

    add_track_parser(sub)
    evaluate = sub.add_parser(
        "evaluate", help="score tracks against ground truth (HOTA, IDF1, MOTA, ...) as JSON"
    )
    evaluate.add_argument(
        "tracks", metavar="TRACKS", help="MOT Challenge text, or a FrameLens detections JSON"
    )
    evaluate.add_argument(
        "--gt", required=True, metavar="GT.txt", help="ground truth, MOT Challenge text"
    )
    evaluate.add_argument(
        "--report",
        metavar="DIR",
        help="also write an HTML report with plots (a new or empty folder, or an earlier "
        "evaluation report)",
    )
    evaluate.add_argument(
        "--benchmark",
        choices=BENCHMARKS,
        help="whose preprocessing MOT16/17/20 ground truth gets (MOT20 also drops track "
        "boxes on non-MOT vehicles; default: the benchmark GT's path names, else MOT17)",
    )
    evaluate.add_argument(
        "--classes",
        metavar="NAMES",
        help="score only the tracks of these classes (comma-separated names or IDs, e.g. "
        "person): MOT Challenge ground truth has pedestrians only",
    )
    evaluate.add_argument(
        "--no-preprocess",
        dest="preprocess",
        action="store_false",
        help="MOT16/17/20 ground truth: count every row not marked 0, whatever its class, "
        "and keep track boxes on distractors (TrackEval's DO_PREPROC off)",
    )


def cmd_evaluate(args: argparse.Namespace) -> int:
    from framelens.core.stages.sinks.atomic_dir import check_dir_target
    from framelens.core.stages.tracking.evaluation import ERROR_SPANS, evaluate_tracks
    from framelens.core.stages.tracking.evaluation_report import (
        EVALUATION_REPORT_FILES,
        write_evaluation_report,
    )
    from framelens.core.stages.tracking.mot import read_ground_truth, read_tracks_file

    if args.report:  # refused before the work, as one line
        check_dir_target(args.report, EVALUATION_REPORT_FILES, EVALUATION_REPORT_FILES)
    tracks = read_tracks_file(args.tracks)
    ground_truth = read_ground_truth(args.gt)
    classes = [c.strip() for c in (args.classes or "").split(",") if c.strip()]
    if classes:
        tracks = tracks.only_classes(classes)
    elif len(counts := tracks.class_counts()) > 1:  # every class scored as the GT's
        listed = ", ".join(
            f"{tracks.class_name(c)} {n}"
            for c, n in sorted(counts.items(), key=lambda x: (-x[1], tracks.class_name(x[0])))
        )
        print(
            f"framelens: warning: {args.tracks} holds tracks of {len(counts)} classes "
            f"({listed}), each scored against the ground truth: --classes picks",
            file=sys.stderr,
        )
    evaluation = evaluate_tracks(
        tracks,
        ground_truth,
        error_spans=ERROR_SPANS if args.report else 0,
        preprocess=args.preprocess,
        benchmark=args.benchmark,
    )
    if classes:  # said with the scores, in the report too
        evaluation = replace(evaluation, classes=tuple(classes))
    report = write_evaluation_report(args.report, evaluation) if args.report else None
    print(json.dumps(evaluation.as_json(), indent=2))
    if report is not None:
        _print_written([report])
    return 0


def _print_written(outputs: list[Path]) -> None:
    """The last line, on stderr (stdout stays the JSON): what was written."""
    from framelens.core.stages.sinks.written import wrote_line

    sys.stdout.flush()
    print(f"framelens: {wrote_line(outputs)}", file=sys.stderr)


def add_track_parser(sub: Any) -> None:
    from framelens.cli_options import add_tracker_options, add_zones_args
    from framelens.core.stages.tracking.settings import TRACKER_KINDS

    track = sub.add_parser(
        "track", help="run a tracker over detections (MOT text or FrameLens JSON), no video"
    )
    track.add_argument(
        "detections",
        metavar="DETECTIONS",
        help="MOT Challenge detections text (id -1), or a FrameLens detections JSON",
    )
    track.add_argument(
        "--output", required=True, metavar="TRACKS.txt", help="the tracks, MOT Challenge text"
    )
    track.add_argument(
        "--tracker", default=TRACKER_KINDS[0], choices=TRACKER_KINDS, help="default: %(default)s"
    )
    track.add_argument(
        "--frame-size",
        metavar="WxH",
        help="the source's size in pixels: detections are clipped to it, as a run clips "
        "its own (default: none, or the JSON's, whose boxes are clipped already)",
    )
    track.add_argument(
        "--fps",
        type=float,
        default=None,
        metavar="N",
        help="the source's frame rate, which scales --track-buffer (default: the JSON's, else 30)",
    )
    add_zones_args(track, tracking=True)
    add_tracker_options(track, skip=("frame_rate", "trail_length", "cmc", "cmc_downscale"))


def _frame_size(text: str) -> tuple[int, int]:
    width, sep, height = text.lower().partition("x")
    if sep and width.strip().isdigit() and height.strip().isdigit():
        size = int(width), int(height)
        if size[0] > 0 and size[1] > 0:
            return size
    raise ConfigError(f"--frame-size {text!r}: give WIDTHxHEIGHT in pixels, e.g. 1920x1080")


def _blank_frame(size: tuple[int, int] | None, detections: Any) -> Any:
    """A black frame of the source's size, for a tracker that looks at pixels: the size
    given, the JSON's, else the boxes' extent (at least 1x1)."""
    import numpy as np

    if size is None and detections.width and detections.height:
        size = detections.width, detections.height
    if size is None:
        right, bottom = 1.0, 1.0
        for frame in detections.frames:
            if len(frame):
                right = max(right, float((frame.boxes[:, 0] + frame.boxes[:, 2]).max()))
                bottom = max(bottom, float((frame.boxes[:, 1] + frame.boxes[:, 3]).max()))
        size = math.ceil(right), math.ceil(bottom)
    return np.zeros((size[1], size[0], 3), np.uint8)


def _clipped(found: Any, size: tuple[int, int]) -> Any:
    """The detections clipped to the frame, as a run's are; boxes wholly outside it
    (nothing left after clipping) are dropped."""
    import numpy as np

    limits = np.array([size[0], size[1], size[0], size[1]], np.float32)
    boxes = np.clip(found.boxes, 0.0, limits)
    found.boxes = boxes
    return found.select((boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1]))


@contextlib.contextmanager
def _stop_between_frames() -> Iterator[threading.Event]:
    """Ctrl+C (and what framelens.cli forwards to it: SIGTERM, SIGHUP) asks the tracking
    loop to stop at its next frame, where the tracks writer can be aborted whole, instead
    of raising wherever the signal falls (between creating the temporary file and
    registering its removal, it was left behind). A second signal stops at once."""
    asked = threading.Event()
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.SIG_IGN or threading.current_thread() is not threading.main_thread():
        yield asked  # Ctrl+C ignored (started in the background), or not ours to take
        return

    def ask(signum: int, frame: FrameType | None) -> None:
        if asked.is_set():
            raise KeyboardInterrupt
        asked.set()

    signal.signal(signal.SIGINT, ask)
    try:
        yield asked
    finally:
        signal.signal(signal.SIGINT, previous)


def cmd_track(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from framelens.cli_options import (
        refuse_others_parameters,
        refuse_replacing,
        refuse_shared_outputs,
        tracker_settings_from_args,
        zones_from_args,
    )
    from framelens.core.stages.analytics import AnalyticsStage, EventsWriter
    from framelens.core.stages.sinks.atomic import check_target
    from framelens.core.stages.tracking.mot import MotFrame, MotTracksWriter, read_detections_file
    from framelens.core.stages.tracking.registry import make_tracker

    size = _frame_size(args.frame_size) if args.frame_size else None
    if args.fps is not None and not (math.isfinite(args.fps) and args.fps > 0):
        raise ConfigError("--fps must be a positive number")
    check_target(args.output)  # one line before any work, and nothing written
    refuse_shared_outputs([("--output", args.output), ("--events", args.events)])
    targets = [Path(args.output), *([Path(args.events)] if args.events else [])]
    inputs = [Path(args.detections), *([Path(args.zones)] if args.zones else [])]
    refuse_replacing(inputs, targets)
    detections = read_detections_file(args.detections)
    fps = args.fps or detections.fps or 30.0
    known = size or (
        (detections.width, detections.height) if detections.width and detections.height else None
    )
    zones = zones_from_args(args, detections.labels, source=known, tracked=True)
    # no pixels here: no camera-motion compensation, no trails
    refuse_others_parameters(args, args.tracker, "--tracker")
    settings = tracker_settings_from_args(
        args, args.tracker, frame_rate=fps, trail_length=0, cmc="none"
    )
    try:
        tracker = make_tracker(settings)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    image = _blank_frame(size, detections) if tracker.needs_image else None
    track_ids: set[int] = set()
    started = time.perf_counter()
    analytics = AnalyticsStage(zones, detections.labels) if zones is not None else None
    with contextlib.ExitStack() as outputs:
        stop = outputs.enter_context(_stop_between_frames())
        writer = outputs.enter_context(MotTracksWriter(args.output))
        events = (
            outputs.enter_context(EventsWriter(args.events, detections.labels))
            if (args.events)
            else None
        )
        for frame in detections.frames:
            if stop.is_set():  # Ctrl+C (or SIGTERM, SIGHUP): the writers remove their files
                raise KeyboardInterrupt
            found = frame.detections() if size is None else _clipped(frame.detections(), size)
            found.track_ids = tracker.update(found, image)
            if analytics is not None:  # MOT frame numbers; time from the first frame
                made = analytics.update(frame.number, (frame.number - 1) / fps, found)
                if events is not None:
                    events.add_events(made)
            tracked = MotFrame.from_detections(frame.number, found)
            track_ids.update(int(i) for i in tracked.ids)
            writer.add_frame(tracked)
    seconds = time.perf_counter() - started
    frames = len(detections.frames)
    summary = {
        "detections": str(args.detections),
        "output": str(writer.path),
        "tracker": settings.kind,
        "settings": {k: v for k, v in asdict(settings).items() if k != "kind"},
        "frames": frames,
        "detection_boxes": detections.num_boxes,
        "tracks": len(track_ids),
        "track_boxes": writer.boxes_written,
        "ms_per_frame": round(1000.0 * seconds / frames, 4) if frames else None,
    }
    if analytics is not None:
        summary["analytics"] = analytics.tally.as_json()
    print(json.dumps(summary, indent=2))
    _print_written([writer.path] + ([events.path] if events is not None else []))
    return 0
