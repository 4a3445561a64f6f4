"""One overlay, one picture: OpenCV's drawing (export, snapshots) and the canvas' QPainter
overlay (frames kept on the GPU) of the same detections on the same image.

The canvas is shown at exactly the image's size, so its image pixels are screen pixels;
its framebuffer is compared with ``annotate``'s output:
- box outlines: the same pixels in the same class colour (outside the tags), to 1 px;
- landmark dots: the same pixels in the same colours, to 1 px;
- tags: their background (the class colour) spans the same rectangle to 1 px, and what
  is drawn around a tag (background and text) overlaps with IoU >= 0.9; the glyphs
  differ (Hershey in OpenCV, Qt's font fitted into the same box), so the class-colour
  pixels inside a tag only need IoU >= 0.6;
- nothing drawn where OpenCV draws nothing.
Both renders are saved side by side as ``same_picture.png`` in the test's tmp dir.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt
import pytest
from framelens.core.stages.draw.opencv import annotate
from framelens.core.stages.draw.style import LANDMARK_COLOURS, OverlayStyle, layout, track_colour
from framelens.core.types import Detections
from framelens.gui.display.canvas import QPainterAnnotator, VideoCanvas
from PySide6.QtGui import QImage
from pytestqt.qtbot import QtBot

W, H = 640, 360
LABELS = ("person", "bicycle", "car", "face")
U8 = npt.NDArray[np.uint8]


def scene() -> tuple[U8, Detections]:
    """A grey gradient (no palette colour in it) and boxes of four classes: one at the top
    edge (its tag goes inside), one overlapping another, a face with landmarks."""
    yy, xx = np.mgrid[0:H, 0:W]
    grey = (40 + 120 * xx / W + 30 * yy / H).astype(np.uint8)
    image = np.dstack([grey, grey, grey]).copy()
    boxes = [
        [60.2, 120.7, 220.4, 330.1],  # person
        [300.0, 0.0, 470.0, 150.0],  # car at the top edge
        [430.0, 110.0, 600.0, 250.0],  # bicycle, over the car's corner
        [120.0, 180.0, 190.0, 260.0],  # face inside the person
        [560.5, 290.0, 660.0, 400.0],  # car beyond the bottom-right corner
    ]
    nan = [[np.nan, np.nan]] * 5
    landmarks = np.array(
        [nan, nan, nan, [[140, 205], [170, 205], [155, 222], [142, 240], [168, 240]], nan],
        np.float32,
    )
    dets = Detections(
        np.array(boxes, np.float32),
        np.array([0.87, 0.64, 0.91, 0.78, 0.55], np.float32),
        np.array([0, 2, 1, 3, 2], np.int32),
        landmarks,
    )
    return image, dets


def _bgr(image: QImage) -> U8:
    rgb = image.convertToFormat(QImage.Format.Format_RGB888)
    w, h = rgb.width(), rgb.height()
    arr = np.frombuffer(rgb.constBits(), np.uint8, rgb.bytesPerLine() * h)
    return arr.reshape(h, rgb.bytesPerLine())[:, : w * 3].reshape(h, w, 3)[:, :, ::-1].copy()


def _qimage(bgr: U8) -> QImage:
    h, w = bgr.shape[:2]
    return QImage(bgr.data, w, h, bgr.strides[0], QImage.Format.Format_BGR888).copy()


def _is(img: U8, colour: tuple[int, int, int]) -> npt.NDArray[np.bool_]:
    return np.all(img == np.array(colour, np.uint8), axis=2)


def _grow(mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    return cv2.dilate(mask.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)


def _off_by_more_than_1px(a: npt.NDArray[np.bool_], b: npt.NDArray[np.bool_]) -> int:
    """Pixels of either mask with no pixel of the other within 1 px."""
    return int((a & ~_grow(b)).sum() + (b & ~_grow(a)).sum())


def _save(tmp_path: Path, ref: U8, got: U8) -> Path:
    gap = np.full((H, 8, 3), 255, np.uint8)
    path = tmp_path / "same_picture.png"
    cv2.imwrite(str(path), np.hstack([ref, gap, got]))
    return path


def compare(
    ref: U8, got: U8, dets: Detections, style: OverlayStyle, image: U8 | None = None
) -> dict[str, float]:
    """Asserts the same picture; returns what was measured."""
    overlay = layout(dets, LABELS, style, W, H)
    tags = np.zeros((H, W), bool)
    for mark in overlay.boxes:
        if mark.tag is not None:
            t = mark.tag.rect
            tags[t.y1 : t.y2 + 1, t.x1 : t.x2 + 1] = True
    near_tags = _grow(tags)
    measured: dict[str, float] = {}
    # a class's colour, or a track's (its trail in it too)
    for colour in sorted({m.colour for m in overlay.boxes}):
        cid = f"colour {colour}"
        a, b = _is(ref, colour), _is(got, colour)
        assert a.any(), f"{cid}: OpenCV drew nothing in it"
        # box outlines and trails, away from the tags: the same pixels
        off = _off_by_more_than_1px(a & ~near_tags, b & ~near_tags)
        exact = int(((a ^ b) & ~near_tags).sum())
        measured[f"{cid} outline px off by >1 px"] = off
        measured[f"{cid} outline px differing"] = exact
        assert off == 0, f"{cid}: {off} outline pixels more than 1 px apart"
    source = scene()[0] if image is None else image
    for i, mark in enumerate(overlay.boxes):
        if mark.tag is None:
            continue
        t, text = mark.tag.rect, mark.tag.text
        colour = mark.colour
        # a window around the tag: where its background lies, and what is drawn there
        y1, y2, x1, x2 = max(0, t.y1 - 6), min(H, t.y2 + 7), max(0, t.x1 - 6), min(W, t.x2 + 7)
        a, b = _is(ref[y1:y2, x1:x2], colour), _is(got[y1:y2, x1:x2], colour)
        inside = np.zeros_like(a)
        inside[t.y1 - y1 : t.y2 - y1 + 1, t.x1 - x1 : t.x2 - x1 + 1] = True
        # the background's extent: the same rectangle, to 1 px
        for side, m in (("OpenCV", a & inside), ("canvas", b & inside)):
            ys, xs = np.nonzero(m)
            extent = (xs.min() + x1, ys.min() + y1, xs.max() + x1, ys.max() + y1)
            gap = max(abs(e - r) for e, r in zip(extent, (t.x1, t.y1, t.x2, t.y2), strict=True))
            measured[f"tag {i} ({text}) {side} background extent off by px"] = int(gap)
            assert gap <= 1, f"tag {text!r}: {side}'s background spans {extent}, not {t}"
        # footprint (background and text: what differs from the image) and background alone
        drawn_a = np.any(ref[y1:y2, x1:x2] != source[y1:y2, x1:x2], axis=2)
        drawn_b = np.any(got[y1:y2, x1:x2] != source[y1:y2, x1:x2], axis=2)
        footprint = float((drawn_a & drawn_b).sum() / max(1, (drawn_a | drawn_b).sum()))
        background = float((a & b).sum() / max(1, (a | b).sum()))
        measured[f"tag {i} ({text}) footprint IoU"] = footprint
        measured[f"tag {i} ({text}) class-colour IoU (glyphs differ)"] = background
        assert footprint >= 0.9, f"tag {text!r}: footprint IoU {footprint:.3f}"
        assert background >= 0.6, f"tag {text!r}: class-colour IoU {background:.3f}"
        tc = mark.tag.text_colour
        glyphs_a = _is(ref[t.y1 : t.y2 + 1, t.x1 : t.x2 + 1], tc).sum()
        glyphs_b = _is(got[t.y1 : t.y2 + 1, t.x1 : t.x2 + 1], tc).sum()
        assert glyphs_a > 0 and glyphs_b > 0, f"tag {text!r}: no text in {tc}"
    for k, colour in enumerate(LANDMARK_COLOURS if dets.landmarks is not None else ()):
        a, b = _is(ref, colour), _is(got, colour)
        assert a.any(), f"landmark {k} not drawn by OpenCV"
        off = _off_by_more_than_1px(a, b)
        measured[f"landmark {k} px off by >1 px"] = off
        measured[f"landmark {k} px differing"] = int((a ^ b).sum())
        assert off == 0, f"landmark {k}: {off} pixels more than 1 px apart"
    # nothing where OpenCV drew nothing (the glyphs' antialiasing may spill 1 px)
    untouched = np.all(ref == source, axis=2) & ~near_tags
    stray = int((untouched & np.any(got != source, axis=2)).sum())
    measured["px drawn only by the canvas, outside tags"] = stray
    assert stray == 0, f"{stray} pixels painted by the canvas only"
    return measured


@pytest.fixture
def canvas(qtbot: QtBot) -> VideoCanvas:
    c = VideoCanvas()
    qtbot.addWidget(c)
    c.setFixedSize(W, H)
    c.show()
    qtbot.waitExposed(c)
    qtbot.waitUntil(lambda: "no OpenGL context" not in c.display_path, timeout=10_000)
    return c


@pytest.mark.parametrize("style", [OverlayStyle(), OverlayStyle(thickness=1, font_scale=0.5)])
def test_canvas_overlay_is_the_picture_opencv_draws(
    canvas: VideoCanvas, qtbot: QtBot, tmp_path: Path, style: OverlayStyle
) -> None:
    image, dets = scene()
    ref = annotate(image, dets, LABELS, style)
    canvas.set_image(image, (dets, LABELS, style))
    qtbot.wait(300)
    r = canvas.image_rect()
    assert (r.left(), r.top(), r.width(), r.height()) == (0, 0, W, H)  # 1:1, no offset
    got = _bgr(canvas.grab_frame_image())
    assert got.shape == ref.shape
    path = _save(tmp_path, ref, got)
    measured = compare(ref, got, dets, style)
    print(f"\n{path}")
    for what, value in measured.items():
        print(f"  {what}: {value:.3f}" if isinstance(value, float) else f"  {what}: {value}")


def tracked_scene() -> tuple[U8, Detections]:
    """Tracks 12 and 3 with trails (one leaving the frame), and a box of no track."""
    image = scene()[0]
    trails = (
        np.array([[40, 330], [90, 300], [120, 260], [140, 225]], np.float32),
        np.array([[700, 20], [520, 60], [385, 75]], np.float32),
        np.zeros((0, 2), np.float32),
    )
    dets = Detections(
        np.array([[60, 120, 220, 330], [300, 0, 470, 150], [430, 180, 600, 300]], np.float32),
        np.array([0.87, 0.64, 0.91], np.float32),
        np.array([0, 2, 1], np.int32),
        track_ids=np.array([12, 3, -1], np.int64),
        trails=trails,
    )
    return image, dets


@pytest.mark.parametrize("style", [OverlayStyle(), OverlayStyle(thickness=3, scores=False)])
def test_tracks_and_trails_are_the_same_picture_on_the_canvas(
    canvas: VideoCanvas, qtbot: QtBot, tmp_path: Path, style: OverlayStyle
) -> None:
    """IDs ("person #12"), track colours and trails: OpenCV's export and the canvas' overlay
    of frames kept on the GPU colour the same pixels; trails off on both, none on either."""
    image, dets = tracked_scene()
    ref = annotate(image, dets, LABELS, style)
    canvas.set_image(image, (dets, LABELS, style))
    qtbot.wait(300)
    got = _bgr(canvas.grab_frame_image())
    _save(tmp_path, ref, got)
    compare(ref, got, dets, style, image)
    trail_colour = track_colour(12)
    assert _is(got, trail_colour)[300, 90]  # on track 12's trail, outside its box
    no_trails = OverlayStyle(labels=style.labels, scores=style.scores, thickness=style.thickness)
    no_trails = replace(no_trails, trails=False)
    canvas.set_image(image, (dets, LABELS, no_trails))
    qtbot.wait(300)
    plain = _bgr(canvas.grab_frame_image())
    assert not _is(plain, trail_colour)[300, 90]
    assert np.array_equal(_is(plain, trail_colour)[:, :50], np.zeros((H, 50), bool))


def test_qpainter_annotator_paints_what_the_canvas_paints(tmp_path: Path) -> None:
    """The Annotator form of the canvas' painting (a QImage in, a QImage out)."""
    image, dets = scene()
    style = OverlayStyle()
    ref = annotate(image, dets, LABELS, style)
    got = _bgr(QPainterAnnotator().annotate(_qimage(image), dets, LABELS, style))
    _save(tmp_path, ref, got)
    compare(ref, got, dets, style)


