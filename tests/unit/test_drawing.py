"""annotate() and the style it draws: what reaches the pixels, and what must not."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from framelens.core.gpu.rects import rect_half_width
from framelens.core.stages.draw.opencv import OpenCvAnnotator, annotate
from framelens.core.stages.draw.style import (
    LANDMARK_COLOURS,
    Annotator,
    BoxMark,
    Dot,
    Overlay,
    OverlayStyle,
    Rect,
    class_colour,
    layout,
    mark_region,
    outline_half_width,
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


@pytest.mark.parametrize("thickness", [1, 2, 3, 4, 5, 6])
def test_outline_bands_are_cv2_rectangle_with_square_corners(thickness: int) -> None:
    """The style's outline covers what cv2.rectangle covers, plus its rounded-off corners."""
    w, h = 120, 90
    half = outline_half_width(thickness)
    assert half == rect_half_width(thickness)  # the CUDA kernel's band
    for box in (Rect(20, 15, 100, 70), Rect(0, 0, 119, 89), Rect(30, 30, 33, 32)):
        ours = np.zeros((h, w), np.uint8)
        for band in BoxMark(box, half, (0, 0, 0), 0, None, True).bands(w, h):
            ours[band.y1 : band.y2 + 1, band.x1 : band.x2 + 1] = 1
        ref = np.zeros((h, w), np.uint8)
        cv2.rectangle(ref, (box.x1, box.y1), (box.x2, box.y2), 1, thickness, cv2.LINE_8)
        assert not (ref & ~ours).any()  # everything cv2 draws
        extra = np.argwhere(ours & ~ref)  # and only corner pixels beyond the box
        for y, x in extra:
            assert (x < box.x1 or x > box.x2) and (y < box.y1 or y > box.y2)


@pytest.mark.parametrize("radius", [1, 2, 3, 4, 5, 8])
def test_dots_are_cv2_filled_circles(radius: int) -> None:
    w, h = 40, 30
    for cx, cy in ((20, 15), (1, 1), (39, 29)):
        ours = np.zeros((h, w), np.uint8)
        for span in Dot(cx, cy, radius, (0, 0, 0)).spans(w, h):
            ours[span.y1 : span.y2 + 1, span.x1 : span.x2 + 1] = 1
        ref = np.zeros((h, w), np.uint8)
        cv2.circle(ref, (cx, cy), radius, 1, -1, cv2.LINE_8)
        assert np.array_equal(ours, ref)


def test_layout_places_tags_above_or_inside_and_skips_outside_boxes() -> None:
    dets = _dets([[40, 60, 200, 180], [10, 0, 100, 50], [400, 300, 500, 400]], [0, 1, 2])
    overlay = layout(dets, LABELS, OverlayStyle(), 320, 240)
    assert [m.class_id for m in overlay.boxes] == [0, 1]  # the third is outside
    above, inside = (m.tag for m in overlay.boxes)
    assert above is not None and inside is not None
    assert above.text == "person 0.90" and above.rect.y2 == 59  # just above the box
    assert inside.rect.y1 == 0 and inside.rect.x1 == 10  # no room above: inside
    assert above.colour == class_colour(0) and above.text_colour in ((0, 0, 0), (255,) * 3)


def test_a_mark_around_a_box_goes_around_everything_drawn_of_it_its_tag_too() -> None:
    """The followed or picked box's mark (the canvas paints it outside this region)
    never covers the box's tag, above the box or inside it, nor its outline."""
    dets = _dets([[40, 60, 200, 180], [10, 0, 100, 50], [290, 100, 318, 140]], [0, 1, 2])
    style = OverlayStyle()
    overlay = layout(dets, LABELS, style, 320, 240)
    for i, mark in enumerate(overlay.boxes):
        region = mark_region(dets, i, LABELS, style, 320, 240)
        assert region is not None
        x1, y1, x2, y2 = region
        drawn = np.zeros((240, 320), bool)
        for band in mark.bands(320, 240):
            drawn[band.y1 : band.y2 + 1, band.x1 : band.x2 + 1] = True
        assert mark.tag is not None
        t = mark.tag.rect
        drawn[t.y1 : t.y2 + 1, t.x1 : t.x2 + 1] = True
        ys, xs = np.nonzero(drawn)
        # exactly what is drawn of it: pixel edges around its outline and its tag
        assert (x1, y1, x2, y2) == (xs.min(), ys.min(), xs.max() + 1, ys.max() + 1)
    above, tag = mark_region(dets, 0, LABELS, style, 320, 240), overlay.boxes[0].tag
    assert above is not None and tag is not None and above[1] == tag.rect.y1 < 60
    narrow = mark_region(dets, 2, LABELS, style, 320, 240)  # its tag wider than it
    assert narrow is not None and narrow[0] < 290
    # no tag drawn (labels and scores off): the box and its outline alone
    bare = mark_region(dets, 0, LABELS, OverlayStyle(labels=False, scores=False), 320, 240)
    half = overlay.boxes[0].half
    assert bare == (40 - half, 60 - half, 201 + half, 181 + half)
    assert mark_region(_dets([[400, 300, 500, 400]], [0]), 0, LABELS, style, 320, 240) is None
    assert mark_region(dets, 7, LABELS, style, 320, 240) is None


