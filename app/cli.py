"""The `framelens` command: run, compare, models, doctor, bench, engines, batch, query,
evaluate, track, gui.

Every FrameLensError becomes one line on stderr (core.errors.error_message) and exit
code 2, here and nowhere else.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

from framelens.cli_options import (
    add_heatmap_args,
    add_model_args,
    add_tracker_args,
    add_zones_args,
    heatmap_from_args,
    per_source_file,
    refuse_replacing,
    refuse_shared_outputs,
    sample_video,
    settings_from_args,
    tracker_from_args,
    zones_from_args,
)
from framelens.core import __version__
from framelens.core.errors import Cancelled, ConfigError, FrameLensError, error_message
from framelens.terminal_bars import bars_for


class OneLineParser(argparse.ArgumentParser):
    """A bad option or value is one line on stderr and exit code 2, like every other
    error of the command (argparse's own would print the whole usage first); its
    subcommands' parsers are of this class too (add_subparsers makes them so). Options
    are taken only as written: a prefix would read ``--precision`` as ``--precisions``
    where a command has only the latter, and a new option could change what an old
    prefix means."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


SIGPIPE = 13  # signal.SIGPIPE, which Windows does not name
DEVICE_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})
"""Errors of a device that takes no more (stdout sent to a full disk): one line, not a
traceback."""


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="framelens", description="GPU video analysis workbench (GUI and command line)."
    )
    parser.add_argument("--version", action="version", version=f"framelens {__version__}")
    sub = parser.add_subparsers(dest="command")

    run = sub.add_parser("run", help="detect on a video, camera, stream or image folder")
    run.add_argument(
        "source",
        nargs="+",
        help="file, camera index, rtsp/http URL or image folder; several with --export-dir",
    )
    add_model_args(run, device_list=True)
    run.add_argument(
        "--export", metavar="OUT.mp4|DIR/", help="write the annotated video (DIR/: PNG frames)"
    )
    run.add_argument(
        "--lossless", action="store_true", help="with --export OUT.mkv: FFV1, bit-exact frames"
    )
    run.add_argument("--detections", metavar="OUT.json|OUT.csv", help="write the detections")
    add_tracker_args(run)
    run.add_argument(
        "--export-tracks",
        nargs="?",
        const="",
        default=None,
        metavar="TRACKS.txt",
        help="with --track: write the tracks as MOT Challenge text (frame, id, left, top, "
        "width, height, conf, -1, -1, -1); several sources: bare, DIR/<name>.tracks.txt each",
    )
    add_zones_args(run)
    add_heatmap_args(run)
    run.add_argument(
        "--batch-wait",
        type=float,
        default=None,
        metavar="MS",
        help="several sources: how long a batch waits for more frames (default 5 ms)",
    )
    run.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="inference workers (several sources: per device; default 2 on CUDA, 1 for a "
        "one-source run of up to 1000 frames through a heavy super-resolution model; one per "
        "core up to 4 on the CPU)",
    )
    run.add_argument(
        "--processes",
        default=None,
        metavar="N|auto",
        help="several sources: spread over N processes (one GIL each; the listed devices "
        "in turn); default auto: one per 4 sources for 8 or more files on one GPU",
    )
    run.add_argument(
        "--export-dir",
        metavar="DIR",
        help="several sources in one run: DIR/<name>.mp4 and DIR/<name>.json for each",
    )
    run.add_argument("--start", type=int, default=0, help="first frame index")
    run.add_argument("--frames", type=int, default=None, help="number of frames to process")
    run.add_argument(
        "--realtime", action="store_true",
        help="play files at their own rate, as cameras deliver them: a frame not taken "
        "before the next is due is dropped (the summary's dropped per source); latency "
        "counts from each frame's release; --frames: frames played, dropped included",
    )  # fmt: skip
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument(
        "-v", "--verbose", action="store_true",
        help="print the run's plan first: model graph, backend, path, workers, batch and "
        "each source's decoder, each with why",
    )  # fmt: skip
    run.add_argument(
        "--calibration-frames", type=int, default=50, help="int8: frames spread over the source"
    )
    run.add_argument(
        "--sensitivity-frames", type=int, default=8, help="int8: frames that score each layer"
    )

    sub.add_parser("models", help="list the bundled models")

    doctor = sub.add_parser("doctor", help="what this machine offers (GPU, CUDA, providers)")
    doctor.add_argument("--json", action="store_true")

    bench = sub.add_parser("bench", help="pipeline fps against a naive loop, as JSON")
    bench.add_argument("source", nargs="?", default=None, help="default: the bundled sample")
    bench.add_argument("--frames", type=int, default=200)
    bench.add_argument("--threads", type=int, default=1, help="ONNX Runtime threads, both loops")
    bench.add_argument("--workers", type=int, default=2, help="pipeline inference workers")
    bench.add_argument("--no-export", action="store_true", help="leave encoding out")
    bench.add_argument("--output", metavar="FILE.json", help="also write the JSON here")
    bench.add_argument("--quiet", action="store_true", help="no progress bars")

    compare = sub.add_parser(
        "compare", help="precisions side by side, or super-resolution models against bicubic"
    )
    compare.add_argument("source", help="file, camera index, rtsp/http URL or image folder")
    add_model_args(compare, precision=False)
    compare.add_argument(
        "--precisions",
        default=None,
        help="2 to 4, e.g. fp32,fp16,int8 (--task superres: 1 or more, default fp32)",
    )
    compare.add_argument(
        "--models",
        default=None,
        help="--task superres: models to measure, e.g. espcn-x2,fsrcnn-x2,PATH.onnx",
    )
    compare.add_argument("--reference", default=None, help="default: the first precision")
    compare.add_argument("--report", metavar="DIR", required=True, help="report directory")
    compare.add_argument("--start", type=int, default=0, help="first frame index")
    compare.add_argument("--frames", type=int, default=None, help="number of frames to compare")
    compare.add_argument("--quiet", action="store_true", help="no progress bar")
    compare.add_argument(
        "--calibration-frames", type=int, default=50, help="int8: frames spread over the source"
    )
    compare.add_argument(
        "--sensitivity-frames", type=int, default=8, help="int8: frames that score each layer"
    )
    from framelens.cli_compare import add_tracking_args

    add_tracking_args(compare)

    from framelens.cli_batch import add_parsers as add_batch
    from framelens.cli_engines import add_parser as add_engines
    from framelens.cli_tracks import add_parsers as add_tracks

    add_engines(sub)
    add_batch(sub, add_model_args, add_tracker_args)
    add_tracks(sub)

    gui = sub.add_parser("gui", help="open the desktop application (the default)")
    gui.add_argument("source", nargs="?", default=None)
    return parser


