"""What an overlay looks like, decided once for every painter.

``OverlayStyle`` says what to draw; ``layout`` turns detections into an ``Overlay``:
integer pixel geometry (inclusive coordinates) and colours for one image size, in
painting order. The painters only put that on their surface:

* OpenCV (``framelens.core.stages.draw.opencv``): export, snapshots, host frames;
* QPainter (``framelens.gui.display.canvas``): the canvas' overlay over frames kept on the GPU;
* CUDA (``framelens.core.stages.draw.cuda``): boxes, trails and landmark dots straight
  into a device image. Label text is drawn by the host painters only.

Everything that decides the picture lives here: per-class colour (per-track colour for
a box a tracker gave an ID, core/stages/tracking), the tag's text ("person 0.87", or
"person #12 0.87" for track 12), trails (the last centre points of a box's track as a
polyline, rasterised here once so every painter colours the same pixels), line
thickness and font scale from the image size, where a tag goes (above the box, inside
when there is no room at the top edge), landmark dots, and where a mark around one box
goes (``mark_region``: the followed or picked box, its tag inside the mark, so the mark
never covers it). Tag sizes are measured with OpenCV's Hershey font, so every painter
fills the same tag rectangle; the QPainter fits its own font's glyphs into the measured
text box.

Shapes are plain filled rectangles, so all painters colour exactly the same pixels:
a box outline is the band of width ``2 * half + 1`` centred on the box's edges
(what ``cv2.rectangle(thickness, LINE_8)`` covers, with square outer corners), a
landmark is the disc ``dx**2 + dy**2 <= r**2`` (what ``cv2.circle(r, FILLED, LINE_8)``
covers), drawn as one rectangle a row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

import cv2
import numpy as np
import numpy.typing as npt
from framelens.core.stages.draw.label_room import LabelRoom
from framelens.core.types import Detections

BGR = tuple[int, int, int]


@dataclass(frozen=True)
class OverlayStyle:
    """What to draw. ``None`` sizes are derived from the frame size."""

    boxes: bool = True
    labels: bool = True
    scores: bool = True
    landmarks: bool = True
    trails: bool = True  # a tracked box's trail (when the tracker keeps trails)
    heatmap: bool = True  # a heatmap stage's layer (core/stages/analytics/heatmap.py)
    thickness: int | None = None
    font_scale: float | None = None

    @property
    def tagged(self) -> bool:
        """Whether boxes get a "label score" tag."""
        return self.labels or self.scores

    @property
    def anything(self) -> bool:
        return self.boxes or self.labels or self.scores or self.landmarks or self.trails


DEFAULT_STYLE = OverlayStyle()
"""The default style (frozen: one shared instance is safe as a default argument)."""


# BGR. Neighbouring ids get well separated hues so adjacent classes (person, bicycle,
# car...) are told apart at a glance; an id always maps to the same colour.
PALETTE: tuple[BGR, ...] = (
    (56, 56, 255),
    (151, 157, 255),
    (31, 112, 255),
    (29, 178, 255),
    (49, 210, 207),
    (10, 249, 72),
    (23, 204, 146),
    (134, 219, 61),
    (52, 147, 26),
    (187, 212, 0),
    (168, 153, 44),
    (255, 194, 0),
    (147, 69, 52),
    (255, 115, 100),
    (236, 24, 0),
    (255, 56, 132),
    (133, 0, 82),
    (255, 56, 203),
    (200, 149, 255),
    (199, 55, 255),
)

# Eyes, nose, mouth corners: distinct colours show a face's orientation (BGR).
LANDMARK_COLOURS: tuple[BGR, ...] = (
    (255, 0, 0),
    (0, 0, 255),
    (0, 255, 0),
    (255, 0, 255),
    (0, 255, 255),
)

FONT = cv2.FONT_HERSHEY_SIMPLEX
"""The font tags are measured (and drawn by OpenCV) in."""


def class_colour(class_id: int) -> BGR:
    """The BGR colour used for ``class_id``."""
    return PALETTE[class_id % len(PALETTE)]


def _luma(colour: BGR) -> float:
    b, g, r = colour
    return 0.114 * b + 0.587 * g + 0.299 * r


# The palette less its darkest colours (the deep blue and the purple), which vanish on
# night footage and dark clothes: a track's box and trail must be seen on any picture.
TRACK_PALETTE: tuple[BGR, ...] = tuple(c for c in PALETTE if _luma(c) >= 60)
_TRACK_STRIDE = 7  # coprime with the palette's length: IDs 1, 2, 3... are far apart in hue


def track_colour(track_id: int) -> BGR:
    """The BGR colour of track ``track_id`` (>= 1), the same in every frame and painter;
    consecutive IDs get well separated colours of the palette."""
    return TRACK_PALETTE[(track_id * _TRACK_STRIDE) % len(TRACK_PALETTE)]


def box_colour(class_id: int, track_id: int = -1) -> BGR:
    """A box's colour: its track's when it has one (``track_id`` >= 1), else its class's."""
    return track_colour(track_id) if track_id >= 1 else class_colour(class_id)


