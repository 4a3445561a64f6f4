"""A local camera through OpenCV (V4L2 on Linux, the platform default elsewhere)."""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import cv2
import numpy as np
from framelens.core.errors import SourceError
from framelens.core.stages.sources.base import Source
from framelens.core.types import Frame, Image, SourceInfo

DEFAULT_FPS = 30.0  # when the driver reports no rate
V4L2_SYSFS = Path("/sys/class/video4linux")
_VIDEO_NODE = re.compile(r"video(\d+)")


@dataclass(frozen=True)
class CameraDevice:
    """A camera present on this machine: its index, device path and name."""

    index: int
    path: str  # what open_source takes: /dev/videoN on Linux
    name: str  # as its driver calls it ("Integrated Camera: Integrated C")

    @property
    def label(self) -> str:
        return f"{self.name} ({self.path})"


def list_cameras(sysfs: Path = V4L2_SYSFS) -> list[CameraDevice]:
    """The cameras present, by index: on Linux every /dev/videoN that ``sysfs`` lists,
    named from its ``name`` file. Empty where there are none or nothing lists them (a
    webcam often has a second node for metadata: it is listed too, opening it fails)."""
    try:
        entries = list(sysfs.iterdir()) if sys.platform.startswith("linux") else []
    except OSError:
        return []
    cameras = []
    for entry in entries:
        match = _VIDEO_NODE.fullmatch(entry.name)
        if match is None:
            continue
        try:
            name = (entry / "name").read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            name = ""
        index = int(match.group(1))
        cameras.append(CameraDevice(index, f"/dev/video{index}", name or f"Camera {index}"))
    return sorted(cameras, key=lambda c: c.index)


def _fourcc(value: float) -> str:
    code = int(value)
    text = "".join(chr((code >> (8 * i)) & 0xFF) for i in range(4))
    return text.strip("\x00 ") if text.isprintable() else ""


@contextmanager
def _opencv_quiet() -> Iterator[None]:
    """OpenCV's own logging silenced while a camera is probed, its level restored after."""
    from cv2.utils import logging as cv_logging

    level = cv_logging.getLogLevel()
    cv_logging.setLogLevel(cv_logging.LOG_LEVEL_SILENT)
    try:
        yield
    finally:
        cv_logging.setLogLevel(level)


class CameraSource(Source):
    """Frames from camera ``device`` (an index, or a /dev/videoN path on Linux).

    ``pts`` is the time since the source opened on a monotonic clock, taken when the
    frame was grabbed; a camera never ends, so a failed grab raises SourceError.
    """

    def __init__(self, device: int | str) -> None:
        self._name = str(device)
        backend = cv2.CAP_V4L2 if sys.platform.startswith("linux") else cv2.CAP_ANY
        try:
            with _opencv_quiet():  # a missing camera is our one line, not OpenCV's warnings
                capture = cv2.VideoCapture(device, backend)
                opened = capture.isOpened()
        except cv2.error as exc:
            raise SourceError(f"camera {device} could not be opened: {exc}") from exc
        if not opened:
            capture.release()
            raise SourceError(f"camera {device} could not be opened (no such device?)")
        self._capture = capture
        fps = capture.get(cv2.CAP_PROP_FPS)
        self.info = SourceInfo(
            uri=f"camera:{device}",
            kind="camera",
            width=int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)),
            height=int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT)),
            fps=fps if 0 < fps <= 1000 else DEFAULT_FPS,
            frame_count=None,
            codec=_fourcc(capture.get(cv2.CAP_PROP_FOURCC)),
            seekable=False,
        )
        self._lock = threading.Lock()  # close() may come from another thread mid-read
        self._closed = False
        self._index = 0
        self._t0 = time.monotonic()

    def read(self) -> Frame | None:
        with self._lock:
            if self._closed:
                raise SourceError(f"camera {self._name} is closed")
            try:
                ok, image = self._capture.read()
            except cv2.error as exc:
                raise SourceError(f"camera {self._name} failed: {exc}") from exc
            pts = time.monotonic() - self._t0
        if not ok or image is None:
            raise SourceError(f"camera {self._name} stopped delivering frames (unplugged?)")
        if image.ndim == 2:  # some drivers hand out grey frames
            image = cv2.cvtColor(image, cv2.COLOR_GRAY2BGR)
        pixels = cast(Image, np.ascontiguousarray(image, dtype=np.uint8))
        frame = Frame(pixels, self._index, pts, source_id=self.source_id)
        self._index += 1
        return frame

    def seek(self, index: int) -> None:
        raise SourceError(f"camera {self._name} is live and cannot seek")

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._capture.release()
