"""Shapes for the drawing kernel (``kernels/draw.cu``), packed on the host.

One shape is 8 int32: x1, y1, x2, y2, colour (bytes c0..c3 in the image's channel
order, little-endian; alpha 255 where not given), half, kind, 0. Kind 0 is a
rectangle (x1..x2, y1..y2 inclusive): half >= 0 an outline band of width
2 * half + 1 centred on its edges, half < 0 filled. Kind 1 is a disc: the pixels
(x, y) with (x - x1)**2 + (y - y1)**2 <= half**2 (what cv2.circle(half, FILLED,
LINE_8) covers). The geometry is ``framelens.core.stages.draw.style``'s.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

RECT, DISC = 0, 1
"""Shape kinds (column 6)."""


def _colours(colours: npt.ArrayLike, n: int) -> npt.NDArray[np.int64]:
    c = np.asarray(colours, dtype=np.int64)
    if c.ndim == 1:
        c = np.broadcast_to(c, (n, c.shape[0]))
    if c.ndim != 2 or len(c) != n or not 1 <= c.shape[1] <= 4:
        raise ValueError(f"colours must be (N, 1..4) for {n} shapes, not {c.shape}")
    return c


def _packed_colours(c: npt.NDArray[np.int64]) -> npt.NDArray[np.int32]:
    """Bytes c0..c3 packed little-endian; missing channels (alpha) are 255."""
    packed = np.zeros(len(c), dtype=np.uint32)
    for k in range(4):
        byte = c[:, k] if k < c.shape[1] else np.full(len(c), 255)
        packed |= (byte.astype(np.uint32) & np.uint32(0xFF)) << np.uint32(8 * k)
    return packed.view(np.int32)


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
    ``framelens.core.stages.draw.style.layout`` does (boxes wholly outside the frame
    or NaN are dropped); ``colours`` (N, C) or (C,) are bytes in the frame's channel
    order.
    """
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    c = _colours(colours, len(b))
    with np.errstate(invalid="ignore"):
        keep = (b[:, 2] >= 0) & (b[:, 3] >= 0) & (b[:, 0] <= width - 1) & (b[:, 1] <= height - 1)
    b, c = b[keep], c[keep]
    out = np.zeros((len(b), 8), dtype=np.int32)
    r = np.rint(b).astype(np.int64)
    out[:, 0] = np.maximum(0, r[:, 0])
    out[:, 1] = np.maximum(0, r[:, 1])
    out[:, 2] = np.minimum(width - 1, r[:, 2])
    out[:, 3] = np.minimum(height - 1, r[:, 3])
    out[:, 4] = _packed_colours(c)
    out[:, 5] = -1 if filled else rect_half_width(thickness)
    return out


def pack_dots(centres: npt.ArrayLike, colours: npt.ArrayLike, radius: int) -> npt.NDArray[np.int32]:
    """Discs for ``GpuKernels.draw_rects``: (N, 8) int32, one row a disc of ``radius``
    around each integer pixel centre of ``centres`` (N, 2); ``colours`` as in
    ``pack_rects``. Centres are taken as given (the style rounds and culls them)."""
    p = np.asarray(centres, dtype=np.int64).reshape(-1, 2)
    c = _colours(colours, len(p))
    out = np.zeros((len(p), 8), dtype=np.int32)
    out[:, 0:2] = p
    out[:, 2:4] = p
    out[:, 4] = _packed_colours(c)
    out[:, 5] = max(0, int(radius))
    out[:, 6] = DISC
    return out