def cmd_run(args: argparse.Namespace) -> int:
    from framelens.core.sessions.runs import run_to_outputs

    sources: list[str] = list(args.source)
    args.source = sources[0]  # one source, or the one INT8 calibrates on
    devices = [d.strip() for d in args.device.split(",") if d.strip()]
    if len(devices) > 1 and not (len(sources) > 1 or args.export_dir):
        raise ConfigError("a list of devices spreads several sources: add them and --export-dir")
    args.device = devices[0] if devices else args.device
    args.devices = devices if len(devices) > 1 else None
    settings = settings_from_args(args)
    if args.frames is not None and args.frames <= 0:
        raise ConfigError("--frames must be positive")
    if args.workers is not None and args.workers < 1:
        raise ConfigError("--workers must be at least 1")
    args.tracker = tracker_from_args(args, settings.model)
    several = len(sources) > 1 or bool(args.export_dir)
    _check_export_tracks(args, several)
    args.zones_file = zones_from_args(args, settings.model.labels, several, sources[0])
    args.heatmap_settings = heatmap_from_args(args, several)
    _refuse_writing_over_sources(args, sources, several)
    if args.verbose and args.tracker is not None:
        _print_tracker(args.tracker)
    if several:
        return _run_many(args, sources, settings)
    if args.processes is not None:  # one source runs in one process: only the value is checked
        from framelens.core.pipeline.devices import process_count

        process_count(args.processes)
    if args.batch is None:
        from framelens.core.pipeline.build import default_batch

        settings = default_batch(settings, args.source)
    settings, variant = _prepare_precision(args, settings)
    summary = run_to_outputs(
        args.source,
        settings,
        export=args.export,
        detections=args.detections,
        lossless=args.lossless,
        start=args.start,
        frames=args.frames,
        progress=bars_for(args),
        on_message=lambda text: print(f"framelens: {text}", file=sys.stderr),
        on_plan=_print_plan if args.verbose else None,
        cancel=getattr(args, "cancel", None),
        tracker=args.tracker,
        tracks=args.export_tracks or None,
        zones=args.zones_file,
        events=args.events,
        realtime=args.realtime,
        heatmap=args.heatmap_settings,
        heatmap_png=args.heatmap_png or None,
        workers=args.workers,
    )
    if variant is not None:
        summary = replace(summary, variant=variant.summary())
    print(json.dumps(summary.as_json(), indent=2))
    _print_written(summary.outputs, "--export and --detections name the outputs")
    return 0


