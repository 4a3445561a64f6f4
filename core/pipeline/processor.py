"""What the executor, the player and compare need of a pipeline (CPU or GPU)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.stages.tasks import AnyTask
from framelens.core.types import Frame, FrameResult, StageTimes


class FrameProcessor(Protocol):
    """A pipeline: frames in, FrameResults out, one batch per engine call.

    Implementations: FramePipeline (host frames; ONNX Runtime on the CPU or CUDA) and
    GpuFramePipeline (frames in device memory, CUDA kernels, device buffers), both built
    by core/pipeline/build.py only. A pipeline is used by one thread at a time.
    """

    # True when it takes frames in device memory (NVDEC): the builder then opens the
    # source with NVDEC for it
    takes_device_frames: bool

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
