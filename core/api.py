"""The public API of core for the GUI: everything framelens.gui uses, and nothing else.

The GUI imports core only through this module (an import-linter contract says so),
so core's internals can move without touching the GUI. Most names are re-exported
from where they live; where the GUI used to reach into an internal (OpenCV drawing,
the difference view's colours, the report folder rules) a function here says what
it needs instead. Groups:

* errors: the hierarchy, ``Cancelled``, and ``error_message`` (the one line a user reads)
* types: frames, results, detections, images
* models: the catalogue, resolving a name or an ONNX file, layouts
* devices and backends: what can run here, and why not
* archives: batches over folders of footage (``run_batch``, local or on Ray), their
  manifest (``read_manifest``) and the Parquet detections (``query_detections``,
  ``archive_labels``)
* playback and runs: the Player, its settings and state, export runs, snapshots, what
  an export wrote (``describe_outputs``); the video wall's WallPlayer (many sources
  through one executor) and its state
* precision: FP32/FP16/INT8 variants, calibration, the INT8 sensitivity report
* compare: panes in lock-step (fed by the executor), their difference overlays, the report
* sources: opening a video, camera or stream; a file's frames at given indices
  (``frames_at``: the batch results browser's thumbnails)
* display: device frames to the screen (CUDA-GL interop); the one overlay style
  (colours, tags, layout into shapes, ``class_colour``) that the canvas paints like
  core draws
* super-resolution: its output and parameters (the region of interest), bicubic for
  comparison, detections enlarged by a model (``crop_upscaler``) and one frame's
  PSNR/SSIM against bicubic (``measure_frame_quality``)

Like the rest of core, this module imports no Qt.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from framelens.core import __version__
from framelens.core.errors import (
    Cancelled,
    ConfigError,
    ExportError,
    FrameLensError,
    SourceError,
    error_message,
)
from framelens.core.gpu.interop import (
    INTEROP_PATH,
    DeviceFrame,
    DeviceFrameUploader,
    fallback_path,
)
from framelens.core.gpu.wall_composite import LAYOUTS as WALL_LAYOUTS
from framelens.core.gpu.wall_composite import wall_grid
from framelens.core.gpu.wall_picture import WallPicture, picture_size_for
from framelens.core.models.catalog import DEFAULT_MODEL, load_catalog, resolve_model
from framelens.core.models.spec import LAYOUTS, TASK_OF_LAYOUT, ModelSpec
from framelens.core.pipeline.archive import (
    BatchSummary,
    DetectionHit,
    InputProgress,
    InputState,
    archive_labels,
    discover_inputs,
    query_detections,
    read_manifest,
    run_batch,
    search_detections,
)
from framelens.core.pipeline.build import host_pipeline
from framelens.core.pipeline.compare.feed import LockstepFeed
from framelens.core.pipeline.compare.kept import KeptFrames
from framelens.core.pipeline.compare.panes import (
    MAX_PANES,
    MIN_PANES,
    CompareRunner,
    CompareStep,
    PaneSpec,
)
from framelens.core.pipeline.compare.report import REPORT_FILES
from framelens.core.pipeline.compare.saved import save_kept_report
from framelens.core.pipeline.compare.session import compare_to_report
from framelens.core.pipeline.compare.variants import prepare_pane
from framelens.core.pipeline.decode_ahead import End
from framelens.core.pipeline.devices import (
    DeviceChoice,
    backend_choices,
    device_choices,
    resolve_device,
)
from framelens.core.pipeline.engines import EngineBuild, build_engine
from framelens.core.pipeline.player import Player, PlayerState
from framelens.core.pipeline.run import run_to_outputs
from framelens.core.pipeline.settings import PipelineSettings, with_changes, without_classes
from framelens.core.pipeline.wall import TileState, WallPlayer, WallState
from framelens.core.pipeline.wall_layout import (
    WALL_LAYOUT_SUFFIX,
    WallLayout,
    load_wall_layout,
    save_wall_layout,
)
from framelens.core.precision import (
    PRECISIONS,
    CalibrationSettings,
    LayerSensitivity,
    SensitivityReport,
    VariantInfo,
    cached_variant,
    prepare_variant,
)
from framelens.core.stages.draw.opencv import annotate
from framelens.core.stages.draw.style import (
    BGR,
    DEFAULT_STYLE,
    Overlay,
    OverlayStyle,
    Rect,
    Tag,
    class_colour,
    layout,
)
from framelens.core.stages.engines.tensorrt_flavour import Flavour, installed_flavours
from framelens.core.stages.engines.tensorrt_layers import kept_in_float, plan_layer_precisions
from framelens.core.stages.sinks import save_snapshot
from framelens.core.stages.sinks.atomic_dir import check_dir_target
from framelens.core.stages.sinks.written import describe_outputs
from framelens.core.stages.sources import Source, open_source
from framelens.core.stages.sources.camera import CameraDevice, list_cameras
from framelens.core.stages.sources.suffixes import VIDEO_SUFFIXES
from framelens.core.stages.tasks import (
    DetectParams,
    SuperResParams,
    SuperResTask,
    Upscaled,
    task_for,
)
from framelens.core.stages.tasks.detect.diff import (
    REF_ONLY_COLOUR,
    TEST_ONLY_COLOUR,
    draw_difference,
)
from framelens.core.stages.tasks.superres.color import Region, bicubic_upscale, clamp_region
from framelens.core.stages.tasks.superres.crops import (
    DEFAULT_MARGIN,
    MAX_CROPS,
    CropUpscaler,
    EnlargedCrop,
    HostUpscaler,
)
from framelens.core.stages.tasks.superres.frame_quality import FrameQuality, frame_quality
from framelens.core.stages.tasks.superres.metrics import ImageAgreement
from framelens.core.types import Detections, Frame, FrameResult, Image

__all__ = [
    "BGR",
    "DEFAULT_MARGIN",
    "DEFAULT_MODEL",
    "DEFAULT_STYLE",
    "INTEROP_PATH",
    "LAYOUTS",
    "MAX_CROPS",
    "MAX_PANES",
    "MIN_PANES",
    "PRECISIONS",
    "TASK_OF_LAYOUT",
    "VIDEO_SUFFIXES",
    "WALL_LAYOUTS",
    "WALL_LAYOUT_SUFFIX",
    "BatchSummary",
    "CalibrationSettings",
    "CameraDevice",
    "Cancelled",
    "CompareRunner",
    "CompareStep",
    "ConfigError",
    "CropUpscaler",
    "DetectParams",
    "DetectionHit",
    "Detections",
    "DeviceChoice",
    "DeviceFrame",
    "DeviceFrameUploader",
    "DifferenceColours",
    "End",
    "EngineBuild",
    "EnlargedCrop",
    "ExportError",
    "Frame",
    "FrameLensError",
    "FrameQuality",
    "FrameResult",
    "HostUpscaler",
    "Image",
    "ImageAgreement",
    "InputProgress",
    "InputState",
    "KeptFrames",
    "LayerSensitivity",
    "LockstepFeed",
    "ModelSpec",
    "Overlay",
    "OverlayStyle",
    "PaneDifferences",
    "PaneSpec",
    "PipelineSettings",
    "Player",
    "PlayerState",
    "Rect",
    "Region",
    "SensitivityReport",
    "Source",
    "SuperResParams",
    "Tag",
    "TileState",
    "Upscaled",
    "VariantInfo",
    "WallLayout",
    "WallPicture",
    "WallPlayer",
    "WallState",
    "__version__",
    "archive_labels",
    "backend_choices",
    "bicubic_upscale",
    "build_engine",
    "bundled_sample",
    "cached_variant",
    "clamp_region",
    "class_colour",
    "compare_report_folder",
    "compare_to_report",
    "crop_upscaler",
    "describe_outputs",
    "device_choices",
    "difference_colours",
    "discover_inputs",
    "draw_pane_differences",
    "error_message",
    "fallback_path",
    "fp32_variant",
    "frames_at",
    "layout",
    "list_cameras",
    "load_catalog",
    "load_wall_layout",
    "measure_frame_quality",
    "open_source",
    "picture_size_for",
    "prepare_pane",
    "prepare_variant",
    "query_detections",
    "read_manifest",
    "resolve_device",
    "resolve_model",
    "run_batch",
    "run_to_outputs",
    "save_frame_snapshot",
    "save_kept_report",
    "save_wall_layout",
    "search_detections",
    "sr_upscaler",
    "tensorrt_flavours",
    "tensorrt_kept_float",
    "wall_grid",
    "with_changes",
    "without_classes",
]

# ---- precision --------------------------------------------------------------------


def fp32_variant(spec: ModelSpec) -> VariantInfo:
    """The model as it is, as a variant: switching back to FP32 needs no preparation."""
    return VariantInfo("fp32", spec.path, spec, "", False)


# ---- playback: snapshots ----------------------------------------------------------


def save_frame_snapshot(
    result: FrameResult, path: str | Path, settings: PipelineSettings | None = None
) -> Path:
    """Save ``result``'s frame as PNG with its overlays and return the path written.

    The CPU path hands annotated frames; the GPU path leaves the overlays to the screen,
    so they are drawn here with ``settings``' labels and overlay style. Raises
    ExportError (a FrameLensError) when the file cannot be written.
    """
    image = result.annotated
    if image is None and settings is not None:  # the task draws its own overlay
        task = task_for(settings.model)
        image = task.annotate(result.frame.image, result.output, settings.overlay)
    elif image is None:
        image = annotate(result.frame.image, result.output, (), DEFAULT_STYLE)
    return save_snapshot(image, path)


# ---- compare: differences and the report ------------------------------------------


@dataclass(frozen=True)
class DifferenceColours:
    """The difference view's two colours as "#rrggbb", for legends and notes."""

    ref_only: str  # the reference found it, the pane missed it (drawn dashed)
    test_only: str  # only the pane found it


