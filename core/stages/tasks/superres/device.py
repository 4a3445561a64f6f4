"""Super-resolution's device half: NVDEC frames -> upscaled RGBA frames, on the device.

Per frame, on this pipeline's own CUDA stream, nothing leaving the device:

    wait for the decoder's write (or upload a host frame through pinned memory)
    -> the display kernel: the original as RGBA (what the canvas shows beside the result),
       its last column and row repeated out to a multiple of the scale (the host path's
       padding, color.py; the buffer is that large, the display image the frame's size)
    -> the colour split of the frame (or of the region of interest) from that RGBA:
       Y / 255 and the Cr, Cb planes for Y-channel models (kernels/sr_color.cu, OpenCV's
       integer YCrCb), planar float x input_scale for colour models
    -> the engine on the device buffer (ONNX Runtime IOBinding or TensorRT), its output
       left on the device
    -> the merge: model Y + chroma upscaled bicubically in the same kernel (or the colour
       model's planes) into an RGBA buffer at scale x size: the display frame, which the
       canvas draws through CUDA-OpenGL interop and export downloads; the padding's
       output is left out of the display image (exactly scale x the frame).

The arithmetic is the host path's (core/stages/tasks/superres/color.py) step by step;
tests/gpu holds the two to the same pixels. A CUDA stage timer times ``preprocess``
(original + split), ``inference`` and ``display`` (the merge). Frames run one engine call
each and untiled (a tile asked for with --tile runs on the host pipeline, build.py).
The GPU pipeline (core/pipeline/gpu_pipeline.py) runs it on its stream, engine and
timers (core/stages/tasks/device.py's DeviceRig).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
from framelens.core.errors import GpuError
from framelens.core.gpu.buffers import DeviceBuffer, DevicePool, cuda_driver
from framelens.core.gpu.context import GpuContext
from framelens.core.gpu.images import RgbaDeviceImage, replicate_edges
from framelens.core.models.spec import ModelSpec
from framelens.core.stages.preprocess.cuda import DeviceFrame
from framelens.core.stages.sources.nv12 import DeviceNV12Frame
from framelens.core.stages.tasks.device import DeviceRig
from framelens.core.stages.tasks.superres.color import clamp_region, padded_size
from framelens.core.stages.tasks.superres.output import SuperResParams, Upscaled
from framelens.core.stages.tasks.superres.tiling import is_heavy
from framelens.core.types import FrameResult, StageTimes

WARM_UP_SIDE = 64  # a blank this size loads cuDNN's kernels before the first frame


class _CropBuffers:
    """The model input, chroma planes and output frames of one crop size."""

    def __init__(
        self, ctx: GpuContext, size: tuple[int, int], channels: int, scale: int, frames: int
    ) -> None:
        width, height = size
        self.size = size
        plane = width * height
        self.input = DevicePool.linear(ctx, plane * channels * 4, 1, kind="SR model input")
        self.chroma = (
            DevicePool.linear(ctx, plane * 2, 1, kind="SR chroma") if channels == 1 else None
        )
        try:
            self.output = DevicePool.pitched(
                ctx, width * scale * 4, height * scale, frames, kind="upscaled frame"
            )
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for pool in (self.input, self.chroma, getattr(self, "output", None)):
            if pool is not None:
                pool.close()


class _Upscales(Protocol):
    """What the device half needs of the task (task.py's SuperResTask)."""

    spec: ModelSpec


class SuperResDevice:
    """The super-resolution task in a GPU pipeline, frame by frame, untiled.

    Results carry the original frame as an RGBA device image (``result.frame.device``)
    and the upscaled frame as another (``result.output.device``, ``Upscaled.image``
    downloads it); export downloads only the upscaled one (``Task.produces_image``).
    """

    def __init__(self, rig: DeviceRig, task: _Upscales) -> None:
        if rig.engine.input_dtype != np.float32:
            raise GpuError(
                f"the GPU super-resolution path takes float32 models, this graph takes "
                f"{rig.engine.input_dtype.name}"
            )
        self.rig = rig
        self.task = task
        self._src: tuple[int, int] | None = None
        self._orig: DevicePool | None = None
        self._crop: _CropBuffers | None = None

    def warm_up(self) -> None:
        """One inference on a small blank: loads cuDNN before the first frame (the
        algorithm search for the frame's own size still runs on its first frame). None
        for a heavy model (ESRGAN and its kind): cuDNN builds its fused convolutions for
        each input size, so the blank's call cost seconds a worker and spared the first
        frame nothing (a 40-frame ESRGAN x2 FP16 run on an H100, cuDNN's heuristic plans:
        12.5 s whole and the first frame at 5.3 s without it; with it, 22.6 s and 15.4 s,
        and 22.4 s and 15.4 s with the exhaustive search the plan keeps;
        benchmarks/results/h100-sr-startup-2026-12-06.json)."""
        if is_heavy(self.task.spec):
            return
        rig = self.rig
        side, c = WARM_UP_SIDE, self.task.spec.channels
        nbytes = side * side * c * 4
        blank = DevicePool.linear(rig.ctx, nbytes, 1, kind="warm-up input")
        try:
            with rig.ctx.active():
                cuda_driver().memset_d8_async(blank.buffers[0].ptr, 0, nbytes, rig.stream)
            rig.engine.infer_device(blank.buffers[0].ptr, (1, c, side, side), np.float32)
        finally:
            blank.close()

    # ---- buffers --------------------------------------------------------------------------

    def _buffers_for(self, width: int, height: int, crop_w: int, crop_h: int) -> _CropBuffers:
        """Buffers for a ``width`` x ``height`` frame (the display buffer padded to a
        multiple of the scale) and a model input of ``crop_w`` x ``crop_h``."""
        rig = self.rig
        if self._src != (width, height) or self._orig is None:
            if self._orig is not None:
                self._orig.close()
            self._orig = None
            pw, ph = padded_size(width, height, self.task.spec.scale)
            self._orig = DevicePool.pitched(
                rig.ctx, pw * 4, ph, rig.rgba_buffers, kind="display frame"
            )
            self._src = (width, height)
        if self._crop is None or self._crop.size != (crop_w, crop_h):
            if self._crop is not None:
                self._crop.close()
            self._crop = None
            spec = self.task.spec
            self._crop = _CropBuffers(
                rig.ctx, (crop_w, crop_h), spec.channels, spec.scale, rig.rgba_buffers
            )
        return self._crop

    def free(self) -> None:
        if self._orig is not None:
            self._orig.close()
        if self._crop is not None:
            self._crop.close()
        self._orig, self._crop, self._src = None, None, None

    # ---- frames ---------------------------------------------------------------------------

    def infer(
        self,
        frames: Sequence[DeviceFrame],
        times_each: Sequence[StageTimes],
        params: Any,
        pixels: bool,
    ) -> list[FrameResult]:
        """Each frame upscaled (the original is always kept: the views show both)."""
        del pixels
        asked = params.region if isinstance(params, SuperResParams) else None
        return [self._upscale(f, t, asked) for f, t in zip(frames, times_each, strict=True)]

    def _upscale(self, frame: DeviceFrame, times: StageTimes, asked: Any) -> FrameResult:
        rig = self.rig
        spec, timer = self.task.spec, rig.timer
        width, height = frame.width, frame.height
        region = clamp_region(asked, width, height, spec.scale)
        # a region is a multiple of the scale already; the whole frame is padded to one
        x, y, cw, ch = region if region is not None else (0, 0, width, height)
        pw, ph = (cw, ch) if region is not None else padded_size(width, height, spec.scale)
        crop = self._buffers_for(width, height, pw, ph)
        assert self._orig is not None
        with rig.ctx.active():
            original = self._original(frame)
            source = original.ptr + y * original.pitch + x * 4
            with timer.stage("preprocess"):
                if (pw, ph) != (cw, ch):
                    replicate_edges(original.ptr, original.pitch, width, height, pw, ph, rig.stream)
                self._split(source, original.pitch, pw, ph, crop)
            with timer.stage("inference"):
                out = rig.engine.infer_device(
                    crop.input.buffers[0].ptr, (1, spec.channels, ph, pw), np.float32,
                    to_host=False,
                )[0]  # fmt: skip
            want = (1, spec.channels, ph * spec.scale, pw * spec.scale)
            if tuple(out.shape) != want or out.dtype != np.float32:
                raise GpuError(
                    f"{spec.name}: output {list(out.shape)} {out.dtype.name}, expected "
                    f"{list(want)} float32"
                )
            upscaled = self._merge(
                out.ptr, pw * spec.scale, ph * spec.scale, crop, (cw * spec.scale, ch * spec.scale)
            )
            timer.collect([times])
        return FrameResult(
            frame.holding(device=original.image),
            Upscaled(None, spec.scale, device=upscaled, region=region),
            times,
        )

    def _original(self, frame: DeviceFrame) -> _Original:
        """The frame as RGBA in a display buffer (an NVDEC frame is released after)."""
        assert self._orig is not None
        rig = self.rig
        stream = rig.stream
        rgba: DeviceBuffer = self._orig.acquire(stream, timeout=10.0)
        try:
            if isinstance(frame, DeviceNV12Frame):
                frame.wait(stream)  # the decoder's write, before the timed stage
            else:
                rig.pre.upload(frame, stream)
            with rig.timer.stage("preprocess"):
                rig.pre.rgba(frame, rgba, stream)
        except BaseException:
            self._orig.release(rgba)
            raise
        if isinstance(frame, DeviceNV12Frame):
            frame.release(stream)  # the decoder may reuse it once the kernel ran
        self._orig.mark_used(rgba, stream)
        image = RgbaDeviceImage(rgba, self._orig, frame.width, frame.height, rig.ctx, rgba.event)
        return _Original(image, rgba.ptr, rgba.pitch)

    def _split(self, src_ptr: int, pitch: int, cw: int, ch: int, crop: _CropBuffers) -> None:
        spec, k, stream = self.task.spec, self.rig.kernels, self.rig.stream
        y_ptr = crop.input.buffers[0].ptr
        if crop.chroma is not None:
            cr = crop.chroma.buffers[0].ptr
            k.bgr_to_ycrcb_planes(
                src_ptr, pitch, cw, ch, y_ptr, cr, cr + cw * ch, stream,
                src_order="rgb", src_channels=4,
            )  # fmt: skip
        else:
            k.packed_to_planar(
                src_ptr, pitch, cw, ch, y_ptr, stream, src_order="rgb", src_channels=4,
                dst_order=spec.color_order, scale=spec.input_scale,
            )  # fmt: skip

    def _merge(
        self, out_ptr: int, w: int, h: int, crop: _CropBuffers, shown: tuple[int, int]
    ) -> RgbaDeviceImage:
        """The model's ``w`` x ``h`` output merged into an output buffer; the image is
        its top-left ``shown`` (width, height): the padding's output left out."""
        spec, k, stream = self.task.spec, self.rig.kernels, self.rig.stream
        dst: DeviceBuffer = crop.output.acquire(stream, timeout=10.0)
        try:
            with self.rig.timer.stage("display"):
                if crop.chroma is not None:
                    cw, ch = crop.size
                    cr = crop.chroma.buffers[0].ptr
                    k.merge_ycrcb_to_rgba(
                        out_ptr, w, h, cr, cr + cw * ch, cw, ch, dst.ptr, dst.pitch, stream
                    )
                else:
                    k.planar_to_packed(
                        out_ptr, w, h, dst.ptr, dst.pitch, stream,
                        src_order=spec.color_order, input_scale=spec.input_scale, order="rgba",
                    )  # fmt: skip
        except BaseException:
            crop.output.release(dst)
            raise
        crop.output.mark_used(dst, stream)
        return RgbaDeviceImage(dst, crop.output, *shown, self.rig.ctx, dst.event)


class _Original:
    """The original frame's display image and where its pixels are (for the split)."""

    __slots__ = ("image", "pitch", "ptr")

    def __init__(self, image: RgbaDeviceImage, ptr: int, pitch: int) -> None:
        self.image, self.ptr, self.pitch = image, ptr, pitch
