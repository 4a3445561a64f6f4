"""Tracked boxes as every painter draws them: coloured by their track, tagged "person #12",
with the track's trail under them when trails are on; untracked boxes as before."""

from __future__ import annotations

import itertools

import numpy as np
import numpy.typing as npt
import pytest
from framelens.core.stages.draw.cuda import shape_rows
from framelens.core.stages.draw.opencv import annotate
from framelens.core.stages.draw.style import (
    PALETTE,
    TRACK_PALETTE,
    OverlayStyle,
    class_colour,
    layout,
    track_colour,
)
from framelens.core.types import Detections

from tests.unit.test_drawing import _emulate_draw_kernel

LABELS = ["person", "bicycle", "car"]
W, H = 320, 240


def _tracked(trails: bool = True) -> Detections:
    """A person of track 12 walking right (its trail behind it), a car of track 3, and a
    person no track has taken (-1)."""
    trail12 = np.array([[40, 200], [70, 190], [100, 185], [130, 150]], np.float32)
    trail3 = np.array([[290, 40], [270, 60]], np.float32)
    return Detections(
        np.array([[110, 100, 150, 200], [250, 40, 290, 80], [10, 10, 40, 60]], np.float32),
        np.array([0.87, 0.8, 0.7], np.float32),
        np.array([0, 2, 0], np.int32),
        track_ids=np.array([12, 3, -1], np.int64),
        trails=(trail12, trail3, np.zeros((0, 2), np.float32)) if trails else None,
    )


def _blank() -> npt.NDArray[np.uint8]:
    return np.zeros((H, W, 3), np.uint8)


def _has(img: npt.NDArray[np.uint8], colour: tuple[int, int, int]) -> npt.NDArray[np.bool_]:
    return np.all(img == np.array(colour, np.uint8), axis=2)


def test_a_tracked_box_is_coloured_and_tagged_by_its_track() -> None:
    dets = _tracked(trails=False)
    overlay = layout(dets, LABELS, OverlayStyle(), W, H)
    tags = [m.tag.text for m in overlay.boxes if m.tag is not None]
    assert tags == ["person #12 0.87", "car #3 0.80", "person 0.70"]
    out = annotate(_blank(), dets, LABELS, OverlayStyle(labels=False, scores=False))
    assert tuple(out[150, 110]) == track_colour(12)  # left edge of track 12's box
    assert tuple(out[60, 290]) == track_colour(3)
    assert tuple(out[40, 10]) == class_colour(0)  # untracked: its class's colour, as before
    assert track_colour(12) != class_colour(0)
    # without IDs the same boxes look as they always did
    plain = Detections(dets.boxes, dets.scores, dets.class_ids)
    before = annotate(_blank(), plain, LABELS, OverlayStyle(labels=False, scores=False))
    assert tuple(before[150, 110]) == class_colour(0)
    assert [m.tag.text for m in layout(plain, LABELS, OverlayStyle(), W, H).boxes if m.tag] == [
        "person 0.87",
        "car 0.80",
        "person 0.70",
    ]


def test_tag_texts_follow_the_label_and_score_toggles() -> None:
    dets = _tracked(trails=False)

    def texts(style: OverlayStyle) -> list[str]:
        return [m.tag.text for m in layout(dets, LABELS, style, W, H).boxes if m.tag]

    assert texts(OverlayStyle(scores=False))[:2] == ["person #12", "car #3"]
    assert texts(OverlayStyle(labels=False))[:2] == ["#12 0.87", "#3 0.80"]
    # the tag's background is the track's colour
    out = annotate(_blank(), dets, LABELS, OverlayStyle(scores=False))
    tag = layout(dets, LABELS, OverlayStyle(scores=False), W, H).boxes[0].tag
    assert tag is not None
    assert tuple(out[tag.rect.y1, tag.rect.x1]) == track_colour(12)


def test_track_colours_are_stable_bright_enough_and_neighbours_differ() -> None:
    n = len(TRACK_PALETTE)
    colours = [track_colour(i) for i in range(1, n + 1)]
    assert len(set(colours)) == n  # every track colour once per cycle
    assert all(a != b for a, b in itertools.pairwise(colours))
    assert track_colour(7) == track_colour(7) == track_colour(7 + n)
    # a box or trail drawn in any of them is seen on a dark picture (the palette's deep
    # blue and purple were not): luma at least 60 of 255
    darkest = min(0.114 * b + 0.587 * g + 0.299 * r for b, g, r in colours)
    assert darkest >= 60 and len(TRACK_PALETTE) >= len(PALETTE) - 2


def test_trails_are_drawn_under_tracked_boxes_only_when_on() -> None:
    dets = _tracked()
    style = OverlayStyle(labels=False, scores=False)
    on = annotate(_blank(), dets, LABELS, style)
    off = annotate(_blank(), dets, LABELS, OverlayStyle(labels=False, scores=False, trails=False))
    trail12 = _has(on, track_colour(12)) & ~_has(off, track_colour(12))
    # the polyline's first point and a point half way along its first segment
    assert trail12[200, 40] and trail12[195, 55]
    assert trail12[:, :100].sum() >= 59  # a line (1 px at this size), not a dot
    assert _has(on, track_colour(3))[50, 280]  # the car's short trail
    assert not _has(off, track_colour(12))[:, :100].any()  # trails off: nothing there
    # an untracked box's trail (empty, -1) draws nothing; no trails: nothing either
    plain = _tracked(trails=False)
    assert np.array_equal(annotate(_blank(), plain, LABELS, style), off)


def test_a_trail_leaving_the_frame_is_clipped() -> None:
    trail = np.array([[-50, 120], [100, 120], [400, 120]], np.float32)
    dets = Detections(
        np.array([[80, 100, 120, 140]], np.float32),
        np.array([0.9], np.float32),
        np.array([0], np.int32),
        track_ids=np.array([5], np.int64),
        trails=(trail,),
    )
    out = annotate(_blank(), dets, LABELS, OverlayStyle(labels=False, scores=False))
    row = _has(out, track_colour(5))[120]
    assert row[0] and row[W - 1] and row.all()


@pytest.mark.parametrize("order", ["bgr", "rgba"])
def test_cuda_shapes_draw_the_same_trails(order: str) -> None:
    """The rows handed to the draw kernel colour OpenCV's trail pixels exactly."""
    rng = np.random.default_rng(3)
    img = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    dets = _tracked()
    style = OverlayStyle(labels=False, scores=False)
    ref = annotate(img, dets, LABELS, style)
    rows = shape_rows(layout(dets, LABELS, style, W, H), order)
    if order == "bgr":
        got = _emulate_draw_kernel(img, rows)
    else:
        rgba = np.dstack([img[:, :, ::-1], np.full((H, W), 255, np.uint8)])
        got = _emulate_draw_kernel(rgba, rows)[:, :, 2::-1]
    assert np.array_equal(got, ref)