def _hex(bgr: tuple[int, int, int]) -> str:
    b, g, r = bgr
    return f"#{r:02x}{g:02x}{b:02x}"


def difference_colours() -> DifferenceColours:
    """The colours draw_pane_differences uses, for text that refers to them."""
    return DifferenceColours(_hex(REF_ONLY_COLOUR), _hex(TEST_ONLY_COLOUR))


@dataclass(frozen=True)
class PaneDifferences:
    """One compare step's difference overlays, per pane (None for the reference).

    ``images[i]``: the reference's detections that pane i missed and pane i's that the
    reference lacks, drawn on the plain frame. ``counts[i]``: (only in the reference,
    only in pane i).
    """

    images: tuple[Image | None, ...]
    counts: tuple[tuple[int, int] | None, ...]


def draw_pane_differences(step: CompareStep, panes: Sequence[PaneSpec]) -> PaneDifferences:
    """Each pane's difference overlay against the reference, and how many of each."""
    ref = step.panes[step.reference].label
    images: list[Image | None] = []
    counts: list[tuple[int, int] | None] = []
    for i, pane in enumerate(step.panes):
        if i == step.reference:
            images.append(None)
            counts.append(None)
            continue
        diff = step.difference(i)
        labels = panes[i].settings.model.labels
        images.append(draw_difference(step.frame.image, diff, labels, (ref, pane.label)))
        counts.append((len(diff.ref_only), len(diff.test_only)))
    return PaneDifferences(tuple(images), tuple(counts))


