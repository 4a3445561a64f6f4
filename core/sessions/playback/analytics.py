"""Lines and zones in playback: the definition the window edits, counted live.

No Qt. ``PlaybackAnalytics`` holds the video's lines and zones (the zones.json model of
core/stages/analytics/zones.py, the CLI's), counts the tracker's boxes against them on
every frame played (its ``stage``, placed after the tracker by
core/sessions/playback/tracking.py) and keeps the events so far, which the window reads
from its own thread (a lock guards them).

* Counting: core/stages/analytics/counting.py's ``Counter``, the same definitions as a
  run (docs/analytics.md). A seek resets it (where each track was is forgotten, as the
  tracker's reset does); a frame counted once makes no events when it is played again,
  so a stretch seen twice is counted once and the events list has no duplicates.
* Counts at a frame (``LiveCounts``): per line the ``in`` and ``out`` crossings up to
  that frame, per zone the tracks inside it now and how many entered up to it; they are
  drawn next to each line and zone (``ZonesPicture`` on ``result.marks``, painted with
  the frame, the same in the window and in an export).
* Editing the lines and zones (``set_zones``) keeps the tracker running: only the
  counting starts again. A new video, or another tracker (IDs numbered afresh), starts
  the counts again too (a new chain of stages asks for a new ``stage``).
* Saved beside the video (``<video>.zones.json``, written whole or not at all) and
  loaded when the video is opened again (``use_video``).
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from framelens.core.errors import ConfigError
from framelens.core.stages.analytics.counting import Counter, Event
from framelens.core.stages.analytics.picture import LiveCounts, ZonesPicture
from framelens.core.stages.analytics.zones import (
    ZonesFile,
    load_zones,
    save_zones,
    zones_beside,
)
from framelens.core.stages.sources import names_a_file
from framelens.core.types import Detections, FrameResult

__all__ = ["PlaybackAnalytics", "ZonesCounting"]


def _key(e: Event) -> tuple[int, int, str, str]:
    return (e.frame, e.track_id, e.kind, e.name)


class PlaybackAnalytics:
    """The lines and zones of the video playing and what they counted (see the module's
    docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spec = ZonesFile()
        self._counter: Counter | None = None
        self._events: list[Event] = []  # sorted by frame
        self._counted: set[int] = set()  # frames whose events are in _events
        self._latest: LiveCounts | None = None
        self.labels: dict[int, str] = {}  # the model's class names (files name classes)
        self.size: tuple[int, int] | None = None  # the video's frame (for the warnings)
        self.path: Path | None = None  # where the lines and zones are kept
        self.unusable: str | None = None  # why the video's zones file was not used
        self.version = 0  # changes whenever the events or the definition change
        self.generation = 0  # changes whenever the counts start again

    # ---- the definition -------------------------------------------------------------

    @property
    def spec(self) -> ZonesFile:
        with self._lock:
            return self._spec

    def __bool__(self) -> bool:
        return bool(self.spec)

    def set_zones(self, spec: ZonesFile) -> None:
        """Count with ``spec`` from the next frame on (the counts start again)."""
        with self._lock:
            self._spec = spec
            self._counter = Counter(spec) if spec else None
            self._restart()

    def set_labels(self, labels: Mapping[int, str] | Sequence[str]) -> None:
        self.labels = dict(enumerate(labels)) if isinstance(labels, Sequence) else dict(labels)

    def use_video(self, video: str | None, size: tuple[int, int] | None = None) -> str | None:
        """Another video: its lines and zones from ``<video>.zones.json`` when there is
        one, else none. Returns what to tell the user (the file read, a warning, or why
        it could not be used: one line, kept in ``unusable`` too), None when there was
        nothing to read."""
        self.size = size
        self.path = zones_beside(video) if video and names_a_file(video) else None
        spec, said = ZonesFile(), None
        self.unusable = None
        if self.path is not None and self.path.is_file():
            try:
                spec = load_zones(self.path, self.labels, size)
                said = spec.warnings[0] if spec.warnings else f"Lines and zones from {self.path}"
            except ConfigError as exc:
                said = self.unusable = str(exc)
        self.set_zones(spec)
        return said

    def load(self, path: str | Path) -> ZonesFile:
        """Lines and zones from ``path`` (ConfigError, one line, when it cannot be used);
        counted from the next frame on."""
        spec = load_zones(path, self.labels, self.size)
        self.set_zones(spec)
        return spec

    def save(self, path: str | Path | None = None) -> Path:
        """Write the lines and zones to ``path`` (default: beside the video), whole or
        not at all; ConfigError (one line) when that cannot be done."""
        target = Path(path) if path is not None else self.path
        if target is None:
            raise ConfigError("no video file open: choose where to save the lines and zones")
        return save_zones(self.spec, target, self.labels)

    # ---- counting (the player's thread) ----------------------------------------------

    def _restart(self) -> None:
        self._events = []
        self._counted = set()
        self._latest = None
        self.version += 1
        self.generation += 1

    def restart(self) -> None:
        """The counts from nothing (a new video, another tracker)."""
        with self._lock:
            if self._counter is not None:
                self._counter.clear()
            self._restart()

    def stage(self) -> ZonesCounting:
        """The stage that counts a chain's frames here (a new chain: counts restarted)."""
        self.restart()
        return ZonesCounting(self)

    def count(self, result: FrameResult) -> None:
        """One frame through the lines and zones: its events (once per frame) and its
        counts, drawn as the frame's mark."""
        with self._lock:
            counter, spec = self._counter, self._spec
            if counter is None:
                return
            frame, time_s = result.frame.index, float(result.frame.pts)
            dets = result.output
            if isinstance(dets, Detections) and dets.track_ids is not None:
                events = counter.update(frame, time_s, dets.boxes, dets.track_ids, dets.class_ids)
                if frame not in self._counted:
                    self._counted.add(frame)
                    for e in events:
                        bisect.insort(self._events, e, key=_key)
                    if events:
                        result.events = (*result.events, *events)
                        self.version += 1
            counts = self._counts_at(spec, counter, frame, time_s)
            self._latest = counts
        result.marks = (*result.marks, ZonesPicture(spec, counts))

    def _counts_at(
        self, spec: ZonesFile, counter: Counter, frame: int, time_s: float
    ) -> LiveCounts:
        crossed: dict[tuple[str, str], int] = {}
        entered: dict[str, int] = {}
        for e in self._events:
            if e.frame > frame:
                break
            if e.kind == "cross":
                crossed[(e.name, e.direction)] = crossed.get((e.name, e.direction), 0) + 1
            elif e.kind == "enter":
                entered[e.name] = entered.get(e.name, 0) + 1
        inside = counter.inside(frame)
        return LiveCounts(
            frame, time_s,
            tuple((s.name, crossed.get((s.name, "in"), 0), crossed.get((s.name, "out"), 0))
                  for s in spec.lines),
            tuple((s.name, inside[k], entered.get(s.name, 0)) for k, s in enumerate(spec.zones)),
        )  # fmt: skip

    def reset(self) -> None:
        """The frames stop following one another (a seek): where tracks were is forgotten."""
        with self._lock:
            if self._counter is not None:
                self._counter.clear()

    # ---- what the window reads (any thread) ------------------------------------------

    def events(self) -> list[Event]:
        """Every event so far, in frame order."""
        with self._lock:
            return list(self._events)

    @property
    def latest(self) -> LiveCounts | None:
        """The counts at the last frame counted."""
        with self._lock:
            return self._latest


class ZonesCounting:
    """A per-source stage feeding ``PlaybackAnalytics`` (core/stages/source_stages.py)."""

    def __init__(self, analytics: PlaybackAnalytics) -> None:
        self.analytics = analytics

    def __call__(self, result: FrameResult) -> None:
        self.analytics.count(result)

    def reset(self) -> None:
        self.analytics.reset()