def test_lines_and_zones_with_counts_are_the_same_picture_on_the_canvas(
    canvas: VideoCanvas, qtbot: QtBot, tmp_path: Path
) -> None:
    """A line (with its ``in`` arrow and its p1 dot) and a zone with their counts: what
    core draws into a host frame (the window's picture and an export's) and what the
    canvas paints over a frame kept on the GPU colour the same pixels."""
    from framelens.core.stages.analytics.picture import LiveCounts, ZonesPicture, shape_colour
    from framelens.core.stages.analytics.zones import parse_zones

    image = scene()[0]
    spec = parse_zones({
        "lines": [{"name": "gate", "points": [[100, 300], [300, 120]]}],
        "zones": [{"name": "bay", "polygon": [[380, 80], [600, 110], [560, 330], [400, 300]]}],
    })  # fmt: skip
    picture = ZonesPicture(spec, LiveCounts(7, 0.7, (("gate", 3, 1),), (("bay", 2, 5),)))
    ref = image.copy()
    picture.paint(ref)
    canvas.set_image(image, (Detections.empty(), LABELS, OverlayStyle()), (picture,))
    qtbot.wait(300)
    got = _bgr(canvas.grab_frame_image())
    _save(tmp_path, ref, got)
    overlay = picture.overlay(W, H)
    texts = [m.tag.text for m in overlay.boxes if m.tag]
    assert texts == ["gate in 3 out 1", "bay inside 2 entered 5"]
    tags = np.zeros((H, W), bool)
    for mark in overlay.boxes:
        t = mark.box
        tags[t.y1 : t.y2 + 1, t.x1 : t.x2 + 1] = True
    near_tags = _grow(tags)
    for k in (0, 1):
        a, b = _is(ref, shape_colour(k)), _is(got, shape_colour(k))
        assert a[~near_tags].sum() > 200, f"shape {k}: OpenCV drew little of it"
        assert _off_by_more_than_1px(a & ~near_tags, b & ~near_tags) == 0
        ys, xs = np.nonzero(a & near_tags)
        ys2, xs2 = np.nonzero(b & near_tags)
        assert abs(int(xs.min()) - int(xs2.min())) <= 1 and abs(int(ys.max()) - int(ys2.max())) <= 1
    untouched = np.all(ref == image, axis=2) & ~near_tags
    assert int((untouched & np.any(got != image, axis=2)).sum()) == 0


