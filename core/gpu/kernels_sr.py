"""Launchers of the super-resolution colour kernels (``kernels/sr_color.cu``): the
YCrCb split of a frame into the SR model's Y input and its chroma, chroma upscaling,
and the merge of the model's Y output with the chroma back into a packed image.

``SrColourLaunchers`` is a part of ``GpuKernels`` (``framelens.core.gpu.kernels``),
which provides the launch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from framelens.core.gpu.kernel_build import KernelError
from framelens.core.gpu.kernel_launch import (
    BLOCK,
    MERGE_ORDERS,
    check_image,
    check_order,
    check_rgba,
    check_size,
    grid,
)


class SrColourLaunchers:
    """The SR colour launchers of ``GpuKernels``."""

    def _launch(
        self,
        fn: str,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        stream: Any,
        *args: Any,
    ) -> None:
        raise NotImplementedError  # GpuKernels launches

    def bgr_to_ycrcb_planes(
        self,
        src_ptr: int,
        src_pitch: int,
        width: int,
        height: int,
        y_ptr: int,
        cr_ptr: int,
        cb_ptr: int,
        stream: Any = None,
        *,
        src_order: str = "bgr",
        src_channels: int = 3,
    ) -> None:
        """Packed BGR (or RGB; with ``src_channels`` 4, BGRA or RGBA: the display frame)
        -> contiguous planes: Y / 255 float32 (the SR model's [1, 1, h, w] input), Cr and
        Cb uint8 (cv2.COLOR_BGR2YCrCb, exactly). ``cr_ptr`` / ``cb_ptr`` may be 0 to skip
        that plane."""
        check_order(src_order)
        _check_channels(src_channels)
        check_image("source", src_ptr, src_pitch, width, height, src_channels)
        if not y_ptr or y_ptr % 4:
            raise KernelError("Y plane pointer must be non-null and 4-byte aligned (float32)")
        self._launch(
            "fl_packed_to_ycrcb_planes",
            grid(width, height),
            BLOCK,
            stream,
            src_ptr,
            src_pitch,
            width,
            height,
            int(src_order == "rgb"),
            src_channels,
            y_ptr,
            cr_ptr,
            cb_ptr,
        )

    def packed_to_planar(
        self,
        src_ptr: int,
        src_pitch: int,
        width: int,
        height: int,
        dst_ptr: int,
        stream: Any = None,
        *,
        src_order: str = "bgr",
        src_channels: int = 3,
        dst_order: str = "rgb",
        scale: float = 1.0 / 255.0,
    ) -> None:
        """Packed uint8 (3 or 4 channels) -> a colour SR model's input: 3 contiguous
        float32 planes in ``dst_order``, times ``scale`` (the spec's input_scale)."""
        check_order(src_order)
        check_order(dst_order)
        _check_channels(src_channels)
        check_image("source", src_ptr, src_pitch, width, height, src_channels)
        if not dst_ptr or dst_ptr % 4:
            raise KernelError("planar pointer must be non-null and 4-byte aligned (float32)")
        self._launch(
            "fl_packed_to_planar",
            grid(width, height),
            BLOCK,
            stream,
            src_ptr,
            src_pitch,
            width,
            height,
            int(src_order == "rgb"),
            src_channels,
            dst_ptr,
            int(dst_order == "rgb"),
            float(scale),
        )

    def planar_to_packed(
        self,
        src_ptr: int,
        width: int,
        height: int,
        dst_ptr: int,
        dst_pitch: int,
        stream: Any = None,
        *,
        src_order: str = "rgb",
        input_scale: float = 1.0 / 255.0,
        order: str = "rgba",
    ) -> None:
        """A colour SR model's output (3 contiguous float32 planes in ``src_order``) ->
        packed uint8 in ``order`` ("bgr", "rgb", "bgra", "rgba"), rounded and clipped
        as on the host: clip(rint(v / (255 * input_scale) * 255))."""
        check_order(src_order)
        if order not in MERGE_ORDERS:
            raise KernelError(f"order must be one of {sorted(MERGE_ORDERS)}, not {order!r}")
        channels, r_first = MERGE_ORDERS[order]
        if channels == 4:
            check_rgba("destination", dst_ptr, dst_pitch, width, height)
        else:
            check_image("destination", dst_ptr, dst_pitch, width, height, 3)
        if not src_ptr or src_ptr % 4:
            raise KernelError("planar pointer must be non-null and 4-byte aligned (float32)")
        divisor = float(np.float32(255.0 * input_scale))  # as the host computes it
        self._launch(
            "fl_planar_to_packed",
            grid(width, height),
            BLOCK,
            stream,
            src_ptr,
            width,
            height,
            int(src_order == "rgb"),
            divisor,
            dst_ptr,
            dst_pitch,
            channels,
            r_first,
        )

    def upscale_chroma(
        self,
        cr_ptr: int,
        cb_ptr: int,
        width: int,
        height: int,
        cr_out_ptr: int,
        cb_out_ptr: int,
        out_w: int,
        out_h: int,
        stream: Any = None,
    ) -> None:
        """Both contiguous uint8 chroma planes bicubically to out_w x out_h (cv2 INTER_CUBIC)."""
        check_size("chroma", width, height)
        check_size("output", out_w, out_h)
        if not (cr_ptr and cb_ptr and cr_out_ptr and cb_out_ptr):
            raise KernelError("chroma pointers must not be null")
        self._launch(
            "fl_upscale_chroma",
            grid(out_w, out_h),
            BLOCK,
            stream,
            cr_ptr,
            cb_ptr,
            width,
            height,
            cr_out_ptr,
            cb_out_ptr,
            out_w,
            out_h,
            width / out_w,
            height / out_h,
        )

    def merge_ycrcb_to_bgr(
        self,
        y_ptr: int,
        width: int,
        height: int,
        cr_ptr: int,
        cb_ptr: int,
        chroma_w: int,
        chroma_h: int,
        dst_ptr: int,
        dst_pitch: int,
        stream: Any = None,
        *,
        order: str = "bgr",
    ) -> None:
        """SR model output + chroma -> packed uint8 image of width x height.

        ``y_ptr``: contiguous float32 Y / 255 (the model's [1, 1, H, W] output; NaN
        and out-of-range values are clamped). ``cr_ptr``/``cb_ptr``: contiguous uint8
        planes of chroma_w x chroma_h, upscaled bicubically inline when smaller than
        the output (so no upscaled chroma is ever stored). ``order``: "bgr", "rgb",
        "bgra" or "rgba" (alpha 255; 4-byte aligned rows) - "rgba" for the canvas.
        """
        if order not in MERGE_ORDERS:
            raise KernelError(f"order must be one of {sorted(MERGE_ORDERS)}, not {order!r}")
        channels, r_first = MERGE_ORDERS[order]
        if channels == 4:
            check_rgba("destination", dst_ptr, dst_pitch, width, height)
        else:
            check_image("destination", dst_ptr, dst_pitch, width, height, 3)
        check_size("chroma", chroma_w, chroma_h)
        if not (y_ptr and cr_ptr and cb_ptr) or y_ptr % 4:
            raise KernelError("Y, Cr and Cb pointers must be non-null, Y 4-byte aligned")
        self._launch(
            "fl_merge_ycrcb",
            grid(width, height),
            BLOCK,
            stream,
            y_ptr,
            width,
            height,
            cr_ptr,
            cb_ptr,
            chroma_w,
            chroma_h,
            chroma_w / width,
            chroma_h / height,
            int((chroma_w, chroma_h) != (width, height)),
            dst_ptr,
            dst_pitch,
            channels,
            r_first,
        )

    def merge_ycrcb_to_rgba(
        self,
        y_ptr: int,
        width: int,
        height: int,
        cr_ptr: int,
        cb_ptr: int,
        chroma_w: int,
        chroma_h: int,
        dst_ptr: int,
        dst_pitch: int,
        stream: Any = None,
    ) -> None:
        """``merge_ycrcb_to_bgr(..., order="rgba")``: straight into a canvas buffer."""
        self.merge_ycrcb_to_bgr(
            y_ptr,
            width,
            height,
            cr_ptr,
            cb_ptr,
            chroma_w,
            chroma_h,
            dst_ptr,
            dst_pitch,
            stream,
            order="rgba",
        )


def _check_channels(channels: int) -> None:
    if channels not in (3, 4):
        raise KernelError(f"packed images have 3 or 4 channels, not {channels}")
