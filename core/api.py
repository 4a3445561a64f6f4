"""The public API of core for the GUI: everything framelens.gui uses, and nothing else.

The GUI imports core only through this module (an import-linter contract says so),
so core's internals can move without touching the GUI. It only re-exports: every
name lives where its job is (a snapshot with overlays: core/pipeline/snapshot.py, the
difference view: core/pipeline/compare/differences.py, the super-resolution upscalers:
core/pipeline/upscalers.py, a file's frames at indices: core/stages/sources/frames_at.py).
Groups:

* errors: the hierarchy, ``Cancelled``, and ``error_message`` (the one line a user reads)
* types: frames, results, detections, images
* models: the catalogue, resolving a name or an ONNX file, layouts
* devices and backends: what can run here, and why not
* archives: batches over folders of footage (``run_batch``, local or on Ray), their
  manifest (``read_manifest``) and the Parquet detections (``query_detections``,
  ``archive_labels``, a tracked batch's tracks: ``archive_tracks``), the events of a
  batch that counted lines and zones (``query_events``, ``archive_event_names``)
* tracking: the trackers' settings, playback's tracker and track log, following an ID
* lines and zones: the zones.json model (``parse_zones``, ``zones_as_json``), playback's
  live counting (``PlaybackAnalytics``: counts, events, saved beside the video) and
  their picture (``ZonesPicture`` on a result's marks, ``LiveCounts``)
* playback and runs: the Player, its settings and state, export runs, snapshots, what
  an export wrote (``describe_outputs``); the video wall's WallPlayer (many sources
  through one executor) and its state
* precision: FP32/FP16/INT8 variants, calibration, the INT8 sensitivity report
* compare: panes in lock-step (fed by the executor), their difference overlays, the report
* sources: opening a video, camera or stream; a file's frames at given indices
  (``frames_at``: the batch results browser's thumbnails)
* display: device frames to the screen (CUDA-GL interop); the one overlay style
  (colours, tags, layout into shapes, ``class_colour``) that the canvas paints like
  core draws; ``ms_since`` (a shown frame's time from its release, on core's clock)
* super-resolution: its output and parameters (the region of interest), bicubic for
  comparison, detections enlarged by a model (``crop_upscaler``) and one frame's
  PSNR/SSIM against bicubic (``measure_frame_quality``)

Like the rest of core, this module imports no Qt.
"""

from __future__ import annotations

