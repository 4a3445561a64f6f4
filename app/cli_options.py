"""The command line's shared options: the model options every command takes, the
settings they make, and the bundled sample (framelens.cli and its subcommands' modules
all use them; none of them imports another command's module)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from framelens.core.errors import ConfigError

__all__ = [
    "TRACKER_OPTIONS",
    "add_model_args",
    "add_tracker_args",
    "sample_video",
    "settings_from_args",
    "tracker_from_args",
]


def sample_video() -> Path:
    """The bundled demo clip (CC BY 4.0, attribution in resources/samples/ATTRIBUTION.md)."""
    from importlib.resources import files

    return Path(str(files("framelens.resources") / "samples" / "one-by-one-person-detection.mp4"))


def add_model_args(p: argparse.ArgumentParser, *, precision: bool = True) -> None:
    """The model, precision, device and threshold options of run, compare, batch, bench."""
    p.add_argument("--model", default=None, help="catalogue name or path to an ONNX file")
    p.add_argument("--layout", choices=["yolox", "yolov5", "yolov8", "end2end", "yunet"])
    p.add_argument("--labels", metavar="FILE", help="class labels, one per line")
    p.add_argument(
        "--task",
        metavar="TASK",
        help="detect, faces or superres (or a task registered by a plugin): follows from the "
        "model; without --model, picks the task's default model",
    )
    p.add_argument(
        "--tile",
        type=int,
        default=0,
        metavar="PX",
        help="superres: the largest input side run at once (default: from the model and device)",
    )
    if precision:  # compare takes --precisions instead
        p.add_argument("--precision", default="fp32", choices=["fp32", "fp16", "int8"])
    p.add_argument("--backend", default="onnxruntime", choices=["onnxruntime", "tensorrt"])
    p.add_argument(
        "--device",
        default="auto",
        help="auto | cpu | cuda[:N]; run with several sources: a list, cuda:0,cuda:1",
    )
    p.add_argument("--threads", type=int, default=None, help="ONNX Runtime intra-op threads")
    p.add_argument(
        "--batch",
        type=int,
        default=None,
        metavar="N",
        help="frames per engine call (default: 4 for a video file on the GPU, else 1)",
    )
    p.add_argument("--conf", type=float, default=0.25, help="confidence threshold")
    p.add_argument("--iou", type=float, default=0.45, help="NMS IoU threshold")
    p.add_argument("--classes", default=None, help="comma-separated class names to keep")


def settings_from_args(args: argparse.Namespace) -> Any:
    from framelens.core.models.catalog import default_model, resolve_model
    from framelens.core.pipeline.devices import resolve_device
    from framelens.core.pipeline.settings import PipelineSettings
    from framelens.core.stages.tasks import kind_of, task_kind

    if args.task is not None:
        task_kind(args.task)  # ModelError naming the tasks there are
    default = default_model(args.task)  # --task without --model: its default
    spec = resolve_model(
        args.model or default, layout=args.layout, labels_file=args.labels, task=args.task
    )
    if args.task and args.task != spec.task:
        raise ConfigError(f"--task {args.task} contradicts model {spec.name} ({spec.task})")
    if not 0.0 <= args.conf <= 1.0 or not 0.0 <= args.iou <= 1.0:
        raise ConfigError("--conf and --iou must be between 0 and 1")
    if args.batch is not None and not 1 <= args.batch <= 64:
        raise ConfigError("--batch must be between 1 and 64")
    options = {
        "conf": args.conf,
        "iou": args.iou,
        "classes": args.classes,
        "tile": getattr(args, "tile", 0),
    }
    params = kind_of(spec).task.params_from_options(spec, options)
    return PipelineSettings(
        model=spec,
        params=params,
        backend=args.backend,
        device=resolve_device(args.device),
        precision=args.precision,
        threads=args.threads,
        batch=args.batch or 1,
    )


TRACKER_OPTIONS = {
    "track_high": ("--track-high", "high_threshold"),
    "track_low": ("--track-low", "low_threshold"),
    "track_new": ("--track-new", "new_track_threshold"),
    "track_buffer": ("--track-buffer", "track_buffer"),
    "match_iou": ("--match-iou", "match_iou"),
    "min_hits": ("--min-hits", "min_hits"),
    "cmc": ("--cmc", "cmc"),
}
"""The tracker's parameter options: argparse's name -> (the option, TrackerSettings' field)."""


def add_tracker_args(p: argparse.ArgumentParser) -> None:
    """``--track [KIND]`` and the tracker's parameters (run and batch)."""
    from framelens.core.stages.tracking.settings import TRACKER_KINDS

    p.add_argument(
        "--track", nargs="?", const=TRACKER_KINDS[0], default=None, choices=TRACKER_KINDS,
        help=f"follow each detected object from frame to frame (each source its own "
        f"track IDs, from 1): {', '.join(TRACKER_KINDS)} (bare --track: {TRACKER_KINDS[0]})",
    )  # fmt: skip
    p.add_argument(
        "--track-high",
        type=float,
        default=None,
        metavar="S",
        help="tracking: detections scoring this are matched first (default: the tracker's "
        "published value, as for the other tracker options)",
    )
    p.add_argument(
        "--track-low",
        type=float,
        default=None,
        metavar="S",
        help="tracking: the least score that may extend a track",
    )
    p.add_argument(
        "--track-new",
        type=float,
        default=None,
        metavar="S",
        help="tracking: the score a detection needs to start a track",
    )
    p.add_argument(
        "--track-buffer",
        type=int,
        default=None,
        metavar="N",
        help="tracking: frames a lost track is kept to be found again, counted at 30 fps "
        "(scaled by the source's frame rate)",
    )
    p.add_argument(
        "--match-iou",
        type=float,
        default=None,
        metavar="IOU",
        help="tracking: the least IoU of a box and a track to match",
    )
    p.add_argument(
        "--min-hits",
        type=int,
        default=None,
        metavar="N",
        help="tracking: frames a new track is seen before it gets an ID",
    )
    p.add_argument(
        "--cmc",
        default=None,
        choices=["sparse", "ecc", "none"],
        help="botsort: camera-motion compensation (default: sparse optical flow)",
    )


def tracker_from_args(args: argparse.Namespace, model: Any) -> Any:
    """The TrackerSettings the options ask for (None without ``--track``); ConfigError for
    a tracker's option without ``--track``, a model whose outputs are not boxes, or a
    parameter out of range."""
    from framelens.core.stages.tasks import kind_of
    from framelens.core.stages.tracking.settings import TrackerSettings

    named = [name for name in TRACKER_OPTIONS if getattr(args, name, None) is not None]
    given = {TRACKER_OPTIONS[name][1]: getattr(args, name) for name in named}
    if args.track is None:
        if named:
            options = ", ".join(TRACKER_OPTIONS[name][0] for name in named)
            raise ConfigError(f"{options}: options of the tracker: add --track")
        return None
    if not kind_of(model).finds_objects:
        raise ConfigError(
            f"--track follows detected objects, and {model.name} ({model.task}) finds none: "
            "choose a detection model"
        )
    for name in named:
        option, value = TRACKER_OPTIONS[name][0], getattr(args, name)
        if isinstance(value, float) and not 0.0 <= value <= 1.0:
            raise ConfigError(f"{option} must be between 0 and 1")
        if isinstance(value, int) and value < (1 if name == "min_hits" else 0):
            raise ConfigError(f"{option} must be at least {1 if name == 'min_hits' else 0}")
    if given.get("cmc") is not None and args.track != "botsort":
        raise ConfigError("--cmc is BoT-SORT's camera-motion compensation: add --track botsort")
    try:
        return TrackerSettings.for_kind(args.track, **given)
    except ValueError as exc:
        raise ConfigError(f"--track: {exc}") from None
