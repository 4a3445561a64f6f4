"""A folder of still images played as a video, in natural name order (img2 < img10)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import cast

import cv2
import numpy as np
from framelens.core.errors import SourceError
from framelens.core.stages.sources.base import Source
from framelens.core.stages.sources.suffixes import IMAGE_SUFFIXES, VIDEO_SUFFIXES
from framelens.core.types import Frame, Image, SourceInfo

NOMINAL_FPS = 25.0  # images carry no timing; pts = index / 25


def _natural_key(path: Path) -> list[int | str]:
    # Numbered exports are rarely zero-padded; plain sorting would put 10 before 2.
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", path.name)]


def load_image(path: Path) -> Image:
    """BGR uint8 HxWx3 whatever the file holds (grey, alpha, 16 bit)."""
    try:
        # imdecode from bytes, not imread: imread cannot open non-ASCII paths on Windows.
        data = np.fromfile(path, dtype=np.uint8)
        image = cv2.imdecode(data, cv2.IMREAD_COLOR)
    except (OSError, cv2.error) as exc:
        raise SourceError(f"cannot read image {path}: {exc}") from exc
    if image is None:
        raise SourceError(f"cannot read image {path}: not a decodable image")
    return cast(Image, np.ascontiguousarray(image, dtype=np.uint8))


class FolderSource(Source):
    """Every image file directly in ``folder``; all are resized to the first one's size."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        root = Path(folder)
        try:
            files = [p for p in root.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES]
        except OSError as exc:
            raise SourceError(f"cannot list folder {root}: {exc.strerror or exc}") from exc
        self._files = sorted((p for p in files if p.is_file()), key=_natural_key)
        if not self._files:
            suffixes = ", ".join(sorted(IMAGE_SUFFIXES))
            videos = sorted(p.name for p in root.iterdir() if p.suffix.lower() in VIDEO_SUFFIXES)
            named = ", ".join(videos[:2]) + (", ..." if len(videos) > 2 else "")
            also = (
                f" but {len(videos)} video{'s' if len(videos) > 1 else ''} ({named}): "
                f"choose {'one of its videos' if len(videos) > 1 else 'the video'}, "
                "or run the folder as a batch"
                if videos
                else ""
            )
            raise SourceError(f"folder {root} contains no images ({suffixes}){also}")
        first = load_image(self._files[0])
        self._first: Image | None = first  # read already; don't decode it twice
        height, width = first.shape[:2]
        self.info = SourceInfo(
            uri=str(root),
            kind="folder",
            width=width,
            height=height,
            fps=NOMINAL_FPS,
            frame_count=len(self._files),
            codec="images",
            seekable=True,
        )
        self._next = 0
        self._closed = False

    def read(self) -> Frame | None:
        if self._closed:
            raise SourceError(f"{self.info.uri} is closed")
        index = self._next
        if index >= len(self._files):
            return None
        if index == 0 and self._first is not None:
            image = self._first
        else:
            image = load_image(self._files[index])
        self._first = None
        size = (self.info.width, self.info.height)
        if (image.shape[1], image.shape[0]) != size:
            shrink = image.shape[1] > size[0]
            interpolation = cv2.INTER_AREA if shrink else cv2.INTER_LINEAR
            image = cast(Image, cv2.resize(image, size, interpolation=interpolation))
        self._next += 1
        return Frame(image, index, index / NOMINAL_FPS, source_id=self.source_id)

    def seek(self, index: int) -> None:
        if self._closed:
            raise SourceError(f"{self.info.uri} is closed")
        if not 0 <= index < len(self._files):
            raise SourceError(
                f"frame {index} is out of range for {self.info.uri} (0..{len(self._files) - 1})"
            )
        self._next = index

    def close(self) -> None:
        self._closed = True
        self._first = None

    @property
    def files(self) -> list[Path]:
        """The images in playback order."""
        return list(self._files)