def _refuse_writing_over_sources(
    args: argparse.Namespace, sources: Sequence[str], several: bool
) -> None:
    """An output that is one of the run's input files (its sources, its zones file) is
    refused (ConfigError, one line): renamed over it when complete, it would replace the
    file being analysed (``--export clip.mp4`` on clip.mp4, ``--export-dir .`` in the
    videos' folder, ``--events zones.json`` beside ``--zones zones.json``); so are two
    outputs given one file, of which only the last written would be left."""
    from framelens.core.stages.sources import names_a_file

    if not several:
        refuse_shared_outputs(
            [("--export", args.export), ("--detections", args.detections),
             ("--export-tracks", args.export_tracks), ("--events", args.events),
             ("--heatmap-png", args.heatmap_png)]
        )  # fmt: skip
    files = [Path(s) for s in sources if names_a_file(s)]
    files += [Path(args.zones)] if args.zones else []
    if not files or (several and not args.export_dir):  # no folder: said next, one line
        return
    if several:
        from framelens.core.sessions.outputs import output_names
        from framelens.core.sessions.tracks import MOT_SUFFIX
        from framelens.core.stages.analytics.events import EVENTS_SUFFIX
        from framelens.core.stages.analytics.heatmap import HEATMAP_SUFFIX

        suffixes = (".mkv" if args.lossless else ".mp4", ".json", MOT_SUFFIX, EVENTS_SUFFIX,
                    HEATMAP_SUFFIX)  # fmt: skip
        names = output_names(sources)
        outputs = [Path(args.export_dir) / f"{n}{x}" for n in names for x in suffixes]
    else:
        given = (args.export, args.detections, args.export_tracks, args.events, args.heatmap_png)
        outputs = [Path(o) for o in given if o]
    refuse_replacing(files, outputs, " or --export-dir" if several else "")


def _check_export_tracks(args: argparse.Namespace, several: bool) -> None:
    """``--export-tracks``: a tracker's; a file for one source, bare for several (each
    source's ``DIR/<name>.tracks.txt``)."""
    if args.export_tracks is None:
        return
    if args.tracker is None:
        raise ConfigError("--export-tracks writes a tracker's tracks: add --track")
    per_source_file("--export-tracks", args.export_tracks, several, ".tracks.txt", "TRACKS.txt")


def _print_tracker(tracker: Any) -> None:
    """``-v``: the tracker and its parameters, on stderr."""
    from framelens.core.sessions.tracks import tracker_json

    described = tracker_json(tracker) or {}
    kind = described.pop("kind")
    others = {"botsort": "ocsort_", "ocsort": "cmc"}.get(kind, ("cmc", "ocsort_"))
    # another tracker's parameters (BoT-SORT's cmc, OC-SORT's ocsort_*) would read as used
    params = ", ".join(f"{k} {v}" for k, v in described.items() if not k.startswith(others))
    print(f"framelens: tracker: {kind} ({params})", file=sys.stderr)


def _print_plan(plan: Any, slot: str = "") -> None:
    """``-v``: the run's plan on stderr, a choice and its reason a line; ``slot``: the
    device slot it is of, where a run has several."""
    of = f" of {slot}" if slot else ""
    # one write: two device slots' threads print their blocks whole, not interleaved
    sys.stderr.write("".join(f"framelens: plan{of}: {line}\n" for line in plan.lines()))


