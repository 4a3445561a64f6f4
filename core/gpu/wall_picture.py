"""The video wall as ONE picture, drawn a tile at a time as each source's frames arrive.

    result of source i ──put(i, frame)──> its tile of the picture (letterboxed into cell i)
    canvas repaint ──picture()──> one texture upload (CUDA-GL interop for a device picture)

Frames of the GPU path (RGBA device images) are drawn by the ``fl_rgba_resize`` kernel
into an RGBA buffer in device memory (``DeviceWallPicture``), so the wall reaches the
screen as one device frame through one interop buffer, whatever the number of sources;
host frames are drawn by ``cv2.resize`` into a BGR array (the reference the kernel is
tested against). Nothing holds a source's frame after ``put``: a device frame's buffer
goes back to its pipeline's pool at once, so 16 tiles never starve a pipeline of display
buffers. The tiles sit where ``wall_composite.tile_rects`` puts them.
"""

from __future__ import annotations

import math
from typing import Any, cast

import cv2
import numpy as np
from framelens.core.errors import EngineError, GpuError
from framelens.core.gpu.wall_composite import (
    BACKGROUND,
    Rect,
    TileImage,
    cell_rect,
    composite_device,
    tile_rects,
    wall_grid,
)
from framelens.core.types import Frame, Image

__all__ = ["PICTURE_SIZE", "DeviceWallPicture", "WallPicture", "picture_size_for"]

PICTURE_SIZE = (1920, 1080)
"""The wall picture's pixels to begin with (the canvas gives it its own aspect)."""

PICTURE_PIXELS = 1920 * 1080


def picture_size_for(width: float, height: float) -> tuple[int, int]:
    """A picture of about PICTURE_PIXELS with the aspect of a ``width`` x ``height``
    canvas (even sides; aspects past 4:1 either way are limited to 4:1)."""
    aspect = min(max(width / max(height, 1.0), 0.25), 4.0)
    w = math.sqrt(PICTURE_PIXELS * aspect)
    return 2 * round(w / 2), 2 * round(w / aspect / 2)


_BACKGROUND_RGBA = BACKGROUND[2] | BACKGROUND[1] << 8 | BACKGROUND[0] << 16 | 255 << 24
"""The background as one 32-bit RGBA pixel (bytes R, G, B, A in memory), for memset."""


class DeviceWallPicture:
    """The wall's picture in device memory, drawn on a stream of its own.

    It is the canvas's ``DeviceFrame``: ``write_rgba`` copies the picture, as drawn by
    everything queued so far, into the interop buffer (the copying stream waits for the
    drawing, and the next drawing for the copy: no host synchronisation either way).
    """

    def __init__(self, context: Any, width: int, height: int) -> None:
        """GpuError in one line when the picture cannot be made (the GPU is full)."""
        from framelens.core.gpu.buffers import DevicePool, cuda_driver, cuda_message
        from framelens.core.gpu.shared_kernels import kernels_for

        cuda = cuda_driver()
        self.context, self.width, self.height = context, width, height
        self._pool = DevicePool.pitched(context, width * 4, height, 1, kind="video wall")
        try:
            self._buffer = self._pool.buffers[0]
            self._kernels = kernels_for(context)
            with context.active():
                self._stream = cuda.Stream()
                self._drawn = cuda.Event()  # after the last drawing queued
                self._copied = cuda.Event()  # after the last copy out
                self._copied.record(self._stream)
            self.fill(None)
        except Exception as exc:
            self._pool.close()
            raise GpuError(f"the video wall's picture: {cuda_message(exc)}") from exc

    def fill(self, rect: Rect | None) -> None:
        """The background over ``rect`` (all of the picture for None)."""
        from framelens.core.gpu.buffers import cuda_driver

        x, y, w, h = rect or (0, 0, self.width, self.height)
        pitch = self._buffer.pitch
        with self.context.active():
            cuda_driver().memset_d2d32_async(
                self._buffer.ptr + y * pitch + x * 4, pitch, _BACKGROUND_RGBA, w, h, self._stream
            )
            self._drawn.record(self._stream)

    def draw(self, image: TileImage, rect: Rect) -> None:
        """``image`` resized into ``rect``, queued behind the image's own making."""
        with self.context.active():
            composite_device(
                self._kernels, [image], [rect], self._buffer.ptr, self._buffer.pitch, self._stream
            )
            self._drawn.record(self._stream)

    def region(self, rect: Rect) -> TileImage:
        """``rect`` of the picture as an image a kernel can read (a new layout draws the
        old tiles from it)."""
        return _Region(self, rect)

    def write_rgba(self, dst_ptr: int, dst_pitch: int, stream: Any) -> None:
        from framelens.core.gpu.images import copy_rgba

        with self.context.active():
            stream.wait_for_event(self._drawn)
            copy_rgba(self._buffer.ptr, self._buffer.pitch, dst_ptr, dst_pitch, self.width,
                      self.height, stream)  # fmt: skip
            self._copied.record(stream)
            self._stream.wait_for_event(self._copied)

    def to_host_bgr(self) -> Image:
        from framelens.core.gpu.buffers import cuda_message
        from framelens.core.gpu.images import download_rgba

        try:
            rgba = download_rgba(
                self.context, self._buffer.ptr, self._buffer.pitch, self.width, self.height,
                self._drawn,
            )  # fmt: skip
        except Exception as exc:
            raise GpuError(f"downloading the video wall failed: {cuda_message(exc)}") from exc
        return cast(Image, cv2.cvtColor(rgba, cv2.COLOR_RGBA2BGR))

    def close(self, read_by: DeviceWallPicture | None = None) -> None:
        """Free the picture once its last copy out, and the drawing of ``read_by`` (a new
        picture that drew this one's regions), are done: those streams only, not the
        whole device (the pipelines go on)."""
        with self.context.active():
            self._stream.wait_for_event(self._copied)
            if read_by is not None:
                self._stream.wait_for_event(read_by._drawn)
        self._pool.close(stream=self._stream)


