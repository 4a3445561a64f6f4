"""`framelens engines build|list|clear`: TensorRT plans built before a run.

    framelens engines build MODEL --precision fp32|fp16|int8 [--calibration VIDEO]
                            [--target sm_86,...] [--batch N]
    framelens engines list
    framelens engines clear

Ctrl+C during a build stops TensorRT's builder (its progress monitor) and caches nothing.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from framelens.core.errors import Cancelled, ConfigError


def add_parser(sub: Any) -> None:
    engines = sub.add_parser("engines", help="build, list or clear cached TensorRT engines")
    what = engines.add_subparsers(
        dest="engines_command", required=True, metavar="{build,list,clear}"
    )
    build = what.add_parser("build", help="build (or find cached) the plan of a model")
    build.add_argument("model", help="catalogue name or path to an ONNX file")
    build.add_argument("--precision", default="fp32", choices=["fp32", "fp16", "int8"])
    build.add_argument(
        "--calibration", metavar="VIDEO", help="int8: the video to calibrate on (default: sample)"
    )
    build.add_argument(
        "--target",
        metavar="sm_86,...",
        help="compute capabilities to build for ahead of time (TensorRT-RTX); default: this "
        "GPU, or every target the flavour has when there is no GPU",
    )
    build.add_argument("--batch", type=int, default=1, help="the largest batch the plan runs")
    build.add_argument("--calibration-frames", type=int, default=50)
    build.add_argument("--quiet", action="store_true", help="no progress bar")
    what.add_parser("list", help="one line per cached plan")
    what.add_parser("clear", help="remove the plans and timing caches (the precision graphs stay)")


def cmd_engines(args: argparse.Namespace) -> int:
    from framelens.core.tools import engine_prebuild as engines

    if args.engines_command == "list":
        plans = engines.engines_list()
        for plan in plans:
            print(plan.line())
        if not plans:
            print("no TensorRT engines cached", file=sys.stderr)
        return 0
    if args.engines_command == "clear":
        removed = engines.engines_clear()
        print(f"removed {removed} plan(s) and their timing caches; precision graphs kept")
        return 0
    return _build(args)


def _build(args: argparse.Namespace) -> int:
    from framelens.cli_options import sample_video
    from framelens.core.precision import CalibrationSettings
    from framelens.core.tools import engine_prebuild as engines
    from tqdm import tqdm

    if args.batch < 1:
        raise ConfigError("--batch must be at least 1")
    calibration = CalibrationSettings(frames=args.calibration_frames)
    calibration.validate()
    cancel = threading.Event()
    bar = tqdm(total=100, unit="%", disable=args.quiet or None, file=sys.stderr, leave=False)

    def progress(text: str, fraction: float) -> None:
        bar.set_description_str(text[:60], refresh=False)
        bar.update(max(0, round(100 * fraction) - bar.n))

    # Ctrl+C asks the builder to stop at its next step (its progress monitor returns
    # False), instead of raising inside TensorRT's C++ call
    previous = signal.signal(signal.SIGINT, lambda *_: cancel.set())
    try:
        built = engines.build_engine(
            args.model,
            args.precision,
            calibration=args.calibration or str(sample_video()),
            targets=args.target,
            max_batch=args.batch,
            on_progress=progress,
            cancel=cancel,
            calibration_settings=calibration,
        )
    except Cancelled:
        raise Cancelled("engine build cancelled; nothing was cached") from None
    finally:
        signal.signal(signal.SIGINT, previous)
        bar.close()
    print(built.line())
    print(built.entry)
    return 0