def test_a_heatmap_is_the_same_picture_on_the_canvas(
    canvas: VideoCanvas, qtbot: QtBot, tmp_path: Path
) -> None:
    """Where tracks have been: the heatmap core blends into a host frame (the window's
    picture and an export's) and the one the canvas lays over a frame kept on the GPU
    (a patch, core's ``heat_patch``) give the same colours, and nothing away from it."""
    from framelens.core.stages.analytics.heatmap import Heatmap

    image = scene()[0]
    heat = Heatmap(W, H)
    for k in range(40):  # a walk along the bottom, a long stay on the right
        heat.add(np.array([[100.0 + 6 * k, 300.0]]), k / 10)
    for k in range(200):
        heat.add(np.array([[520.0, 200.0]]), 4 + k / 10)
    layer = heat.layer()
    ref = image.copy()
    layer.paint(ref)
    canvas.set_image(image, (Detections.empty(), LABELS, OverlayStyle()), (), layer)
    qtbot.wait(300)
    got = _bgr(canvas.grab_frame_image())
    _save(tmp_path, ref, got)
    changed = np.any(ref != image, axis=2)
    assert changed[300, 150] and changed[200, 520]  # the path and the stay are coloured
    diff = np.abs(ref.astype(np.int16) - got.astype(np.int16)).max(axis=2)
    assert np.percentile(diff[changed], 95) <= 12  # the same colours (rounding, filtering)
    moved = np.abs(got.astype(np.int16) - image.astype(np.int16)).max(axis=2)
    assert int((~_grow(changed) & (moved > 2)).sum()) == 0  # nothing elsewhere (an alpha
    # of 1/255 at the patch's cold edge may move a grey level where OpenCV rounds back)
    canvas.set_image(image, (Detections.empty(), LABELS, OverlayStyle()), ())
    qtbot.wait(300)
    assert np.array_equal(_bgr(canvas.grab_frame_image()), image)  # none given: none drawn
