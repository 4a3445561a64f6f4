"""`framelens batch` and `framelens query`: an archive of footage analysed, and searched.

    framelens batch INPUTS... --output DIR [model options] [--export-video]
                    [--track [KIND] [tracker options] [--zones ZONES.json]]
                    [--ray [auto|local|ADDRESS]] [--gpus-per-worker G] [--workers N]
    framelens query DIR [--class NAME] [--min-score S] [--source GLOB] [--between T0 T1]
                    [--track-id N] [--tracks]
    framelens query DIR --event cross|enter|exit|loiter|any [--name NAME]
                    [--direction in|out] [--class NAME] [--between T0 T1] [--source GLOB]

batch exits 0 when every input is done (now or by an earlier batch), 1 when some
failed (each named on stderr), 130 when cancelled by Ctrl+C, 128 + the signal when by kill
(SIGTERM) or a closed terminal (a later batch resumes).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from framelens.core.errors import ConfigError
from framelens.terminal_bars import bars_for

EXIT_FAILED = 1
EXIT_CANCELLED = 128 + signal.SIGINT


def add_parsers(
    sub: Any,
    add_model_args: Callable[[argparse.ArgumentParser], None],
    add_tracker_args: Callable[[argparse.ArgumentParser], None],
) -> None:
    batch = sub.add_parser(
        "batch", help="run the pipeline over files, folders or globs of videos (resumable)"
    )
    batch.add_argument("inputs", nargs="+", help="video files, folders (recursive) or globs")
    batch.add_argument("--output", required=True, metavar="DIR", help="results and manifest")
    add_model_args(batch)
    batch.add_argument(
        "--export-video",
        action="store_true",
        help="also write each input's annotated video (superres: always, the upscaled one)",
    )
    add_tracker_args(batch)
    batch.add_argument(
        "--zones",
        metavar="ZONES.json",
        help="with --track: count crossings of its lines and stays in its zones (docs/"
        "analytics.md): each input's events as Parquet in DIR/events/, its counts in the "
        "manifest; framelens query DIR --event lists the events",
    )
    batch.add_argument(
        "--ray",
        nargs="?",
        const="auto",
        default=None,
        metavar="auto|local|ADDRESS",
        help="run on Ray: auto (RAY_ADDRESS or a running cluster, else local), local, or a "
        "cluster's address (ray://HEAD:10001, HEAD:6379); default: this process, no Ray",
    )
    batch.add_argument(
        "--gpus-per-worker",
        type=float,
        default=None,
        metavar="G",
        help="with --ray and a CUDA device: GPUs per worker (default 1; 0.5: two share one)",
    )
    batch.add_argument(
        "--workers", type=int, default=None, metavar="N", help="with --ray: how many workers"
    )
    batch.add_argument(
        "--segment-frames",
        type=int,
        default=None,
        metavar="N",
        help="with --ray: split inputs longer than N frames at keyframes (default 9000; "
        "a tracked input is never split: its tracks would break at the boundaries)",
    )
    batch.add_argument("--quiet", action="store_true", help="no progress bars")

    query = sub.add_parser("query", help="search the detections of a batch's results")
    query.add_argument("dir", metavar="DIR", help="a batch's --output folder")
    query.add_argument("--class", dest="label", metavar="NAME", help="only this class")
    query.add_argument("--min-score", type=float, default=0.0, metavar="S")
    query.add_argument("--source", metavar="GLOB", help="only sources whose path matches")
    query.add_argument(
        "--between", nargs=2, type=float, metavar=("T0", "T1"), help="seconds of the source"
    )
    query.add_argument("--limit", type=int, default=None, metavar="N", help="at most N lines")
    query.add_argument(
        "--track-id",
        type=int,
        default=None,
        metavar="N",
        help="a tracked batch's: the boxes of track N (IDs are per input: each input's "
        "track N, its source on each line; --source picks one)",
    )
    query.add_argument(
        "--tracks",
        action="store_true",
        help="list the tracks instead: per input and track its ID, class, first and last "
        "frame, duration and boxes",
    )
    query.add_argument(
        "--event",
        metavar="cross|enter|exit|loiter|any",
        help="list the events of a batch run with --zones instead (DIR/events/): crossings "
        "of a line, entering, leaving or loitering in a zone, or any; --class, --between, "
        "--source, --track-id and --limit narrow them",
    )
    query.add_argument(
        "--name", metavar="NAME", help="with --event: only the events of this line or zone"
    )
    query.add_argument(
        "--direction", metavar="in|out", help="with --event cross: only crossings this way"
    )


def cmd_batch(args: argparse.Namespace) -> int:
    from framelens.cli_options import settings_from_args, tracker_from_args
    from framelens.core.pipeline.build import default_batch
    from framelens.core.sessions.archive import DEFAULT_SEGMENT_FRAMES, run_batch
    from framelens.core.sessions.archive.inputs import discover_inputs

    ray_only = ("workers", "gpus_per_worker", "segment_frames")
    given = [f"--{k.replace('_', '-')}" for k in ray_only if getattr(args, k) is not None]
    if given and args.ray is None:  # without Ray they would be silently ignored
        raise ConfigError(f"{', '.join(given)}: options of Ray's workers: add --ray")
    if args.segment_frames is not None and args.segment_frames < 1:
        raise ConfigError("--segment-frames must be at least 1")
    if args.gpus_per_worker is not None and not args.gpus_per_worker > 0:
        raise ConfigError("--gpus-per-worker must be more than 0")
    if "," in args.device:
        raise ConfigError("batch runs on one device; with --ray, each worker gets its own GPU")
    settings = _cluster_settings(args) if args.ray is not None else settings_from_args(args)
    if args.gpus_per_worker is not None and not settings.device.startswith("cuda"):
        raise ConfigError(
            f"--gpus-per-worker gives each worker a GPU share, but the device is "
            f"{settings.device}: add --device cuda"
        )
    tracker = tracker_from_args(args, settings.model)
    first = discover_inputs(args.inputs)[0]
    zones = None
    if args.zones is not None:
        from framelens.cli_options import zones_from_args

        args.events = None  # a batch writes its events as Parquet, DIR/events/
        zones = zones_from_args(args, settings.model.labels, source=first,
                                tracked=tracker is not None)  # fmt: skip
    if args.batch is None:
        settings = default_batch(settings, first)
    cancel = threading.Event()

    def stop(*_: object) -> None:
        # the first Ctrl+C cancels (running inputs go back to pending); a second one
        # interrupts at once
        print("framelens: cancelling (Ctrl+C again to stop at once)", file=sys.stderr)
        cancel.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, stop)
    try:
        summary = run_batch(
            args.inputs,
            args.output,
            settings,
            export_video=args.export_video,
            ray=args.ray,
            gpus_per_worker=args.gpus_per_worker or 1.0,
            workers=args.workers,
            cancel=cancel,
            progress=bars_for(args),
            segment_frames=args.segment_frames or DEFAULT_SEGMENT_FRAMES,
            tracker=tracker,
            on_message=lambda text: print(f"framelens: {text}", file=sys.stderr),
            zones=zones,
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    for item in summary.inputs:
        if item.state == "failed":
            why = item.error or "failed"
            what = why if item.path in why else f"{item.path}: {why}"  # named once
            print(f"framelens: failed: {what}", file=sys.stderr)
    counts = summary.counts
    if counts is not None:
        print(f"framelens: counts: {counts.line()}", file=sys.stderr)
    print(f"framelens: batch: {summary.line()}", file=sys.stderr)
    if summary.cancelled:
        return EXIT_CANCELLED
    return EXIT_FAILED if summary.failed else 0


def _cluster_settings(args: argparse.Namespace) -> Any:
    """The settings of a Ray batch: ``--device cuda[:N]`` is the workers' device, so it
    is taken as it is even where this machine (the driver) has no GPU."""
    import re
    from dataclasses import replace

    from framelens.cli_options import settings_from_args

    wanted = re.fullmatch(r"cuda(?::(\d+))?", args.device.strip().lower())
    if wanted is None:
        return settings_from_args(args)
    settings = settings_from_args(argparse.Namespace(**{**vars(args), "device": "cpu"}))
    return replace(settings, device=f"cuda:{wanted.group(1) or 0}")


def cmd_query(args: argparse.Namespace) -> int:
    from framelens.core.sessions.archive import MANIFEST, archive_labels, query_detections

    folder = Path(args.dir)
    if not (folder / MANIFEST).is_file():
        raise ConfigError(f"{folder} holds no batch results (no {MANIFEST}): see framelens batch")
    if not 0.0 <= args.min_score <= 1.0:
        raise ConfigError("--min-score must be between 0 and 1")
    if args.track_id is not None and args.track_id < 1:
        raise ConfigError("--track-id: track IDs start at 1")
    if args.event is not None:
        return _list_events(args, folder)
    if args.name is not None or args.direction is not None:
        raise ConfigError("--name and --direction select events: add --event "
                          "cross|enter|exit|loiter|any")  # fmt: skip
    if args.tracks:
        return _list_tracks(args, folder)
    hits = query_detections(
        folder,
        label=args.label,
        min_score=args.min_score,
        source_glob=args.source,
        between=tuple(args.between) if args.between else None,
        limit=args.limit,
        track_id=args.track_id,
    )
    for hit in hits:
        print(hit.line())
    sys.stdout.flush()
    if hits:
        print(f"framelens: {len(hits)} detection{'s' if len(hits) != 1 else ''}", file=sys.stderr)
        return 0
    labels = archive_labels(folder)
    if args.track_id is not None and not _tracked(folder):
        print(f"framelens: no track {args.track_id}: the archive was not tracked (batch it "
              "with --track)", file=sys.stderr)  # fmt: skip
    elif args.label and args.label not in labels:
        known = ", ".join(labels) if labels else "none"
        print(f"framelens: no detections of class {args.label} (the archive has: {known})",
              file=sys.stderr)  # fmt: skip
    else:
        print("framelens: no detections match", file=sys.stderr)
    return 0


def _tracked(folder: Path) -> bool:
    """Whether any input of the archive was tracked (its rows carry track IDs)."""
    from framelens.core.sessions.archive import archive_tracks

    return bool(archive_tracks(folder))


def _list_tracks(args: argparse.Namespace, folder: Path) -> int:
    """``query --tracks``: one line per input and track (the other filters narrow it)."""
    from framelens.core.sessions.archive import archive_tracks

    if args.min_score or args.between:
        raise ConfigError("--tracks lists whole tracks: --min-score and --between select boxes")
    if args.limit is not None and args.limit < 0:
        raise ConfigError("--limit must not be negative")
    tracks = archive_tracks(
        folder, label=args.label, source_glob=args.source, track_id=args.track_id
    )
    if args.limit is not None:
        tracks = tracks[: args.limit]
    for track in tracks:
        print(track.line())
    sys.stdout.flush()
    if tracks:
        print(f"framelens: {len(tracks)} track{'s' if len(tracks) != 1 else ''}", file=sys.stderr)
    elif not _tracked(folder):
        print("framelens: the archive holds no tracks (batch it with --track)", file=sys.stderr)
    else:
        print("framelens: no tracks match", file=sys.stderr)
    return 0


def _list_events(args: argparse.Namespace, folder: Path) -> int:
    """``query --event``: one line per event of the archive's DIR/events/."""
    from framelens.core.sessions.archive import (
        DIRECTIONS,
        EVENT_KINDS,
        archive_event_names,
        query_events,
    )

    kind = None if args.event == "any" else args.event
    if kind is not None and kind not in EVENT_KINDS:
        raise ConfigError(f"--event {args.event}: one of {', '.join(EVENT_KINDS)}, any")
    if args.direction is not None and args.direction not in DIRECTIONS:
        raise ConfigError(f"--direction {args.direction}: in or out")
    if args.direction is not None and kind != "cross":
        raise ConfigError("--direction is a crossing's: add --event cross")
    if args.tracks or args.min_score:
        raise ConfigError("--event lists events: --tracks and --min-score are for detections")
    if args.limit is not None and args.limit < 0:
        raise ConfigError("--limit must not be negative")
    events = query_events(
        folder,
        kind=kind,
        name=args.name,
        direction=args.direction,
        label=args.label,
        between=tuple(args.between) if args.between else None,
        source_glob=args.source,
        limit=args.limit,
        track_id=args.track_id,
    )
    for event in events:
        print(event.line())
    sys.stdout.flush()
    if events:
        print(f"framelens: {len(events)} event{'s' if len(events) != 1 else ''}", file=sys.stderr)
        return 0
    names = archive_event_names(folder)
    if not any((folder / "events").glob("*.parquet")):  # batched without --zones
        print("framelens: the archive holds no events (batch it with --track --zones "
              "ZONES.json)", file=sys.stderr)  # fmt: skip
    elif args.name is not None and args.name not in names:
        known = ", ".join(names) if names else "none"
        print(f"framelens: no events at {args.name} (the archive's lines and zones with "
              f"events: {known})", file=sys.stderr)  # fmt: skip
    else:
        print("framelens: no events match", file=sys.stderr)
    return 0
