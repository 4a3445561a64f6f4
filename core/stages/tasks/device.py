"""A task's device half: what a task does on the GPU path, beside the Task interface.

The GPU pipeline (core/pipeline/gpu_pipeline.py) is one class for every task: it owns
the CUDA context's stream, the device engine, the kernels, the CUDA preprocessing, the
stage timers, fault injection, error wrapping and closing. What is task-specific on the
device it asks of the task's half (``Task.device_half``), through the narrow
``DeviceHalf`` interface: warm up, run a batch of device frames into results, free the
buffers made for frames.

``BatchDevice`` is the half most tasks need (any task whose input is the frame laid out
by ``Task.input_geometry``, like detection or a classifier): per batch, on the
pipeline's stream,

    for each frame: wait for the decoder's write -> fused preprocessing kernel into its
    slot of the batch input -> display kernel (RGBA; not when results carry no pixels,
    a run that writes only outputs) -> release the NV12 buffer
    then: one engine call on the batch, a short one padded to the pipeline's batch size
    (ONNX Runtime IOBinding or TensorRT, same stream)
    -> the outputs to pinned host memory -> the task's ``decode`` on the host

Detection adds its candidate gather on the device (detect/device.py); super-resolution
has its own half (superres/device.py). A CUDA stage timer times ``preprocess``,
``display`` and ``inference`` with events on the stream; ``postprocess`` is a host stage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from framelens.core.geometry import InputGeometry
from framelens.core.gpu.buffers import DeviceBuffer, DevicePool, cuda_driver
from framelens.core.gpu.context import GpuContext
from framelens.core.gpu.images import RgbaDeviceImage
from framelens.core.gpu.kernels import GpuKernels, PreprocessLayout
from framelens.core.models.spec import ModelSpec
from framelens.core.stages.engines.base import DeviceEngine, DeviceOutput
from framelens.core.stages.preprocess.cuda import (
    CudaFramePreprocessor,
    CudaPreprocessor,
    DeviceFrame,
)
from framelens.core.stages.sources.nv12 import DeviceNV12Frame
from framelens.core.stages.timing import CudaStageTimer, HostStageTimer
from framelens.core.types import FrameResult, PixelsNotKept, StageTimes

MAX_SIZES = 8  # source sizes whose buffers a pipeline keeps at once (several sources)


@dataclass(frozen=True)
class DeviceRig:
    """What a GPU pipeline hands its task's device half: everything it runs on."""

    ctx: GpuContext
    stream: Any  # the pipeline's CUDA stream
    engine: DeviceEngine
    kernels: GpuKernels
    pre: CudaPreprocessor  # uploads host frames; converts frames for display
    timer: CudaStageTimer  # device stages (events on ``stream``)
    host_timer: HostStageTimer  # host stages (postprocess)
    spec: ModelSpec  # the graph that runs (its precision's, its batch's)
    batch: int  # frames per engine call
    rgba_buffers: int  # display frames a consumer may hold per batch slot


class DeviceHalf(Protocol):
    """A task's work in one GPU pipeline (one stream, one worker thread at a time).

    The pipeline calls ``infer`` with the context not yet current; on an exception it
    resets the timers and releases the batch's NVDEC frames, so a half need not.
    """

    def warm_up(self) -> None:
        """One inference on a blank input: cuDNN's first-run cost while the model loads."""

    def infer(
        self,
        frames: Sequence[DeviceFrame],
        times_each: Sequence[StageTimes],
        params: Any,
        pixels: bool,
    ) -> list[FrameResult]:
        """One result per frame, in order, decoded with ``params``; with ``pixels`` each
        result's frame carries its display image (RGBA, on the device)."""

    def free(self) -> None:
        """Release the buffers made for frames (images consumers hold stay valid)."""


class Decodes(Protocol):
    """What ``BatchDevice`` needs of a task (every Task has it)."""

    def input_geometry(self, src_w: int, src_h: int) -> InputGeometry: ...

    def decode(self, outputs: Any, geometries: Any, params: Any) -> list[Any]: ...


