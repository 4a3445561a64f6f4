"""What the executor, the player and compare need of a pipeline (CPU or GPU)."""

from __future__ import annotations

import math
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Protocol

from framelens.core.pipeline.settings import PipelineSettings, with_changes
from framelens.core.stages.tasks import AnyTask
from framelens.core.stages.timing import HostStageTimer
from framelens.core.types import Frame, FrameResult, StageTimes


class FrameProcessor(Protocol):
    """A pipeline: frames in, FrameResults out, one batch per engine call.

    Implementations: FramePipeline (host frames; ONNX Runtime on the CPU or CUDA) and
    GpuFramePipeline (frames in device memory, CUDA kernels, device buffers), each one
    class for every task, both built by core/pipeline/build.py only. A pipeline is used by
    one thread at a time.
    """

    # True when it takes frames in device memory (NVDEC): the builder then opens the
    # source with NVDEC for it
    takes_device_frames: bool
    # results carry the frame's pixels (display, export); off: outputs only
    pixels: bool

    @property
    def settings(self) -> PipelineSettings: ...

    @property
    def task(self) -> AnyTask: ...

    def infer_batch(
        self, frames: Sequence[Frame], times_each: Sequence[StageTimes]
    ) -> list[FrameResult]: ...

    def infer(self, frame: Frame, times: StageTimes) -> FrameResult: ...

    def draw(self, result: FrameResult, *, copy: bool = True) -> FrameResult: ...

    def process(self, frame: Frame, decode_ms: float = math.nan) -> FrameResult: ...

    def update(self, **changes: object) -> None: ...

    def close(self) -> None: ...


class PipelineBase(ABC):
    """What the host and the GPU pipeline share: their settings and task, live updates,
    overlays drawn on the host (export, snapshots) and the one-frame calls."""

    takes_device_frames: bool

    def __init__(self, settings: PipelineSettings, task: AnyTask) -> None:
        # whether results carry the frame's pixels for a display or an export: a run that
        # writes only detections turns it off (the GPU pipeline then skips its display
        # kernel and buffer per frame)
        self.pixels = True
        self._settings = settings
        self._task = task
        self._lock = threading.Lock()
        self._host_timer = HostStageTimer()

    @property
    def settings(self) -> PipelineSettings:
        return self._settings

    @property
    def task(self) -> AnyTask:
        return self._task

    def update(self, **changes: object) -> None:
        """Change the task's parameters or the overlay; applies from the next frame.

        The model, backend, device, precision and batch need a new pipeline.
        """
        with self._lock:
            self._settings = with_changes(self._settings, changes)

    @abstractmethod
    def infer_batch(
        self, frames: Sequence[Frame], times_each: Sequence[StageTimes]
    ) -> list[FrameResult]:
        """The batch through preprocessing, one engine call and the task's decoding."""

    def infer(self, frame: Frame, times: StageTimes) -> FrameResult:
        return self.infer_batch([frame], [times])[0]

    def draw(self, result: FrameResult, *, copy: bool = True) -> FrameResult:
        """The task's overlay on the host copy of the frame; for a task whose output is
        an image (super-resolution), that image (a GPU pipeline's frame then stays on
        the device: only the output is downloaded)."""
        with self._host_timer.stage("draw"):
            _annotate(self._task, self._settings, result, copy)
        self._host_timer.collect([result.times])
        return result

    def process(
        self, frame: Frame, decode_ms: float = math.nan, *, draw: bool = True
    ) -> FrameResult:
        """One frame; with ``draw``, overlays on frames that stay on the host (the GPU
        pipeline's stay on the device, where the canvas overlays them)."""
        result = self.infer(frame, StageTimes(decode=decode_ms))
        if draw and result.frame.on_host:
            self.draw(result)
        return result

    @abstractmethod
    def close(self) -> None:
        """Release the engine and the buffers; safe to call twice."""


def draw_after_stages(pipeline: FrameProcessor, result: FrameResult, *, copy: bool) -> None:
    """``pipeline``'s overlay on ``result``, drawn by the consumer's thread after the
    per-source stages (core/stages/source_stages.py) added to the output (track IDs,
    trails), while the pipeline's own thread may be busy with the next batch: timed
    here, not by the pipeline's stage timer."""
    start = time.perf_counter()
    _annotate(pipeline.task, pipeline.settings, result, copy)
    result.times.draw = (time.perf_counter() - start) * 1000.0


def _annotate(task: AnyTask, settings: PipelineSettings, result: FrameResult, copy: bool) -> None:
    image = task.output_image(result.output) if task.produces_image else None
    if image is not None:
        result.annotated = image
        return
    frame = result.frame.image
    # the stages' layers (a heatmap) under the task's overlay, each if the style shows it
    style = settings.overlay
    shown = [y for y in result.layers if getattr(style, getattr(y, "style_key", ""), True)]
    if shown:
        frame = frame.copy() if copy else frame
        for layer in shown:
            layer.paint(frame)
        copy = False
    annotated = task.annotate(frame, result.output, style, copy=copy)
    if result.marks:  # the stages' marks over the task's overlay, in source pixels
        flags = annotated.flags
        if (annotated is result.frame.image and copy) or not (
            flags.writeable and flags.c_contiguous
        ):
            annotated = annotated.copy()
        for mark in result.marks:
            mark.paint(annotated)
    result.annotated = annotated