def _slot_plan_printer(devices: Sequence[str]) -> Any:
    """``-v`` of a several-source run: each device slot's plan, said whose when there
    are several (device k as --device lists it, counted from 0)."""

    def show(k: int, plan: Any) -> None:
        _print_plan(plan, f"device {k} ({devices[k]})" if len(devices) > 1 else "")

    return show


def _print_written(outputs: Sequence[str], hint: str = "") -> None:
    """The run's last line, on stderr (stdout stays the JSON summary): every output
    written, or ``hint`` after "nothing written"."""
    from framelens.core.stages.sinks.written import wrote_line

    sys.stdout.flush()  # the summary first, even when both streams go to one place
    line = wrote_line(outputs) + (f" ({hint})" if hint and not outputs else "")
    print(f"framelens: {line}", file=sys.stderr)


def _run_many(args: argparse.Namespace, sources: list[str], settings: Any) -> int:
    from framelens.core.sessions.runs import run_many

    if not args.export_dir:
        raise ConfigError("several sources need --export-dir DIR (DIR/<name>.mp4 and .json each)")
    if args.export or args.detections:
        raise ConfigError("--export and --detections name one source's outputs: use --export-dir")
    if args.start:
        raise ConfigError("--start needs one source; several are read from their starts")
    if args.batch_wait is not None and args.batch_wait < 0:
        raise ConfigError("--batch-wait must not be negative")
    from framelens.core.pipeline.devices import device_slots, resolve_device
    from framelens.core.stages.sources import names_a_file

    listed = [resolve_device(d) for d in args.devices] if args.devices else [settings.device]
    files = all(names_a_file(s) for s in sources)
    devices, processes = device_slots(listed, len(sources), args.processes, files)
    if processes and args.processes in (None, "auto"):
        print(f"framelens: {len(sources)} sources on {listed[0]}: {len(devices)} processes, "
              "each with its own CUDA context and engine (--processes 1 keeps one)",
              file=sys.stderr)  # fmt: skip
    settings, variant = _prepare_precision(args, settings)  # INT8: on the first source
    summary = run_many(
        sources,
        settings,
        args.export_dir,
        devices=devices,
        lossless=args.lossless,
        frames=args.frames,
        progress=bars_for(args),
        on_message=lambda text: print(f"framelens: {text}", file=sys.stderr),
        max_wait_ms=args.batch_wait,
        workers=args.workers,
        processes=processes,
        on_plan=_slot_plan_printer(devices) if args.verbose else None,
        cancel=getattr(args, "cancel", None),
        tracker=args.tracker,
        tracks=args.export_tracks is not None,
        zones=args.zones_file,
        events=args.events is not None,
        realtime=args.realtime,
        heatmap=args.heatmap_settings,
        heatmap_png=args.heatmap_png is not None,
    )
    if variant is not None:
        summary = replace(summary, variant=variant.summary())
    print(json.dumps(summary.as_json(), indent=2))
    _print_written(summary.outputs)
    return 0 if summary.ok else 1


def _prepare_precision(args: argparse.Namespace, settings: Any) -> tuple[Any, Any]:
    """The fp16/int8 variant before the run (progress bar, then the INT8 sensitivity table
    on stderr, so stdout stays the JSON summary)."""
    if settings.precision == "fp32":
        return settings, None
    from framelens.core.pipeline.variant import prepare_precision
    from framelens.core.precision import CalibrationSettings

    calibration = CalibrationSettings(
        frames=args.calibration_frames, sensitivity_frames=args.sensitivity_frames, conf=args.conf
    )
    calibration.validate()
    settings, variant = prepare_precision(
        args.source, settings, progress=bars_for(args), calibration=calibration,
        cancel=getattr(args, "cancel", None),
    )  # fmt: skip
    if variant is not None and variant.report is not None:
        cached = " (cached)" if variant.from_cache else ""
        print(f"INT8 layer sensitivity{cached}:", file=sys.stderr)
        print(variant.report.table(), file=sys.stderr)
    return settings, variant