class BatchDevice:
    """The batch path for tasks whose model takes the frame laid out by their input
    geometry and whose outputs are decoded on the host."""

    def __init__(self, rig: DeviceRig, task: Decodes) -> None:
        self.rig = rig
        self.task = task
        self._sizes: dict[tuple[int, int], SizeBuffers] = {}  # by source size, LRU
        self._dtype = "float16" if rig.engine.input_dtype == np.float16 else "float32"

    # ---- hooks for halves on top of this one (detection's candidate gather) ------------

    def outputs_to_host(self) -> bool:
        """Whether the engine copies every output to the host after each batch."""
        return True

    def after_warm_up(self, outputs: Sequence[DeviceOutput]) -> None:
        """Told the outputs of the warm-up's blank batch (their shapes and types)."""
        del outputs

    def gather(self, outputs: Sequence[DeviceOutput], n: int, params: Any) -> Any:
        """Queued right behind the engine (the context is current): work on the device
        outputs of the first ``n`` frames before they are decoded; returns what
        ``decode_gathered`` decodes, after waiting for it, or None (the default: the
        outputs went to the host)."""
        del outputs, n, params
        return None

    def decode_gathered(self, gathered: Any, geometries: Sequence[Any], params: Any) -> list[Any]:
        """The batch's outputs from what ``gather`` returned."""
        raise NotImplementedError

    # ---- warm-up -------------------------------------------------------------------------

    def warm_up(self) -> None:
        rig = self.rig
        h, w = rig.spec.input_size
        layout = PreprocessLayout.from_spec(rig.spec, w, h, self._dtype)
        n = rig.batch
        blank = DevicePool.linear(rig.ctx, layout.nbytes * n, 1, kind="warm-up input")
        try:
            with rig.ctx.active():
                cuda_driver().memset_d8_async(
                    blank.buffers[0].ptr, 0, layout.nbytes * n, rig.stream
                )
            outputs = rig.engine.infer_device(
                blank.buffers[0].ptr, batch_shape(layout, n), layout.numpy_dtype
            )
            self.after_warm_up(outputs)
        finally:
            blank.close()

    # ---- buffers, allocated per source size -----------------------------------------

    def buffers_for(self, width: int, height: int) -> SizeBuffers:
        """The model input and display buffers for frames of this size: kept for the
        last MAX_SIZES sizes (several sources of different sizes in one run)."""
        key = (width, height)
        found = self._sizes.pop(key, None)
        if found is not None:
            self._sizes[key] = found  # most recently used last
            return found
        while len(self._sizes) >= MAX_SIZES:
            self._sizes.pop(next(iter(self._sizes))).close()  # held frames stay valid
        rig = self.rig
        geometry = self.task.input_geometry(width, height)
        layout = PreprocessLayout.from_spec(rig.spec, width, height, self._dtype, geometry=geometry)
        model_input = DevicePool.linear(rig.ctx, layout.nbytes * rig.batch, 1, kind="model input")
        try:
            if rig.batch > 1:  # the padding of a short batch: zeros, not whatever memory held
                with rig.ctx.active():
                    cuda_driver().memset_d8(
                        model_input.buffers[0].ptr, 0, layout.nbytes * rig.batch
                    )
        except BaseException:
            model_input.close()
            raise
        pre = CudaFramePreprocessor(rig.pre, layout)
        buffers = self._sizes[key] = SizeBuffers(pre, model_input)
        return buffers

    def _display_pool(self, sized: SizeBuffers, width: int, height: int) -> DevicePool:
        """The RGBA display frames of one size, made when results first carry pixels (a
        run that writes only outputs never allocates them: 1 GB at batch 16, 1080p)."""
        if sized.rgba is None:
            rig = self.rig
            sized.rgba = DevicePool.pitched(
                rig.ctx, width * 4, height, rig.rgba_buffers * rig.batch, kind="display frame"
            )
        return sized.rgba

    def free(self) -> None:
        sizes, self._sizes = self._sizes, {}
        for buffers in sizes.values():
            buffers.close()

    # ---- one batch ----------------------------------------------------------------------

    def infer(
        self,
        frames: Sequence[DeviceFrame],
        times_each: Sequence[StageTimes],
        params: Any,
        pixels: bool,
    ) -> list[FrameResult]:
        sizes = list(dict.fromkeys((f.width, f.height) for f in frames))
        if len(sizes) == 1:
            return self._infer_same_size(frames, times_each, params, pixels)
        # frames of sources of different sizes: one engine call per size, in order
        results: list[FrameResult | None] = [None] * len(frames)
        for size in sizes:
            picks = [i for i, f in enumerate(frames) if (f.width, f.height) == size]
            done = self._infer_same_size(
                [frames[i] for i in picks], [times_each[i] for i in picks], params, pixels
            )
            for i, result in zip(picks, done, strict=True):
                results[i] = result
        return [r for r in results if r is not None]

    def _infer_same_size(
        self,
        frames: Sequence[DeviceFrame],
        times_each: Sequence[StageTimes],
        params: Any,
        pixels: bool,
    ) -> list[FrameResult]:
        rig = self.rig
        sized = self.buffers_for(frames[0].width, frames[0].height)
        layout = sized.layout
        timer = rig.timer
        base = sized.input.buffers[0].ptr
        n = len(frames)
        with rig.ctx.active():
            images = [
                self._convert(f, sized, base + i * layout.nbytes, pixels)
                for i, f in enumerate(frames)
            ]
            # a short batch is padded to the pipeline's: the engine sees one shape, so
            # cuDNN's algorithm search (ORT's default, per input shape) runs once, not
            # whenever a live source or the end of a range leaves a batch short
            with timer.stage("inference"):
                outputs = rig.engine.infer_device(
                    base,
                    batch_shape(layout, rig.batch),
                    layout.numpy_dtype,
                    to_host=self.outputs_to_host(),
                )
            # queued right behind the engine; its wait is the batch's one wait, which
            # completes the timer's events too
            gathered = self.gather(outputs, n, params)
            timer.collect(times_each, synced=gathered is not None)
        geometries = [sized.pre.geometry] * n
        with rig.host_timer.stage("postprocess"):
            if gathered is not None:
                decoded = self.decode_gathered(gathered, geometries, params)
            else:
                hosts = [o.host if n == rig.batch else o.host[:n] for o in outputs]
                decoded = self.task.decode(hosts, geometries, params)
        rig.host_timer.collect(times_each)
        results = []
        for f, image, out, t in zip(frames, images, decoded, times_each, strict=True):
            shown = image if image is not None else PixelsNotKept(f.width, f.height)
            frame = f.holding(device=shown)
            results.append(FrameResult(frame, out, t))
        return results

    def _convert(
        self, frame: DeviceFrame, sized: SizeBuffers, dst_ptr: int, pixels: bool
    ) -> RgbaDeviceImage | None:
        """Queue the preprocessing and display kernels; the RGBA frame as an image (None
        when results carry no pixels: only the model input is made)."""
        rig = self.rig
        stream, timer, pre = rig.stream, rig.timer, rig.pre
        if not pixels:
            if isinstance(frame, DeviceNV12Frame):
                frame.wait(stream)
            with timer.stage("preprocess"):
                sized.pre(frame, dst_ptr, stream)
            if isinstance(frame, DeviceNV12Frame):
                frame.release(stream)
            return None
        pool = self._display_pool(sized, frame.width, frame.height)
        rgba: DeviceBuffer = pool.acquire(stream, timeout=10.0)
        try:
            if isinstance(frame, DeviceNV12Frame):
                frame.wait(stream)  # the decoder's write, before the timed stage
            with timer.stage("preprocess"):
                sized.pre(frame, dst_ptr, stream)
            with timer.stage("display"):
                pre.rgba(frame, rgba, stream)
        except BaseException:
            pool.release(rgba)
            raise
        if isinstance(frame, DeviceNV12Frame):
            frame.release(stream)  # the decoder may reuse it once the kernels ran
        # the buffer's own event marks the RGBA frame complete (the timer's events are
        # reused next batch; the buffer's only by its next user, after this image is gone)
        pool.mark_used(rgba, stream)
        return RgbaDeviceImage(rgba, pool, frame.width, frame.height, rig.ctx, rgba.event)


def batch_shape(layout: PreprocessLayout, n: int) -> tuple[int, int, int, int]:
    """The (N, C, H, W) of a batch of ``n`` inputs laid out by ``layout``."""
    _, c, h, w = layout.shape
    return (n, c, h, w)


class SizeBuffers:
    """The preprocessing, the model input and the display frames of one source size."""

    __slots__ = ("input", "pre", "rgba")

    def __init__(self, pre: CudaFramePreprocessor, model_input: DevicePool) -> None:
        self.pre, self.input = pre, model_input
        self.rgba: DevicePool | None = None  # made when first needed

    @property
    def layout(self) -> PreprocessLayout:
        return self.pre.layout

    def close(self) -> None:
        for pool in (self.input, self.rgba):
            if pool is not None:
                pool.close()
