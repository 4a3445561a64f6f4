"""The results browser's background job: a query of a batch's detections, then a
thumbnail of each hit shown, decoded from its video.

A search runs on a thread: ``search_detections`` (every hit of the class above the
score, in the sources matched), the first ``limit`` kept, best first or by video and
time; ``hitsFound`` brings them and how many matched in all. Then each video is opened
once and its frames of the hits read in order (``api.frames_at``); each hit's thumbnail
(the box with some of the scene around it, the box drawn in its class's colour, fitted
into ``THUMB_SIZE``) comes by ``thumbnailReady``. A newer search supersedes the one
running: what the old one still reports is dropped (each search has a token).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from contextlib import closing
from dataclasses import dataclass

from framelens.core.api import (
    DetectionHit,
    FrameLensError,
    Image,
    class_colour,
    error_message,
    frames_at,
    search_detections,
)
from framelens.gui.display.image_view import to_qimage
from PySide6.QtCore import QObject, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QImage, QPainter, QPen

__all__ = ["THUMB_SIZE", "HitSearch", "SearchQuery", "crop_box", "hit_thumbnail"]

THUMB_SIZE = QSize(192, 128)
BACKGROUND = QColor(19, 21, 25)


@dataclass(frozen=True)
class SearchQuery:
    """What the browser asks for: search_detections' filters and how many to show."""

    folder: str
    label: str | None = None  # None: every class
    min_score: float = 0.0
    source_glob: str | None = None
    limit: int = 200
    order: str = "score"  # "score": best first; "time": by video, then frame


def crop_box(
    box: tuple[float, float, float, float], width: int, height: int
) -> tuple[int, int, int, int]:
    """The part of a frame a thumbnail shows: the box, grown by half its size (at
    least 16 px) on each side to give it context, to the thumbnail's aspect, clipped to
    the frame. (x0, y0, x1, y1) in pixels."""
    x1, y1, x2, y2 = box
    bw, bh = max(1.0, x2 - x1), max(1.0, y2 - y1)
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    w, h = bw + 2 * max(16.0, bw / 2), bh + 2 * max(16.0, bh / 2)
    aspect = THUMB_SIZE.width() / THUMB_SIZE.height()
    w, h = max(w, h * aspect), max(h, w / aspect)
    w, h = min(w, float(width)), min(h, float(height))
    x0 = min(max(0.0, cx - w / 2), width - w)
    y0 = min(max(0.0, cy - h / 2), height - h)
    return round(x0), round(y0), round(x0 + w), round(y0 + h)


def hit_thumbnail(image: Image, hit: DetectionHit) -> QImage:
    """The hit's thumbnail: its box with the scene around it, the box drawn."""
    height, width = image.shape[:2]
    x0, y0, x1, y1 = crop_box((hit.x1, hit.y1, hit.x2, hit.y2), width, height)
    crop = to_qimage(image[y0:y1, x0:x1])
    scaled = crop.scaled(
        THUMB_SIZE, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation
    )
    thumb = QImage(THUMB_SIZE, QImage.Format.Format_RGB32)
    thumb.fill(BACKGROUND)
    s = scaled.width() / max(1, x1 - x0)
    ox = (THUMB_SIZE.width() - scaled.width()) / 2
    oy = (THUMB_SIZE.height() - scaled.height()) / 2
    b, g, r = class_colour(hit.class_id)
    painter = QPainter(thumb)
    painter.drawImage(round(ox), round(oy), scaled)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
    painter.setPen(QPen(QColor(r, g, b), 2))
    painter.drawRect(
        QRectF(
            ox + (hit.x1 - x0) * s,
            oy + (hit.y1 - y0) * s,
            (hit.x2 - hit.x1) * s,
            (hit.y2 - hit.y1) * s,
        )
    )
    painter.end()
    return thumb


class HitSearch(QObject):
    """Searches and thumbnails on a thread, one search at a time (the newest wins)."""

    hitsFound = Signal(int, list, int)  # token, hits shown (best first), how many matched
    thumbnailReady = Signal(int, int, QImage)  # token, the hit's place in the list, image
    thumbnailFailed = Signal(int, int, str)  # token, place, one line (video gone, say)
    searchFailed = Signal(int, str)  # token, one line
    searchDone = Signal(int)  # token: every thumbnail made

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.token = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def search(self, query: SearchQuery) -> int:
        """Start ``query``; returns its token (the signals carry it)."""
        self.stop()
        self.token += 1
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run,
            args=(self.token, query, self._stop),
            name="fl-hit-search",
            daemon=True,
        )
        self._thread.start()
        return self.token

    def stop(self) -> None:
        self._stop.set()

    def wait(self, timeout_s: float = 5.0) -> None:
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _run(self, token: int, query: SearchQuery, stop: threading.Event) -> None:
        try:
            self._search(token, query, stop)
        except RuntimeError:  # the window went while this ran: its signals with it
            if not stop.is_set():
                raise

    def _search(self, token: int, query: SearchQuery, stop: threading.Event) -> None:
        try:
            shown, total = search_detections(
                query.folder,
                label=query.label,
                min_score=query.min_score,
                source_glob=query.source_glob,
                limit=query.limit,
                order="score" if query.order == "score" else "place",
            )
        except BaseException as exc:
            self.searchFailed.emit(token, error_message(exc))
            return
        if stop.is_set():
            return
        self.hitsFound.emit(token, shown, total)
        self._thumbnails(token, shown, stop)
        if not stop.is_set():
            self.searchDone.emit(token)

    def _thumbnails(self, token: int, hits: list[DetectionHit], stop: threading.Event) -> None:
        by_source: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
        for place, hit in enumerate(hits):
            by_source[hit.source][hit.frame].append(place)
        for source, frames in by_source.items():
            if stop.is_set():
                return
            left = set(frames)
            try:
                with closing(frames_at(source, frames)) as reader:
                    for index, image in reader:
                        if stop.is_set():
                            return
                        for place in frames[index]:
                            thumb = hit_thumbnail(image, hits[place])
                            self.thumbnailReady.emit(token, place, thumb)
                        left.discard(index)
            except FrameLensError as exc:  # the video moved, or ends sooner than it did
                message = error_message(exc)
                for place in (p for index in sorted(left) for p in frames[index]):
                    self.thumbnailFailed.emit(token, place, message)
