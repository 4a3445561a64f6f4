"""The GPU pipeline for one frame: device NV12 (or a host BGR frame) -> detections + RGBA.

Per frame, on this pipeline's own CUDA stream:

    wait for the decoder's write -> fused preprocessing kernel -> display kernel (RGBA)
    -> release the NV12 buffer -> ONNX Runtime (IOBinding, same stream) -> outputs to
    pinned host memory -> decode + NMS on the host (outputs are small)

CUDA events around the kernels and the inference feed the same StageTimes as the CPU
path (``preprocess``, ``inference``; the display conversion counts as ``draw``).

Two GpuFramePipelines on two streams, driven by two worker threads (the runner's and
the player's inference workers), alternate frames: while one runs inference on frame
N, the other uploads and preprocesses frame N+1. ONNX Runtime releases the GIL, so the
Python threads overlap as the streams do.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import weakref
from typing import Any, cast

import cv2
import numpy as np
from framelens.core.errors import EngineError, GpuError
from framelens.core.gpu.buffers import (
    DeviceBuffer,
    DevicePool,
    PinnedPool,
    cuda_driver,
    cuda_message,
)
from framelens.core.gpu.context import GpuContext
from framelens.core.gpu.kernels import GpuKernels, PreprocessLayout, yuv_matrix
from framelens.core.pipeline.frame_pipeline import (
    PipelineSettings,
    with_changes,
    with_precision_model,
)
from framelens.core.stages.draw.opencv import annotate
from framelens.core.stages.engines.base import DeviceEngine
from framelens.core.stages.sources.nvdec import DeviceNV12Frame
from framelens.core.stages.tasks.detect.decoders import make_decoder
from framelens.core.stages.timing import now_ms
from framelens.core.types import Frame, FrameResult, Image, StageTimes

FAULT_ENV = "FRAMELENS_GPU_FAULT_AT"
"""Fault injection for tests: a frame index at which every GPU pipeline raises GpuError."""

_kernels: dict[int, GpuKernels] = {}
_kernels_lock = threading.Lock()


def kernels_for(ctx: GpuContext) -> GpuKernels:
    """The kernels of a context, loaded (and built or read from the cache) once."""
    with _kernels_lock:
        k = _kernels.get(ctx.index)
        if k is None:
            k = _kernels[ctx.index] = GpuKernels(ctx)
        return k


class RgbaDeviceImage:
    """An RGBA8 frame in a pooled device buffer, made by the display kernel.

    The canvas copies it into its GL pixel buffer (``write_rgba``, the interop
    protocol); export and snapshots download it (``to_host_bgr``). The buffer goes
    back to its pool when this object is dropped.
    """

    __slots__ = ("__weakref__", "_buffer", "_pool", "_ready", "context", "height", "width")

    def __init__(
        self,
        buffer: DeviceBuffer,
        pool: DevicePool,
        width: int,
        height: int,
        context: GpuContext,
        ready: Any,
    ) -> None:
        self._buffer = buffer
        self._pool = pool
        self._ready = ready  # event recorded after the display kernel
        self.width, self.height, self.context = width, height, context
        weakref.finalize(self, pool.release, buffer)

    def write_rgba(self, dst_ptr: int, dst_pitch: int, stream: Any) -> None:
        cuda = cuda_driver()
        with self.context.active():
            stream.wait_for_event(self._ready)
            copy = cuda.Memcpy2D()
            copy.set_src_device(self._buffer.ptr)
            copy.src_pitch = self._buffer.pitch
            copy.set_dst_device(dst_ptr)
            copy.dst_pitch = dst_pitch
            copy.width_in_bytes = self.width * 4
            copy.height = self.height
            copy(stream)
        # the buffer's next user (a display kernel) waits for this copy too
        self._pool.mark_used(self._buffer, stream)

    def to_host_rgba(self) -> np.ndarray[Any, np.dtype[np.uint8]]:
        try:
            return self._download()
        except Exception as exc:  # a failing device: the run may go on on the CPU
            raise GpuError(f"downloading a frame failed: {cuda_message(exc)}") from exc

    def _download(self) -> np.ndarray[Any, np.dtype[np.uint8]]:
        cuda = cuda_driver()
        host = np.empty((self.height, self.width, 4), dtype=np.uint8)
        with self.context.active():
            self._ready.synchronize()
            copy = cuda.Memcpy2D()
            copy.set_src_device(self._buffer.ptr)
            copy.src_pitch = self._buffer.pitch
            copy.set_dst_host(host)
            copy.dst_pitch = self.width * 4
            copy.width_in_bytes = self.width * 4
            copy.height = self.height
            copy(aligned=False)
        return host

    def to_host_bgr(self) -> Image:
        return cast(Image, cv2.cvtColor(self.to_host_rgba(), cv2.COLOR_RGBA2BGR))


class GpuFramePipeline:
    """FramePipeline's job on the GPU; one instance per stream and per worker thread.

    ``infer`` takes a DeviceNV12Frame (from core.gpu.decode) or a host Frame (cameras,
    streams, folders: uploaded through pinned memory). Results carry an RGBA device
    image of the frame; ``draw`` (export) downloads it and draws the overlays on the host.
    """

    takes_device_frames = True
    RGBA_BUFFERS = 8  # frames a consumer may hold (queues, reorder, canvas) per pipeline

    def __init__(
        self,
        settings: PipelineSettings,
        ctx: GpuContext,
        *,
        spinning: bool = True,
        non_blocking: bool = True,
    ) -> None:
        from framelens.core.stages.engines.onnxruntime_cuda import OnnxRuntimeCudaEngine

        self._settings = settings = with_precision_model(settings)
        self._lock = threading.Lock()
        self.ctx = ctx
        self._decode = make_decoder(settings.model)
        self._layout: PreprocessLayout | None = None
        self._input: DevicePool | None = None
        self._rgba: DevicePool | None = None
        self._upload: PinnedPool | None = None
        self._bgr: DevicePool | None = None
        self.engine: DeviceEngine | None = None
        cuda = cuda_driver()
        try:
            self.kernels = kernels_for(ctx)
            with ctx.active():
                # Non-blocking: work others queue on the legacy NULL stream (a decoder,
                # a library's copies) does not stall this stream; frames arrive through
                # events (DeviceNV12Frame.ready), so nothing relies on implicit ordering.
                self.stream = cuda.Stream(flags=1 if non_blocking else 0)
                self._events = [cuda.Event() for _ in range(4)]
            if settings.backend == "tensorrt":
                from framelens.core.stages.engines.tensorrt import TensorRtEngine

                self.engine = TensorRtEngine(
                    settings.model.path, ctx, self.stream,
                    precision=settings.precision, spec=settings.model,
                )  # fmt: skip
            else:
                self.engine = OnnxRuntimeCudaEngine(
                    settings.model.path, ctx, self.stream,
                    threads=settings.threads, spinning=spinning,
                )  # fmt: skip
            self._dtype = "float16" if self.engine.input_dtype == np.float16 else "float32"
        except EngineError as exc:
            self.close()
            raise GpuError(str(exc)) from exc
        except Exception as exc:
            self.close()
            raise GpuError(f"GPU pipeline: {cuda_message(exc)}") from exc

    def warm_up(self) -> None:
        """One inference on a blank input of the model's size: the first run of a session
        loads cuDNN's kernels and searches its convolution algorithms (seconds on a cold
        process), which belongs to loading the model, not to the first frame."""
        h, w = self._settings.model.input_size
        layout = PreprocessLayout.from_spec(self._settings.model, w, h, self._dtype)
        blank = DevicePool.linear(self.ctx, layout.nbytes, 1, kind="warm-up input")
        try:
            assert self.engine is not None
            with self.ctx.active():
                cuda_driver().memset_d8_async(blank.buffers[0].ptr, 0, layout.nbytes, self.stream)
            self.engine.infer_device(blank.buffers[0].ptr, layout.shape, layout.numpy_dtype)
        except EngineError as exc:
            raise GpuError(f"warming up the model: {exc}") from exc
        except Exception as exc:
            raise GpuError(f"warming up the model: {cuda_message(exc)}") from exc
        finally:
            blank.close()

    @property
    def settings(self) -> PipelineSettings:
        return self._settings

    def update(self, **changes: object) -> None:
        with self._lock:
            self._settings = with_changes(self._settings, changes)

    # ---- buffers, allocated per source size -----------------------------------------

    def _buffers_for(self, width: int, height: int) -> PreprocessLayout:
        layout = self._layout
        if layout is not None and (layout.src_w, layout.src_h) == (width, height):
            return layout
        self._free_frame_buffers()
        layout = PreprocessLayout.from_spec(self._settings.model, width, height, self._dtype)
        self._input = DevicePool.linear(self.ctx, layout.nbytes, 1, kind="model input")
        self._rgba = DevicePool.pitched(
            self.ctx, width * 4, height, self.RGBA_BUFFERS, kind="display frame"
        )
        self._layout = layout
        return layout

    def _free_frame_buffers(self) -> None:
        for pool in (self._input, self._rgba, self._upload, self._bgr):
            if pool is not None:
                pool.close()
        self._input = self._rgba = self._upload = self._bgr = None
        self._layout = None

    # ---- one frame ----------------------------------------------------------------------

    def infer(self, frame: Frame | DeviceNV12Frame, times: StageTimes) -> FrameResult:
        try:
            return self._infer(frame, times)
        except BaseException as exc:
            # whatever failed, the decoder's buffer goes back, so a pipeline that
            # survives an error does not run its source dry
            if isinstance(frame, DeviceNV12Frame):
                with contextlib.suppress(Exception):
                    frame.release()
            if isinstance(exc, GpuError) or not isinstance(exc, Exception):
                raise
            if isinstance(exc, EngineError):
                raise GpuError(f"frame {frame.index}: {exc}") from exc
            # pycuda's driver errors (out of memory, launch failure)
            raise GpuError(f"frame {frame.index}: {cuda_message(exc)}") from exc

    def _infer(self, frame: Frame | DeviceNV12Frame, times: StageTimes) -> FrameResult:
        s = self._settings
        if os.environ.get(FAULT_ENV) == str(frame.index):
            raise GpuError(f"frame {frame.index}: injected fault ({FAULT_ENV})")
        layout = self._buffers_for(frame.width, frame.height)
        assert self._input is not None and self._rgba is not None and self.engine is not None
        stream, (e0, e1, e2, e3) = self.stream, self._events
        model_input = self._input.buffers[0]
        with self.ctx.active():
            rgba = self._rgba.acquire(stream, timeout=10.0)
            try:
                image = self._convert(frame, layout, model_input, rgba, stream)
            except BaseException:
                self._rgba.release(rgba)
                raise
            outputs = self.engine.infer_device(model_input.ptr, layout.shape, layout.numpy_dtype)
            e3.record(stream)
            e3.synchronize()
            times.preprocess = e0.time_till(e1)
            times.draw = e1.time_till(e2)
            times.inference = e2.time_till(e3)
        t0 = now_ms()
        dets = self._decode(
            [o.host for o in outputs], [layout.letterbox], s.conf, s.iou, s.classes
        )[0]
        times.postprocess = now_ms() - t0
        return FrameResult(Frame(None, frame.index, frame.pts, device=image), dets, times)

    def _convert(
        self,
        frame: Frame | DeviceNV12Frame,
        layout: PreprocessLayout,
        model_input: DeviceBuffer,
        rgba: DeviceBuffer,
        stream: Any,
    ) -> RgbaDeviceImage:
        """Queue the preprocessing and display kernels; the RGBA frame as an image."""
        assert self._rgba is not None
        e0, e1, e2, _ = self._events
        if isinstance(frame, DeviceNV12Frame):
            frame.wait(stream)
            e0.record(stream)
            matrix = yuv_matrix(frame.matrix, frame.full_range)
            planes = (frame.y_ptr, frame.y_pitch, frame.uv_ptr, frame.uv_pitch)
            self.kernels.preprocess_nv12(
                *planes, frame.width, frame.height, model_input.ptr, layout, stream,
                matrix=matrix,
            )  # fmt: skip
            e1.record(stream)
            self.kernels.nv12_to_rgba(
                *planes, frame.width, frame.height, rgba.ptr, rgba.pitch,
                frame.width, frame.height, stream, matrix=matrix,
            )  # fmt: skip
            e2.record(stream)
            frame.release(stream)  # the decoder may reuse it once the kernels ran
        else:
            bgr = self._upload_bgr(frame.image, stream)
            e0.record(stream)
            self.kernels.preprocess_bgr(
                bgr.ptr, bgr.pitch, frame.width, frame.height, model_input.ptr, layout, stream
            )
            e1.record(stream)
            self.kernels.bgr_to_rgba(
                bgr.ptr, bgr.pitch, frame.width, frame.height, rgba.ptr, rgba.pitch,
                frame.width, frame.height, stream,
            )  # fmt: skip
            e2.record(stream)
        # the buffer's own event marks the RGBA frame complete (e2 is reused next frame;
        # the buffer's event only by the buffer's next user, after this image is gone)
        self._rgba.mark_used(rgba, stream)
        return RgbaDeviceImage(rgba, self._rgba, frame.width, frame.height, self.ctx, rgba.event)

    def _upload_bgr(self, image: Image, stream: Any) -> DeviceBuffer:
        """A host BGR frame into a device buffer (pinned staging, asynchronous copy)."""
        cuda = cuda_driver()
        h, w = image.shape[:2]
        if self._upload is None or self._bgr is None:
            self._upload = PinnedPool(self.ctx, (h, w, 3), np.uint8, 2, kind="frame upload")
            self._bgr = DevicePool.pitched(self.ctx, w * 3, h, 1, kind="BGR frame")
        staging = self._upload.cycle()
        np.copyto(staging.array, image)
        device = self._bgr.buffers[0]
        copy = cuda.Memcpy2D()
        copy.set_src_host(staging.array)
        copy.src_pitch = w * 3
        copy.set_dst_device(device.ptr)
        copy.dst_pitch = device.pitch
        copy.width_in_bytes = w * 3
        copy.height = h
        copy(stream)
        self._upload.mark_used(staging, stream)
        return device

    def draw(self, result: FrameResult, *, copy: bool = True) -> FrameResult:
        """Overlays on the host copy of the frame (for export and snapshots)."""
        s = self._settings
        t0 = now_ms()
        result.annotated = annotate(
            result.frame.image, result.detections, s.model.labels, s.overlay, copy=copy
        )
        drawn = now_ms() - t0
        result.times.draw = drawn if math.isnan(result.times.draw) else result.times.draw + drawn
        return result

    def process(self, frame: Frame | DeviceNV12Frame, decode_ms: float = math.nan) -> FrameResult:
        return self.infer(frame, StageTimes(decode=decode_ms))

    def close(self) -> None:
        """Release the engine and every buffer; safe to call twice."""
        engine, self.engine = self.engine, None
        try:
            if engine is not None:
                engine.close()
        finally:
            self._free_frame_buffers()
