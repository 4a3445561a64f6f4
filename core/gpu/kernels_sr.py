"""Launchers of the super-resolution colour kernels (``kernels/sr_color.cu``): the
YCrCb split of a frame into the SR model's Y input and its chroma, chroma upscaling,
and the merge of the model's Y output with the chroma back into a packed image.

``SrColourLaunchers`` is a part of ``GpuKernels`` (``framelens.core.gpu.kernels``),
which provides the launch.
"""

from __future__ import annotations

from typing import Any

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
    ) -> None:
        """Packed BGR (or RGB) -> contiguous planes: Y / 255 float32 (the SR model's
        [1, 1, h, w] input), Cr and Cb uint8 (cv2.COLOR_BGR2YCrCb, exactly).
        ``cr_ptr`` / ``cb_ptr`` may be 0 to skip that plane."""
        check_order(src_order)
        check_image("source", src_ptr, src_pitch, width, height, 3)
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
            y_ptr,
            cr_ptr,
            cb_ptr,
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
