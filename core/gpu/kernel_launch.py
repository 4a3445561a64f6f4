"""What the kernels' launches take: pycuda formats, block and grid, argument checks.

Every check runs on the host before a launch, so a bad pointer, pitch or size is a
``KernelError`` here rather than a fault on the device.
"""

from __future__ import annotations

from typing import Any

from framelens.core.gpu.kernel_build import KernelError
from framelens.core.gpu.kernel_layout import PreprocessLayout

BLOCK = (32, 8, 1)
"""Threads per block: a warp writes 32 consecutive pixels of a row."""

MAX_RESIZE_SIDE = 32767
"""Largest source or letterbox side the preprocessing kernels take."""

KERNEL_SIGNATURES: dict[str, tuple[str, str]] = {
    "fl_preprocess_packed_f32": ("preprocess", "PiiiPiiiiiiif" + "f" * 6),
    "fl_preprocess_packed_f16": ("preprocess", "PiiiPiiiiiiif" + "f" * 6),
    "fl_preprocess_nv12_f32": ("preprocess", "PiPiiiPiiiiiiif" + "f" * 12),
    "fl_preprocess_nv12_f16": ("preprocess", "PiPiiiPiiiiiiif" + "f" * 12),
    "fl_nv12_to_rgba": ("display", "PiPiiiPiiiffii" + "f" * 6),
    "fl_packed_to_rgba": ("display", "PiiiPiiiffiii"),
    "fl_rgba_resize": ("display", "PiiiPiiiffi"),
    "fl_packed_to_ycrcb_planes": ("sr_color", "PiiiiiPPP"),
    "fl_packed_to_planar": ("sr_color", "PiiiiiPif"),
    "fl_planar_to_packed": ("sr_color", "PiiifPiii"),
    "fl_upscale_chroma": ("sr_color", "PPiiPPiiff"),
    "fl_merge_ycrcb": ("sr_color", "PiiPPiiffiPiii"),
    "fl_draw_rects": ("draw", "PiiiiPi"),
    "fl_gather_candidates": ("candidates", "PiiifiPPP"),
    "fl_spin": ("bench", "q"),
}
"""Kernel name -> (module, pycuda ``prepare`` format: P pointer, i int, f float, q int64).
tests/unit checks these against the parameter lists in the shipped PTX."""

ORDERS = ("bgr", "rgb")
MERGE_ORDERS = {"bgr": (3, 0), "rgb": (3, 1), "bgra": (4, 0), "rgba": (4, 1)}


def grid(width: int, height: int) -> tuple[int, int, int]:
    return ((width + BLOCK[0] - 1) // BLOCK[0], (height + BLOCK[1] - 1) // BLOCK[1], 1)


def check_size(what: str, width: int, height: int) -> None:
    if width <= 0 or height <= 0:
        raise KernelError(f"{what} size must be positive, not {width}x{height}")


def check_image(what: str, ptr: int, pitch: int, width: int, height: int, bpp: int) -> None:
    check_size(what, width, height)
    if not ptr:
        raise KernelError(f"{what} pointer is null")
    if pitch < width * bpp:
        raise KernelError(f"{what} pitch {pitch} < {width} pixels x {bpp} bytes")


def check_rgba(what: str, ptr: int, pitch: int, width: int, height: int) -> None:
    check_image(what, ptr, pitch, width, height, 4)
    if ptr % 4 or pitch % 4:
        raise KernelError(f"{what} pointer and pitch must be multiples of 4 (pitch {pitch})")


def check_order(order: str) -> None:
    if order not in ORDERS:
        raise KernelError(f"colour order must be bgr or rgb, not {order!r}")


def pre_args(layout: PreprocessLayout, swap: bool) -> tuple[Any, ...]:
    # No scale factors: the kernels take the resize's source coordinates exactly
    # from the sizes (src_w / new_w as a rational), as cv2.resize's float path does.
    return (
        layout.input_w,
        layout.input_h,
        layout.new_w,
        layout.new_h,
        layout.pad_x,
        layout.pad_y,
        int(swap),
        layout.pad_value,
        *layout.scale,
        *layout.offset,
    )


def check_layout(layout: PreprocessLayout, src_w: int, src_h: int, out_ptr: int) -> None:
    if (src_w, src_h) != (layout.src_w, layout.src_h):
        raise KernelError(
            f"frame is {src_w}x{src_h}, layout built for {layout.src_w}x{layout.src_h}"
        )
    if not out_ptr or out_ptr % layout.itemsize:
        raise KernelError(f"output pointer must be non-null and {layout.itemsize}-byte aligned")
    if max(src_w, src_h, layout.new_w, layout.new_h) > MAX_RESIZE_SIDE:
        # the kernels' exact coordinates take 2 * new * src in 32-bit integers
        raise KernelError(f"sides above {MAX_RESIZE_SIDE} px are not supported")
