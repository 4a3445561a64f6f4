"""The GPU pipeline: frames in device memory -> task outputs + RGBA display frames.

Per batch, on this pipeline's own CUDA stream:

    for each frame: wait for the decoder's write -> fused preprocessing kernel into its
    slot of the batch input -> display kernel (RGBA; not when results carry no pixels,
    a run that writes only detections) -> release the NV12 buffer
    then: one engine call on the batch, a short one padded to the pipeline's batch size
    (ONNX Runtime IOBinding or TensorRT, same stream)
    -> YOLOv5/YOLOX layouts: the candidates kernel packs the rows whose objectness beats
       conf, and only they are copied to the host (candidates_cuda.py); other layouts:
       the outputs to pinned host memory -> the task decodes them on the host

A CUDA stage timer times ``preprocess``, ``display`` and ``inference`` with events on the
stream; ``postprocess`` and ``draw`` (overlays for export) are host stages.

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

import numpy as np
from framelens.core.errors import EngineError, GpuError
from framelens.core.gpu.buffers import DeviceBuffer, DevicePool, cuda_driver, cuda_message
from framelens.core.gpu.context import GpuContext
from framelens.core.gpu.images import RgbaDeviceImage
from framelens.core.gpu.kernels import PreprocessLayout
from framelens.core.pipeline.gpu_base import GpuPipelineBase
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.stages.engines.base import DeviceEngine, DeviceOutput
from framelens.core.stages.preprocess.cuda import DeviceFrame
from framelens.core.stages.sources.nv12 import DeviceNV12Frame
from framelens.core.stages.tasks import AnyTask
from framelens.core.stages.tasks.detect.candidates import Candidates
from framelens.core.stages.tasks.detect.candidates_cuda import DeviceCandidateGather
from framelens.core.stages.tasks.detect.task import DetectionTask, DetectParams
from framelens.core.types import Frame, FrameResult, PixelsNotKept, StageTimes

MAX_SIZES = 8  # source sizes whose buffers a pipeline keeps at once (several sources)

HOST_CANDIDATES_ENV = "FRAMELENS_HOST_CANDIDATES"
"""Set to 1: copy whole detection outputs to the host and gather candidates there (the
benchmarks' A/B of the device gather)."""

FAULT_ENV = "FRAMELENS_GPU_FAULT_AT"
"""Fault injection for tests: a frame index at which every GPU pipeline raises GpuError."""


class GpuFramePipeline(GpuPipelineBase):
    """The host pipeline's job on the GPU; one instance per stream and per worker thread.

    ``infer_batch`` takes DeviceNV12Frames (from the NVDEC source) or host Frames
    (cameras, streams, folders: uploaded through pinned memory). Results carry an RGBA
    device image of the frame; ``draw`` (export) downloads it and draws the overlays.
    """

    def __init__(
        self,
        settings: PipelineSettings,
        ctx: GpuContext,
        stream: Any,
        engine: DeviceEngine,
        task: AnyTask,
    ) -> None:
        super().__init__(settings, ctx, stream, engine, task)
        self._sizes: dict[tuple[int, int], _SizeBuffers] = {}  # by source size, LRU
        self._dtype = "float16" if engine.input_dtype == np.float16 else "float32"
        # detections whose layout has a gate (YOLOv5/YOLOX objectness): candidates are
        # gathered on the device and only they are copied to the host
        self._gate = task.candidate_gate if isinstance(task, DetectionTask) else None
        if os.environ.get(HOST_CANDIDATES_ENV) == "1":
            self._gate = None
        self._gather = DeviceCandidateGather(ctx, self.kernels) if self._gate is not None else None

    def warm_up(self) -> None:
        """One inference on a blank batch of the model's size: the first run of a session
        loads cuDNN's kernels and searches its convolution algorithms (seconds on a cold
        process), which belongs to loading the model, not to the first frame."""
        h, w = self._settings.model.input_size
        layout = PreprocessLayout.from_spec(self._settings.model, w, h, self._dtype)
        assert self.engine is not None, "warm_up() on a closed pipeline"
        n = self._settings.batch
        blank = DevicePool.linear(self.ctx, layout.nbytes * n, 1, kind="warm-up input")
        try:
            with self.ctx.active():
                cuda_driver().memset_d8_async(
                    blank.buffers[0].ptr, 0, layout.nbytes * n, self.stream
                )
            outputs = self.engine.infer_device(
                blank.buffers[0].ptr, _batch(layout, n), layout.numpy_dtype
            )
            first = outputs[0] if outputs else None
            if self._gather is not None and (
                first is None or first.dtype != np.float32 or len(first.shape) != 3
            ):  # float16 outputs (a graph converted without keep_io_types): host decode
                self._gather.close()
                self._gather, self._gate = None, None
        except EngineError as exc:
            raise GpuError(f"warming up the model: {exc}") from exc
        except Exception as exc:
            raise GpuError(f"warming up the model: {cuda_message(exc)}") from exc
        finally:
            blank.close()

    # ---- buffers, allocated per source size -----------------------------------------

    def _buffers_for(self, width: int, height: int) -> _SizeBuffers:
        """The model input and display buffers for frames of this size: kept for the
        last MAX_SIZES sizes (several sources of different sizes in one run)."""
        key = (width, height)
        found = self._sizes.pop(key, None)
        if found is not None:
            self._sizes[key] = found  # most recently used last
            return found
        while len(self._sizes) >= MAX_SIZES:
            self._sizes.pop(next(iter(self._sizes))).close()  # held frames stay valid
        geometry = self._task.input_geometry(width, height)
        layout = PreprocessLayout.from_spec(
            self._settings.model, width, height, self._dtype, geometry=geometry
        )
        batch = self._settings.batch
        model_input = DevicePool.linear(self.ctx, layout.nbytes * batch, 1, kind="model input")
        try:
            if batch > 1:  # the padding of a short batch: zeros, not whatever memory held
                with self.ctx.active():
                    cuda_driver().memset_d8(model_input.buffers[0].ptr, 0, layout.nbytes * batch)
        except BaseException:
            model_input.close()
            raise
        buffers = self._sizes[key] = _SizeBuffers(layout, model_input)
        return buffers

    def _display_pool(self, sized: _SizeBuffers, width: int, height: int) -> DevicePool:
        """The RGBA display frames of one size, made when results first carry pixels (a
        run that writes only detections never allocates them: 1 GB at batch 16, 1080p)."""
        if sized.rgba is None:
            sized.rgba = DevicePool.pitched(
                self.ctx, width * 4, height, self.RGBA_BUFFERS * self._settings.batch,
                kind="display frame",
            )  # fmt: skip
        return sized.rgba

    def _free_frame_buffers(self) -> None:
        if self._gather is not None:
            self._gather.close()
        sizes, self._sizes = self._sizes, {}
        for buffers in sizes.values():
            buffers.close()
        self._pre.free()

    # ---- one batch ----------------------------------------------------------------------

    def infer_batch(
        self, frames: Sequence[DeviceFrame], times_each: Sequence[StageTimes]
    ) -> list[FrameResult]:
        try:
            return self._infer(frames, times_each)
        except BaseException as exc:
            self._timer.reset()  # this batch's events are not the next one's times
            self._host_timer.reset()
            # whatever failed, the decoder's buffers go back, so a pipeline that
            # survives an error does not run its source dry
            for frame in frames:
                if isinstance(frame, DeviceNV12Frame):
                    with contextlib.suppress(Exception):
                        frame.release()
            if isinstance(exc, GpuError) or not isinstance(exc, Exception):
                raise
            first = frames[0].index if frames else -1
            if isinstance(exc, EngineError):
                raise GpuError(f"frame {first}: {exc}") from exc
            # pycuda's driver errors (out of memory, launch failure)
            raise GpuError(f"frame {first}: {cuda_message(exc)}") from exc

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
        sizes = list(dict.fromkeys((f.width, f.height) for f in frames))
        if len(sizes) == 1:
            return self._infer_same_size(frames, times_each)
        # frames of sources of different sizes: one engine call per size, in order
        results: list[FrameResult | None] = [None] * len(frames)
        for size in sizes:
            picks = [i for i, f in enumerate(frames) if (f.width, f.height) == size]
            done = self._infer_same_size([frames[i] for i in picks], [times_each[i] for i in picks])
            for i, result in zip(picks, done, strict=True):
                results[i] = result
        return [r for r in results if r is not None]

    def _infer_same_size(
        self, frames: Sequence[DeviceFrame], times_each: Sequence[StageTimes]
    ) -> list[FrameResult]:
        s = self._settings
        assert self.engine is not None
        sized = self._buffers_for(frames[0].width, frames[0].height)
        layout = sized.layout
        stream, timer = self.stream, self._timer
        base = sized.input.buffers[0].ptr
        with self.ctx.active():
            images = [
                self._convert(f, sized, base + i * layout.nbytes, stream)
                for i, f in enumerate(frames)
            ]
            # a short batch is padded to the pipeline's: the engine sees one shape, so
            # cuDNN's algorithm search (ORT's default, per input shape) runs once, not
            # whenever a live source or the end of a range leaves a batch short
            gather = self._gather
            with timer.stage("inference"):
                outputs = self.engine.infer_device(
                    base, _batch(layout, s.batch), layout.numpy_dtype, to_host=gather is None
                )
            n = len(frames)
            # queued right behind the engine; its wait for the candidates is the batch's
            # one wait, which completes the timer's events too
            cands = None if gather is None else self._gather_candidates(gather, outputs[0], n, s)
            timer.collect(times_each, synced=cands is not None)
        geometries = [layout.letterbox] * n
        with self._host_timer.stage("postprocess"):
            if cands is not None:
                task, params = self._task, s.params
                assert isinstance(task, DetectionTask) and isinstance(params, DetectParams)
                decoded: list[Any] = task.decode_candidates(cands, geometries, params)
            else:
                hosts = [o.host if n == s.batch else o.host[:n] for o in outputs]
                decoded = self._task.decode(hosts, geometries, s.params)
        self._host_timer.collect(times_each)
        results = []
        for f, image, out, t in zip(frames, images, decoded, times_each, strict=True):
            pixels = image if image is not None else PixelsNotKept(f.width, f.height)
            frame = Frame(None, f.index, f.pts, device=pixels, source_id=f.source_id)
            results.append(FrameResult(frame, out, t))
        return results

    def _gather_candidates(
        self, gather: DeviceCandidateGather, output: DeviceOutput, n: int, s: PipelineSettings
    ) -> Candidates:
        """The first ``n`` frames' candidates, gathered on the device (the context is
        current) at the conf of ``s``, the settings the batch decodes with; returns once
        they are on the host."""
        params = s.params
        assert isinstance(params, DetectParams) and isinstance(self._task, DetectionTask)
        assert self._gate is not None
        shape = output.shape
        if len(shape) != 3 or output.dtype != np.float32 or shape[0] < n:
            raise GpuError(
                f"{self._settings.model.name}: output {output.name} is {list(shape)} "
                f"{output.dtype}; the {self._settings.model.layout} layout reads "
                "(batch, rows, columns) float32"
            )
        self._task.check_columns(int(shape[2]))
        return gather.gather(
            output.ptr, (n, int(shape[1]), int(shape[2])), self._gate, params.conf, self.stream
        )

    def _convert(
        self, frame: DeviceFrame, sized: _SizeBuffers, dst_ptr: int, stream: Any
    ) -> RgbaDeviceImage | None:
        """Queue the preprocessing and display kernels; the RGBA frame as an image (None
        when results carry no pixels: only the model input is made)."""
        layout = sized.layout
        if not self.pixels:
            if isinstance(frame, DeviceNV12Frame):
                frame.wait(stream)
            with self._timer.stage("preprocess"):
                self._pre.model_input(frame, layout, dst_ptr, stream)
            if isinstance(frame, DeviceNV12Frame):
                frame.release(stream)
            return None
        pool = self._display_pool(sized, frame.width, frame.height)
        rgba: DeviceBuffer = pool.acquire(stream, timeout=10.0)
        try:
            if isinstance(frame, DeviceNV12Frame):
                frame.wait(stream)  # the decoder's write, before the timed stage
            with self._timer.stage("preprocess"):
                self._pre.model_input(frame, layout, dst_ptr, stream)
            with self._timer.stage("display"):
                self._pre.rgba(frame, rgba, stream)
        except BaseException:
            pool.release(rgba)
            raise
        if isinstance(frame, DeviceNV12Frame):
            frame.release(stream)  # the decoder may reuse it once the kernels ran
        # the buffer's own event marks the RGBA frame complete (the timer's events are
        # reused next batch; the buffer's only by its next user, after this image is gone)
        pool.mark_used(rgba, stream)
        return RgbaDeviceImage(rgba, pool, frame.width, frame.height, self.ctx, rgba.event)


def _batch(layout: PreprocessLayout, n: int) -> tuple[int, int, int, int]:
    _, c, h, w = layout.shape
    return (n, c, h, w)


class _SizeBuffers:
    """The model input and the display frames of one source size."""

    __slots__ = ("input", "layout", "rgba")

    def __init__(self, layout: PreprocessLayout, model_input: DevicePool) -> None:
        self.layout, self.input = layout, model_input
        self.rgba: DevicePool | None = None  # made when first needed

    def close(self) -> None:
        for pool in (self.input, self.rgba):
            if pool is not None:
                pool.close()
