"""FrameLens' CUDA kernels from Python: fused preprocessing, display conversion, SR colour work.

``GpuKernels`` loads the CUDA modules into a context (``kernel_build``: nvcc for the
device with a cubin cache, else the shipped PTX) and launches them with typed,
checked arguments (``kernel_launch``); what they take is described on the host by
``kernel_layout`` (preprocessing layout, YUV matrices) and ``rects`` (rectangles
for the drawing kernel). Every public name of those modules is importable from here.

Every launch is asynchronous on the given ``pycuda.driver.Stream`` (``None``: the
default stream). Pointers are integer device addresses (``int(allocation)``,
a mapped GL buffer's pointer, an NVDEC surface), pitches are bytes between rows.
Each method makes the kernels' context current for its launch.

Accuracy against the CPU path, in 0..255 units before a model's scaling (the
bounds tests/gpu/test_kernels.py asserts; in brackets what the kernels gave on
random frames run through a host build of the same sources, against cv2 5.0 on x86):
- BGR preprocessing vs ``core.preprocess.Preprocessor`` (float32 resize): max 1e-3,
  mean 1e-5. The kernels take cv2's taps and weights (the source coordinate exact,
  as IPP, which runs cv2's float resize on x86, holds it in double) and its
  arithmetic (a + (b - a) w, rows then columns) [identical when downscaling; 1
  float ulp, <= 3e-5, on ~0.2% of pixels, edge columns, when upscaling]. Where cv2
  has no IPP its own loop rounds the coordinate to float first: max 0.05 there
  [0.018 at 1917 -> 416 px]. Frames that are not resized are identical;
- NV12 preprocessing vs ``cv2.cvtColor(COLOR_YUV2BGR_NV12)`` then the
  Preprocessor: the same bounds [the same results]: each source pixel is
  converted to bytes by OpenCV's own fixed-point formula first, bit for bit;
- display: BGR and NV12 1:1 identical; stretched max 2;
- YCrCb split, and merge with full-size chroma: identical (OpenCV's integer
  formulas); bicubic chroma vs ``cv2.resize(INTER_CUBIC)``: max 1 [on <0.2% of
  pixels], hence max 2 after the merge;
- fp16 output: the same plus one fp16 rounding step [identical in practice: both
  sides round the same float32 values].

pycuda is imported only when a ``GpuKernels`` is made: this module imports
without it (the layout, matrix and rectangle helpers serve the CPU tests too).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from framelens.core.gpu.kernel_build import (
    KERNEL_SOURCES,
    NVCC_OPTIONS,
    PTX_ARCH,
    PTX_HEADER,
    KernelError,
    KernelLoader,
    find_nvcc,
    kernel_cache_dir,
    kernels_dir,
    nvcc_version,
    ptx_digest,
    source_digest,
)
from framelens.core.gpu.kernel_launch import (
    BLOCK,
    KERNEL_SIGNATURES,
    MAX_RESIZE_SIDE,
    check_image,
    check_layout,
    check_order,
    check_rgba,
    grid,
    pre_args,
)
from framelens.core.gpu.kernel_layout import (
    BT601_LIMITED,
    OUTPUT_DTYPES,
    PreprocessLayout,
    YuvMatrix,
    yuv_matrix,
)
from framelens.core.gpu.kernels_sr import SrColourLaunchers
from framelens.core.gpu.rects import pack_dots, pack_rects, rect_half_width

if TYPE_CHECKING:
    from framelens.core.gpu.context import GpuContext

__all__ = [
    "BLOCK",
    "BT601_LIMITED",
    "KERNEL_SIGNATURES",
    "KERNEL_SOURCES",
    "MAX_RESIZE_SIDE",
    "NVCC_OPTIONS",
    "OUTPUT_DTYPES",
    "PTX_ARCH",
    "PTX_HEADER",
    "GpuKernels",
    "KernelError",
    "KernelLoader",
    "PreprocessLayout",
    "YuvMatrix",
    "find_nvcc",
    "kernel_cache_dir",
    "kernels_dir",
    "nvcc_version",
    "pack_dots",
    "pack_rects",
    "ptx_digest",
    "rect_half_width",
    "source_digest",
    "yuv_matrix",
]


class GpuKernels(SrColourLaunchers):
    """The CUDA modules of FrameLens loaded into a ``GpuContext``, with typed launchers.

    ``build``: "auto" (nvcc for the device, else the shipped PTX), "nvcc" or "ptx".
    ``origin`` says per module how it was obtained; ``fallback_reason`` why nvcc
    was not used, when it was not.
    """

    def __init__(
        self,
        ctx: GpuContext,
        *,
        build: str = "auto",
        cache_dir: Path | None = None,
        directory: Path | None = None,
    ) -> None:
        self._ctx = ctx
        major, minor = ctx.properties.compute_capability
        self._loader = KernelLoader(
            f"sm_{major}{minor}", build=build, cache_dir=cache_dir, directory=directory
        )
        self._modules: dict[str, Any] = {}
        self._functions: dict[str, Any] = {}
        with ctx.active():
            for name in KERNEL_SOURCES:
                self._modules[name] = self._loader.load(name)
            for fn, (module, fmt) in KERNEL_SIGNATURES.items():
                f = self._modules[module].get_function(fn)
                f.prepare(fmt)
                self._functions[fn] = f

    @property
    def arch(self) -> str:
        """The device's architecture, e.g. "sm_90"."""
        return self._loader.arch

    @property
    def origin(self) -> dict[str, str]:
        """Per module, how it was obtained (nvcc built or cached, or the shipped PTX)."""
        return self._loader.origin

    @property
    def fallback_reason(self) -> str | None:
        """Why nvcc was not used, when it was not."""
        return self._loader.fallback_reason

    # -- launching -------------------------------------------------------------------------

    def _launch(
        self,
        fn: str,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        stream: Any,
        *args: Any,
    ) -> None:
        with self._ctx.active():
            self._functions[fn].prepared_async_call(grid, block, stream, *args)

    # -- preprocessing -----------------------------------------------------------------------

    def preprocess_bgr(
        self,
        src_ptr: int,
        src_pitch: int,
        src_w: int,
        src_h: int,
        out_ptr: int,
        layout: PreprocessLayout,
        stream: Any = None,
        *,
        src_order: str = "bgr",
    ) -> None:
        """Packed 3-channel uint8 frame (BGR, or RGB with ``src_order``) -> NCHW model input.

        Writes ``layout.nbytes`` at ``out_ptr``: letterboxed, colour-ordered and
        scaled as ``Preprocessor`` does, in ``layout.dtype``.
        """
        check_order(src_order)
        check_image("source", src_ptr, src_pitch, src_w, src_h, 3)
        check_layout(layout, src_w, src_h, out_ptr)
        fn = "fl_preprocess_packed_" + ("f16" if layout.dtype == "float16" else "f32")
        swap = src_order != layout.color_order
        self._launch(
            fn,
            grid(layout.input_w, layout.input_h),
            BLOCK,
            stream,
            src_ptr,
            src_pitch,
            src_w,
            src_h,
            out_ptr,
            *pre_args(layout, swap),
        )

    def preprocess_nv12(
        self,
        y_ptr: int,
        y_pitch: int,
        uv_ptr: int,
        uv_pitch: int,
        src_w: int,
        src_h: int,
        out_ptr: int,
        layout: PreprocessLayout,
        stream: Any = None,
        *,
        matrix: YuvMatrix = BT601_LIMITED,
    ) -> None:
        """NV12 frame (Y plane, interleaved UV plane at half resolution) -> NCHW model input.

        The same function as ``cv2.cvtColor(nv12, COLOR_YUV2BGR_NV12)`` followed by
        ``Preprocessor`` (for ``matrix=BT601_LIMITED``), in one pass.
        """
        check_image("Y plane", y_ptr, y_pitch, src_w, src_h, 1)
        check_image("UV plane", uv_ptr, uv_pitch, (src_w + 1) // 2, (src_h + 1) // 2, 2)
        check_layout(layout, src_w, src_h, out_ptr)
        fn = "fl_preprocess_nv12_" + ("f16" if layout.dtype == "float16" else "f32")
        swap = layout.color_order != "bgr"
        self._launch(
            fn,
            grid(layout.input_w, layout.input_h),
            BLOCK,
            stream,
            y_ptr,
            y_pitch,
            uv_ptr,
            uv_pitch,
            src_w,
            src_h,
            out_ptr,
            *pre_args(layout, swap),
            *matrix.args(),
        )

    # -- display -----------------------------------------------------------------------------

    def nv12_to_rgba(
        self,
        y_ptr: int,
        y_pitch: int,
        uv_ptr: int,
        uv_pitch: int,
        src_w: int,
        src_h: int,
        dst_ptr: int,
        dst_pitch: int,
        dst_w: int,
        dst_h: int,
        stream: Any = None,
        *,
        matrix: YuvMatrix = BT601_LIMITED,
        bgra: bool = False,
    ) -> None:
        """NV12 -> RGBA8 (alpha 255; BGRA with ``bgra``) at ``dst_ptr``, rows ``dst_pitch`` apart.

        A destination size other than the source's stretches the frame bilinearly.
        """
        check_image("Y plane", y_ptr, y_pitch, src_w, src_h, 1)
        check_image("UV plane", uv_ptr, uv_pitch, (src_w + 1) // 2, (src_h + 1) // 2, 2)
        check_rgba("destination", dst_ptr, dst_pitch, dst_w, dst_h)
        self._launch(
            "fl_nv12_to_rgba",
            grid(dst_w, dst_h),
            BLOCK,
            stream,
            y_ptr,
            y_pitch,
            uv_ptr,
            uv_pitch,
            src_w,
            src_h,
            dst_ptr,
            dst_pitch,
            dst_w,
            dst_h,
            src_w / dst_w,
            src_h / dst_h,
            int((dst_w, dst_h) != (src_w, src_h)),
            int(bgra),
            *matrix.args(),
        )

    def bgr_to_rgba(
        self,
        src_ptr: int,
        src_pitch: int,
        src_w: int,
        src_h: int,
        dst_ptr: int,
        dst_pitch: int,
        dst_w: int,
        dst_h: int,
        stream: Any = None,
        *,
        src_order: str = "bgr",
        bgra: bool = False,
    ) -> None:
        """Packed BGR (or RGB) uint8 -> RGBA8 (BGRA with ``bgra``), stretched to dst size."""
        check_order(src_order)
        check_image("source", src_ptr, src_pitch, src_w, src_h, 3)
        check_rgba("destination", dst_ptr, dst_pitch, dst_w, dst_h)
        self._launch(
            "fl_packed_to_rgba",
            grid(dst_w, dst_h),
            BLOCK,
            stream,
            src_ptr,
            src_pitch,
            src_w,
            src_h,
            dst_ptr,
            dst_pitch,
            dst_w,
            dst_h,
            src_w / dst_w,
            src_h / dst_h,
            int((dst_w, dst_h) != (src_w, src_h)),
            int(src_order == "rgb"),
            int(bgra),
        )

    def rgba_resize(
        self,
        src_ptr: int,
        src_pitch: int,
        src_w: int,
        src_h: int,
        dst_ptr: int,
        dst_pitch: int,
        dst_w: int,
        dst_h: int,
        stream: Any = None,
    ) -> None:
        """RGBA8 (or BGRA8, order kept) -> a dst_w x dst_h RGBA rectangle at ``dst_ptr``
        (a tile of a larger image: its pitch), bilinear; alpha 255."""
        check_rgba("source", src_ptr, src_pitch, src_w, src_h)
        check_rgba("destination", dst_ptr, dst_pitch, dst_w, dst_h)
        self._launch(
            "fl_rgba_resize",
            grid(dst_w, dst_h),
            BLOCK,
            stream,
            src_ptr,
            src_pitch,
            src_w,
            src_h,
            dst_ptr,
            dst_pitch,
            dst_w,
            dst_h,
            src_w / dst_w,
            src_h / dst_h,
            int((dst_w, dst_h) != (src_w, src_h)),
        )

    # -- drawing -----------------------------------------------------------------------------

    def draw_rects(
        self,
        img_ptr: int,
        pitch: int,
        width: int,
        height: int,
        channels: int,
        rects_ptr: int,
        count: int,
        stream: Any = None,
    ) -> None:
        """Draw ``count`` rectangles (``pack_rects`` rows, in device memory at ``rects_ptr``,
        16-byte aligned) in place on a packed uint8 image of 3 or 4 channels."""
        if channels not in (3, 4):
            raise KernelError(f"channels must be 3 or 4, not {channels}")
        check_image("image", img_ptr, pitch, width, height, channels)
        if count <= 0:
            return
        if not rects_ptr or rects_ptr % 16:
            raise KernelError("rectangles pointer must be non-null and 16-byte aligned")
        self._launch(
            "fl_draw_rects",
            grid(width, height),
            BLOCK,
            stream,
            img_ptr,
            pitch,
            width,
            height,
            channels,
            rects_ptr,
            count,
        )

    # -- detection candidates -----------------------------------------------------------------

    def gather_candidates(
        self,
        out_ptr: int,
        frames: int,
        rows: int,
        cols: int,
        gate: int,
        conf: float,
        capacity: int,
        count_ptr: int,
        where_ptr: int,
        picked_ptr: int,
        stream: Any = None,
    ) -> None:
        """Gather the rows of a (frames, rows, cols) float32 output whose column ``gate``
        exceeds ``conf``: up to ``capacity`` of them into ``picked`` (capacity x cols
        floats) with their flat row numbers in ``where``; ``count`` (one int32, zeroed
        by the caller) receives how many passed, stored or not."""
        if frames <= 0 or rows <= 0:
            return
        if not 0 <= gate < cols:
            raise KernelError(f"gate column {gate} outside the {cols} columns")
        if frames * rows >= 2**31:
            raise KernelError(f"{frames} x {rows} rows do not fit the kernel's int32 indices")
        if not (out_ptr and count_ptr and where_ptr and picked_ptr):
            raise KernelError("gather_candidates needs non-null pointers")
        self._launch(
            "fl_gather_candidates",
            ((rows + 255) // 256, frames, 1),
            (256, 1, 1),
            stream,
            out_ptr,
            rows,
            cols,
            gate,
            float(conf),
            capacity,
            count_ptr,
            where_ptr,
            picked_ptr,
        )

    # -- timing ------------------------------------------------------------------------------

    def spin(self, cycles: int, stream: Any = None) -> None:
        """Keep the GPU busy for ``cycles`` SM clocks (one thread), for timing helpers."""
        self._launch("fl_spin", (1, 1, 1), (1, 1, 1), stream, int(cycles))
