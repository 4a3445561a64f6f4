"""Tiling for super-resolution: frames larger than a tile run as overlapping tiles whose
outputs are blended into one image.

Tiles are ``tile`` x ``tile`` input pixels (smaller where the frame is), at least
``overlap`` pixels shared with each neighbour, the last tile of a row or column flush
with the frame's edge. Each output pixel is the weighted mean of the tiles that cover
it. A tile's weight is 0 in the outer quarter of the overlap next to an inner edge,
ramps linearly to 1 across the middle half, and is 1 elsewhere (and at the frame's own
edges, where the untiled model sees the same border).

Why that is seamless: an output pixel depends on the input pixels within the model's
receptive field (radius r). A tile computes exactly what the whole frame would wherever
it keeps r pixels between the pixel and its inner edges; every pixel a tile weighs is
at least overlap / 4 from them, so with overlap >= 4 r tiled equals untiled up to float
rounding. ESPCN and FSRCNN see r = 4-7 input pixels; the default overlap is 32 (8
pixels of margin). Deep models (ESRGAN, r of a hundred pixels) come close, not exactly:
the linear blend leaves no visible seam. tests/unit/test_superres.py bounds both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from framelens.core.errors import ConfigError
from framelens.core.models.spec import ModelSpec
from framelens.core.stages.engines.base import Engine

F32 = npt.NDArray[np.float32]

DEFAULT_OVERLAP = 32


def tile_starts(length: int, tile: int, overlap: int) -> list[int]:
    """Where the tiles of one axis start: step ``tile - overlap``, the last flush with
    the end; one tile when the axis fits in one."""
    if length <= tile:
        return [0]
    step = tile - overlap
    starts = list(range(0, length - tile, step))
    starts.append(length - tile)
    return starts


def _ramp(length: int, at_start: bool, at_end: bool, overlap: int) -> F32:
    """Blend weights along one axis of a tile (output pixels): towards each inner edge,
    0 over the outer quarter of ``overlap``, a linear ramp over its middle half, 1 beyond."""
    w = np.ones(length, dtype=np.float32)
    margin = overlap // 4
    n = overlap - 2 * margin
    ramp = np.concatenate(
        [np.zeros(margin, np.float32), (np.arange(n, dtype=np.float32) + 0.5) / max(n, 1)]
    )
    if not at_start:
        w[: len(ramp)] = ramp
    if not at_end:
        w[length - len(ramp) :] = ramp[::-1]
    return w


HEAVY_MODEL_BYTES = 4 << 20
"""Models above this size (ESRGAN: 29 MB) are deep: their activations, not the frame,
bound the tile."""
HEAVY_TILE = {"cuda": 512, "cpu": 256}
"""Tile sides for heavy models by device kind: ONNX Runtime's CPU arena holds every
layer's activations of a tile (ESRGAN x2 at 256 px: about 1 GB)."""


def is_heavy(spec: ModelSpec) -> bool:
    """A model whose weights exceed HEAVY_MODEL_BYTES (ESRGAN and its kind)."""
    try:
        return spec.path.stat().st_size > HEAVY_MODEL_BYTES
    except OSError:
        return False


def cuda_options(spec: ModelSpec) -> dict[str, str]:
    """ONNX Runtime CUDA options for a super-resolution model: NHWC convolutions for
    heavy ones. Measured on the H200 (benchmarks/results/h200-esrgan-profile-2026-12-02.json
    and h200-superres-2026-12-02*.json): ESRGAN x2 at 540p 77 -> 54 ms in FP16 and
    125 -> 90 ms in FP32 with NHWC, while ESPCN x2 at 1080p ran 145 fps in NCHW
    against 128 in NHWC (one input channel: the layout transposes cost more than
    they save). The bias fused into the convolution too (taken for FP16 graphs only:
    core/pipeline/engine_plan.py): ESRGAN x2 at 540p FP16 61.4 -> 52.7 ms on an H100
    (h100-superres-2026-12-05.json). ONNX Runtime's exhaustive algorithm search stays:
    cuDNN's heuristic plans were as fast a call, but a 40-frame run started no sooner with
    them (22.6 against 22.4 s, h100-sr-startup-2026-12-06.json). No CUDA graphs of the
    engine's own capture (their gain is one launch per node, ~1% of an ESRGAN call: 52.0
    against 52.7 ms on plain ONNX Runtime; and capture turns off the Conv+activation fusion
    these graphs are made of), until they are measured on the product's super-resolution
    path."""
    if spec.task != "superres":
        return {}
    if is_heavy(spec):
        return {"prefer_nhwc": "1", "fuse_conv_bias": "1", "cuda_graphs": "0"}
    return {"cuda_graphs": "0"}


SHORT_RUN_FRAMES = 1000
"""A heavy model's run of at most this many frames, whose workers end with it, takes one
inference worker on a GPU (gpu_workers): the longest run measured that one worker still
finished sooner."""


