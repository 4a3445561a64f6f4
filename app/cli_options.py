"""The command line's shared options: the model options every command takes, the
settings they make, and the bundled sample (framelens.cli and its subcommands' modules
all use them; none of them imports another command's module)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from framelens.core.errors import ConfigError

__all__ = [
    "add_heatmap_args",
    "add_model_args",
    "add_tracker_args",
    "add_tracker_options",
    "add_zones_args",
    "heatmap_from_args",
    "refuse_others_parameters",
    "refuse_replacing",
    "refuse_shared_outputs",
    "sample_video",
    "settings_from_args",
    "tracker_from_args",
    "tracker_settings_from_args",
    "zones_from_args",
]


def sample_video() -> Path:
    """The bundled demo clip (CC BY 4.0, attribution in resources/samples/ATTRIBUTION.md)."""
    from importlib.resources import files

    return Path(str(files("framelens.resources") / "samples" / "one-by-one-person-detection.mp4"))


def add_model_args(
    p: argparse.ArgumentParser, *, precision: bool = True, device_list: bool = False
) -> None:
    """The model, precision, device and threshold options of run, compare, batch, bench;
    ``device_list``: ``--device`` takes a list (run's several sources)."""
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
        help="auto | cpu | cuda[:N]"
        + ("; several sources: a list, cuda:0,cuda:1" if device_list else ""),
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


TRACKER_OPTION_HELP = {
    "high_threshold": "detections at or above it are matched first; below it (down to "
    "--low-threshold) they only extend existing tracks",
    "low_threshold": "the lowest score a detection may have to extend a track",
    "new_track_threshold": "the score a detection left over needs to start a track",
    "track_buffer": "frames a lost track is kept to be found again (at 30 fps; scaled by "
    "the frame rate)",
    "match_iou": "the least IoU of a detection and a track in the first association",
    "second_match_iou": "the least IoU in the second association (low-score detections)",
    "unconfirmed_match_iou": "the least IoU for a track not yet confirmed",
    "min_hits": "observations in a row before a new track is confirmed and gets its ID",
    "frame_rate": "the source's frames per second (scales --track-buffer)",
    "trail_length": "centre points kept per track for trails (0: none)",
    "cmc": "BoT-SORT's camera-motion compensation",
    "cmc_downscale": "BoT-SORT: the frame is shrunk by this before motion compensation",
    "ocsort_delta_t": "OC-SORT: frames between the observations its direction is measured on",
    "ocsort_inertia": "OC-SORT: the weight of the direction in matching",
    "ocsort_use_byte": "OC-SORT: also match low-score detections (ByteTrack's second association)",
}
"""What each tracker parameter means, as the command line's help says it (the fields of
core/stages/tracking/settings.py's TrackerSettings; one it does not name is still an
option, helped by its field name)."""


def _tracker_fields() -> list[tuple[str, Any, Any]]:
    """(name, type, default per tracker kind) of every TrackerSettings field but kind."""
    import dataclasses
    import typing

    from framelens.core.stages.tracking.settings import TRACKER_KINDS, TrackerSettings

    hints = typing.get_type_hints(TrackerSettings)
    per_kind = {kind: TrackerSettings.for_kind(kind) for kind in TRACKER_KINDS}
    return [
        (f.name, hints[f.name], {k: getattr(s, f.name) for k, s in per_kind.items()})
        for f in dataclasses.fields(TrackerSettings)
        if f.name != "kind"
    ]


def add_tracker_options(p: argparse.ArgumentParser, *, skip: tuple[str, ...] = ()) -> None:
    """One option per tracker parameter (TrackerSettings' fields but ``kind`` and those
    in ``skip``): ``--high-threshold``, ``--track-buffer``, ... Each defaults to the
    chosen tracker's published value; ``tracker_settings_from_args`` reads them."""
    import typing

    group = p.add_argument_group("tracker parameters (default: the chosen tracker's own)")
    for name, kind, defaults in _tracker_fields():
        if name in skip:
            continue
        values = sorted({str(v) for v in defaults.values()})
        if len(values) == 1:
            told = f"default {values[0]}"
        else:
            told = "default " + ", ".join(f"{k} {v}" for k, v in defaults.items())
        text = f"{TRACKER_OPTION_HELP.get(name, name.replace('_', ' '))} ({told})"
        option, dest = "--" + name.replace("_", "-"), f"tracker_{name}"
        if kind is bool:
            group.add_argument(option, dest=dest, action="store_const", const=True, help=text)
        elif typing.get_origin(kind) is typing.Literal:
            choices = [str(c) for c in typing.get_args(kind)]
            group.add_argument(option, dest=dest, choices=choices, default=None, help=text)
        else:
            metavar = "N" if kind is int else "X"
            group.add_argument(
                option, dest=dest, type=kind, default=None, metavar=metavar, help=text
            )


def tracker_settings_from_args(args: argparse.Namespace, kind: str, **fixed: Any) -> Any:
    """TrackerSettings of ``kind`` (its published defaults), with each parameter option
    given (``add_tracker_options``) and then ``fixed`` (field=value) applied; a value out
    of range is a ConfigError, one line."""
    from framelens.core.stages.tracking.settings import TRACKER_KINDS, TrackerSettings

    if kind not in TRACKER_KINDS:
        raise ConfigError(f"unknown tracker {kind!r} (one of {', '.join(TRACKER_KINDS)})")
    given = {
        name: value
        for name, _, _ in _tracker_fields()
        if (value := getattr(args, f"tracker_{name}", None)) is not None
    }
    try:
        return TrackerSettings.for_kind(kind, **{**given, **fixed})
    except ValueError as exc:
        raise ConfigError(f"tracker parameters: {exc}") from None


def add_tracker_args(p: argparse.ArgumentParser) -> None:
    """``--track [KIND]`` and the tracker's parameters, the options of ``framelens track``
    (run and batch; the frame rate is each source's own)."""
    from framelens.core.stages.tracking.settings import TRACKER_KINDS

    p.add_argument(
        "--track", nargs="?", const=TRACKER_KINDS[0], default=None, choices=TRACKER_KINDS,
        help=f"follow each detected object from frame to frame (each source its own "
        f"track IDs, from 1): {', '.join(TRACKER_KINDS)} (bare --track: {TRACKER_KINDS[0]})",
    )  # fmt: skip
    add_tracker_options(p, skip=("frame_rate",))


OWN_PARAMETERS = {
    "botsort": (("cmc", "cmc_downscale"), "BoT-SORT's camera-motion compensation"),
    "ocsort": (("ocsort_delta_t", "ocsort_inertia", "ocsort_use_byte"), "OC-SORT's parameters"),
}
"""Parameters only one tracker has (kind: (names, what they are)): given for another,
they would be taken and do nothing."""


def tracker_from_args(args: argparse.Namespace, model: Any) -> Any:
    """The TrackerSettings the options ask for (None without ``--track``); ConfigError for
    a tracker's option without ``--track``, a model whose outputs are not boxes, BoT-SORT's
    options for another tracker, or a parameter out of range."""
    from framelens.core.stages.tasks import kind_of

    named = _given_parameters(args)
    options = ", ".join("--" + name.replace("_", "-") for name in named)
    if args.track is None:
        if named:
            raise ConfigError(f"{options}: options of the tracker: add --track")
        return None
    if not kind_of(model).finds_objects:
        raise ConfigError(
            f"--track follows detected objects, and {model.name} ({model.task}) finds none: "
            "choose a detection model"
        )
    refuse_others_parameters(args, args.track, "--track")
    return tracker_settings_from_args(args, args.track)


def _given_parameters(args: argparse.Namespace) -> list[str]:
    """The tracker parameters given on the command line (``add_tracker_options``)."""
    return [name for name, _, _ in _tracker_fields()
            if getattr(args, f"tracker_{name}", None) is not None]  # fmt: skip


def refuse_others_parameters(args: argparse.Namespace, kind: str, option: str) -> None:
    """ConfigError (one line) for a tracker parameter given (``add_tracker_options``)
    that only another tracker than ``kind`` has; ``option`` chooses the tracker
    (``--track``)."""
    named = _given_parameters(args)
    for owner, (names, what) in OWN_PARAMETERS.items():
        theirs = [n for n in named if n in names]
        if theirs and kind != owner:
            given = ", ".join("--" + n.replace("_", "-") for n in theirs)
            raise ConfigError(f"{given}: {what}: add {option} {owner}")


def add_zones_args(p: argparse.ArgumentParser, *, tracking: bool = False) -> None:
    """``--zones`` and ``--events``: lines and zones counted from the tracks
    (docs/analytics.md). ``tracking``: for ``framelens track``, which always tracks and
    has one source."""
    p.add_argument(
        "--zones",
        metavar="ZONES.json",
        help=("" if tracking else "with --track: ")
        + "count crossings of its lines and stays in its zones (docs/analytics.md); the "
        "counts go into the JSON summary",
    )
    p.add_argument(
        "--events",
        nargs="?",
        const="",
        default=None,
        metavar="EVENTS.csv",
        help="with --zones: one row per event (frame,time_s,track_id,class,kind,name,"
        "direction), written when complete"
        + ("" if tracking else "; several sources: bare, DIR/<name>.events.csv each"),
    )


def add_heatmap_args(p: argparse.ArgumentParser) -> None:
    """``--heatmap``, ``--heatmap-half-life`` and ``--heatmap-png``: where the tracks have
    been (docs/analytics.md)."""
    p.add_argument(
        "--heatmap",
        nargs="?",
        const="accumulate",
        default=None,
        choices=("accumulate", "decay"),
        help="with --track: a heatmap of where tracked objects have been, drawn under the "
        "boxes of --export; accumulate (the default) keeps every frame, decay fades",
    )
    p.add_argument(
        "--heatmap-half-life",
        type=float,
        default=None,
        metavar="S",
        help="--heatmap decay: seconds in which the heat halves (default 10)",
    )
    p.add_argument(
        "--heatmap-png",
        nargs="?",
        const="",
        default=None,
        metavar="HEATMAP.png",
        help="with --heatmap: the final heatmap over the last frame as a PNG, written when "
        "complete; several sources: bare, DIR/<name>.heatmap.png each",
    )


def heatmap_from_args(args: argparse.Namespace, several: bool = False) -> Any:
    """The HeatmapSettings ``--heatmap`` asks for (None without it); ConfigError (one
    line) for a heatmap without a tracker, a half-life without decay, ``--heatmap-png``
    without ``--heatmap`` or with a file that cannot be written."""
    if args.heatmap is None:
        if args.heatmap_png is not None:
            raise ConfigError("--heatmap-png writes the heatmap: add --heatmap")
        if args.heatmap_half_life is not None:
            raise ConfigError("--heatmap-half-life is --heatmap decay's: add --heatmap decay")
        return None
    if getattr(args, "tracker", None) is None:
        raise ConfigError("--heatmap shows where tracks have been: add --track")
    if args.heatmap_half_life is not None and args.heatmap != "decay":
        raise ConfigError("--heatmap-half-life is --heatmap decay's: add --heatmap decay")
    per_source_file("--heatmap-png", args.heatmap_png, several, ".heatmap.png", "HEATMAP.png")
    from framelens.core.stages.analytics.heatmap import HeatmapSettings
    from framelens.core.stages.sinks.atomic import check_target

    if args.heatmap_png:
        if not args.heatmap_png.lower().endswith(".png"):
            raise ConfigError(
                f"--heatmap-png writes a PNG: {args.heatmap_png} does not end in .png"
            )
        check_target(args.heatmap_png)
    if args.heatmap_half_life is None:
        return HeatmapSettings(mode=args.heatmap)
    return HeatmapSettings(mode=args.heatmap, half_life_s=args.heatmap_half_life)


def refuse_replacing(inputs: Sequence[Path], outputs: Sequence[Path], hint: str = "") -> None:
    """ConfigError (one line) for an output that is one of the ``inputs``: renamed over it
    when complete, it would replace the file being read."""
    for out in (o for o in outputs if o.exists()):
        same = next((f for f in inputs if f.exists() and out.samefile(f)), None)
        if same is not None:
            raise ConfigError(
                f"cannot write {out}: it is the input {same}, which it would replace; "
                f"choose another name{hint}"
            )


def refuse_shared_outputs(named: Sequence[tuple[str, str | None]]) -> None:
    """ConfigError (one line) for two options that name the same output file (``named``:
    (option, path or None) pairs): the one renamed into place last would silently replace
    the other's file."""
    seen: list[tuple[str, Path]] = []
    for option, value in named:
        if not value:
            continue
        path = Path(value)
        for other, earlier in seen:
            if _same_file(path, earlier):
                raise ConfigError(
                    f"{other} and {option} both name {value}: give each output its own file"
                )
        seen.append((option, path))


def _same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file: the same path once resolved, or one file
    reached by two names (a link) where both exist."""
    if a.resolve() == b.resolve():
        return True
    try:
        return a.samefile(b)
    except OSError:  # either does not exist yet: then only the path can say
        return False


def per_source_file(
    option: str, value: str | None, several: bool, suffix: str, metavar: str
) -> None:
    """An output option that names its file for one source and is given bare for several
    (each source's ``DIR/<name><suffix>``); ConfigError (one line) otherwise."""
    if value is None:
        return
    if several and value:
        raise ConfigError(
            f"several sources: {option} writes DIR/<name>{suffix} for each source; "
            "give it without a file"
        )
    if not several and value == "":
        raise ConfigError(f"{option} needs a file for one source: {option} {metavar}")


def zones_from_args(
    args: argparse.Namespace,
    labels: Any,
    several: bool = False,
    source: str | tuple[int, int] | None = None,
    tracked: bool | None = None,
) -> Any:
    """The ZonesFile ``--zones`` names (None without it); ConfigError (one line) for a file
    that cannot be used, ``--zones`` without a tracker, ``--events`` without ``--zones``.
    Points outside ``source``'s frame (a video file, or a (width, height)) are warnings
    on stderr."""
    if args.zones is None:
        if args.events is not None:
            raise ConfigError("--events writes the events of --zones: add --zones ZONES.json")
        return None
    if not (getattr(args, "tracker", None) is not None if tracked is None else tracked):
        raise ConfigError("--zones counts tracks: add --track")
    per_source_file("--events", args.events, several, ".events.csv", "EVENTS.csv")
    from framelens.core.stages.analytics.zones import load_zones
    from framelens.core.stages.sinks.atomic import check_target

    size = _frame_size(source) if isinstance(source, str) else source
    zones = load_zones(args.zones, labels, size)
    if not zones:  # else the run would count nothing and say nothing
        raise ConfigError(f"{args.zones}: holds no lines or zones, so there is nothing to count")
    if args.events:
        check_target(args.events)
    for warning in zones.warnings:
        print(f"framelens: warning: {warning}", file=sys.stderr)
    return zones


def _frame_size(source: str | None) -> tuple[int, int] | None:
    """A video file's frame size (None: not a file, or not readable here: the run says)."""
    if source is None or not Path(source).is_file():
        return None
    try:
        import av

        with av.open(source) as container:
            stream = container.streams.video[0]
            return int(stream.codec_context.width), int(stream.codec_context.height)
    except Exception:
        return None
