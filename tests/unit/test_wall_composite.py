"""The video wall's layout and its host composite (the reference the GPU kernel is held
to in tests/gpu/test_wall_gpu.py), on real frames of the sample."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from framelens.core.errors import ConfigError
from framelens.core.gpu.wall_composite import (
    BACKGROUND,
    GAP,
    Rect,
    composite_host,
    tile_rects,
    wall_grid,
)
from framelens.core.gpu.wall_picture import WallPicture, picture_size_for
from framelens.core.types import Frame
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


def _frame(image: np.ndarray, index: int = 0) -> Frame:
    return Frame(image=image, index=index, pts=0.0)


def test_the_wall_picture_draws_each_result_into_its_tile_as_the_composite_does() -> None:
    """The canvas's one picture, drawn a result at a time, equals the composite of the
    newest frame of each source; a tile past the grid is not drawn."""
    frames = sample_frames(SAMPLE, (0, 300, 330, 600, 900))
    picture = WallPicture((1280, 720))
    picture.set_layout(5, "2x2")  # five sources, four tiles on screen
    assert picture.tiles == 4
    for i, frame in enumerate(frames[:4]):
        assert picture.put(i, _frame(frames[4] if i == 1 else frame))
    assert picture.put(1, _frame(frames[1]))  # the newest frame of source 1 wins
    assert not picture.put(4, _frame(frames[4]))  # no tile for the fifth source
    rects = tile_rects([(f.shape[1], f.shape[0]) for f in frames[:4]], (2, 2), 1280, 720)
    assert [picture.rect(i) for i in range(4)] == rects
    got = picture.picture()
    assert isinstance(got, np.ndarray)
    assert np.array_equal(got, composite_host(frames[:4], rects, 1280, 720))


def test_a_new_frame_size_clears_the_old_letterbox_of_its_tile() -> None:
    wide, tall = (
        sample_frames(SAMPLE, (0,))[0],
        cv2.resize(sample_frames(SAMPLE, (300,))[0], (300, 600)),
    )
    picture = WallPicture((1280, 720))
    picture.set_layout(1, "1")
    picture.put(0, _frame(wide))
    picture.put(0, _frame(tall))
    got = picture.picture()
    assert isinstance(got, np.ndarray)
    assert np.array_equal(got, composite_host([tall], picture_rects(picture, [tall]), 1280, 720))


def picture_rects(picture: WallPicture, frames: list[np.ndarray]) -> list[Rect | None]:
    return tile_rects(
        [(f.shape[1], f.shape[0]) for f in frames], picture.grid, picture.width, picture.height
    )


def test_a_layout_change_carries_the_tiles_over_while_paused() -> None:
    """Switching 2x2 -> 1 -> 2x2 on a paused wall keeps what each tile showed (resized
    from the old picture), instead of blank tiles until the next frames."""
    frames = sample_frames(SAMPLE, (0, 300, 330, 600))
    picture = WallPicture((1280, 720))
    picture.set_layout(4, "2x2")
    for i, frame in enumerate(frames):
        picture.put(i, _frame(frame))
    version = picture.version
    picture.set_layout(4, "1")
    assert picture.tiles == 1 and picture.version > version
    x, y, w, h = picture.rect(0) or (0, 0, 0, 0)
    one = picture.picture()
    assert isinstance(one, np.ndarray)
    want = cv2.resize(frames[0], (w, h), interpolation=cv2.INTER_LINEAR)
    assert np.abs(one[y : y + h, x : x + w].astype(int) - want).mean() < 12  # enlarged tile
    picture.set_layout(4, "2x2")
    back = picture.picture()
    assert isinstance(back, np.ndarray)
    for i, frame in enumerate(frames):
        rect = picture.rect(i)
        if i == 0:
            assert rect is not None
            x, y, w, h = rect
            want = cv2.resize(frame, (w, h), interpolation=cv2.INTER_LINEAR)
            assert np.abs(back[y : y + h, x : x + w].astype(int) - want).mean() < 12
        else:  # not on screen at "1": blank until its next frame, but its place is known
            assert rect is not None
            x, y, w, h = rect
            assert (back[y : y + h, x : x + w] == BACKGROUND).all()


def test_the_picture_takes_the_canvas_aspect_and_keeps_its_tiles() -> None:
    """A canvas of another shape gets a picture of its aspect (about 2 MP), so tiles
    fill the window instead of a 16:9 picture with bars; the tiles are carried over."""
    assert picture_size_for(1920, 1080) == (1920, 1080)
    w, h = picture_size_for(1000, 800)
    assert abs(w / h - 1.25) < 0.01 and 0.95 < w * h / (1920 * 1080) < 1.05
    assert picture_size_for(5000, 100)[0] / picture_size_for(5000, 100)[1] < 4.01
    frame = sample_frames(SAMPLE, (300,))[0]
    picture = WallPicture((1280, 720))
    picture.set_layout(1, "1")
    picture.put(0, _frame(frame))
    picture.set_layout(1, "1", (800, 800))
    assert (picture.width, picture.height) == (800, 800)
    x, y, w, h = picture.rect(0) or (0, 0, 0, 0)
    assert (x, w) == (0, 800)  # fills the square picture's width, letterboxed
    got = picture.picture()
    assert isinstance(got, np.ndarray) and got.shape == (800, 800, 3)
    want = cv2.resize(frame, (w, h), interpolation=cv2.INTER_LINEAR)
    assert np.abs(got[y : y + h, x : x + w].astype(int) - want).mean() < 6
    with pytest.raises(ConfigError, match="too small"):
        picture.set_layout(16, "4x4", (6, 6))
    assert (picture.width, picture.height, picture.grid) == (800, 800, (1, 1))  # unchanged


def test_tiles_left_blank_by_a_layout_change_say_so_and_a_closed_picture_draws_nothing() -> None:
    """The canvas paints a tile's boxes only over a tile that holds its frame."""
    frames = sample_frames(SAMPLE, (0, 300, 330))
    picture = WallPicture((1280, 720))
    picture.set_layout(3, "2x2")
    for i, frame in enumerate(frames):
        picture.put(i, _frame(frame))
    assert [picture.showing(i) for i in range(3)] == [True, True, True]
    picture.set_layout(3, "1")
    picture.set_layout(3, "2x2")
    assert [picture.showing(i) for i in range(3)] == [True, False, False]
    picture.put(2, _frame(frames[2]))
    assert picture.showing(2)
    version = picture.version
    picture.close()
    assert not picture.put(1, _frame(frames[1])) and picture.version == version


