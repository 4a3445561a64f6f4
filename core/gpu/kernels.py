"""FrameLens' CUDA kernels from Python: fused preprocessing, display conversion, SR colour work.

The CUDA C sources in ``framelens/kernels/*.cu`` are the truth. ``GpuKernels``
builds them for the device's architecture with nvcc through pycuda at first use
(cached under ``platformdirs.user_cache_dir("framelens")/cuda``); where nvcc is
missing or fails it loads the PTX shipped beside the sources (``kernels/build.py``
makes it; the driver compiles it for the GPU at load), after checking from its
header that it was built from these very sources.

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
without it (the layout and matrix helpers serve the CPU tests too).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from framelens.core.errors import EngineError
from framelens.core.geometry import Letterbox, letterbox_geometry
from framelens.core.models.spec import ModelSpec, input_size_for

if TYPE_CHECKING:
    from framelens.core.gpu.context import GpuContext

log = logging.getLogger(__name__)

KERNEL_SOURCES = ("preprocess", "display", "sr_color", "draw", "bench")
"""The .cu files in framelens/kernels, one per job; each is one CUDA module."""

PTX_ARCH = "compute_75"
"""Virtual architecture of the shipped PTX: Turing and every later GPU can load it."""

NVCC_OPTIONS: tuple[str, ...] = ("-O3", "-std=c++17")
"""Options for every build, run-time (pycuda) and shipped (kernels/build.py) alike."""

PTX_HEADER = "// framelens-kernel-source-sha256:"
"""First line of a shipped PTX file: the digest of the sources it was built from."""

BLOCK = (32, 8, 1)
"""Threads per block: a warp writes 32 consecutive pixels of a row."""

MAX_RESIZE_SIDE = 32767
"""Largest source or letterbox side the preprocessing kernels take."""

_INCLUDE = re.compile(rb'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


class KernelError(EngineError):
    """The CUDA kernels could not be built or loaded, or a launch was given bad arguments."""


# -- sources ---------------------------------------------------------------------------------


def kernels_dir() -> Path:
    """The folder holding the .cu sources and shipped .ptx files (the source tree in a dev
    install: links are resolved, so ``kernels/build.py`` writes where git sees it)."""
    import framelens.kernels

    return Path(framelens.kernels.__file__).resolve().parent


def _source_bytes(path: Path, seen: set[Path]) -> bytes:
    """The file followed by every local header it includes, line endings normalised."""
    if path in seen:
        return b""
    seen.add(path)
    text = path.read_bytes().replace(b"\r\n", b"\n")
    parts = [path.name.encode(), b"\0", text]
    for name in _INCLUDE.findall(text):
        header = path.parent / name.decode()
        if header.is_file():
            parts.append(_source_bytes(header, seen))
    return b"".join(parts)


def source_digest(name: str, directory: Path | None = None) -> str:
    """sha256 of ``<name>.cu`` and the local headers it includes (recorded in its PTX)."""
    folder = directory if directory is not None else kernels_dir()
    return hashlib.sha256(_source_bytes(folder / f"{name}.cu", set())).hexdigest()


def ptx_digest(ptx: bytes) -> str | None:
    """The source digest recorded in a shipped PTX file's first line, if any."""
    first = ptx.split(b"\n", 1)[0].decode("ascii", "replace").strip()
    if not first.startswith(PTX_HEADER):
        return None
    return first[len(PTX_HEADER) :].strip() or None


def find_nvcc() -> str | None:
    """nvcc on PATH, else under CUDA_HOME / CUDA_PATH / /usr/local/cuda."""
    found = shutil.which("nvcc")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            candidate = Path(root) / "bin" / ("nvcc.exe" if os.name == "nt" else "nvcc")
            if candidate.is_file():
                return str(candidate)
    return None


