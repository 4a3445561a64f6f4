"""Long inputs split at keyframes, so several workers share one file, and the
segments' detections merged back into one file per input.

A segment is a range of the run (``RunRange``: first frame, count) that starts on a
keyframe: decoding from there gives the frames a reading from the start gives, so the
merged results equal a run over the whole file. The plan is made in the driver from
the container's packets (demuxed, not decoded).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from framelens.core.errors import ExportError
from framelens.core.stages.sinks.detections import DetectionsWriter, frame_detections
from framelens.core.stages.sources.av_input import DECODER_LIMITS, open_container
from framelens.core.stages.sources.frame_index import frame_index

DEFAULT_SEGMENT_FRAMES = 9000
"""Inputs longer than this (6 minutes at 25 fps) are split, on Ray, into segments of
about this many frames."""


@dataclass(frozen=True)
class Segment:
    index: int
    start: int
    frames: int | None  # None: to the end of the file

    @property
    def stop(self) -> int | None:
        return None if self.frames is None else self.start + self.frames


WHOLE = Segment(0, 0, None)


def keyframes(path: str) -> list[int]:
    """The frame indices of ``path``'s keyframes (frame k: the k-th frame the file
    presents, as the file source numbers them), sorted."""
    index = frame_index(path)
    if index is None:  # no timestamps to place them by: one segment, counted through
        open_container(path, f"{path} is not a readable video", options=DECODER_LIMITS).close()
        return [0]
    return sorted({index.position(pts) for pts, _dts in index.keyframes})


def plan(frame_count: int | None, keys: Sequence[int], max_frames: int) -> list[Segment]:
    """Segments of at least ``max_frames`` frames (the last may be shorter or longer),
    each starting on a keyframe; one whole segment when the file is not longer."""
    if max_frames < 1:
        raise ValueError("segments must hold at least one frame")
    if not frame_count or frame_count <= max_frames:
        return [WHOLE]
    starts = [0]
    for k in keys:
        if k - starts[-1] >= max_frames and k < frame_count:
            starts.append(k)
    if len(starts) == 1:
        return [WHOLE]
    segments = [Segment(i, s, e - s) for i, (s, e) in enumerate(pairwise(starts))]
    return [*segments, Segment(len(starts) - 1, starts[-1], None)]


def merge_parts(
    parts: Sequence[Path],
    stops: Sequence[int | None],
    targets: Sequence[Path],
    labels: Sequence[str],
    *,
    faces: bool,
) -> list[Path]:
    """The segments' detections JSON (``parts``, in order) as one detections file per
    target (.json, .csv), as a run over the whole file writes them; frames at or past a
    segment's stop (a damaged file's numbering can jump) are the next one's."""
    writers: list[DetectionsWriter] = []
    try:
        for k, (part, stop) in enumerate(zip(parts, stops, strict=True)):
            try:
                data = json.loads(part.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise ExportError(f"cannot read segment {part}: {exc}") from None
            if k == 0:
                writers = [DetectionsWriter(t, data["meta"], labels) for t in targets]
            for frame in data["frames"]:
                if stop is not None and frame["index"] >= stop:
                    continue
                dets = frame_detections(frame, faces=faces)
                for w in writers:
                    w.add(frame["index"], frame["pts"], dets)
        return [w.close() for w in writers]
    except BaseException:
        for w in writers:
            w.abort()
        raise


def remove_parts(folder: Path) -> None:
    """The segments' folder, once merged (or when the input is done again)."""
    shutil.rmtree(folder, ignore_errors=True)