def compare_report_folder(folder: str | Path, stem: str) -> Path:
    """Where a compare report chosen to go in ``folder`` is written.

    ``folder`` itself when it is empty or holds an earlier report (overwritten), else a
    new ``<stem>_compare`` subfolder in it (``_2``, ``_3``... when taken).
    """
    try:
        return check_dir_target(folder, REPORT_FILES)
    except ExportError:
        base = Path(folder) / f"{stem or 'video'}_compare"
        target, n = base, 2
        while target.exists():
            try:
                return check_dir_target(target, REPORT_FILES)
            except ExportError:
                target = base.with_name(f"{base.name}_{n}")
                n += 1
        return check_dir_target(target, REPORT_FILES)


# ---- super-resolution: detections enlarged, one frame's quality -----------------------


def sr_upscaler(settings: PipelineSettings) -> HostUpscaler:
    """The super-resolution model of ``settings`` (its precision, device and backend) as
    a function of images: a BGR image in, the upscaled image out. Close it when done.
    ConfigError for a model that is not a super-resolution model."""
    if settings.model.task != "superres":
        raise ConfigError(f"{settings.model.name} is not a super-resolution model")
    # built where every pipeline is (build.py): the precision variant, the device's
    # engine and the task's tiling; the upscaler runs the pipeline's task and engine
    pipeline = host_pipeline(replace(settings, batch=1, params=SuperResParams()), spinning=False)
    task = pipeline.task
    if not isinstance(task, SuperResTask):  # the model's task decides: checked above
        pipeline.close()
        raise ConfigError(f"{settings.model.name} is not a super-resolution model")
    return HostUpscaler(task, pipeline.engine, pipeline.settings.device)