@functools.cache
def nvcc_version(nvcc: str) -> str:
    """The last line of ``nvcc --version`` (its build), part of the cache key."""
    out = subprocess.run(
        [nvcc, "--version"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    lines = [line for line in out.splitlines() if line.strip()]
    return lines[-1] if lines else "unknown"


def kernel_cache_dir() -> Path:
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("framelens")) / "cuda"


# -- colour matrices -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class YuvMatrix:
    """YUV -> RGB for 8-bit video, applied per pixel by the NV12 kernels:

        y' = max(Y - y_offset, 0) * y_scale;  u = U - 128;  v = V - 128
        R = y' + r_v v;  G = y' + g_u u + g_v v;  B = y' + b_u u   (rounded, clamped)

    in OpenCV's fixed point: every coefficient rounded to a multiple of 2^-20, sums
    in integers, halves rounded up (for ``BT601_LIMITED``, OpenCV's own constants:
    ``cv2.COLOR_YUV2BGR_NV12`` exactly). The clamp below y_offset is OpenCV's.
    Chroma is taken from the pixel's 2x2 block (no chroma interpolation), as
    ``cv2.COLOR_YUV2BGR_NV12`` does.
    """

    name: str
    y_offset: float
    y_scale: float
    r_v: float
    g_u: float
    g_v: float
    b_u: float

    def args(self) -> tuple[float, float, float, float, float, float]:
        return (self.y_offset, self.y_scale, self.r_v, self.g_u, self.g_v, self.b_u)


_KR_KB = {"bt601": (0.299, 0.114), "bt709": (0.2126, 0.0722)}

# OpenCV's fixed-point constants (ITUR_BT_601_*, 20 fractional bits): with them the
# kernel reproduces cv2.COLOR_YUV2BGR_NV12, which is also FFmpeg's default reading
# of untagged video (swscale: BT.601, limited range) to within rounding.
BT601_LIMITED = YuvMatrix(
    "bt601-limited",
    16.0,
    1220542 / 2**20,
    1673527 / 2**20,
    -409993 / 2**20,
    -852492 / 2**20,
    2116026 / 2**20,
)


def yuv_matrix(standard: str = "bt601", full_range: bool = False) -> YuvMatrix:
    """The matrix of ``standard`` ("bt601" or "bt709"), limited (16-235) or full range.

    BT.601 limited is OpenCV's (``BT601_LIMITED``); the others follow from Kr, Kb.
    """
    key = standard.lower().replace(".", "").replace("-", "").replace("_", "")
    if key not in _KR_KB:
        raise ValueError(f"unknown YUV standard {standard!r}: use bt601 or bt709")
    if key == "bt601" and not full_range:
        return BT601_LIMITED
    kr, kb = _KR_KB[key]
    kg = 1.0 - kr - kb
    ys, cs, off = (1.0, 1.0, 0.0) if full_range else (255.0 / 219.0, 255.0 / 224.0, 16.0)
    return YuvMatrix(
        f"{key}-{'full' if full_range else 'limited'}",
        off,
        ys,
        2.0 * (1.0 - kr) * cs,
        -2.0 * kb * (1.0 - kb) / kg * cs,
        -2.0 * kr * (1.0 - kr) / kg * cs,
        2.0 * (1.0 - kb) * cs,
    )


# -- preprocessing layout --------------------------------------------------------------------

OUTPUT_DTYPES = ("float32", "float16")


@dataclass(frozen=True, slots=True)
class PreprocessLayout:
    """Where a source frame lands in a model's input tensor, and how values are scaled.

    Computed by ``from_spec`` with the CPU path's own geometry functions
    (``input_size_for``, ``letterbox_geometry``), so both paths place pixels alike.
    Output channel c (in the model's colour order) is ``pixel * scale[c] + offset[c]``
    for 0..255 pixel values; padding is ``pad_value`` treated the same way.
    """

    src_w: int
    src_h: int
    input_w: int
    input_h: int
    new_w: int
    new_h: int
    pad_x: int
    pad_y: int
    ratio: float
    color_order: str
    pad_value: float
    scale: tuple[float, float, float]
    offset: tuple[float, float, float]
    dtype: str = "float32"

    @classmethod
    def from_spec(
        cls,
        spec: ModelSpec,
        src_w: int,
        src_h: int,
        dtype: str = "float32",
        *,
        mean: tuple[float, float, float] | None = None,
        std: tuple[float, float, float] | None = None,
    ) -> PreprocessLayout:
        """Layout of a ``src_w`` x ``src_h`` frame for ``spec``.

        ``mean``/``std`` (in scaled units, model channel order) add a normalisation
        ``(pixel * input_scale - mean) / std``; ModelSpec has none, so by default the
        values are ``pixel * input_scale`` exactly as ``Preprocessor`` computes them.
        """
        if dtype not in OUTPUT_DTYPES:
            raise ValueError(f"dtype must be one of {OUTPUT_DTYPES}, not {dtype!r}")
        if src_w <= 0 or src_h <= 0:
            raise ValueError(f"source size must be positive, not {src_w}x{src_h}")
        h, w = input_size_for(spec, src_w, src_h)
        ratio, nw, nh, px, py = letterbox_geometry(src_w, src_h, w, h, spec.letterbox)
        m = mean if mean is not None else (0.0, 0.0, 0.0)
        s = std if std is not None else (1.0, 1.0, 1.0)
        scale = tuple(spec.input_scale / s[c] for c in range(3))
        offset = tuple(-m[c] / s[c] for c in range(3))
        return cls(
            src_w=src_w,
            src_h=src_h,
            input_w=w,
            input_h=h,
            new_w=nw,
            new_h=nh,
            pad_x=px,
            pad_y=py,
            ratio=ratio,
            color_order=spec.color_order,
            pad_value=float(spec.pad_value),
            scale=(scale[0], scale[1], scale[2]),
            offset=(offset[0], offset[1], offset[2]),
            dtype=dtype,
        )

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """NCHW shape of the output tensor."""
        return (1, 3, self.input_h, self.input_w)

    @property
    def itemsize(self) -> int:
        return 2 if self.dtype == "float16" else 4

    @property
    def nbytes(self) -> int:
        return 3 * self.input_h * self.input_w * self.itemsize

    @property
    def numpy_dtype(self) -> np.dtype[Any]:
        return np.dtype(self.dtype)

    @property
    def letterbox(self) -> Letterbox:
        """The same mapping back to source pixels as ``Preprocessor.geometry``."""
        return Letterbox(self.ratio, float(self.pad_x), float(self.pad_y), self.src_w, self.src_h)


# -- rectangles ------------------------------------------------------------------------------


def rect_half_width(thickness: int) -> int:
    """Half-width of the outline band that matches cv2.rectangle(thickness, LINE_8)."""
    return 0 if thickness <= 1 else (thickness + 1) // 2


def pack_rects(
    boxes: npt.NDArray[np.floating[Any]],
    colours: npt.ArrayLike,
    width: int,
    height: int,
    thickness: int,
    *,
    filled: bool = False,
) -> npt.NDArray[np.int32]:
    """Rectangles for ``GpuKernels.draw_rects``: (M, 8) int32, one row a rectangle.

    ``boxes`` (N, 4) are x1, y1, x2, y2 in frame pixels, rounded and clipped as
    ``core.drawing.annotate`` does (boxes wholly outside the frame or NaN are
    dropped); ``colours`` (N, C) or (C,) are bytes in the frame's channel order.
    """
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    c = np.asarray(colours, dtype=np.int64)
    if c.ndim == 1:
        c = np.broadcast_to(c, (len(b), c.shape[0]))
    if c.ndim != 2 or len(c) != len(b) or not 1 <= c.shape[1] <= 4:
        raise ValueError(f"colours must be (N, 1..4) for {len(b)} boxes, not {c.shape}")
    with np.errstate(invalid="ignore"):
        keep = (b[:, 2] >= 0) & (b[:, 3] >= 0) & (b[:, 0] <= width - 1) & (b[:, 1] <= height - 1)
    b, c = b[keep], c[keep]
    out = np.zeros((len(b), 8), dtype=np.int32)
    r = np.rint(b).astype(np.int64)
    out[:, 0] = np.maximum(0, r[:, 0])
    out[:, 1] = np.maximum(0, r[:, 1])
    out[:, 2] = np.minimum(width - 1, r[:, 2])
    out[:, 3] = np.minimum(height - 1, r[:, 3])
    # Bytes c0..c3 packed little-endian; missing channels (alpha) are 255.
    packed = np.zeros(len(b), dtype=np.uint32)
    for k in range(4):
        byte = c[:, k] if k < c.shape[1] else np.full(len(b), 255)
        packed |= (byte.astype(np.uint32) & np.uint32(0xFF)) << np.uint32(8 * k)
    out[:, 4] = packed.view(np.int32)
    out[:, 5] = -1 if filled else rect_half_width(thickness)
    return out


# -- the kernels -----------------------------------------------------------------------------

KERNEL_SIGNATURES: dict[str, tuple[str, str]] = {
    "fl_preprocess_packed_f32": ("preprocess", "PiiiPiiiiiiif" + "f" * 6),
    "fl_preprocess_packed_f16": ("preprocess", "PiiiPiiiiiiif" + "f" * 6),
    "fl_preprocess_nv12_f32": ("preprocess", "PiPiiiPiiiiiiif" + "f" * 12),
    "fl_preprocess_nv12_f16": ("preprocess", "PiPiiiPiiiiiiif" + "f" * 12),
    "fl_nv12_to_rgba": ("display", "PiPiiiPiiiffii" + "f" * 6),
    "fl_packed_to_rgba": ("display", "PiiiPiiiffiii"),
    "fl_packed_to_ycrcb_planes": ("sr_color", "PiiiiPPP"),
    "fl_upscale_chroma": ("sr_color", "PPiiPPiiff"),
    "fl_merge_ycrcb": ("sr_color", "PiiPPiiffiPiii"),
    "fl_draw_rects": ("draw", "PiiiiPi"),
    "fl_spin": ("bench", "q"),
}
"""Kernel name -> (module, pycuda ``prepare`` format: P pointer, i int, f float, q int64).
tests/unit checks these against the parameter lists in the shipped PTX."""

_ORDERS = ("bgr", "rgb")
_MERGE_ORDERS = {"bgr": (3, 0), "rgb": (3, 1), "bgra": (4, 0), "rgba": (4, 1)}


def _grid(width: int, height: int) -> tuple[int, int, int]:
    return ((width + BLOCK[0] - 1) // BLOCK[0], (height + BLOCK[1] - 1) // BLOCK[1], 1)


def _check_size(what: str, width: int, height: int) -> None:
    if width <= 0 or height <= 0:
        raise KernelError(f"{what} size must be positive, not {width}x{height}")


def _check_image(what: str, ptr: int, pitch: int, width: int, height: int, bpp: int) -> None:
    _check_size(what, width, height)
    if not ptr:
        raise KernelError(f"{what} pointer is null")
    if pitch < width * bpp:
        raise KernelError(f"{what} pitch {pitch} < {width} pixels x {bpp} bytes")


def _check_rgba(what: str, ptr: int, pitch: int, width: int, height: int) -> None:
    _check_image(what, ptr, pitch, width, height, 4)
    if ptr % 4 or pitch % 4:
        raise KernelError(f"{what} pointer and pitch must be multiples of 4 (pitch {pitch})")


def _check_order(order: str) -> None:
    if order not in _ORDERS:
        raise KernelError(f"colour order must be bgr or rgb, not {order!r}")


class GpuKernels:
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
        if build not in ("auto", "nvcc", "ptx"):
            raise ValueError(f"build must be auto, nvcc or ptx, not {build!r}")
        self._ctx = ctx
        self._dir = directory if directory is not None else kernels_dir()
        self._cache = cache_dir if cache_dir is not None else kernel_cache_dir()
        self._build = build
        self.origin: dict[str, str] = {}
        self.fallback_reason: str | None = None
        self._modules: dict[str, Any] = {}
        self._functions: dict[str, Any] = {}
        major, minor = ctx.properties.compute_capability
        self.arch = f"sm_{major}{minor}"
        with ctx.active():
            for name in KERNEL_SOURCES:
                self._modules[name] = self._load(name)
            for fn, (module, fmt) in KERNEL_SIGNATURES.items():
                f = self._modules[module].get_function(fn)
                f.prepare(fmt)
                self._functions[fn] = f

    # -- loading -----------------------------------------------------------------------------

    def _load(self, name: str) -> Any:
        import pycuda.driver as cuda

        if self._build in ("auto", "nvcc"):
            try:
                binary, how = self._compile(name)
            except Exception as exc:  # pycuda's CompileError, ExecError, OSError...
                if self._build == "nvcc":
                    raise KernelError(f"nvcc could not build {name}.cu: {exc}") from exc
                self.fallback_reason = self.fallback_reason or f"nvcc: {exc}".splitlines()[0]
                log.info("using shipped PTX for %s.cu (%s)", name, self.fallback_reason)
            else:
                self.origin[name] = f"nvcc {self.arch} ({how})"
                return cuda.module_from_buffer(binary)
        ptx = self._shipped_ptx(name)
        try:
            module = cuda.module_from_buffer(ptx + b"\0")
        except Exception as exc:
            raise KernelError(f"the driver could not load {name}.ptx: {exc}") from exc
        self.origin[name] = f"ptx {PTX_ARCH} (driver JIT)"
        return module

    def _compile(self, name: str) -> tuple[bytes, str]:
        """A cubin for this device: from the cache when the sources, options and nvcc
        are unchanged, else built with nvcc through pycuda and cached."""
        from pycuda.compiler import compile as nvcc_compile

        nvcc = find_nvcc()
        if nvcc is None:
            raise KernelError("nvcc not found (PATH, CUDA_HOME, /usr/local/cuda)")
        key = hashlib.sha256(
            "|".join(
                (source_digest(name, self._dir), self.arch, *NVCC_OPTIONS, nvcc_version(nvcc))
            ).encode()
        ).hexdigest()[:32]
        cached = self._cache / f"{name}-{self.arch}-{key}.cubin"
        if cached.is_file():
            return cached.read_bytes(), "cached"
        source = (self._dir / f"{name}.cu").read_text(encoding="utf-8")
        cubin = bytes(
            nvcc_compile(
                source,
                nvcc=nvcc,
                options=list(NVCC_OPTIONS),
                no_extern_c=True,
                arch=self.arch,
                cache_dir=False,
                include_dirs=[str(self._dir)],
            )
        )
        try:  # the cache is an optimisation: a read-only home must not stop the GPU path
            self._cache.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(cubin)
            os.replace(tmp, cached)
        except OSError as exc:
            log.warning("could not cache %s: %s", cached, exc)
        return cubin, "built"

    def _shipped_ptx(self, name: str) -> bytes:
        path = self._dir / f"{name}.ptx"
        if not path.is_file():
            raise KernelError(
                f"no nvcc ({self.fallback_reason or 'not tried'}) and no shipped {path.name}"
            )
        ptx = path.read_bytes()
        if ptx_digest(ptx) != source_digest(name, self._dir):
            raise KernelError(
                f"{path.name} was not built from the current {name}.cu: "
                "run python kernels/build.py (needs nvcc)"
            )
        return ptx

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

    def _pre_args(self, layout: PreprocessLayout, swap: bool) -> tuple[Any, ...]:
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

    @staticmethod
    def _check_layout(layout: PreprocessLayout, src_w: int, src_h: int, out_ptr: int) -> None:
        if (src_w, src_h) != (layout.src_w, layout.src_h):
            raise KernelError(
                f"frame is {src_w}x{src_h}, layout built for {layout.src_w}x{layout.src_h}"
            )
        if not out_ptr or out_ptr % layout.itemsize:
            raise KernelError(f"output pointer must be non-null and {layout.itemsize}-byte aligned")
        if max(src_w, src_h, layout.new_w, layout.new_h) > MAX_RESIZE_SIDE:
            # the kernels' exact coordinates take 2 * new * src in 32-bit integers
            raise KernelError(f"sides above {MAX_RESIZE_SIDE} px are not supported")

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
        _check_order(src_order)
        _check_image("source", src_ptr, src_pitch, src_w, src_h, 3)
        self._check_layout(layout, src_w, src_h, out_ptr)
        fn = "fl_preprocess_packed_" + ("f16" if layout.dtype == "float16" else "f32")
        swap = src_order != layout.color_order
        self._launch(
            fn,
            _grid(layout.input_w, layout.input_h),
            BLOCK,
            stream,
            src_ptr,
            src_pitch,
            src_w,
            src_h,
            out_ptr,
            *self._pre_args(layout, swap),
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
        _check_image("Y plane", y_ptr, y_pitch, src_w, src_h, 1)
        _check_image("UV plane", uv_ptr, uv_pitch, (src_w + 1) // 2, (src_h + 1) // 2, 2)
        self._check_layout(layout, src_w, src_h, out_ptr)
        fn = "fl_preprocess_nv12_" + ("f16" if layout.dtype == "float16" else "f32")
        swap = layout.color_order != "bgr"
        self._launch(
            fn,
            _grid(layout.input_w, layout.input_h),
            BLOCK,
            stream,
            y_ptr,
            y_pitch,
            uv_ptr,
            uv_pitch,
            src_w,
            src_h,
            out_ptr,
            *self._pre_args(layout, swap),
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
        _check_image("Y plane", y_ptr, y_pitch, src_w, src_h, 1)
        _check_image("UV plane", uv_ptr, uv_pitch, (src_w + 1) // 2, (src_h + 1) // 2, 2)
        _check_rgba("destination", dst_ptr, dst_pitch, dst_w, dst_h)
        self._launch(
            "fl_nv12_to_rgba",
            _grid(dst_w, dst_h),
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
        _check_order(src_order)
        _check_image("source", src_ptr, src_pitch, src_w, src_h, 3)
        _check_rgba("destination", dst_ptr, dst_pitch, dst_w, dst_h)
        self._launch(
            "fl_packed_to_rgba",
            _grid(dst_w, dst_h),
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

    # -- super-resolution colour -------------------------------------------------------------

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
        _check_order(src_order)
        _check_image("source", src_ptr, src_pitch, width, height, 3)
        if not y_ptr or y_ptr % 4:
            raise KernelError("Y plane pointer must be non-null and 4-byte aligned (float32)")
        self._launch(
            "fl_packed_to_ycrcb_planes",
            _grid(width, height),
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
        _check_size("chroma", width, height)
        _check_size("output", out_w, out_h)
        if not (cr_ptr and cb_ptr and cr_out_ptr and cb_out_ptr):
            raise KernelError("chroma pointers must not be null")
        self._launch(
            "fl_upscale_chroma",
            _grid(out_w, out_h),
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
        if order not in _MERGE_ORDERS:
            raise KernelError(f"order must be one of {sorted(_MERGE_ORDERS)}, not {order!r}")
        channels, r_first = _MERGE_ORDERS[order]
        if channels == 4:
            _check_rgba("destination", dst_ptr, dst_pitch, width, height)
        else:
            _check_image("destination", dst_ptr, dst_pitch, width, height, 3)
        _check_size("chroma", chroma_w, chroma_h)
        if not (y_ptr and cr_ptr and cb_ptr) or y_ptr % 4:
            raise KernelError("Y, Cr and Cb pointers must be non-null, Y 4-byte aligned")
        self._launch(
            "fl_merge_ycrcb",
            _grid(width, height),
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
        _check_image("image", img_ptr, pitch, width, height, channels)
        if count <= 0:
            return
        if not rects_ptr or rects_ptr % 16:
            raise KernelError("rectangles pointer must be non-null and 16-byte aligned")
        self._launch(
            "fl_draw_rects",
            _grid(width, height),
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

    # -- timing ------------------------------------------------------------------------------

    def spin(self, cycles: int, stream: Any = None) -> None:
        """Keep the GPU busy for ``cycles`` SM clocks (one thread), for timing helpers."""
        self._launch("fl_spin", (1, 1, 1), (1, 1, 1), stream, int(cycles))
