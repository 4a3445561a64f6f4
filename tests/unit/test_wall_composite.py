"""The video wall's layout and its host composite (the reference the GPU kernel is held
to in tests/gpu/test_wall_gpu.py), on real frames of the sample."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from framelens.core.errors import ConfigError
from framelens.core.gpu.wall_composite import BACKGROUND, GAP, composite_host, tile_rects, wall_grid
from media_factory import sample_frames

SAMPLE = (
    Path(__file__).resolve().parents[2]
    / "resources"
    / "samples"
    / "one-by-one-person-detection.mp4"
)


def test_grids_for_fixed_layouts_and_by_count() -> None:
    assert [wall_grid(n) for n in (1, 2, 4, 5, 9, 10, 16)] == [
        (1, 1), (2, 1), (2, 2), (3, 2), (3, 3), (4, 3), (4, 4),
    ]  # fmt: skip
    assert wall_grid(3, "4x4") == (4, 4) and wall_grid(20, "2x2") == (2, 2)
    with pytest.raises(ConfigError, match="unknown wall layout"):
        wall_grid(4, "5x5")


def test_tiles_keep_each_sources_aspect_inside_their_cell_without_overlap() -> None:
    sizes = [(1920, 1080), (768, 432), (480, 640), None, (1080, 1920)]
    rects = tile_rects(sizes, (3, 2), 1280, 720)
    assert rects[3] is None  # no frame yet: nothing drawn there
    placed = [r for r in rects if r is not None]
    cell_w, cell_h = (1280 - 2 * GAP) // 3, (720 - GAP) // 2
    for (sw, sh), (x, y, w, h) in zip([s for s in sizes if s], placed, strict=True):
        assert w <= cell_w and h <= cell_h and (w == cell_w or h == cell_h)  # fills one side
        assert abs(w / h - sw / sh) < 0.02  # letterboxed, not stretched
        assert x >= 0 and x + w <= 1280 and y >= 0 and y + h <= 720
    for i, a in enumerate(placed):
        for b in placed[i + 1 :]:
            assert (
                a[0] + a[2] <= b[0]
                or b[0] + b[2] <= a[0]
                or a[1] + a[3] <= b[1]
                or b[1] + b[3] <= a[1]
            )
    assert tile_rects([(10, 10)] * 5, (2, 2), 100, 100)[4] is None  # past the grid


def test_the_host_composite_puts_each_frame_in_its_tile() -> None:
    frames = sample_frames(SAMPLE, (0, 300, 330, 600))
    rects = tile_rects([(f.shape[1], f.shape[0]) for f in frames], (2, 2), 1280, 720)
    wall = composite_host(frames, rects, 1280, 720)
    assert wall.shape == (720, 1280, 3)
    for frame, rect in zip(frames, rects, strict=True):
        assert rect is not None
        x, y, w, h = rect
        want = cv2.resize(frame, (w, h), interpolation=cv2.INTER_LINEAR)
        assert np.array_equal(wall[y : y + h, x : x + w], want)
    assert tuple(wall[0, 639]) == BACKGROUND  # the gap between the columns


def test_the_device_wall_checks_its_tiles_and_copies_to_the_host_as_composited() -> None:
    """DeviceWall's host copy (snapshots, no interop) is the host composite of its frames'
    host copies; a frame list that does not match the tiles is refused in one line."""
    from framelens.core.gpu.wall_composite import DeviceWall

    class HostCopy:  # a device frame as the host sees it after a download: its image
        def __init__(self, image: np.ndarray) -> None:
            self.image = image

        def to_host_bgr(self) -> np.ndarray:
            return self.image

    frames = sample_frames(SAMPLE, (0, 300))
    rects = tile_rects([(f.shape[1], f.shape[0]) for f in frames], (2, 1), 800, 300)
    wall = DeviceWall(None, None, [HostCopy(f) for f in frames], rects, 800, 300)
    assert np.array_equal(wall.to_host_bgr(), composite_host(frames, rects, 800, 300))
    with pytest.raises(ConfigError, match="2 frames for 1 tiles"):
        DeviceWall(None, None, [HostCopy(f) for f in frames], rects[:1], 800, 300)