from framelens.core import __version__
from framelens.core.errors import (
    Cancelled,
    ConfigError,
    ExportError,
    FrameLensError,
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
from framelens.core.pipeline.compare.differences import (
    DifferenceColours,
    PaneDifferences,
    difference_colours,
    draw_pane_differences,
)
from framelens.core.pipeline.compare.kept import KeptFrames
from framelens.core.pipeline.compare.panes import (
    MAX_PANES,
    MIN_PANES,
    CompareRunner,
    CompareStep,
    PaneSpec,
)
from framelens.core.pipeline.compare.report import compare_report_folder
from framelens.core.pipeline.compare.variants import prepare_pane
from framelens.core.pipeline.decode_ahead import End
from framelens.core.pipeline.devices import (
    DeviceChoice,
    backend_choices,
    device_choices,
    resolve_device,
)
from framelens.core.pipeline.settings import PipelineSettings, with_changes, without_classes
from framelens.core.pipeline.snapshot import save_frame_snapshot
from framelens.core.pipeline.upscalers import crop_upscaler, measure_frame_quality, sr_upscaler
from framelens.core.precision import (
    PRECISIONS,
    CalibrationSettings,
    LayerSensitivity,
    SensitivityReport,
    VariantInfo,
    cached_variant,
    fp32_variant,
    prepare_variant,
)
from framelens.core.precision.jobs import PrecisionJob, prepare_job
from framelens.core.precision.sensitivity import tensorrt_kept_float
from framelens.core.sessions.archive import (
    EVENT_KINDS,
    BatchSummary,
    DetectionHit,
    EventCounts,
    EventRow,
    InputProgress,
    InputState,
    TrackRow,
    archive_event_names,
    archive_labels,
    archive_tracks,
    discover_inputs,
    query_detections,
    query_events,
    read_manifest,
    run_batch,
    search_detections,
)
from framelens.core.sessions.compare.live_tracks import TrackNumbers
from framelens.core.sessions.compare.lockstep import LockstepFeed
from framelens.core.sessions.compare.saved import save_kept_report
from framelens.core.sessions.compare.to_report import compare_to_report
from framelens.core.sessions.compare_view import (
    CompareFrame,
    CompareWorker,
    PaneRequest,
    Resolve,
    pane_labels,
    prepare_panes,
    report_target,
)
from framelens.core.sessions.export import (
    ExportJob,
    ExportRequest,
    ProgressFn,
    default_outputs,
    writable_folder,
)
from framelens.core.sessions.playback.analytics import PlaybackAnalytics
from framelens.core.sessions.playback.bookmarks import Bookmarks
from framelens.core.sessions.playback.choice import PlaybackChoice
from framelens.core.sessions.playback.delivery import ResultGate
from framelens.core.sessions.playback.follow import FollowStep, TrackFollow, track_name
from framelens.core.sessions.playback.heatmap import PlaybackHeatmap
from framelens.core.sessions.playback.player import Player, PlayerState
from framelens.core.sessions.playback.tracking import PlaybackTracking
from framelens.core.sessions.playback.view import PlaybackView
from framelens.core.sessions.runs import run_to_outputs
from framelens.core.sessions.wall import TileState, WallPlayer, WallState
from framelens.core.sessions.wall_layout import (
    WALL_LAYOUT_SUFFIX,
    WallLayout,
    load_wall_layout,
    save_wall_layout,
)
from framelens.core.sessions.wall_process import (
    WALL_PROCESS_CHOICES,
    SharedWallFrame,
    WallProcess,
    wall_in_own_process,
)
from framelens.core.sessions.wall_transport import WallTransport
from framelens.core.sessions.wall_zones import WallZones, wall_stages, wall_zones, zones_of
from framelens.core.stages.analytics.counting import Event
from framelens.core.stages.analytics.heatmap import HeatLayer, heat_layer, heat_patch
from framelens.core.stages.analytics.picture import LiveCounts, ZonesPicture, shape_colour
from framelens.core.stages.analytics.zones import (
    ANCHORS,
    ZONES_SUFFIX,
    LineSpec,
    ZonesFile,
    ZoneSpec,
    load_zones,
    parse_zones,
    zones_as_json,
)
from framelens.core.stages.draw.style import (
    BGR,
    DEFAULT_STYLE,
    Overlay,
    OverlayStyle,
    Rect,
    Tag,
    Trail,
    box_colour,
    class_colour,
    layout,
    mark_region,
    track_colour,
)
from framelens.core.stages.engines.tensorrt_flavour import installed_flavours as tensorrt_flavours
from framelens.core.stages.sinks.written import describe_outputs
from framelens.core.stages.source_stages import StageFactory
from framelens.core.stages.sources import Source, camera_index, open_source, source_kind
from framelens.core.stages.sources.camera import CameraDevice, list_cameras
from framelens.core.stages.sources.frames_at import frames_at
from framelens.core.stages.sources.samples import bundled_sample
from framelens.core.stages.sources.suffixes import VIDEO_SUFFIXES
from framelens.core.stages.tasks import (
    DetectParams,
    SuperResParams,
    TaskKind,
    Upscaled,
    find_kind,
    produces_image,
    task_kinds,
)
from framelens.core.stages.tasks.superres.color import Region, bicubic_upscale, clamp_region
from framelens.core.stages.tasks.superres.crops import (
    DEFAULT_MARGIN,
    MAX_CROPS,
    CropUpscaler,
    EnlargedCrop,
    HostUpscaler,
)
from framelens.core.stages.tasks.superres.frame_quality import FrameQuality
from framelens.core.stages.tasks.superres.metrics import ImageAgreement
from framelens.core.stages.timing import ms_since
from framelens.core.stages.tracking.settings import TRACKER_KINDS, TrackerKind, TrackerSettings
from framelens.core.stages.tracking.track_log import TrackLog, TrackRecord
from framelens.core.tools.engine_prebuild import EngineBuild, build_engine
from framelens.core.types import Detections, Frame, FrameResult, Image

__all__ = [
    "ANCHORS",
    "BGR",
    "DEFAULT_MARGIN",
    "DEFAULT_MODEL",
    "DEFAULT_STYLE",
    "EVENT_KINDS",
    "INTEROP_PATH",
    "LAYOUTS",
    "MAX_CROPS",
    "MAX_PANES",
    "MIN_PANES",
    "PRECISIONS",
    "TASK_OF_LAYOUT",
    "TRACKER_KINDS",
    "VIDEO_SUFFIXES",
    "WALL_LAYOUTS",
    "WALL_LAYOUT_SUFFIX",
    "WALL_PROCESS_CHOICES",
    "ZONES_SUFFIX",
    "BatchSummary",
    "Bookmarks",
    "CalibrationSettings",
    "CameraDevice",
    "Cancelled",
    "CompareFrame",
    "CompareRunner",
    "CompareStep",
    "CompareWorker",
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
    "Event",
    "EventCounts",
    "EventRow",
    "ExportError",
    "ExportJob",
    "ExportRequest",
    "FollowStep",
    "Frame",
    "FrameLensError",
    "FrameQuality",
    "FrameResult",
    "HeatLayer",
    "HostUpscaler",
    "Image",
    "ImageAgreement",
    "InputProgress",
    "InputState",
    "KeptFrames",
    "LayerSensitivity",
    "LineSpec",
    "LiveCounts",
    "LockstepFeed",
    "ModelSpec",
    "Overlay",
    "OverlayStyle",
    "PaneDifferences",
    "PaneRequest",
    "PaneSpec",
    "PipelineSettings",
    "PlaybackAnalytics",
    "PlaybackChoice",
    "PlaybackHeatmap",
    "PlaybackTracking",
    "PlaybackView",
    "Player",
    "PlayerState",
    "PrecisionJob",
    "ProgressFn",
    "Rect",
    "Region",
    "Resolve",
    "ResultGate",
    "SensitivityReport",
    "SharedWallFrame",
    "Source",
    "StageFactory",
    "SuperResParams",
    "Tag",
    "TaskKind",
    "TileState",
    "TrackFollow",
    "TrackLog",
    "TrackNumbers",
    "TrackRecord",
    "TrackRow",
    "TrackerKind",
    "TrackerSettings",
    "Trail",
    "Upscaled",
    "VariantInfo",
    "WallLayout",
    "WallPicture",
    "WallPlayer",
    "WallProcess",
    "WallState",
    "WallTransport",
    "WallZones",
    "ZoneSpec",
    "ZonesFile",
    "ZonesPicture",
    "__version__",
    "archive_event_names",
    "archive_labels",
    "archive_tracks",
    "backend_choices",
    "bicubic_upscale",
    "box_colour",
    "build_engine",
    "bundled_sample",
    "cached_variant",
    "camera_index",
    "clamp_region",
    "class_colour",
    "compare_report_folder",
    "compare_to_report",
    "crop_upscaler",
    "default_outputs",
    "describe_outputs",
    "device_choices",
    "difference_colours",
    "discover_inputs",
    "draw_pane_differences",
    "error_message",
    "fallback_path",
    "find_kind",
    "fp32_variant",
    "frames_at",
    "heat_layer",
    "heat_patch",
    "layout",
    "list_cameras",
    "load_catalog",
    "load_wall_layout",
    "load_zones",
    "mark_region",
    "measure_frame_quality",
    "ms_since",
    "open_source",
    "pane_labels",
    "parse_zones",
    "picture_size_for",
    "prepare_job",
    "prepare_pane",
    "prepare_panes",
    "prepare_variant",
    "produces_image",
    "query_detections",
    "query_events",
    "read_manifest",
    "report_target",
    "resolve_device",
    "resolve_model",
    "run_batch",
    "run_to_outputs",
    "save_frame_snapshot",
    "save_kept_report",
    "save_wall_layout",
    "search_detections",
    "shape_colour",
    "source_kind",
    "sr_upscaler",
    "task_kinds",
    "tensorrt_flavours",
    "tensorrt_kept_float",
    "track_colour",
    "track_name",
    "wall_grid",
    "wall_in_own_process",
    "wall_stages",
    "wall_zones",
    "with_changes",
    "without_classes",
    "writable_folder",
    "zones_as_json",
    "zones_of",
]
