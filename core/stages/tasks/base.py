"""What a task is: everything task-specific the pipeline, compare, export and precision need.

A pipeline knows stages (source, preprocess, engine, decode, draw, sink) and nothing of
what the model computes; the task does. Detection is the first task
(core/stages/tasks/detect/task.py); super-resolution plugs in the same way.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, Self, TypeVar

import numpy as np
import numpy.typing as npt
from framelens.core.geometry import InputGeometry
from framelens.core.models.spec import ModelSpec, input_geometry
from framelens.core.stages.draw.style import OverlayStyle
from framelens.core.stages.engines.base import Engine
from framelens.core.stages.preprocess.base import HostPreprocessor
from framelens.core.stages.preprocess.cpu import Preprocessor
from framelens.core.stages.sinks.atomic import StrPath
from framelens.core.types import Image

if TYPE_CHECKING:
    from framelens.core.stages.tasks.device import DeviceHalf, DeviceRig

OutputT = TypeVar("OutputT")
ParamsT = TypeVar("ParamsT")
MatchT = TypeVar("MatchT")
InputT = TypeVar("InputT")
OutputT_contra = TypeVar("OutputT_contra", contravariant=True)

EngineOutputs = Sequence[npt.NDArray[Any]]
"""A batch's engine outputs, in the model's output order, each with a leading batch dim."""


class Task(ABC, Generic[OutputT, ParamsT, MatchT, InputT]):
    """One model's task: preparing and decoding a batch, its parameters, overlay,
    agreement and export.

    ``params`` are the thresholds a user may change while a pipeline runs (the pipeline
    passes its current ones to every call, so a change applies from the next frame).
    ``InputT`` is what decoding needs of each frame besides the model's output
    (detection: the letterbox; super-resolution: the frame's size and chroma).
    """

    name: ClassVar[str]
    writes_outputs: ClassVar[bool] = True
    """A run writes this task's per-frame outputs beside its video (detections: .json,
    .csv, Parquet rows); False where the video is the output (super-resolution)."""
    produces_image: ClassVar[bool] = False
    """The output is an image (``output_image``): views show it, compare measures it by
    PSNR/SSIM, export writes it instead of an overlay on the frame."""
    batches_frames: ClassVar[bool] = True
    """Several frames per engine call pay off (a run on CUDA batches video files)."""
    has_thresholds: ClassVar[bool] = False
    """The user tunes score thresholds and a class filter (detection's controls)."""
    finds_objects: ClassVar[bool] = False
    """Its outputs are ``Detections``: boxes of objects a tracker can follow from frame
    to frame (core/stages/tracking/)."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec

    @classmethod
    def for_model(cls, spec: ModelSpec, output_names: Sequence[str] | None = None) -> Self:
        """The task of ``spec`` (``output_names``: the engine's, for tasks that read
        outputs by name)."""
        del output_names
        return cls(spec)

    @classmethod
    def cuda_options(cls, spec: ModelSpec) -> dict[str, str]:
        """ONNX Runtime CUDA provider options this task's model runs best with."""
        del spec
        return {}

    @classmethod
    def gpu_workers(
        cls, spec: ModelSpec, run_frames: Callable[[], int | None]
    ) -> tuple[int, str] | None:
        """How many inference workers a GPU run of ``spec`` is best served by, and why;
        None: the plan's default (two, on two CUDA streams). ``run_frames()``: the frames
        the run will process (None: workers that outlive one run, or a length not
        known), called only where the count depends on it: it may probe the file."""
        del spec, run_frames
        return None

    @classmethod
    def params_from_options(cls, spec: ModelSpec, options: Mapping[str, Any]) -> ParamsT:
        """The parameters the command line's options ask for (``conf``, ``iou``,
        ``classes``: names, comma-separated; ``tile``); ConfigError (one line) for
        options that do not fit the task or the model. By default the task's defaults."""
        del spec, options
        return cls.default_params()

    @classmethod
    def describe(cls, spec: ModelSpec) -> str:
        """What ``framelens models`` says of the model besides its name and task."""
        return f"{spec.layout:<8} {spec.input_size[1]}x{spec.input_size[0]}"

    int8_measure: ClassVar[str] = ""
    """How the INT8 search measures a trial against FP32 (core/precision/agreement.py):
    "f1" (detections), "psnr" (images); "" where it has no measure (no INT8 search)."""

    @classmethod
    def calibration_input(
        cls, spec: ModelSpec, image: Image, patch: int
    ) -> tuple[npt.NDArray[np.float32], Any]:
        """One calibration frame's model input (a copy) and what decoding needs of it:
        the frame laid out by the spec's input geometry (``patch``: the side of the part
        a task that runs on any input size feeds instead)."""
        del patch
        h, w = image.shape[:2]
        pre = Preprocessor(spec, w, h, input_geometry(spec, w, h))
        return pre(image).copy(), pre.geometry

    @classmethod
    def provenance(cls, spec: ModelSpec, params: ParamsT) -> dict[str, Any]:
        """What a run's outputs record of this task and its parameters (detections
        files' and videos' metadata), with ``task_summary``: one line of it (the video's
        comment)."""
        del params
        return {"task": spec.task, "task_summary": spec.task}

    @classmethod
    def device_unavailable(cls, params: ParamsT) -> str | None:
        """Why the GPU pipeline cannot run this task with ``params``, or None."""
        del params
        return None

    def device_half(self, rig: DeviceRig) -> DeviceHalf:
        """This task's half of a GPU pipeline (core/stages/tasks/device.py): by default
        the batch path, frames laid out by ``input_geometry`` into one engine input,
        outputs copied to the host and decoded by ``decode``."""
        from framelens.core.stages.tasks.device import BatchDevice

        return BatchDevice(rig, self)

    def input_geometry(self, src_w: int, src_h: int) -> InputGeometry:
        """Where a ``src_w`` x ``src_h`` frame goes in the model's input; both
        preprocessors (CPU and CUDA) lay frames out by it, and ``decode`` receives its
        letterbox. Detection letterboxes into the spec's input size."""
        return input_geometry(self.spec, src_w, src_h)

    @abstractmethod
    def preprocessor(self, src_w: int, src_h: int, params: ParamsT) -> HostPreprocessor[InputT]:
        """The host preprocessing of ``src_w`` x ``src_h`` frames (one per batch slot),
        for ``params`` as far as ``preprocess_key`` says they matter."""

    def preprocess_key(self, src_w: int, src_h: int, params: ParamsT) -> Hashable:
        """What a preprocessor is made for: a pipeline makes a new one when this changes
        (the frame size; super-resolution's region of interest too)."""
        del params
        return (src_w, src_h)

    def host_engine(self, engine: Engine, device: str, params: ParamsT) -> Engine:
        """The engine a host pipeline calls: ``engine`` itself, or one around it that
        this task needs (super-resolution tiles large frames)."""
        del device, params
        return engine

    def output_size(self, src_w: int, src_h: int) -> tuple[int, int]:
        """The (width, height) of the frames this task's export writes."""
        return src_w, src_h

    @classmethod
    @abstractmethod
    def default_params(cls) -> ParamsT:
        """The parameters a new pipeline starts with (the registry's defaults)."""

    @abstractmethod
    def decode(
        self, outputs: EngineOutputs, geometries: Sequence[InputT], params: ParamsT
    ) -> list[OutputT]:
        """One output per image of the batch, in order (geometry: each image's
        preprocessor's ``geometry``)."""

    @abstractmethod
    def empty(self) -> OutputT:
        """The output of a frame no model ran on (a video opened before its model)."""

    def output_image(self, output: OutputT) -> Image | None:
        """The image the model produced (super-resolution), which compare measures by
        PSNR/SSIM; None for tasks whose output is not an image (detection)."""
        del output
        return None

    @abstractmethod
    def annotate(
        self, image: Image, output: OutputT, style: OverlayStyle, *, copy: bool = True
    ) -> Image:
        """The frame with this task's overlay, drawn by OpenCV (export, snapshots)."""

    @abstractmethod
    def agree(self, reference: OutputT, output: OutputT) -> MatchT:
        """How far ``output`` agrees with ``reference`` on one frame (compare, INT8 search)."""

    @abstractmethod
    def open_writer(self, path: StrPath, meta: Mapping[str, Any]) -> OutputWriter[OutputT]:
        """A sink for this task's per-frame outputs (detections: .json or .csv), atomic."""


class OutputWriter(Protocol[OutputT_contra]):
    """Writes a task's outputs frame by frame; the file appears on close() only."""

    def add(self, index: int, pts: float, output: OutputT_contra) -> None: ...

    def close(self) -> object: ...

    def abort(self) -> None: ...


def stack_batch(tensors: Sequence[npt.NDArray[np.float32]]) -> npt.NDArray[np.float32]:
    """Single-image (1, C, H, W) tensors as one (N, C, H, W) batch."""
    if len(tensors) == 1:
        return tensors[0]
    return np.concatenate(tensors, axis=0)