def cmd_models(_: argparse.Namespace) -> int:
    from framelens.core.models.catalog import DEFAULT_MODEL, load_catalog
    from framelens.core.stages.tasks import find_kind

    for name, spec in load_catalog().items():
        mark = "*" if name == DEFAULT_MODEL else " "
        kind = find_kind(spec.task)
        what = kind.task.describe(spec) if kind is not None else spec.layout
        print(f"{mark} {name:<12} {spec.task:<8} {what}  {spec.licence}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from framelens.core.tools.doctor import diagnose

    report = diagnose()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        width = max(len(k) for k in report)
        for key, value in report.items():
            print(f"{key:<{width}}  {value}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from framelens.core.tools.bench import run_bench

    for option, value in (("--frames", args.frames), ("--workers", args.workers)):
        if value <= 0:
            raise ConfigError(f"{option} must be positive")
    if args.threads is not None and args.threads <= 0:
        raise ConfigError("--threads must be positive")
    source = args.source or str(sample_video())
    if args.output:  # one line before minutes of benchmark, not after
        from framelens.core.stages.sinks.atomic import check_target
        from framelens.core.stages.sources import names_a_file

        check_target(args.output)
        refuse_replacing([Path(source)] if names_a_file(source) else [], [Path(args.output)])
    result = run_bench(
        source,
        frames=args.frames,
        threads=args.threads,
        export=not args.no_export,
        workers=args.workers,
        progress=bars_for(args),
    )
    text = json.dumps(result, indent=2)
    print(text)
    if args.output:
        from framelens.core.stages.sinks.atomic import write_bytes_atomic

        write_bytes_atomic(Path(args.output), (text + "\n").encode())
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from framelens.cli_compare import cmd_compare

    return cmd_compare(args)


def _cmd_engines(args: argparse.Namespace) -> int:
    from framelens.cli_engines import cmd_engines

    return cmd_engines(args)


def _cmd_batch(args: argparse.Namespace) -> int:
    from framelens.cli_batch import cmd_batch

    return cmd_batch(args)


def _cmd_query(args: argparse.Namespace) -> int:
    from framelens.cli_batch import cmd_query

    return cmd_query(args)


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from framelens.cli_tracks import cmd_evaluate

    return cmd_evaluate(args)


def _cmd_track(args: argparse.Namespace) -> int:
    from framelens.cli_tracks import cmd_track

    return cmd_track(args)


HEADLESS_PLATFORMS = frozenset(
    {"offscreen", "minimal", "minimalegl", "vnc", "eglfs", "linuxfb", "vkkhrdisplay"}
)
"""Qt platform plugins that need no X11 or Wayland display."""


def no_display(env: Mapping[str, str], platform: str = sys.platform) -> str | None:
    """Why the window cannot open here (one line), or None: on Linux and the BSDs, no
    DISPLAY, no WAYLAND_DISPLAY and no headless Qt platform asked for. (Qt itself would
    abort with a misleading note about libxcb-cursor0.)"""
    if platform.startswith(("win", "darwin", "cygwin")):
        return None
    if env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"):
        return None
    asked = env.get("QT_QPA_PLATFORM", "").split(":", 1)[0].strip().lower()
    if asked in HEADLESS_PLATFORMS:
        return None
    return (
        "no display: the window needs a desktop session (DISPLAY or WAYLAND_DISPLAY is "
        "not set); use `framelens run` for the command line"
    )


def cmd_gui(args: argparse.Namespace) -> int:
    reason = no_display(os.environ)
    if reason is not None:
        raise ConfigError(reason)
    # imported here: commands that never open a window do not pay for loading Qt
    from framelens.gui.app import main as run_gui

    return int(run_gui([sys.argv[0]], source=args.source))


COMMANDS = {
    "run": cmd_run,
    "compare": _cmd_compare,
    "models": cmd_models,
    "doctor": cmd_doctor,
    "bench": cmd_bench,
    "gui": cmd_gui,
    "engines": _cmd_engines,
    "batch": _cmd_batch,
    "query": _cmd_query,
    "evaluate": _cmd_evaluate,
    "track": _cmd_track,
}


STOP_SIGNALS = ("SIGTERM", "SIGHUP")
"""Signals that stop a command as Ctrl+C does: ``kill``, a service manager, a closed
terminal. A file run removes its partial outputs; a recording of a live source ends and
is kept, complete; a batch cancels (pending inputs stay for the next one)."""


def stop_like_ctrl_c() -> list[int]:
    """Make STOP_SIGNALS do what Ctrl+C does now, whatever handles it then (a command's
    own cancel, else KeyboardInterrupt). Returns the signals received, in order."""
    received: list[int] = []

    def forward(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler) and handler is not forward:
            handler(signal.SIGINT, frame)
        else:  # Ctrl+C ignored (started in the background) or Python's default
            raise KeyboardInterrupt

    for name in STOP_SIGNALS:
        signum = getattr(signal, name, None)  # Windows has no SIGHUP
        if signum is not None and signal.getsignal(signum) is not signal.SIG_IGN:  # nohup
            signal.signal(signum, forward)
    return received


def stop_at_next_frame() -> tuple[threading.Event, list[int]]:
    """Ctrl+C and STOP_SIGNALS ask a run to stop at its next frame: the run unwinds from
    there (a file's partial outputs removed, a live recording kept), never from whatever
    line the signal fell on (a thread half started, a temporary half registered: they
    were left behind). A second signal stops at once. Returns the request and the
    signals received, in order."""
    asked = threading.Event()
    received: list[int] = []

    def ask(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        if asked.is_set():
            raise KeyboardInterrupt
        asked.set()

    for name in ("SIGINT", *STOP_SIGNALS):
        signum = getattr(signal, name, None)  # Windows has no SIGHUP
        # a signal ignored when the run started stays ignored: Ctrl+C for a run started
        # in the background by a script, SIGHUP under nohup
        if signum is not None and signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, ask)
    return asked, received


def bare_track(argv: Sequence[str]) -> list[str]:
    """``--track`` followed by a source, not a tracker's name (``framelens run --track
    clip.mp4``), is a bare ``--track``: the default tracker."""
    from framelens.core.stages.tracking.settings import TRACKER_KINDS

    out = list(argv)
    for i, arg in enumerate(out[:-1]):
        after = out[i + 1]
        a_source = Path(after).exists() or "/" in after or "." in after or after.isdigit()
        if arg == "--track" and after not in TRACKER_KINDS and a_source:
            out.insert(i + 1, TRACKER_KINDS[0])  # a misspelt tracker stays argparse's error
            break
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(bare_track(sys.argv[1:] if argv is None else argv))
    command = args.command or "gui"
    if unknown:  # named by the command they were given to, as its other errors are
        prog = f"{parser.prog} {command}" if args.command else parser.prog
        what = f"unrecognized arguments: {' '.join(unknown)}"
        parser.exit(2, f"{prog}: error: {what} (see {prog} --help)\n")
    if command == "gui" and not hasattr(args, "source"):
        args.source = None
    received: list[int] = []
    if command == "run":
        args.cancel, received = stop_at_next_frame()
    elif command != "gui":
        received = stop_like_ctrl_c()
    try:
        code = COMMANDS[command](args)
        sys.stdout.flush()  # a closed pipe is met here, not when Python exits
        if code == 128 + signal.SIGINT and received:  # cancelled (a batch): by which
            return 128 + received[-1]
        return code
    except Cancelled as exc:
        if not received:  # cancelled by nothing the user did: say what
            print(f"framelens: error: {error_message(exc)}", file=sys.stderr)
            return 2
        print("framelens: interrupted", file=sys.stderr)
        return 128 + received[-1]
    except FrameLensError as exc:
        print(f"framelens: error: {error_message(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("framelens: interrupted", file=sys.stderr)
        return 128 + (received[-1] if received else signal.SIGINT)
    except BrokenPipeError:  # `framelens query ... | head`: the reader has all it wanted
        # stdout's buffered rest would fail again when Python exits: send it nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + SIGPIPE
    except OSError as exc:
        if exc.errno not in DEVICE_FULL:  # no full disk: a bug, shown with its stack
            raise
        # outputs' own errors are one line already: here stdout (`> /dev/full`) failed
        what = exc.filename or "standard output"
        reason = (exc.strerror or str(exc)).lower()
        print(f"framelens: error: cannot write {what}: {reason}", file=sys.stderr)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 2


if __name__ == "__main__":
    sys.exit(main())
