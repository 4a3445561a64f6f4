"""Heatmaps: where one source's tracked objects have been, as a per-source stage.

    Heatmap(width, height, settings)   the accumulator: each tracked box's tested point
                                       (its anchor) splatted as a small Gaussian on a grid
                                       of ``cell`` x ``cell`` pixel cells; ``accumulate``
                                       sums for ever, ``decay`` halves every ``half_life_s``
    HeatmapStage(settings)             a SourceStage: the tracked boxes of each result into
                                       the source's heatmap, which the result carries as a
                                       ``HeatLayer`` (``result.layers``) for the draw step
    HeatmapStages(settings)            its factory, picklable (``run --processes``)
    HeatLayer                          a snapshot of the grid; ``paint(image)`` blends it,
                                       colour-mapped, over a BGR frame (``blend_heat``)
    HeatmapPng(path)                   a run's output: the final heatmap over the last
                                       frame, as a PNG written to a temporary name and
                                       renamed when the run's outputs are committed

One observation of a tracked object adds exactly 1.0 to the cell its tested point is in,
and ``exp(-d^2 / (2 sigma^2))`` to a cell ``d`` cells away (the kernel's peak is 1), so a
cell's value is the number of object-frames spent there, blurred. ``reset()`` (a seek)
starts the heatmap again: after a seek it shows where objects have been since.
docs/analytics.md defines it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

import cv2
import numpy as np
import numpy.typing as npt
from framelens.core.errors import ConfigError, ExportError
from framelens.core.stages.analytics.counting import anchor_points
from framelens.core.stages.analytics.zones import ANCHORS
from framelens.core.stages.sinks.atomic import AtomicFile
from framelens.core.stages.source_stages import SourceStage
from framelens.core.types import Detections, FrameResult, Image

__all__ = [
    "HEATMAP_MODES",
    "HEATMAP_SUFFIX",
    "HeatLayer",
    "Heatmap",
    "HeatmapMode",
    "HeatmapPng",
    "HeatmapSettings",
    "HeatmapStage",
    "HeatmapStages",
    "blend_heat",
    "heat_layer",
    "heat_patch",
]

HEATMAP_SUFFIX = ".heatmap.png"
"""A source's final heatmap in a several-source run: ``DIR/<name>.heatmap.png``."""

HeatmapMode = Literal["accumulate", "decay"]
HEATMAP_MODES: tuple[HeatmapMode, ...] = ("accumulate", "decay")

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class HeatmapSettings:
    """How a heatmap accumulates and looks.

    ``mode``: ``accumulate`` (every observation kept) or ``decay`` (heat halves every
    ``half_life_s`` seconds of the source's time); ``cell``: source pixels per grid cell
    (the grid is the frame downscaled by it); ``sigma``: the splat's spread, in cells;
    ``anchor``: the tested point of a box (as lines and zones test it); ``alpha``: how
    opaque the hottest colour is over the frame."""

    mode: HeatmapMode = "accumulate"
    half_life_s: float = 10.0
    cell: int = 8
    sigma: float = 1.5
    anchor: str = "bottom_center"
    alpha: float = 0.6

    def __post_init__(self) -> None:
        if self.mode not in HEATMAP_MODES:
            raise ConfigError(f"unknown heatmap mode {self.mode!r} ({', '.join(HEATMAP_MODES)})")
        if not (math.isfinite(self.half_life_s) and self.half_life_s > 0):
            raise ConfigError("the heatmap's half-life must be a positive number of seconds")
        if self.cell < 1:
            raise ConfigError("the heatmap's cell must be at least 1 pixel")
        if not (math.isfinite(self.sigma) and self.sigma > 0):
            raise ConfigError("the heatmap's sigma must be positive")
        if self.anchor not in ANCHORS:
            raise ConfigError(f"unknown anchor {self.anchor!r} ({', '.join(ANCHORS)})")
        if not 0.0 <= self.alpha <= 1.0:
            raise ConfigError("the heatmap's alpha must be between 0 and 1")


def _kernel(sigma: float) -> F32:
    radius = max(1, math.ceil(3.0 * sigma))
    d = np.arange(-radius, radius + 1, dtype=np.float64)
    g = np.exp(-(d * d) / (2.0 * sigma * sigma))
    return np.outer(g, g).astype(np.float32)  # peak exactly 1 at the centre