def _tags_cover_one_another(overlay: Overlay) -> bool:
    rects = [m.tag.rect for m in overlay.boxes if m.tag is not None]
    return any(
        min(a.x2, b.x2) >= max(a.x1, b.x1) and min(a.y2, b.y2) >= max(a.y1, b.y1)
        for k, a in enumerate(rects)
        for b in rects[k + 1 :]
    )


def test_a_tag_that_would_cover_another_goes_where_it_can_be_read() -> None:
    """Two people side by side, a third behind them: each tag above its box's top-left
    corner would cover its neighbour's. The first keeps its place; the others move
    (above the top-right corner, under the box, inside its top edge) where no tag is,
    and the follow mark goes around the tag where it went."""
    boxes = [[40, 80, 90, 200], [70, 82, 120, 202], [100, 84, 150, 204]]
    dets = _dets(boxes, [0, 0, 0])
    style = OverlayStyle()
    alone = [layout(_dets([b], [0]), LABELS, style, 320, 240).boxes[0].tag for b in boxes]
    overlay = layout(dets, LABELS, style, 320, 240)
    tags = [m.tag for m in overlay.boxes]
    assert all(t is not None for t in tags) and all(t is not None for t in alone)
    assert _tags_cover_one_another(layout(_dets(boxes[:1], [0]), LABELS, style, 320, 240)) is False
    assert tags[0] == alone[0]  # the first where a lone box's goes
    assert tags[1] != alone[1] and tags[2] != alone[2]  # they would cover the first's
    assert not _tags_cover_one_another(overlay)
    assert [t.text for t in tags if t is not None] == ["person 0.90", "person 0.70", "person 0.50"]
    for i, mark in enumerate(overlay.boxes):
        region = mark_region(dets, i, LABELS, style, 320, 240)
        assert region is not None and mark.tag is not None
        t = mark.tag.rect
        assert region[0] <= t.x1 and region[1] <= t.y1 and region[2] > t.x2 and region[3] > t.y2
    # boxes far apart: every tag where it always was
    apart = _dets([[20, 60, 80, 200], [180, 60, 240, 200]], [0, 2])
    placed = layout(apart, LABELS, style, 320, 240)
    assert [m.tag.rect.y2 for m in placed.boxes if m.tag] == [59, 59]


def test_opencv_annotator_is_an_annotator() -> None:
    painter: Annotator[np.ndarray] = OpenCvAnnotator()
    img = _blank()
    dets = _dets([[40, 60, 200, 180]], [2])
    assert np.array_equal(painter.annotate(img, dets, LABELS), annotate(img, dets, LABELS))


def _emulate_draw_kernel(image: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """kernels/draw.cu's fl_draw_rects in numpy (the last shape covering a pixel wins)."""
    h, w, channels = image.shape
    out = image.copy()
    yy, xx = np.mgrid[0:h, 0:w]
    for x1, y1, x2, y2, colour, half, kind, _ in rows.tolist():
        if kind == 1:
            r = max(half, 0)
            covered = (xx - x1) ** 2 + (yy - y1) ** 2 <= r * r
        else:
            hw = max(half, 0)
            outer = (xx >= x1 - hw) & (xx <= x2 + hw) & (yy >= y1 - hw) & (yy <= y2 + hw)
            inner = (xx > x1 + hw) & (xx < x2 - hw) & (yy > y1 + hw) & (yy < y2 - hw)
            covered = outer & ~(inner if half >= 0 else np.zeros_like(inner))
        out[covered] = list((colour & 0xFFFFFFFF).to_bytes(4, "little")[:channels])
    return out


@pytest.mark.parametrize("order", ["bgr", "rgba"])
@pytest.mark.parametrize("thickness", [None, 1, 3])
def test_cuda_shapes_are_the_opencv_picture(order: str, thickness: int | None) -> None:
    """What CudaAnnotator hands the kernel draws OpenCV's boxes and dots, pixel for pixel
    (checked here through a numpy model of the kernel; tests/gpu runs the kernel)."""
    from framelens.core.stages.draw.cuda import shape_rows

    rng = np.random.default_rng(5)
    img = rng.integers(0, 256, (240, 320, 3), dtype=np.uint8)
    lms = np.full((4, 5, 2), np.nan, np.float32)
    lms[3] = [[60, 80], [120, 80], [90, 110], [70, 140], [319.4, 0.2]]
    dets = _dets(
        [[40, 60, 200, 180], [0, 0, 90, 50], [250.5, 190.5, 330, 260], [45, 70, 150, 150]],
        [0, 1, 2, 0],
        lms,
    )
    style = OverlayStyle(labels=False, scores=False, thickness=thickness)
    ref = annotate(img, dets, LABELS, style)
    rows = shape_rows(layout(dets, LABELS, style, 320, 240), order)
    if order == "bgr":
        got = _emulate_draw_kernel(img, rows)
    else:
        rgba = np.dstack([img[:, :, ::-1], np.full((240, 320), 255, np.uint8)])
        got = _emulate_draw_kernel(rgba, rows)[:, :, 2::-1]
    assert np.array_equal(got, ref)