class _UnusableDeviceImage:
    """A device frame on a machine where no device picture can be made (here: no pycuda),
    which can still be downloaded: the wall draws it on the host and says why."""

    context = None

    def __init__(self, image: np.ndarray) -> None:
        self.width, self.height = image.shape[1], image.shape[0]
        self._image = image

    def read_on(self, stream: object) -> tuple[int, int, int, int]:
        raise AssertionError("not drawn on the device")

    def read_done(self, stream: object) -> None:
        raise AssertionError("not drawn on the device")

    def to_host_bgr(self) -> np.ndarray:
        return self._image


def test_device_frames_are_drawn_on_the_host_where_no_device_picture_can_be_made() -> None:
    frame = sample_frames(SAMPLE, (300,))[0]
    picture = WallPicture((1280, 720))
    picture.set_layout(1, "1")
    assert picture.put(0, Frame(None, 0, 0.0, device=_UnusableDeviceImage(frame)))
    assert "pycuda" in picture.note
    got = picture.picture()
    assert isinstance(got, np.ndarray)
    x, y, w, h = picture.rect(0) or (0, 0, 0, 0)
    want = cv2.resize(frame, (w, h), interpolation=cv2.INTER_LINEAR)
    assert np.array_equal(got[y : y + h, x : x + w], want)
