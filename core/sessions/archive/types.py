"""What a batch reports: each input's progress and state, the batch's summary, and the
rows of the archive's detections as a query returns them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

InputState = Literal["pending", "running", "done", "failed", "skipped"]
"""``skipped``: done by an earlier batch with the same file and settings (the manifest
keeps it ``done``)."""


@dataclass(frozen=True)
class InputProgress:
    """One event: an input's state changed or it progressed."""

    path: str  # the input's path as given or discovered (what Parquet's `source` holds)
    state: InputState
    frames_done: int
    frames_total: int  # 0 when unknown
    fps: float  # this input's processing fps so far (0.0 if not started)
    worker: str  # "local" or the Ray actor's name, e.g. "worker-1"
    error: str | None = None  # the one-line reason when failed
    analytics: dict[str, Any] | None = None  # a done input's counts by line and zone


@dataclass(frozen=True)
class BatchSummary:
    """How a batch ended."""

    output_dir: str
    done: int
    failed: int
    skipped: int
    cancelled: bool
    frames: int  # frames processed by this batch
    wall_s: float
    ray: str | None  # None (local) or the cluster address / "local"
    inputs: tuple[InputProgress, ...]  # the final state of each input
    notes: tuple[str, ...] = ()  # what the batch said on its way (a file run whole)

    @property
    def counts(self) -> EventCounts | None:
        """The inputs' counts by line and zone added up (None: nothing was counted)."""
        return EventCounts.of(self.inputs)

    @property
    def fps(self) -> float:
        """Frames processed per second of the batch's wall time."""
        return self.frames / self.wall_s if self.wall_s > 0 else 0.0

    def line(self) -> str:
        """The batch's last line: counts, frames, fps and where the results are."""
        how = "cancelled: " if self.cancelled else ""
        pending = len(self.inputs) - self.done - self.failed - self.skipped
        rest = f", {pending} pending" if pending else ""
        return (
            f"{how}{self.done} done, {self.failed} failed, {self.skipped} skipped{rest}; "
            f"{self.frames} frames in {self.wall_s:.1f} s ({self.fps:.1f} fps); "
            f"results in {self.output_dir}"
        )


@dataclass(frozen=True)
class DetectionHit:
    """One row of the archive's Parquet dataset."""

    source: str
    frame: int
    pts: float
    class_id: int
    label: str
    score: float
    x1: float
    y1: float
    x2: float
    y2: float
    model: str
    precision: str
    track_id: int | None = None  # its track (the batch tracked), else None

    def line(self) -> str:
        """The row as ``framelens query`` prints it (its track as "#12" when tracked)."""
        track = "" if self.track_id is None or self.track_id < 0 else f" #{self.track_id}"
        return (
            f"{self.source}\tframe {self.frame}\t{self.pts:.3f} s\t{self.label}{track}\t"
            f"{self.score:.4f}\t{self.x1:.2f},{self.y1:.2f},{self.x2:.2f},{self.y2:.2f}"
        )


@dataclass(frozen=True)
class TrackRow:
    """One track of one input of an archive: its ID, its class (the one most of its
    boxes have), its first and last frame and their times, and how many boxes it has."""

    source: str
    track_id: int
    label: str
    first_frame: int
    last_frame: int
    first_pts: float
    last_pts: float
    boxes: int

    @property
    def duration_s(self) -> float:
        """From its first box's time to its last one's."""
        return round(self.last_pts - self.first_pts, 6)

    def line(self) -> str:
        """The track as ``framelens query --tracks`` prints it."""
        return (
            f"{self.source}\t#{self.track_id}\t{self.label}\tframes {self.first_frame}-"
            f"{self.last_frame}\t{self.first_pts:.3f}-{self.last_pts:.3f} s\t"
            f"{self.duration_s:.3f} s\t{self.boxes} boxes"
        )


@dataclass(frozen=True)
class EventRow:
    """One row of the archive's events (a batch that counted lines and zones): the
    events CSV's columns and the input's ``source``; ``label`` is the CSV's ``class``."""

    source: str
    frame: int
    time_s: float
    track_id: int
    label: str
    kind: str
    name: str
    direction: str

    def line(self) -> str:
        """The event as ``framelens query --event`` prints it."""
        what = f"{self.kind} {self.name}" + (f" {self.direction}" if self.direction else "")
        return (
            f"{self.source}\tframe {self.frame}\t{self.time_s:.3f} s\t{self.label} "
            f"#{self.track_id}\t{what}"
        )


@dataclass(frozen=True)
class EventCounts:
    """The counts of a batch's inputs added up: per line its crossings in and out, per
    zone its enter, exit and loiter events (inputs counted with the same zones.json)."""

    lines: dict[str, dict[str, int]]
    zones: dict[str, dict[str, int]]

    @staticmethod
    def of(inputs: tuple[InputProgress, ...]) -> EventCounts | None:
        """The sum over ``inputs``' counts; None when none was counted."""
        counted = [i.analytics for i in inputs if i.analytics is not None]
        if not counted:
            return None
        lines: dict[str, dict[str, int]] = {}
        zones: dict[str, dict[str, int]] = {}
        for one in counted:
            for table, keys, into in (("lines", ("in", "out"), lines),
                                      ("zones", ("enter", "exit", "loiter"), zones)):  # fmt: skip
                for name, counts in one.get(table, {}).items():
                    total = into.setdefault(name, dict.fromkeys(keys, 0))
                    for key in keys:
                        total[key] += int(counts.get(key, 0))
        return EventCounts(lines, zones)

    def line(self) -> str:
        """``door in 6, out 0; bay enter 2, exit 1, loiter 0``."""
        parts = [
            f"{name} " + ", ".join(f"{k} {v}" for k, v in counts.items())
            for table in (self.lines, self.zones)
            for name, counts in table.items()
        ]
        return "; ".join(parts)
