"""A run of several sources writes each source's outputs under a name of its own
(``DIR/<name>.mp4`` and ``DIR/<name>.json``): the names, and the writer that feeds one
source's exporter and detections in frame order (core/pipeline/multi_run.py)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from framelens.core.stages.sinks.lossless import FrameExporter
from framelens.core.stages.tasks.base import OutputWriter
from framelens.core.types import FrameResult

__all__ = ["SourceOutputs", "output_names", "source_name"]

_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def source_name(spec: str) -> str:
    """What a source's outputs are called: a file's stem, a URL's host and path, a
    camera's index ("camera-0")."""
    text = spec.strip()
    if text.isdigit():
        return f"camera-{text}"
    if text.startswith("/dev/video"):
        return f"camera-{text.removeprefix('/dev/video')}"
    if _URL.match(text):
        rest = _URL.sub("", text).split("?")[0].strip("/")
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", rest).strip("-")
        return name or "stream"
    return Path(text.rstrip("/\\")).stem or "source"


def output_names(specs: Sequence[str]) -> list[str]:
    """``source_name`` of each, clashes numbered "-2", "-3" in the order given."""
    names: list[str] = []
    seen: dict[str, int] = {}
    for spec in specs:
        base = source_name(spec)
        count = seen.get(base, 0) + 1
        seen[base] = count
        name = base if count == 1 else f"{base}-{count}"
        while name in names:  # "a-2" given as a file of its own
            count += 1
            name = f"{base}-{count}"
        names.append(name)
    return names


class SourceOutputs:
    """One source's exporter and detections writer, fed its results in frame order."""

    def __init__(
        self, video: FrameExporter | None, writer: OutputWriter[Any] | None, fps: float
    ) -> None:
        self.video, self.writer = video, writer
        self.frames = 0
        self.next_index = 0  # the source's frame to write next (where a move resumes it)
        self._interval = 1.0 / fps if fps > 0 else 1.0 / 30
        self._last_pts = -self._interval
        self._offsets = (0, 0.0)  # added to index and pts: a live source reopened
        self.rebase = False  # the next frame continues the numbering and the timeline

    def add(self, result: FrameResult) -> None:
        frame = result.frame
        if self.rebase:  # a live source counts from 0 again after a move
            self._offsets = (
                self.next_index - frame.index,
                self._last_pts + self._interval - frame.pts,
            )
            self.rebase = False
        index, pts = frame.index + self._offsets[0], frame.pts + self._offsets[1]
        if self.video is not None and result.annotated is not None:
            self.video.write(result.annotated, pts, index)
        if self.writer is not None:
            self.writer.add(index, pts, result.output)
        self.frames += 1
        self.next_index, self._last_pts = index + 1, pts

    def close(self) -> list[str]:
        return [str(w.close()) for w in (self.video, self.writer) if w is not None]

    def abort(self) -> None:
        for w in (self.video, self.writer):
            if w is not None:
                w.abort()