class _Region:
    """A rectangle of a device picture, read by a kernel once the picture's drawing
    queued so far is done (``TileImage``)."""

    def __init__(self, picture: DeviceWallPicture, rect: Rect) -> None:
        self._picture, self._rect = picture, rect

    def read_on(self, stream: Any) -> tuple[int, int, int, int]:
        picture = self._picture
        x, y, w, h = self._rect
        with picture.context.active():
            stream.wait_for_event(picture._drawn)
        pitch = picture._buffer.pitch
        return picture._buffer.ptr + y * pitch + x * 4, pitch, w, h

    def read_done(self, stream: Any) -> None:
        """Nothing to mark: the picture is freed only after the reader's drawing is done
        (``DeviceWallPicture.close(read_by=...)``)."""


class WallPicture:
    """The wall of ``count`` sources in a grid (``set_layout``) as one picture of
    ``size`` pixels; ``put`` draws a source's newest frame into its tile.

    Where the device picture cannot be made (the GPU is full) frames are drawn on the
    host instead (``note`` says why), so the wall goes on showing them."""

    def __init__(self, size: tuple[int, int] = PICTURE_SIZE) -> None:
        self.width, self.height = size
        self.grid = (1, 1)
        self._sizes: list[tuple[int, int] | None] = []  # each tile's frame size
        self._showing: set[int] = set()  # tiles whose frame is in the picture
        self._host: Image | None = None
        self._device: DeviceWallPicture | None = None
        self._closed = False
        self.note = ""  # why device frames are drawn on the host, if they are
        self.version = 0  # counts the changes of the picture (a repaint uploads it again)

    def set_layout(
        self, count: int, layout: str = "auto", size: tuple[int, int] | None = None
    ) -> None:
        """``count`` tiles in ``layout`` (1, 2x2, 3x3, 4x4 or auto) on a picture of
        ``size`` (unchanged for None). What the tiles showed is carried over, resized
        from the old picture into the new tiles, so a paused wall keeps its pictures;
        each tile is sharp again from its next frame."""
        grid = wall_grid(count, layout)
        width, height = size or (self.width, self.height)
        cell_rect(grid, width, height, 0)  # too small for the grid: refused, nothing changed
        sizes = (self._sizes + [None] * count)[:count]
        new_rects = tile_rects(sizes, grid, width, height)
        moves = [
            (i, old, new)
            for i, (old, new) in enumerate(zip(self._rects(), new_rects, strict=False))
            if old is not None and new is not None and i in self._showing
        ]
        if self._device is not None:
            previous = self._device
            try:
                self._device = DeviceWallPicture(previous.context, width, height)
            except EngineError as exc:  # nothing carried over: the host draws from now on
                self._device = None
                self.note = str(exc)
                moves = []
            else:
                for _i, old, new in moves:
                    self._device.draw(previous.region(old), new)
            previous.close(read_by=self._device)
        elif self._host is not None:
            previous_host = self._host
            self._host = None
            picture = self._new_host(width, height)
            for _i, (ox, oy, ow, oh), (x, y, w, h) in moves:
                part = previous_host[oy : oy + oh, ox : ox + ow]
                picture[y : y + h, x : x + w] = cv2.resize(
                    part, (w, h), interpolation=cv2.INTER_LINEAR
                )
        self.grid, self.width, self.height, self._sizes = grid, width, height, sizes
        self._showing = {i for i, _old, _new in moves}
        self.version += 1

    @property
    def tiles(self) -> int:
        """Tiles in the picture: the grid's cells, or fewer for fewer sources."""
        return min(self.grid[0] * self.grid[1], len(self._sizes))

    def cell(self, tile: int) -> Rect:
        """Tile ``tile``'s cell of the grid, in picture pixels (its frame is letterboxed
        into it)."""
        return cell_rect(self.grid, self.width, self.height, tile)

    def rect(self, tile: int) -> Rect | None:
        """Where tile ``tile``'s frame lies in the picture; None before its first frame."""
        if not 0 <= tile < self.tiles:
            return None
        return self._rects()[tile]

    def showing(self, tile: int) -> bool:
        """Whether tile ``tile`` holds a frame (False: blank, until its next frame)."""
        return tile in self._showing

    def put(self, tile: int, frame: Frame) -> bool:
        """Draw ``frame`` into tile ``tile``; False for a tile the grid does not show
        (or once the picture is closed)."""
        if self._closed or not 0 <= tile < self.tiles:
            return False
        device = frame.device  # drawn from the device even when downloaded already
        on_device = device is not None and hasattr(device, "read_on")
        self._use(device if on_device else None)
        size = (frame.width, frame.height)
        if self._sizes[tile] != size:  # a new size: a new letterbox in the cell
            self._sizes[tile] = size
            self._fill(self.cell(tile))
        rect = self.rect(tile)
        assert rect is not None
        if self._device is not None:
            self._device.draw(cast(TileImage, device), rect)
        else:
            x, y, w, h = rect
            picture = self._host_picture()
            picture[y : y + h, x : x + w] = cv2.resize(
                frame.image, (w, h), interpolation=cv2.INTER_LINEAR
            )
        self._showing.add(tile)
        self.version += 1
        return True

    def picture(self) -> Image | DeviceWallPicture:
        """The picture to show: a BGR array, or the device picture (a DeviceFrame)."""
        return self._device if self._device is not None else self._host_picture()

    def close(self) -> None:
        """Free the device picture; frames put after this are not drawn (results still
        on their way to a closing window)."""
        self._closed = True
        self._drop_device()

    # ---- internals -------------------------------------------------------------------

    def _rects(self) -> list[Rect | None]:
        return tile_rects(self._sizes, self.grid, self.width, self.height)

    def _drop_device(self) -> None:
        if self._device is not None:
            self._device.close()
            self._device = None

    def _use(self, device: Any) -> None:
        """Draw on the device while frames come from it (``device``: the frame's device
        image), on the host otherwise (a GPU that failed mid-run hands over to the CPU,
        or a device picture that could not be made): a switch starts a blank picture."""
        if device is not None and self.note:
            device = None  # the device picture could not be made: host drawing
        current = self._device
        if device is not None and (current is None or current.context is not device.context):
            try:
                made = DeviceWallPicture(device.context, self.width, self.height)
            except EngineError as exc:
                self.note = str(exc)
                made = None
            if made is None and current is None:
                return  # host drawing already
            self._drop_device()
            self._device, self._host = made, None
        elif device is None and current is not None:
            self._drop_device()
        else:
            return
        self._sizes = [None] * len(self._sizes)
        self._showing.clear()

    def _new_host(self, width: int, height: int) -> Image:
        self._host = np.empty((height, width, 3), dtype=np.uint8)
        self._host[:] = BACKGROUND
        return self._host

    def _host_picture(self) -> Image:
        return self._host if self._host is not None else self._new_host(self.width, self.height)

    def _fill(self, rect: Rect | None) -> None:
        if self._device is not None:
            self._device.fill(rect)
            return
        x, y, w, h = rect or (0, 0, self.width, self.height)
        self._host_picture()[y : y + h, x : x + w] = BACKGROUND