def text_colour(bg: BGR) -> BGR:
    """Black or white (BGR), whichever reads better on ``bg``."""
    return (0, 0, 0) if _luma(bg) > 140 else (255, 255, 255)


def tag_text(
    cid: int, score: float, labels: Sequence[str], style: OverlayStyle, track_id: int = -1
) -> str:
    """The "label score" text of a detection, as the overlay shows it; a box of track 12
    (``track_id``) reads "label #12 score"."""
    name = labels[cid] if 0 <= cid < len(labels) else str(cid)
    if track_id >= 1:
        name = f"{name} #{track_id}" if style.labels else f"#{track_id}"
        return f"{name} {score:.2f}" if style.scores else name
    if style.labels and style.scores:
        return f"{name} {score:.2f}"
    return name if style.labels else f"{score:.2f}"


def auto_thickness(width: int, height: int) -> int:
    """Line width that stays visible without hiding small objects: 2 px at 432p, 4 at 1080p."""
    return max(1, round(min(width, height) / 240))


def auto_font_scale(width: int, height: int) -> float:
    return max(0.35, min(width, height) / 900)


def outline_half_width(thickness: int) -> int:
    """Half-width of the band cv2.rectangle(thickness, LINE_8) covers: 1 -> 0, t -> (t+1)//2."""
    return 0 if thickness <= 1 else (thickness + 1) // 2


@dataclass(frozen=True, slots=True)
class Sizes:
    """Line and text sizes of an overlay on one image size."""

    thickness: int
    font_scale: float
    font_thickness: int
    pad: int  # around a tag's text
    landmark_radius: int

    @property
    def half(self) -> int:
        return outline_half_width(self.thickness)


