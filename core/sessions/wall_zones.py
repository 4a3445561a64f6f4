"""Lines and zones on the video wall: each tile its own, counted by its own stage.

    zones_of(spec)              a video's own zones file, the one the window saves beside
                                it (``clip.mp4.zones.json``; None for a camera, a
                                stream, or none there)
    wall_zones(specs, shared)   each source's ZonesFile: ``shared`` (one file for every
                                tile) when given, else its own beside it; with the
                                one-line reasons of the files that could not be used
    WallZones(zones, labels)    the stage factory: source ``n`` gets an AnalyticsStage of
                                ``zones[n]`` (none without), drawn (its lines and zones
                                with their live counts on each result, for the tile)
    wall_stages(tracking, z)    the wall's stages: the tracker, then the lines and zones

A tile's counts are its own source's: every source has its own tracker (TrackStages) and
its own counter, so two tiles never share a track or a count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from framelens.core.errors import FrameLensError, error_message
from framelens.core.sessions.tracks import TrackStages
from framelens.core.stages.analytics.stage import AnalyticsStage
from framelens.core.stages.analytics.zones import ZonesFile, load_zones, zones_beside
from framelens.core.stages.source_stages import SourceStage, StageFactory, chain_stages
from framelens.core.stages.sources import names_a_file
from framelens.core.stages.tracking.settings import TrackerSettings

__all__ = ["WallZones", "wall_stages", "wall_zones", "zones_of"]


def zones_of(spec: str) -> Path | None:
    """The zones file the window keeps beside the video file ``spec``
    (``clip.mp4.zones.json``), if there is one."""
    if not names_a_file(spec):
        return None
    beside = zones_beside(spec)
    return beside if beside.is_file() else None


def wall_zones(
    specs: Sequence[str],
    shared: str | None = None,
    labels: Mapping[int, str] | Sequence[str] | None = None,
) -> tuple[tuple[ZonesFile | None, ...], list[str]]:
    """Each source's lines and zones (None: none), and one line for each file that
    could not be used (its tile then counts nothing): ``shared`` for every tile, else
    each video's own (``zones_of``)."""
    problems: list[str] = []
    loaded: dict[str, ZonesFile | None] = {}
    out: list[ZonesFile | None] = []
    for spec in specs:
        path = shared if shared is not None else zones_of(spec)
        if path is None:
            out.append(None)
            continue
        key = str(path)
        if key not in loaded:
            try:
                loaded[key] = load_zones(path, labels) or None
            except FrameLensError as exc:
                loaded[key] = None
                problems.append(error_message(exc))
        out.append(loaded[key])
    return tuple(out), problems


@dataclass(frozen=True)
class WallZones:
    """The wall's analytics stages: tile ``n`` counts ``zones[n]`` (picklable)."""

    zones: tuple[ZonesFile | None, ...]
    labels: Mapping[int, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return any(z is not None for z in self.zones)

    def __call__(self, number: int) -> Sequence[SourceStage]:
        spec = self.zones[number] if number < len(self.zones) else None
        return [] if spec is None else [AnalyticsStage(spec, self.labels, draw=True)]


def wall_stages(tracking: StageFactory | None, zones: WallZones | None) -> StageFactory | None:
    """The wall's per-source stages: the window's tracking (``tracking``), then each
    tile's lines and zones; lines and zones count tracks, so with tracking off a tile
    with zones is tracked with ByteTrack (the default tracker)."""
    if zones is None or not zones:
        return tracking
    if tracking is None:
        tracking = TrackStages(TrackerSettings())
    return chain_stages(tracking, zones)
