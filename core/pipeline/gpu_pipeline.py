"""The GPU pipeline: frames in device memory -> task outputs + RGBA display frames, for
every task.

It owns what every task shares on the device: the CUDA context's stream, the device
engine (ONNX Runtime IOBinding or TensorRT, on that stream), the kernels, the CUDA
preprocessing (host frames' uploads, display conversion), a CUDA stage timer, fault
injection, error wrapping and closing. What is task-specific it asks of the task's
device half (``Task.device_half``, the narrow interface of
core/stages/tasks/device.py): the batch path of detection and of any task whose input
is the frame laid out by its geometry (tasks/device.py, detect/device.py: candidates
gathered on the device), super-resolution's frame-by-frame upscale
(superres/device.py).

Two GpuFramePipelines on two streams, driven by two executor workers, alternate
batches: while one runs inference, the other uploads and preprocesses the next. ONNX
Runtime releases the GIL, so the Python threads overlap as the streams do. Built by
core/pipeline/build.py, which creates the stream and the engine.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import Any

from framelens.core.errors import EngineError, GpuError
from framelens.core.gpu.buffers import cuda_driver, cuda_message
from framelens.core.gpu.context import GpuContext
from framelens.core.gpu.shared_kernels import kernels_for
from framelens.core.pipeline.processor import PipelineBase
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.stages.engines.base import DeviceEngine
from framelens.core.stages.preprocess.cuda import CudaPreprocessor, DeviceFrame
from framelens.core.stages.sources.nv12 import DeviceNV12Frame
from framelens.core.stages.tasks import AnyTask
from framelens.core.stages.tasks.device import DeviceHalf, DeviceRig
from framelens.core.stages.timing import CudaStageTimer
from framelens.core.types import FrameResult, StageTimes

FAULT_ENV = "FRAMELENS_GPU_FAULT_AT"
"""Fault injection for tests: a frame index at which every GPU pipeline raises GpuError."""


class GpuFramePipeline(PipelineBase):
    """The host pipeline's job on the GPU, for any task; one instance per stream and per
    worker thread.

    ``infer_batch`` takes DeviceNV12Frames (from the NVDEC source) or host Frames
    (cameras, streams, folders: uploaded through pinned memory). Results carry an RGBA
    device image of the frame; ``draw`` (export) downloads it and draws the overlays (or
    downloads the task's output image).
    """

    takes_device_frames = True
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
            rig = DeviceRig(
                ctx=ctx,
                stream=stream,
                engine=engine,
                kernels=self.kernels,
                pre=self._pre,
                timer=self._timer,
                host_timer=self._host_timer,
                spec=settings.model,
                batch=settings.batch,
                rgba_buffers=self.RGBA_BUFFERS,
            )
            self.device_half: DeviceHalf = task.device_half(rig)
        except GpuError:
            raise
        except EngineError as exc:
            raise GpuError(str(exc)) from exc
        except Exception as exc:
            raise GpuError(f"GPU pipeline: {cuda_message(exc)}") from exc

    def warm_up(self) -> None:
        """One inference on a blank batch: the first run of a session loads cuDNN's
        kernels and searches its convolution algorithms (seconds on a cold process),
        which belongs to loading the model, not to the first frame (the task's device
        half decides: a heavy super-resolution model makes no call, its kernels being
        built for each input size)."""
        assert self.engine is not None, "warm_up() on a closed pipeline"
        try:
            self.device_half.warm_up()
        except GpuError:
            raise
        except EngineError as exc:
            raise GpuError(f"warming up the model: {exc}") from exc
        except Exception as exc:
            raise GpuError(f"warming up the model: {cuda_message(exc)}") from exc

    def infer_batch(
        self, frames: Sequence[DeviceFrame], times_each: Sequence[StageTimes]
    ) -> list[FrameResult]:
        try:
            return self._infer(frames, times_each)
        except BaseException as exc:
            self._timer.reset()  # this batch's events are not the next one's times
            self._host_timer.reset()
            # whatever failed, the decoder's buffers go back (releasing twice is
            # harmless), so a pipeline that survives an error does not run its source dry
            for frame in frames:
                if isinstance(frame, DeviceNV12Frame):
                    with contextlib.suppress(Exception):
                        frame.release()
            if isinstance(exc, GpuError) or not isinstance(exc, Exception):
                raise
            # which frames: a batch may hold several sources' frames, so no one number
            where = f"frame {frames[0].index}" if frames else "no frame"
            if len(frames) > 1:
                where = f"a batch of {len(frames)} frames from {where}"
            if isinstance(exc, EngineError):
                raise GpuError(f"{where}: {exc}") from exc
            # pycuda's driver errors (out of memory, launch failure)
            raise GpuError(f"{where}: {cuda_message(exc)}") from exc

    def _infer(
        self, frames: Sequence[DeviceFrame], times_each: Sequence[StageTimes]
    ) -> list[FrameResult]:
        s = self._settings
        if self.engine is None:
            raise GpuError("the GPU pipeline is closed")
        if len(frames) > s.batch:
            raise GpuError(f"a batch of {len(frames)} frames; the pipeline takes {s.batch}")
        for frame in frames:
            if os.environ.get(FAULT_ENV) == str(frame.index):
                raise GpuError(f"frame {frame.index}: injected fault ({FAULT_ENV})")
        return self.device_half.infer(frames, times_each, s.params, self.pixels)

    def close(self) -> None:
        """Release the engine and every buffer; safe to call twice."""
        engine, self.engine = self.engine, None
        try:
            if engine is not None:
                engine.close()
        finally:
            self.device_half.free()
            self._pre.free()