class Heatmap:
    """One source's heat on a grid of ``ceil(width / cell)`` x ``ceil(height / cell)``."""

    def __init__(self, width: int, height: int, settings: HeatmapSettings | None = None) -> None:
        self.settings = s = settings or HeatmapSettings()
        self.width, self.height = int(width), int(height)
        self.cols = max(1, math.ceil(self.width / s.cell))
        self.rows = max(1, math.ceil(self.height / s.cell))
        self._kernel = _kernel(s.sigma)
        self._r = self._kernel.shape[0] // 2
        # padded by the kernel's radius: a splat at the border is one slice add
        r = self._r
        self._padded = np.zeros((self.rows + 2 * r, self.cols + 2 * r), np.float32)
        self._time: float | None = None
        self.observations = 0

    @property
    def grid(self) -> F32:
        """The heat of each cell (a view: copy it to keep it)."""
        r = self._r
        return self._padded[r : r + self.rows, r : r + self.cols]

    def clear(self) -> None:
        self._padded[:] = 0.0
        self._time = None
        self.observations = 0

    def cell_of(self, x: float, y: float) -> tuple[int, int] | None:
        """The (row, column) of source pixel (x, y); None outside the frame."""
        if not (0.0 <= x <= self.width and 0.0 <= y <= self.height):
            return None
        c = self.settings.cell
        return min(int(y // c), self.rows - 1), min(int(x // c), self.cols - 1)

    def add(self, points: npt.NDArray[np.floating], time_s: float) -> None:
        """One frame's tested points (N, 2) at ``time_s`` (decay: the heat halves every
        half-life since the last frame added)."""
        s = self.settings
        if s.mode == "decay" and self._time is not None:
            dt = max(0.0, time_s - self._time)
            if dt > 0:
                self._padded *= np.float32(0.5 ** (dt / s.half_life_s))
        self._time = time_s if self._time is None else max(self._time, time_s)
        k, r = self._kernel, self._r
        for x, y in np.asarray(points, dtype=np.float64).reshape(-1, 2):
            cell = self.cell_of(float(x), float(y))
            if cell is None:
                continue
            row, col = cell  # padded: the kernel's window starts at (row, col)
            self._padded[row : row + 2 * r + 1, col : col + 2 * r + 1] += k
            self.observations += 1

    def layer(self, background: Image | None = None) -> HeatLayer:
        s = self.settings
        return HeatLayer(self.grid.copy(), self.width, self.height, s.alpha, background, s.cell)


@dataclass(frozen=True, slots=True, eq=False)
class HeatLayer:
    """A heatmap as the frame it belongs to carries it: its grid (a copy) and the frame's
    size; drawn by the draw step (exports, the player's host frames) and saved as PNG."""

    style_key: ClassVar[str] = "heatmap"  # drawn when OverlayStyle.heatmap is on

    grid: F32
    width: int
    height: int
    alpha: float = 0.6
    background: Image | None = None  # the frame's pixels before any overlay (for the PNG)
    cell: int = 8  # source pixels per grid cell

    def paint(self, image: Image) -> None:
        """Blend it over ``image`` (BGR uint8, writable) in place."""
        blend_heat(image, self.grid, self.alpha, self.cell)


def heat_layer(layers: Sequence[object]) -> HeatLayer | None:
    """The heatmap among a result's layers, if any."""
    for layer in layers:
        if isinstance(layer, HeatLayer):
            return layer
    return None


def _warm_region(
    shape: tuple[int, int], grid: F32, alpha: float, cell: int | None
) -> tuple[int, int, Image, npt.NDArray[np.float32]] | None:
    """Where the heat shows on a ``shape`` (height, width) frame: the top-left corner
    (x0, y0) of the region round the warm cells, its colours (BGR) and their opacities
    (see ``blend_heat``); None where nothing is warm."""
    peak = float(grid.max()) if grid.size else 0.0
    if peak <= 0.0 or alpha <= 0.0:
        return None
    h, w = shape
    rows, cols = grid.shape
    c = cell or max(1, round(w / cols))
    norm = np.log1p(np.maximum(grid, 0.0)) / np.float32(math.log1p(peak))
    warm = norm > 1e-5  # below: under half a grey level at any alpha
    ys, xs = np.flatnonzero(warm.any(axis=1)), np.flatnonzero(warm.any(axis=0))
    if not len(ys):
        return None
    # the warm cells and one cold cell round them: what the interpolation reaches
    r0, r1 = max(0, int(ys[0]) - 1), min(rows, int(ys[-1]) + 2)
    c0, c1 = max(0, int(xs[0]) - 1), min(cols, int(xs[-1]) + 2)
    y0, y1, x0, x1 = r0 * c, min(h, r1 * c), c0 * c, min(w, c1 * c)
    if y1 <= y0 or x1 <= x0:
        return None
    size = ((c1 - c0) * c, (r1 - r0) * c)
    sub = norm[r0:r1, c0:c1]
    big = cv2.resize(sub, size, interpolation=cv2.INTER_LINEAR)[: y1 - y0, : x1 - x0]
    over = cv2.resize(np.sqrt(sub) * np.float32(alpha), size, interpolation=cv2.INTER_LINEAR)
    over = np.ascontiguousarray(over[: y1 - y0, : x1 - x0])
    colour = cv2.applyColorMap(cv2.convertScaleAbs(big, alpha=255.0), cv2.COLORMAP_JET)
    return x0, y0, np.asarray(colour, np.uint8), np.asarray(over, np.float32)


def blend_heat(image: Image, grid: F32, alpha: float = 0.6, cell: int | None = None) -> Image:
    """``grid`` (one value per ``cell`` x ``cell`` pixels; None: the image's width over
    the grid's columns) over ``image``, in place: normalised logarithmically by its
    maximum (``log(1 + heat) / log(1 + max)``: a path walked once still shows beside a
    spot stood on for minutes), upscaled by ``cell`` (linear, each cell's value at its
    centre), colour-mapped (cv2.COLORMAP_JET) and blended with an opacity of ``alpha *
    sqrt(normalised heat)``: a cold cell leaves the frame as it is, and only the cells
    round the warm ones are touched. Returns ``image``."""
    found = _warm_region(image.shape[:2], grid, alpha, cell)
    if found is None:
        return image
    x0, y0, colour, over = found
    region = image[y0 : y0 + over.shape[0], x0 : x0 + over.shape[1]]
    np.copyto(region, cv2.blendLinear(np.ascontiguousarray(region), colour, 1.0 - over, over))
    return image


def heat_patch(layer: HeatLayer) -> tuple[int, int, npt.NDArray[np.uint8]] | None:
    """The heatmap as a patch to lay over its frame where the frame is not on the host
    (the canvas over frames kept on the GPU): its top-left corner (x0, y0) in source
    pixels and its RGBA pixels, straight alpha; the same colours and opacities
    ``blend_heat`` blends. None where nothing is warm."""
    found = _warm_region((layer.height, layer.width), layer.grid, layer.alpha, layer.cell)
    if found is None:
        return None
    x0, y0, colour, over = found
    rgba = np.empty((*over.shape, 4), np.uint8)
    rgba[..., :3] = colour[..., ::-1]
    rgba[..., 3] = np.clip(np.rint(over * 255.0), 0, 255).astype(np.uint8)
    return x0, y0, rgba


class HeatmapStage:
    """One source's heatmap as a stage (see the module's docstring). ``keep_frame``: it
    puts a copy of each frame's pixels (before any overlay) in its layer, for the PNG."""

    def __init__(self, settings: HeatmapSettings | None = None, keep_frame: bool = False) -> None:
        self.settings = settings or HeatmapSettings()
        self.keep_frame = keep_frame
        self.heatmap: Heatmap | None = None

    def reset(self) -> None:
        if self.heatmap is not None:
            self.heatmap.clear()

    def __call__(self, result: FrameResult) -> None:
        frame = result.frame
        heat = self.heatmap
        if heat is None or (heat.width, heat.height) != (frame.width, frame.height):
            heat = self.heatmap = Heatmap(frame.width, frame.height, self.settings)
        detections = result.output
        if isinstance(detections, Detections) and detections.track_ids is not None:
            tracked = detections.track_ids > 0
            points = anchor_points(detections.boxes[tracked], self.settings.anchor)
            heat.add(points, float(frame.pts))
        background = frame.image.copy() if self.keep_frame else None
        result.layers = (*result.layers, heat.layer(background))


@dataclass(frozen=True)
class HeatmapStages:
    """The factory of a run's heatmap stages: each source its own (picklable)."""

    settings: HeatmapSettings = HeatmapSettings()
    keep_frame: bool = False

    @property
    def needs_pixels(self) -> bool:
        """A PNG is the heat over the last frame: the frames' pixels are kept."""
        return self.keep_frame

    def __call__(self, number: int) -> Sequence[SourceStage]:
        del number
        return [HeatmapStage(self.settings, self.keep_frame)]


def _heatmap_png(target: Path, layer: HeatLayer, frame: Image | None) -> bytes:
    """``layer`` blended over ``frame`` (black without one), encoded as a PNG for
    ``target``; ExportError (one line) when it cannot be encoded."""
    image = (
        np.zeros((layer.height, layer.width, 3), np.uint8)
        if frame is None
        else np.ascontiguousarray(frame).copy()
    )
    blend_heat(image, layer.grid, layer.alpha if frame is not None else 1.0, layer.cell)
    ok, data = cv2.imencode(".png", image)
    if not ok:
        raise ExportError(f"cannot encode the heatmap as PNG for {target}")
    return bytes(data.tobytes())


class HeatmapPng:
    """A run's output: the source's final heatmap as a PNG at ``path``, written when the
    run's outputs are committed (``close``), not at all when they are discarded. Fed
    each result's layers (``add_layers``) by the run's outputs. Its temporary file is
    made at once, so that a folder that cannot take it is said before the run, not
    after it (ExportError, one line)."""

    def __init__(self, path: str | Path) -> None:
        self._file = AtomicFile(path)
        self.path = self._file.target
        self._last: HeatLayer | None = None

    def add(self, index: int, pts: float, output: object) -> None:
        """A run's writer interface: the heat comes through ``add_layers``."""

    def add_layers(self, layers: Sequence[object]) -> None:
        layer = heat_layer(layers)
        if layer is not None:
            self._last = layer

    def close(self) -> Path:
        last, self._last = self._last, None
        if last is None:
            self._file.discard()
            raise ExportError(f"no heatmap to write to {self.path}: no frame was processed")
        try:
            data = _heatmap_png(self.path, last, last.background)
        except BaseException:
            self._file.discard()
            raise
        return self._file.write_bytes(data)

    def abort(self) -> None:
        self._last = None
        self._file.discard()
