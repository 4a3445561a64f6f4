"""File > Export's job: a source range through its own pipeline into the exporters.

No Qt: the controller runs an ExportJob on a thread and turns its progress and end
into signals.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from framelens.core.errors import ExportError
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.runs import run_to_outputs
from framelens.core.stages.source_stages import StageFactory

__all__ = ["ExportJob", "ExportRequest", "ProgressFn", "default_outputs", "writable_folder"]

ProgressFn = Callable[[int, int], None]


@dataclass(frozen=True)
class ExportRequest:
    """What File > Export asks for. ``count`` None = to the end of the source.
    ``stages``: per-source stages after the task (the window's tracker)."""

    source: str
    video_path: str | None
    detections_path: str | None = None
    start: int = 0
    count: int | None = None
    stages: StageFactory | None = None


class ExportJob:
    """Runs a source range through its own pipeline into the exporters, on a thread.

    Independent of the player (its own source, engine and outputs), so export
    and playback do not disturb each other. A cancelled or failed job leaves no file.
    """

    def __init__(self, request: ExportRequest, settings: PipelineSettings) -> None:
        self.request = request
        self.settings = settings
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        self._cancelled.set()

    def run(self, progress: ProgressFn) -> list[str]:
        """Export; returns every path written (the video, then the detections file)."""
        req = self.request
        if not req.video_path and not req.detections_path:
            raise ExportError("choose a video file or a detections file to export")
        summary = run_to_outputs(
            req.source,
            self.settings,
            export=req.video_path,
            detections=req.detections_path,
            start=req.start,
            frames=req.count,
            progress=False,
            on_progress=progress,
            cancel=self._cancelled,
            stages=req.stages,
        )
        return [str(path) for path in summary.outputs]


def writable_folder(folder: str | os.PathLike[str] | None) -> Path | None:
    """``folder`` if it is one this user can write to, else None (the video's folder
    for Export and Snapshot, unless it is read-only, as an installed sample's)."""
    if folder and Path(folder).is_dir() and os.access(folder, os.W_OK):
        return Path(folder)
    return None


def default_outputs(source: str) -> tuple[str, str]:
    """The annotated video and the detections an export of ``source`` suggests:
    ``clip.mp4`` -> ``clip_annotated.mp4`` and ``clip_detections.json`` next to it (in
    the home folder when that folder cannot be written, as an installed sample's),
    numbered ``-2``, ``-3``... past names taken, so that a second export does not
    replace the first unasked."""
    p = Path(source)
    folder = writable_folder(p.parent) or Path.home()
    stem = p.stem or "capture"
    for n in range(1, 10_000):
        tail = "" if n == 1 else f"-{n}"
        video = folder / f"{stem}_annotated{tail}.mp4"
        detections = folder / f"{stem}_detections{tail}.json"
        if not video.exists() and not detections.exists():
            break
    return str(video), str(detections)
