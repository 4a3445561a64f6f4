"""What a run writes for each of its sources, and the names those files get.

A source's outputs are its annotated video (or PNG folder, or lossless MKV), its task's
detections files (.json, .csv) and extra writers (an archive's Parquet rows), fed its
results in frame order and committed together: all of them appear, or none
(core/stages/sinks/atomic.py writes each to a temporary name first).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from framelens.core import __version__
from framelens.core.models.catalog import model_sha256
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.tracks import MotTracks, TrackCount
from framelens.core.stages.analytics.events import EventSink, EventsWriter
from framelens.core.stages.analytics.heatmap import HeatmapPng
from framelens.core.stages.analytics.stage import Tally
from framelens.core.stages.analytics.zones import ZonesFile
from framelens.core.stages.sinks.lossless import FrameExporter, open_exporter
from framelens.core.stages.sinks.video import provenance_metadata
from framelens.core.stages.sources import camera_index, source_kind
from framelens.core.stages.tasks import AnyTask, kind_of
from framelens.core.stages.tasks.base import OutputWriter
from framelens.core.stages.timing import stage
from framelens.core.types import FrameResult, SourceInfo

__all__ = [
    "RunOutputs",
    "SourceOutputs",
    "WriterFactory",
    "open_outputs",
    "output_names",
    "run_meta",
    "source_name",
]


WriterFactory = Callable[[dict[str, Any]], OutputWriter[Any]]
"""An extra output of a run, opened with the run's provenance (``run_meta``) once the
source is open, and committed with the others (a batch's Parquet rows)."""


@dataclass(frozen=True)
class RunOutputs:
    """What a one-source run writes: the annotated video (or PNG folder), the task's
    detections files (.json, .csv) and extra writers; all or none appear."""

    export: str | None = None
    detections: Sequence[str] = ()
    lossless: bool = False
    extra: Sequence[WriterFactory] = ()
    label: str | None = None  # the source's name in the outputs (default: its spec)
    tracks: str | None = None  # the tracks as MOT Challenge text (a tracker ran)
    zones: ZonesFile | None = None  # lines and zones counted (their counts in the summary)
    events: str | None = None  # their events as CSV (core/stages/analytics/events.py)
    labels: tuple[str, ...] = ()  # the model's class names, for the events and counts
    heatmap_png: str | None = None  # the final heatmap over the last frame, as a PNG


def source_name(spec: str) -> str:
    """What a source's outputs are called: a file's stem, a URL's host and path, a
    camera's index ("camera-0")."""
    text = spec.strip()
    index = camera_index(text)
    if index is not None:
        return f"camera-{index}"
    if source_kind(text) == "stream":
        rest = text.split("://", 1)[1].split("?")[0].strip("/")
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", rest).strip("-")
        return name or "stream"
    return Path(text.rstrip("/\\")).stem or "source"


def output_names(specs: Sequence[str]) -> list[str]:
    """``source_name`` of each, clashes numbered "-2", "-3" in the order given. A source
    keeps its own name whenever it can: the number never takes a name another source
    has of its own (``a.mp4 sub/a.mp4 a-2.mp4``: a, a-3, a-2, so that ``a-2.json`` is
    ``a-2.mp4``'s)."""
    bases = [source_name(spec) for spec in specs]
    own = set(bases)
    names: list[str] = []
    taken: set[str] = set()
    for base in bases:
        name, count = base, 1
        while name in taken or (count > 1 and name in own):
            count += 1
            name = f"{base}-{count}"
        taken.add(name)
        names.append(name)
    return names


def run_meta(source: str, settings: PipelineSettings, info: SourceInfo) -> dict[str, Any]:
    """The provenance written into detections files and video metadata."""
    model = settings.model
    task = kind_of(model).task.provenance(model, settings.params)
    return {
        "app_version": __version__,
        "model": settings.model.name,
        "model_sha256": model_sha256(settings.model.path),
        "precision": settings.precision,
        "backend": settings.backend,
        "device": settings.device,
        **task,
        "source": source,
        "source_fps": info.fps,
        "width": info.width,
        "height": info.height,
    }


class SourceOutputs:
    """One source's exporter and writers, fed its results in frame order."""

    def __init__(
        self,
        video: FrameExporter | None = None,
        writers: Sequence[OutputWriter[Any]] = (),
        tally: Tally | None = None,
    ) -> None:
        self.video = video
        self.writers = list(writers)
        self.tally = tally  # the events' counts (lines and zones were counted)
        self.frames = 0
        self.count = TrackCount()  # the tracks its results carried (a tracker ran)

    @property
    def encoder(self) -> str | None:
        return self.video.encoder_name if self.video is not None else None

    def add(self, result: FrameResult) -> None:
        frame = result.frame
        if self.video is not None and result.annotated is not None:
            with stage(result.times, "encode"):
                self.video.write(result.annotated, frame.pts, frame.index)
        for writer in self.writers:
            writer.add(frame.index, frame.pts, result.output)
            if result.events and isinstance(writer, EventSink):
                writer.add_events(result.events)
            elif result.layers and isinstance(writer, HeatmapPng):
                writer.add_layers(result.layers)
        if self.tally is not None and result.events:
            self.tally.add(result.events)
        self.count.add(result.output)
        self.frames += 1

    @property
    def analytics(self) -> dict[str, Any] | None:
        """The counts by line and zone (None: none were counted)."""
        return self.tally.as_json() if self.tally is not None else None

    @property
    def tracks(self) -> int | None:
        """How many tracks the source's results carried; None when no tracker ran."""
        return self.count.tracks

    def close(self) -> list[str]:
        """Commit every output, or leave none: when one cannot be finished (a full disk),
        those already moved into place are removed before the error goes on."""
        done: list[Path] = []
        try:
            for w in self._all():
                done.append(Path(str(w.close())))
        except BaseException:
            self.abort()
            for path in done:
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
            raise
        return [str(path) for path in done]

    def abort(self) -> None:
        for w in self._all():
            w.abort()

    def _all(self) -> list[FrameExporter | OutputWriter[Any]]:
        return [w for w in (self.video, *self.writers) if w is not None]


def open_outputs(
    outputs: RunOutputs,
    spec: str,
    info: SourceInfo,
    meta: dict[str, Any],
    task: AnyTask,
    *,
    start: int = 0,
    frames: int | None = None,
) -> SourceOutputs:
    """A source's outputs opened once it is open (``meta``: the run's provenance for it;
    ``start``, ``frames``: the range it runs, for the audio kept beside the video). A
    file's sound is kept, read from the file a second time; a stream's or a camera's is
    not: a second connection to it would be out of step with the frames, and many
    cameras take only so many clients. When one output cannot be opened (a folder not
    writable), those already open are let go and nothing is left behind."""
    meta = {**meta, "source": outputs.label or spec}
    labels = dict(enumerate(outputs.labels))
    opened: list[OutputWriter[Any]] = []
    try:
        for path in outputs.detections:
            opened.append(task.open_writer(path, meta))
        opened += [make(meta) for make in outputs.extra]
        if outputs.tracks:
            opened.append(MotTracks(outputs.tracks))
        if outputs.heatmap_png:
            opened.append(HeatmapPng(outputs.heatmap_png))
        if outputs.events:
            opened.append(EventsWriter(outputs.events, labels))
        video = None
        if outputs.export:
            fps = info.fps if info.fps > 0 else 30.0
            out_w, out_h = task.output_size(info.width, info.height)
            video = open_exporter(
                outputs.export, lossless=outputs.lossless, width=out_w, height=out_h,
                fps=fps, meta=meta, tags=provenance_metadata(meta),
                audio_source=spec if info.has_audio and info.kind == "file" else None,
                audio_start_s=start / fps,
                audio_end_s=None if frames is None else (start + frames) / fps,
            )  # fmt: skip
    except BaseException:
        for w in opened:
            w.abort()
        raise
    tally = Tally(outputs.zones, labels) if outputs.zones is not None else None
    return SourceOutputs(video, opened, tally)