def crop_upscaler(
    settings: PipelineSettings,
    *,
    margin: float = DEFAULT_MARGIN,
    max_crops: int = MAX_CROPS,
    buckets: Sequence[int] | None = None,
) -> CropUpscaler:
    """Detections enlarged by the super-resolution model of ``settings`` (see
    core/stages/tasks/superres/crops.py). Close it when done."""
    return CropUpscaler(sr_upscaler(settings), margin=margin, max_crops=max_crops, buckets=buckets)


def measure_frame_quality(image: Image, settings: PipelineSettings) -> FrameQuality:
    """PSNR and SSIM of ``settings``' model (at its precision) and of bicubic against
    ``image``, shrunk by the model's scale and upscaled again (compare's method on one
    frame). Builds the model for the call: a fraction of a second, run it off the GUI
    thread."""
    with sr_upscaler(settings) as upscaler:
        return frame_quality(image, upscaler, upscaler.scale)


def tensorrt_flavours() -> tuple[Flavour, ...]:
    """The TensorRT flavours installed here (TensorRT 10/11, TensorRT-RTX), none maybe."""
    return installed_flavours()


def bundled_sample() -> str:
    """The demo clip shipped with FrameLens (CC BY 4.0, resources/samples/ATTRIBUTION.md)."""
    from importlib.resources import files

    return str(files("framelens.resources") / "samples" / "one-by-one-person-detection.mp4")


def tensorrt_kept_float(report: SensitivityReport, graph: str | Path) -> set[str]:
    """Convolutions the INT8 graph quantized that TensorRT ran in float, from the layer
    list of a plan of ``graph`` a GPU has run (empty when none has)."""
    precisions = plan_layer_precisions(graph)
    if not precisions:
        return set()
    return kept_in_float(
        precisions, [layer.name for layer in report.layers if not layer.kept_float]
    )


# ---- sources: frames at given indices ---------------------------------------------

FORWARD_READ = 48
"""A frame this close after the last one read is reached by reading on, not by seeking
(a seek decodes from the keyframe before it anyway)."""


def frames_at(
    source: str | Path, indices: Iterable[int]
) -> Generator[tuple[int, Image], None, None]:
    """``(index, BGR image)`` of a video file's frames at ``indices``, in increasing
    order, each decoded once, the file opened once. Close the generator (or exhaust it)
    to release the file. SourceError (a FrameLensError) when it cannot be opened or a
    frame is not there."""
    wanted = sorted({int(i) for i in indices})
    if not wanted:
        return
    with open_source(str(source)) as src:
        at = 0  # the index the next read returns
        for index in wanted:
            if not at <= index <= at + FORWARD_READ:
                src.seek(index)
                at = index
            frame = src.read()
            while frame is not None and frame.index < index:
                frame = src.read()
            if frame is None:
                raise SourceError(f"frame {index} is not in {source}: the video ends before it")
            at = frame.index + 1
            yield index, frame.image