def sizes(style: OverlayStyle, width: int, height: int) -> Sizes:
    """``style``'s sizes on a ``width`` x ``height`` image (auto ones from the size)."""
    thick = style.thickness if style.thickness is not None else auto_thickness(width, height)
    thick = max(1, thick)
    scale = style.font_scale if style.font_scale is not None else auto_font_scale(width, height)
    return Sizes(thick, scale, max(1, thick // 2), max(1, thick), max(1, thick))


@dataclass(frozen=True, slots=True)
class Rect:
    """Pixels x1..x2, y1..y2, both ends included."""

    x1: int
    y1: int
    x2: int
    y2: int

    @property
    def empty(self) -> bool:
        return self.x2 < self.x1 or self.y2 < self.y1

    @property
    def width(self) -> int:
        return self.x2 - self.x1 + 1

    @property
    def height(self) -> int:
        return self.y2 - self.y1 + 1

    def clipped(self, width: int, height: int) -> Rect:
        return Rect(
            max(0, self.x1), max(0, self.y1), min(width - 1, self.x2), min(height - 1, self.y2)
        )


@dataclass(frozen=True, slots=True)
class Tag:
    """A filled background rectangle with a text in it.

    ``origin`` is the left end of the text's baseline; the text's ink spans
    ``text_size`` (width, height above the baseline) from there, as Hershey measures it.
    """

    rect: Rect
    text: str
    origin: tuple[int, int]
    text_size: tuple[int, int]
    colour: BGR
    text_colour: BGR
    font_scale: float
    font_thickness: int


@dataclass(frozen=True, slots=True)
class BoxMark:
    """A detection's outline (``box`` rounded and clipped, band ``half`` wide) and tag."""

    box: Rect
    half: int
    colour: BGR
    class_id: int
    tag: Tag | None  # None: no tag (style) - the outline is drawn when ``outline``
    outline: bool

    def bands(self, width: int, height: int) -> list[Rect]:
        """The outline as up to four filled rectangles inside a ``width`` x ``height`` image."""
        b, h = self.box, self.half
        outer = Rect(b.x1 - h, b.y1 - h, b.x2 + h, b.y2 + h).clipped(width, height)
        inner = Rect(b.x1 + h + 1, b.y1 + h + 1, b.x2 - h - 1, b.y2 - h - 1)
        if inner.empty:
            return [outer]
        parts = [
            Rect(outer.x1, outer.y1, outer.x2, inner.y1 - 1),
            Rect(outer.x1, inner.y2 + 1, outer.x2, outer.y2),
            Rect(outer.x1, inner.y1, inner.x1 - 1, inner.y2),
            Rect(inner.x2 + 1, inner.y1, outer.x2, inner.y2),
        ]
        return [p for p in parts if not p.empty]

    def extent(self, width: int, height: int) -> Rect:
        """Every pixel of a ``width`` x ``height`` image this mark draws, or stands
        for: the box, its outline's band (when drawn) and its tag."""
        b, h = self.box, self.half if self.outline else 0
        x1, y1, x2, y2 = b.x1 - h, b.y1 - h, b.x2 + h, b.y2 + h
        if self.tag is not None:
            t = self.tag.rect
            x1, y1, x2, y2 = min(x1, t.x1), min(y1, t.y1), max(x2, t.x2), max(y2, t.y2)
        return Rect(x1, y1, x2, y2).clipped(width, height)


@dataclass(frozen=True, slots=True)
class Dot:
    """A landmark: the disc of ``radius`` around pixel (x, y)."""

    x: int
    y: int
    radius: int
    colour: BGR

    def spans(self, width: int, height: int) -> list[Rect]:
        """The disc as one rectangle a row, inside a ``width`` x ``height`` image."""
        r, out = self.radius, []
        for dy in range(-r, r + 1):
            y = self.y + dy
            if not 0 <= y < height:
                continue
            dx = 0
            while (dx + 1) ** 2 + dy * dy <= r * r:
                dx += 1
            span = Rect(self.x - dx, y, self.x + dx, y).clipped(width, height)
            if not span.empty:
                out.append(span)
        return out


@dataclass(frozen=True, slots=True, eq=False)
class Trail:
    """A track's trail, rasterised: the pixels ``mask`` (h, w) sets, placed with its
    top-left corner at image pixel (x, y), inside the image. The polyline through the
    track's last centre points (what ``cv2.polylines(thickness, LINE_8)`` covers)."""

    x: int
    y: int
    mask: npt.NDArray[np.bool_]
    colour: BGR
    track_id: int

    def spans(self) -> list[Rect]:
        """The trail as one rectangle per run of set pixels in a row (image pixels)."""
        m = self.mask.astype(np.int8)
        edges = np.diff(np.pad(m, ((0, 0), (1, 1))), axis=1)
        out = []
        for row, col in zip(*np.nonzero(edges == 1), strict=True):
            end = int(np.argmax(edges[row, col + 1 :] == -1)) + col  # last set pixel
            out.append(Rect(self.x + int(col), self.y + int(row), self.x + end, self.y + int(row)))
        return out


@dataclass(frozen=True, slots=True)
class Overlay:
    """Everything to paint on one ``width`` x ``height`` image, in painting order:
    the trails, then each box's outline then its tag, box after box, then the landmark
    dots."""

    width: int
    height: int
    boxes: tuple[BoxMark, ...]
    dots: tuple[Dot, ...]
    trails: tuple[Trail, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.boxes or self.dots or self.trails)


def _tag(text: str, x: int, y: int, colour: BGR, s: Sizes, width: int, height: int) -> Tag:
    """The tag above the box's top-left corner, moved inside so it is never cut."""
    (tw, th), baseline = cv2.getTextSize(text, FONT, s.font_scale, s.font_thickness)
    bw, bh = tw + 2 * s.pad, th + baseline + 2 * s.pad
    top = y - bh if y - bh >= 0 else y  # no room above the box: put it just inside
    top = max(0, min(top, height - bh))
    left = max(0, min(x, width - bw))
    rect = Rect(left, top, min(width - 1, left + bw - 1), min(height - 1, top + bh - 1))
    return Tag(
        rect,
        text,
        (left + s.pad, top + s.pad + th),
        (tw, th),
        colour,
        text_colour(colour),
        s.font_scale,
        s.font_thickness,
    )


def tag_at(text: str, x: int, y: int, colour: BGR, s: Sizes, width: int, height: int) -> Tag:
    """A tag reading ``text`` above image point (x, y), moved inside the image (a box's
    tag, or a line's or zone's name and counts: core/stages/analytics/picture.py)."""
    return _tag(text, x, y, colour, s, width, height)


def trail_thickness(s: Sizes) -> int:
    """A trail's line width: the boxes' (2 px at 432p, 4 at 1080p)."""
    return s.thickness


def _trail(
    points: npt.NDArray[np.float32], colour: BGR, track_id: int, thick: int, width: int, height: int
) -> Trail | None:
    """The polyline through ``points`` (k, 2) rasterised inside the image (None: nothing
    of it inside, fewer than two points, or not finite)."""
    if len(points) < 2 or not np.all(np.isfinite(points)):
        return None
    pts = np.rint(points).astype(np.int64)
    pad = thick // 2 + 1
    x0 = max(0, int(pts[:, 0].min()) - pad)
    y0 = max(0, int(pts[:, 1].min()) - pad)
    x1 = min(width - 1, int(pts[:, 0].max()) + pad)
    y1 = min(height - 1, int(pts[:, 1].max()) + pad)
    if x1 < x0 or y1 < y0:
        return None
    canvas = np.zeros((y1 - y0 + 1, x1 - x0 + 1), np.uint8)
    shifted = (pts - np.array([x0, y0])).astype(np.int32).reshape(-1, 1, 2)
    cv2.polylines(canvas, [shifted], False, 1, thick, cv2.LINE_8)
    mask = canvas.view(np.bool_)  # 0 or 1 only: the same bytes, not a copy
    return Trail(x0, y0, mask, colour, track_id) if mask.any() else None


def _box_mark(
    box_f: Sequence[float],
    cid: int,
    score: float,
    tid: int,
    labels: Sequence[str],
    style: OverlayStyle,
    s: Sizes,
    width: int,
    height: int,
) -> BoxMark | None:
    """One box's outline and tag (None: entirely outside the image, or NaN)."""
    x1f, y1f, x2f, y2f = box_f
    if not (x2f >= 0 and y2f >= 0 and x1f <= width - 1 and y1f <= height - 1):
        return None  # entirely outside the frame (or NaN): nothing sensible to draw
    box = Rect(round(x1f), round(y1f), round(x2f), round(y2f)).clipped(width, height)
    colour = box_colour(cid, tid)
    tag = None
    if style.tagged:
        text = tag_text(cid, score, labels, style, tid)
        tag = _tag(text, box.x1, box.y1, colour, s, width, height)
    return BoxMark(box, s.half, colour, cid, tag, style.boxes)


MarkBox = tuple[float, float, float, float]
"""A region in image pixels by its edges: x1, y1 (the first pixel's top-left corner),
x2, y2 (one past the last pixel)."""


def mark_region(
    detections: Detections,
    index: int,
    labels: Sequence[str],
    style: OverlayStyle,
    width: int,
    height: int,
) -> MarkBox | None:
    """Where a mark around box ``index`` goes (the followed track's, the box picked in a
    list): around all ``style`` draws of it on a ``width`` x ``height`` image, its
    outline and its tag, so a mark painted around it leaves the tag readable. None: the
    box is not in the image."""
    if not 0 <= index < len(detections) or width <= 0 or height <= 0:
        return None
    s = sizes(style, width, height)
    placed = dict(_marks(detections, labels, style, s, width, height))
    mark = placed.get(index)
    if mark is None:
        return None
    r = mark.extent(width, height)
    return (float(r.x1), float(r.y1), float(r.x2 + 1), float(r.y2 + 1))


def _marks(
    detections: Detections,
    labels: Sequence[str],
    style: OverlayStyle,
    s: Sizes,
    width: int,
    height: int,
) -> list[tuple[int, BoxMark]]:
    """(detection index, its outline and tag) for each box in the image, in painting
    order; a tag that would cover an earlier one goes to another of its places."""
    if not (style.boxes or style.tagged):
        return []
    n = len(detections)
    tracks = detections.track_ids.tolist() if detections.track_ids is not None else [-1] * n
    # tolist() once: Python floats are far cheaper to index than numpy scalars.
    boxes = detections.boxes.tolist()
    scores = detections.scores.tolist()
    class_ids = detections.class_ids.tolist()
    room = LabelRoom() if style.tagged else None
    out: list[tuple[int, BoxMark]] = []
    for i in range(n):
        cid, tid = int(class_ids[i]), int(tracks[i])
        mark = _box_mark(boxes[i], cid, scores[i], tid, labels, style, s, width, height)
        if mark is None:
            continue
        if room is not None and mark.tag is not None:
            tag, b = mark.tag, mark.box
            t = tag.rect
            x1, y1, x2, y2 = room.place((t.x1, t.y1, t.x2, t.y2), (b.x1, b.y1, b.x2, b.y2),
                                        width, height)  # fmt: skip
            if (x1, y1) != (t.x1, t.y1):  # moved: the same label, shifted to its place
                dx, dy = x1 - t.x1, y1 - t.y1
                origin = (tag.origin[0] + dx, tag.origin[1] + dy)
                mark = replace(mark, tag=replace(tag, rect=Rect(x1, y1, x2, y2), origin=origin))
        out.append((i, mark))
    return out


def layout(
    detections: Detections, labels: Sequence[str], style: OverlayStyle, width: int, height: int
) -> Overlay:
    """What ``style`` draws of ``detections`` on a ``width`` x ``height`` image.

    Boxes are rounded (half to even) and clipped to the image; boxes wholly outside
    it, or with NaN corners, are left out. A box with a track ID (``track_ids`` >= 1)
    is coloured by its track and tagged "label #ID"; with ``style.trails`` its trail
    (``detections.trails``) is drawn under the boxes.
    """
    n = len(detections)
    if n == 0 or not style.anything or width <= 0 or height <= 0:
        return Overlay(width, height, (), ())
    s = sizes(style, width, height)
    marks = [m for _, m in _marks(detections, labels, style, s, width, height)]
    trails: list[Trail] = []
    if style.trails and detections.trails is not None:
        thick = trail_thickness(s)
        tracks = detections.track_ids.tolist() if detections.track_ids is not None else [-1] * n
        for i, points in enumerate(detections.trails):
            tid = int(tracks[i])
            if tid >= 1:
                trail = _trail(points, track_colour(tid), tid, thick, width, height)
                if trail is not None:
                    trails.append(trail)
    dots: list[Dot] = []
    if style.landmarks and detections.landmarks is not None:
        for face in detections.landmarks.tolist():
            for k, (px, py) in enumerate(face):
                if 0 <= px < width and 0 <= py < height:
                    colour = LANDMARK_COLOURS[k % len(LANDMARK_COLOURS)]
                    dots.append(Dot(round(px), round(py), s.landmark_radius, colour))
    return Overlay(width, height, tuple(marks), tuple(dots), tuple(trails))


ImageT = TypeVar("ImageT")


class Annotator(Protocol[ImageT]):
    """A painter of overlays (supervision's annotators are the model).

    ``annotate`` draws what ``layout(detections, labels, style, w, h)`` describes on
    ``image`` and returns the image drawn on: a new host array (OpenCV), a QImage
    (QPainter), or the same device image, drawn on asynchronously (CUDA: boxes and
    landmarks only, no label text).
    """

    def annotate(
        self,
        image: ImageT,
        detections: Detections,
        labels: Sequence[str],
        style: OverlayStyle = DEFAULT_STYLE,
    ) -> ImageT: ...


__all__ = [
    "BGR",
    "DEFAULT_STYLE",
    "FONT",
    "LANDMARK_COLOURS",
    "PALETTE",
    "TRACK_PALETTE",
    "Annotator",
    "BoxMark",
    "Dot",
    "MarkBox",
    "Overlay",
    "OverlayStyle",
    "Rect",
    "Sizes",
    "Tag",
    "Trail",
    "auto_font_scale",
    "auto_thickness",
    "box_colour",
    "class_colour",
    "layout",
    "mark_region",
    "outline_half_width",
    "sizes",
    "tag_at",
    "tag_text",
    "text_colour",
    "track_colour",
    "trail_thickness",
]
