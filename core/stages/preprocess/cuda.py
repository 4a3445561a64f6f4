"""CUDA preprocessing: frames in device memory -> the model input, and -> RGBA for display.

The GPU side of core/stages/preprocess/cpu.py, with the same semantics (a shared test in
tests/gpu holds them to the same tensor): one fused kernel does colour conversion
(NV12 from NVDEC, or BGR uploaded from a host frame), the letterbox resize, scaling and
HWC->CHW into fp32 or fp16. Host frames (cameras, streams, folders) go through a pinned
staging buffer and an asynchronous copy on the pipeline's stream. Everything is queued
on the caller's stream; nothing here synchronizes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from framelens.core.geometry import Letterbox
from framelens.core.gpu.buffers import DeviceBuffer, DevicePool, PinnedPool, cuda_driver
from framelens.core.gpu.context import GpuContext
from framelens.core.gpu.kernels import GpuKernels, PreprocessLayout, yuv_matrix
from framelens.core.stages.sources.nv12 import DeviceNV12Frame
from framelens.core.types import Frame, Image

DeviceFrame = Frame | DeviceNV12Frame
"""What the GPU preprocessing takes: an NVDEC frame, or a host frame to upload."""


class CudaPreprocessor:
    """Converts one frame at a time on a stream; owns the upload buffers of host frames."""

    def __init__(self, ctx: GpuContext, kernels: GpuKernels) -> None:
        self.ctx = ctx
        self.kernels = kernels
        self._upload: PinnedPool | None = None
        self._bgr: DevicePool | None = None
        self._size = (0, 0)  # (width, height) the upload buffers hold at most

    def model_input(
        self, frame: DeviceFrame, layout: PreprocessLayout, dst_ptr: int, stream: Any
    ) -> None:
        """Queue the fused preprocessing of ``frame`` into the input at ``dst_ptr``.

        The caller makes ``stream`` wait for an NVDEC frame first (``frame.wait``), so
        the decoder's time is not counted as preprocessing; a host frame is uploaded.
        """
        if isinstance(frame, DeviceNV12Frame):
            self.kernels.preprocess_nv12(
                *_planes(frame), frame.width, frame.height, dst_ptr, layout, stream,
                matrix=yuv_matrix(frame.matrix, frame.full_range),
            )  # fmt: skip
        else:
            bgr = self._upload_bgr(frame.image, stream)
            self.kernels.preprocess_bgr(
                bgr.ptr, bgr.pitch, frame.width, frame.height, dst_ptr, layout, stream
            )

    def upload(self, frame: Frame, stream: Any) -> None:
        """Queue the upload of a host frame, which ``rgba`` then converts (for pipelines
        that need no model input from the frame itself: super-resolution)."""
        self._upload_bgr(frame.image, stream)

    def rgba(self, frame: DeviceFrame, dst: DeviceBuffer, stream: Any) -> None:
        """Queue the display conversion of the frame ``model_input`` just converted.

        For a host frame it reads the device copy ``model_input`` (or ``upload``) made.
        """
        if isinstance(frame, DeviceNV12Frame):
            self.kernels.nv12_to_rgba(
                *_planes(frame), frame.width, frame.height, dst.ptr, dst.pitch,
                frame.width, frame.height, stream,
                matrix=yuv_matrix(frame.matrix, frame.full_range),
            )  # fmt: skip
            return
        assert self._bgr is not None, "rgba() follows model_input() of the same frame"
        bgr = self._bgr.buffers[0]
        self.kernels.bgr_to_rgba(
            bgr.ptr, bgr.pitch, frame.width, frame.height, dst.ptr, dst.pitch,
            frame.width, frame.height, stream,
        )  # fmt: skip

    def _upload_bgr(self, image: Image, stream: Any) -> DeviceBuffer:
        """A host BGR frame into a device buffer (pinned staging, asynchronous copy).

        The buffers only grow: a frame no larger than the last allocation reuses it
        (its rows keep the allocation's pitch), so sources of mixed sizes on one worker
        reallocate once, not on every change of size.
        """
        cuda = cuda_driver()
        h, w = image.shape[:2]
        cap_w, cap_h = self._size
        if self._upload is None or self._bgr is None or w > cap_w or h > cap_h:
            self.free()
            cap_w, cap_h = max(w, cap_w), max(h, cap_h)
            self._size = (cap_w, cap_h)
            self._upload = PinnedPool(self.ctx, (cap_h, cap_w, 3), np.uint8, 2, kind="frame upload")
            self._bgr = DevicePool.pitched(self.ctx, cap_w * 3, cap_h, 1, kind="BGR frame")
        staging = self._upload.cycle()
        np.copyto(staging.array[:h, :w], image)
        device = self._bgr.buffers[0]
        copy = cuda.Memcpy2D()
        copy.set_src_host(staging.array)
        copy.src_pitch = cap_w * 3
        copy.set_dst_device(device.ptr)
        copy.dst_pitch = device.pitch
        copy.width_in_bytes = w * 3
        copy.height = h
        copy(stream)
        self._upload.mark_used(staging, stream)
        return device

    def free(self) -> None:
        for pool in (self._upload, self._bgr):
            if pool is not None:
                pool.close()
        self._upload = self._bgr = None
        self._size = (0, 0)


class CudaFramePreprocessor:
    """The device implementation of ``DevicePreprocessor`` (base.py) for frames of one
    size: the fused kernel into the model input laid out by ``layout`` (the task's
    geometry), on the uploads and kernels of ``pre``. The host twin is cpu.py's
    ``Preprocessor``."""

    def __init__(self, pre: CudaPreprocessor, layout: PreprocessLayout) -> None:
        self.pre = pre
        self.layout = layout
        self.src_w, self.src_h = layout.src_w, layout.src_h

    @property
    def geometry(self) -> Letterbox:
        return self.layout.letterbox

    def __call__(self, frame: DeviceFrame, dst_ptr: int, stream: Any) -> None:
        self.pre.model_input(frame, self.layout, dst_ptr, stream)


def _planes(frame: DeviceNV12Frame) -> tuple[int, int, int, int]:
    return frame.y_ptr, frame.y_pitch, frame.uv_ptr, frame.uv_pitch