def gpu_workers(spec: ModelSpec, run_frames: Callable[[], int | None]) -> tuple[int, str] | None:
    """One inference worker on a GPU for a heavy super-resolution model's short run, two
    (the plan's default, None here) otherwise. A heavy model's call keeps the GPU busy
    alone (ESRGAN x2 at 540p: 52.9 ms on an H100), and a second worker's first call,
    cuDNN choosing and building its convolutions for the frame's size, slows the first
    worker to ~5 frames a second for seconds. Whole runs of ESRGAN x2 FP16, 540p ->
    1080p, on an H100, two workers against one: 0.62 of the time at 40 frames, 0.85 at
    300, 0.95 at 1000 (h100-sr-startup-workers-*.json); p99 per frame at 1000 frames
    6.5 s with two against 0.32 s with one. Workers kept beyond one run (the player, the
    wall, archives) or a length not known keep two: once both are built, two overlap one
    frame's upload and output with the other's call."""
    if spec.task != "superres" or not is_heavy(spec):
        return None
    frames = run_frames()  # only now: it may probe the run's file
    if frames is None or frames > SHORT_RUN_FRAMES:
        return None
    return 1, (
        f"one CUDA stream: a heavy super-resolution model's run of {frames} frames "
        "ends sooner with one worker (a second one's first call, cuDNN building its "
        "convolutions, slows the first for seconds: one was faster in runs of up to "
        f"{SHORT_RUN_FRAMES} frames); --workers 2 for two"
    )


def default_tile(spec: ModelSpec, device: str) -> tuple[int, int]:
    """The (height, width) of the largest tile ``spec`` runs at once on ``device``: its
    input_size, and for heavy models no more than HEAVY_TILE."""
    h, w = spec.input_size
    if is_heavy(spec):
        side = HEAVY_TILE["cuda" if device.startswith("cuda") else "cpu"]
        h, w = min(h, side), min(w, side)
    return h, w


class TiledEngine(Engine):
    """An engine that runs a super-resolution model tile by tile when an input is larger
    than its tile; smaller inputs go straight through.

    ``scale``: the model's; ``tile``: the (height, width) it runs at once (``default_tile``
    from the model and the device, or the user's --tile).
    """

    def __init__(
        self,
        engine: Engine,
        scale: int,
        tile: tuple[int, int],
        overlap: int = DEFAULT_OVERLAP,
    ) -> None:
        if overlap < 4 or min(tile) <= 2 * overlap:
            raise ConfigError(
                f"a {tile[1]}x{tile[0]} tile needs to be more than twice the overlap "
                f"({overlap} px) on each side"
            )
        self.engine = engine
        self.scale = scale
        self.tile_h, self.tile_w = tile
        self.overlap = overlap
        self.output_names = engine.output_names
        self.input_shape = engine.input_shape
        self.tiles_run = 0  # tiles run by the last infer (1 when untiled)

    def infer(self, tensor: F32) -> list[npt.NDArray[Any]]:
        n, c, h, w = tensor.shape
        if h <= self.tile_h and w <= self.tile_w:
            self.tiles_run = 1
            return self.engine.infer(tensor)
        s, o = self.scale, self.overlap
        th, tw = min(self.tile_h, h), min(self.tile_w, w)
        ys, xs = tile_starts(h, th, o), tile_starts(w, tw, o)
        out = np.zeros((n, c, h * s, w * s), dtype=np.float32)
        weight = np.zeros((h * s, w * s), dtype=np.float32)
        for y in ys:
            wy = _ramp(th * s, y == 0, y + th >= h, o * s)
            for x in xs:
                piece = np.ascontiguousarray(tensor[:, :, y : y + th, x : x + tw])
                result = self.engine.infer(piece)[0]
                if result.shape[-2:] != (th * s, tw * s):
                    raise ConfigError(
                        f"a {tw}x{th} tile came out {result.shape[-1]}x{result.shape[-2]}, "
                        f"not x{s}: the model's scale is not {s}"
                    )
                wx = _ramp(tw * s, x == 0, x + tw >= w, o * s)
                wt = np.outer(wy, wx)
                region = (slice(y * s, (y + th) * s), slice(x * s, (x + tw) * s))
                out[(slice(None), slice(None), *region)] += result * wt
                weight[region] += wt
        self.tiles_run = len(ys) * len(xs)
        out /= weight
        return [out]

    def close(self) -> None:
        self.engine.close()


def tiles_of(shape: Sequence[int], tile: tuple[int, int], overlap: int = DEFAULT_OVERLAP) -> int:
    """How many tiles an input of ``shape`` (N, C, H, W) runs as."""
    h, w = int(shape[-2]), int(shape[-1])
    return len(tile_starts(h, min(tile[0], h), overlap)) * len(
        tile_starts(w, min(tile[1], w), overlap)
    )
