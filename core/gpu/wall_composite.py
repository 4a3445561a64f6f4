"""The video wall's one picture: N sources' frames letterboxed into a grid of tiles.

``wall_grid`` and ``tile_rects`` lay the tiles out (1, 2x2, 3x3, 4x4 or automatic by
count); ``composite_host`` draws the wall on the host (cv2.resize INTER_LINEAR, the
reference), ``composite_device`` draws it on the GPU by a kernel (``fl_rgba_resize``)
straight into one RGBA buffer (wall_picture.py keeps the wall's one picture with it).
The two agree to one 8-bit level (tests/gpu).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import cv2
import numpy as np
from framelens.core.errors import ConfigError
from framelens.core.types import Image

Rect = tuple[int, int, int, int]  # x, y, width, height in wall pixels

LAYOUTS = {"1": 1, "2x2": 2, "3x3": 3, "4x4": 4}
GAP = 2  # pixels between tiles
BACKGROUND = (20, 21, 25)  # BGR, the canvas's background


def wall_grid(count: int, layout: str = "auto") -> tuple[int, int]:
    """(columns, rows) for ``count`` sources: a fixed layout, or the smallest square-ish
    grid that holds them ("auto")."""
    if layout in LAYOUTS:
        side = LAYOUTS[layout]
        return side, side
    if layout != "auto":
        raise ConfigError(f"unknown wall layout {layout!r} (use auto, {', '.join(LAYOUTS)})")
    cols = max(1, math.ceil(math.sqrt(max(1, count))))
    rows = max(1, math.ceil(max(1, count) / cols))
    return cols, rows


def cell_rect(grid: tuple[int, int], width: int, height: int, tile: int) -> Rect:
    """Cell ``tile`` (row by row) of ``grid`` over a ``width`` x ``height`` wall, the
    cells ``GAP`` pixels apart."""
    cols, rows = grid
    cell_w = (width - GAP * (cols - 1)) // cols
    cell_h = (height - GAP * (rows - 1)) // rows
    if cell_w < 1 or cell_h < 1:
        raise ConfigError(f"a {width}x{height} wall is too small for {cols}x{rows} tiles")
    r, c = divmod(tile, cols)
    return c * (cell_w + GAP), r * (cell_h + GAP), cell_w, cell_h


def tile_rects(
    sizes: Sequence[tuple[int, int] | None], grid: tuple[int, int], width: int, height: int
) -> list[Rect | None]:
    """Where each source's frame goes on a ``width`` x ``height`` wall: its cell of the
    grid (row by row), letterboxed to its own aspect; None for a source past the grid's
    cells or without a frame yet."""
    cols, rows = grid
    cell_rect(grid, width, height, 0)  # a wall too small for the grid is refused
    rects: list[Rect | None] = []
    for i, size in enumerate(sizes):
        if size is None or i >= cols * rows:
            rects.append(None)
            continue
        x, y, cell_w, cell_h = cell_rect(grid, width, height, i)
        sw, sh = size
        scale = min(cell_w / sw, cell_h / sh)
        w, h = max(1, round(sw * scale)), max(1, round(sh * scale))
        rects.append((x + (cell_w - w) // 2, y + (cell_h - h) // 2, w, h))
    return rects


def composite_host(
    images: Sequence[Image | None], rects: Sequence[Rect | None], width: int, height: int
) -> Image:
    """The wall as one BGR image: each frame resized into its rectangle."""
    wall = np.empty((height, width, 3), dtype=np.uint8)
    wall[:] = BACKGROUND
    for image, rect in zip(images, rects, strict=True):
        if image is None or rect is None:
            continue
        x, y, w, h = rect
        wall[y : y + h, x : x + w] = cv2.resize(image, (w, h), interpolation=cv2.INTER_LINEAR)
    return wall


class TileImage(Protocol):
    """A frame in device memory that a kernel can read (RgbaDeviceImage)."""

    def read_on(self, stream: Any) -> tuple[int, int, int, int]: ...

    def read_done(self, stream: Any) -> None: ...


def composite_device(
    kernels: Any,
    frames: Sequence[TileImage | None],
    rects: Sequence[Rect | None],
    dst_ptr: int,
    dst_pitch: int,
    stream: Any,
) -> None:
    """Queue the wall's tiles on ``stream``: each RGBA device frame resized into its
    rectangle of the RGBA buffer at ``dst_ptr`` (rows ``dst_pitch`` apart), after the
    frame is complete; the frame's buffer is not reused before its tile is drawn. The
    caller clears the background first (memset) when tiles move."""
    for frame, rect in zip(frames, rects, strict=True):
        if frame is None or rect is None:
            continue
        ptr, pitch, w, h = frame.read_on(stream)
        x, y, tw, th = rect
        kernels.rgba_resize(ptr, pitch, w, h, dst_ptr + y * dst_pitch + x * 4, dst_pitch, tw, th,
                            stream)  # fmt: skip
        frame.read_done(stream)
