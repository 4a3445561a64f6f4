"""annotate(): what reaches the pixels, and what must not."""

from __future__ import annotations

import numpy as np
import pytest
from framelens.core.stages.draw.opencv import (
    LANDMARK_COLOURS,
    OverlayStyle,
    annotate,
    class_colour,
)
from framelens.core.types import Detections

LABELS = ["person", "bicycle", "car"]


def _dets(
    boxes: list[list[float]], class_ids: list[int], landmarks: np.ndarray | None = None
) -> Detections:
    n = len(boxes)
    return Detections(
        np.array(boxes, np.float32).reshape(n, 4),
        np.linspace(0.9, 0.5, n).astype(np.float32),
        np.array(class_ids, np.int32),
        landmarks,
    )


def _blank(h: int = 240, w: int = 320) -> np.ndarray:
    return np.zeros((h, w, 3), np.uint8)


def _changed(a: np.ndarray, b: np.ndarray) -> int:
    return int(np.any(a != b, axis=2).sum())


def test_box_edge_has_class_colour() -> None:
    img = _blank()
    out = annotate(img, _dets([[40, 60, 200, 180]], [2]), LABELS, OverlayStyle(labels=False))
    colour = class_colour(2)
    # Middle of each edge: the text never reaches there.
    assert tuple(out[120, 40]) == colour
    assert tuple(out[120, 200]) == colour
    assert tuple(out[60, 120]) == colour
    assert tuple(out[180, 120]) == colour
    assert tuple(out[120, 120]) == (0, 0, 0)  # inside stays untouched


def test_colours_stable_per_class() -> None:
    assert class_colour(0) == class_colour(0)
    assert class_colour(0) != class_colour(1)
    assert class_colour(3) == class_colour(3 + 20)  # palette wraps


def test_labels_off_changes_fewer_pixels() -> None:
    img = _blank()
    dets = _dets([[40, 60, 200, 180], [210, 100, 300, 230]], [0, 1])
    full = _changed(img, annotate(img, dets, LABELS))
    no_text = _changed(img, annotate(img, dets, LABELS, OverlayStyle(labels=False, scores=False)))
    score_only = _changed(img, annotate(img, dets, LABELS, OverlayStyle(labels=False)))
    nothing = _changed(
        img,
        annotate(
            img,
            dets,
            LABELS,
            OverlayStyle(boxes=False, labels=False, scores=False, landmarks=False),
        ),
    )
    assert full > score_only > no_text > nothing == 0


def test_copy_leaves_input_alone_and_in_place_draws_on_it() -> None:
    img = _blank()
    before = img.copy()
    dets = _dets([[10, 10, 100, 100]], [0])
    out = annotate(img, dets, LABELS)
    assert out is not img
    assert np.array_equal(img, before)
    assert _changed(before, out) > 0

    out2 = annotate(img, dets, LABELS, copy=False)
    assert out2 is img
    assert np.array_equal(out2, out)


def test_in_place_on_non_contiguous_falls_back_to_copy() -> None:
    big = np.zeros((240, 640, 3), np.uint8)
    view = big[:, ::2]  # not C-contiguous: OpenCV cannot draw on it
    out = annotate(view, _dets([[10, 10, 100, 100]], [0]), LABELS, copy=False)
    assert out is not view
    assert not big.any()
    assert out.any()


def test_empty_detections_returns_equal_copy() -> None:
    img = np.random.default_rng(0).integers(0, 256, (120, 160, 3), dtype=np.uint8)
    out = annotate(img, Detections.empty(), LABELS)
    assert out is not img
    assert np.array_equal(out, img)


def test_unknown_class_id_uses_number_as_label() -> None:
    img = _blank()
    dets = _dets([[40, 60, 200, 180]], [7])
    as_number = annotate(img, dets, LABELS)
    explicit = annotate(img, dets, [*LABELS, "3", "4", "5", "6", "7"])
    assert np.array_equal(as_number, explicit)
    assert not np.array_equal(as_number, annotate(img, dets, [*LABELS, "3", "4", "5", "6", "cat"]))


@pytest.mark.parametrize(
    "box",
    [
        [0, 0, 50, 40],  # no room above: tag goes inside
        [280, 200, 319, 239],  # bottom-right corner: tag pulled left
        [-50, -50, 400, 300],  # larger than the frame
        [400, 300, 500, 400],  # completely outside: skipped
        [float("nan"), 0, 10, 10],
    ],
)
def test_boxes_at_and_beyond_edges(box: list[float]) -> None:
    img = _blank()
    out = annotate(img, _dets([box], [0]), LABELS)
    assert out.shape == img.shape
    if box[0] == 400 or box[0] != box[0]:
        assert not out.any()
    else:
        assert out.any()


def test_tag_inside_box_when_no_room_above() -> None:
    img = _blank()
    boxes_only = annotate(img, _dets([[0, 0, 100, 80]], [0]), LABELS, OverlayStyle(labels=False))
    tagged = annotate(img, _dets([[0, 0, 100, 80]], [0]), LABELS)
    diff = np.any(tagged != boxes_only, axis=2)
    ys, xs = np.nonzero(diff)
    assert ys.min() >= 0 and ys.max() < 80 and xs.max() < 100  # drawn within the box


def test_landmarks_drawn_as_dots() -> None:
    img = _blank()
    lms = np.array([[[60, 80], [120, 80], [90, 110], [70, 140], [110, 140]]], np.float32)
    dets = _dets([[40, 60, 160, 170]], [0], lms)
    out = annotate(img, dets, ["face"], OverlayStyle(boxes=False, labels=False, scores=False))
    for k, (x, y) in enumerate(lms[0].astype(int)):
        assert tuple(out[y, x]) == LANDMARK_COLOURS[k]
    off = annotate(
        img, dets, ["face"], OverlayStyle(boxes=False, labels=False, scores=False, landmarks=False)
    )
    assert not off.any()


def test_explicit_thickness_is_used() -> None:
    img = _blank()
    dets = _dets([[40, 60, 200, 180]], [0])
    thin = annotate(img, dets, LABELS, OverlayStyle(labels=False, scores=False, thickness=1))
    thick = annotate(img, dets, LABELS, OverlayStyle(labels=False, scores=False, thickness=5))
    assert _changed(img, thick) > 3 * _changed(img, thin)
