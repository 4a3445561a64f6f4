"""Host-side descriptions the preprocessing and display kernels take: the YUV -> RGB
matrix of NV12 frames, and where a frame lands in a model's input tensor.

Pure numpy and the CPU path's own geometry: the CPU tests use them too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from framelens.core.geometry import InputGeometry, Letterbox
from framelens.core.models.spec import ModelSpec, input_geometry

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
        geometry: InputGeometry | None = None,
    ) -> PreprocessLayout:
        """Layout of a ``src_w`` x ``src_h`` frame for ``spec``.

        ``mean``/``std`` (in scaled units, model channel order) add a normalisation
        ``(pixel * input_scale - mean) / std``; ModelSpec has none, so by default the
        values are ``pixel * input_scale`` exactly as ``Preprocessor`` computes them.
        ``geometry``: where the frame goes in the input (the task's; by default the
        letterbox of ``spec``).
        """
        if dtype not in OUTPUT_DTYPES:
            raise ValueError(f"dtype must be one of {OUTPUT_DTYPES}, not {dtype!r}")
        if src_w <= 0 or src_h <= 0:
            raise ValueError(f"source size must be positive, not {src_w}x{src_h}")
        g = geometry if geometry is not None else input_geometry(spec, src_w, src_h)
        h, w, nw, nh, px, py = g.input_h, g.input_w, g.new_w, g.new_h, g.pad_x, g.pad_y
        ratio = g.letterbox.ratio
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
