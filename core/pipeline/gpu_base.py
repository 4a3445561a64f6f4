"""What every pipeline on the GPU shares: its context, stream and device engine, the
kernels, the CUDA preprocessing (uploads, display conversion) and a CUDA stage timer;
closing releases the engine, then the subclass's buffers.

Subclasses: GpuFramePipeline (detection, core/pipeline/gpu_pipeline.py) and
GpuSuperResPipeline (core/pipeline/gpu_superres.py), both built by build.py.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from framelens.core.errors import EngineError, GpuError
from framelens.core.gpu.buffers import cuda_driver, cuda_message
from framelens.core.gpu.context import GpuContext
from framelens.core.gpu.shared_kernels import kernels_for
from framelens.core.pipeline.processor import PipelineBase
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.stages.engines.base import DeviceEngine
from framelens.core.stages.preprocess.cuda import CudaPreprocessor
from framelens.core.stages.tasks import AnyTask
from framelens.core.stages.timing import CudaStageTimer


class GpuPipelineBase(PipelineBase):
    """A pipeline on one CUDA stream of ``ctx``; one instance per worker thread."""

    takes_device_frames = True
    label = "GPU pipeline"  # how its errors start
    RGBA_BUFFERS = 8  # frames a consumer may hold (queues, reorder, canvas) per pipeline

    def __init__(
        self,
        settings: PipelineSettings,
        ctx: GpuContext,
        stream: Any,
        engine: DeviceEngine,
        task: AnyTask,
    ) -> None:
        super().__init__(settings, task)
        self.ctx = ctx
        self.stream = stream
        self.engine: DeviceEngine | None = engine
        try:
            self.kernels = kernels_for(ctx)
            self._pre = CudaPreprocessor(ctx, self.kernels)
            with ctx.active():
                self._timer = CudaStageTimer(stream, cuda_driver().Event)
        except EngineError as exc:
            raise GpuError(str(exc)) from exc
        except Exception as exc:
            raise GpuError(f"{self.label}: {cuda_message(exc)}") from exc

    @abstractmethod
    def _free_frame_buffers(self) -> None:
        """Release the buffers made for frames (held frames stay valid)."""

    def close(self) -> None:
        """Release the engine and every buffer; safe to call twice."""
        engine, self.engine = self.engine, None
        try:
            if engine is not None:
                engine.close()
        finally:
            self._free_frame_buffers()
