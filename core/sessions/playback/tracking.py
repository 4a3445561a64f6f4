"""Tracking in playback: which tracker the player's stages run, and the log of its tracks.

No Qt. The window's Tracking menu chooses a tracker (or none); ``stages`` turns that into
the player's per-source stage factory: the tracker's stages
(core/stages/tracking/stage.py), then the stage that feeds ``log`` (the track list's
rows, core/stages/tracking/track_log.py). File > Export gets the tracker's stages only
(``export_stages``), so an export tracks as the window does without touching its list.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from framelens.core.errors import ConfigError
from framelens.core.sessions.tracks import TrackStages
from framelens.core.stages.source_stages import SourceStage, StageFactory
from framelens.core.stages.tracking.settings import TrackerSettings
from framelens.core.stages.tracking.stage import tracking_stages
from framelens.core.stages.tracking.track_log import TrackLog, TrackLogStage

__all__ = ["PlaybackTracking", "StageMaker"]

StageMaker = Callable[[TrackerSettings], StageFactory]
"""A tracker's per-source stages from its settings."""


class PlaybackTracking:
    """The tracker chosen for playback and its track log."""

    def __init__(self, make: StageMaker | None = None) -> None:
        self._make: StageMaker = make or tracking_stages
        self.settings: TrackerSettings | None = None  # None: tracking off
        self.log = TrackLog()

    def stages(self, settings: TrackerSettings | None) -> StageFactory | None:
        """The player's stages for ``settings`` (None: tracking off, no stages); the log
        starts afresh with the first frame they see. ConfigError (nothing changed) for a
        tracker that cannot be made here."""
        if settings is None:
            self.settings = None
            self.log.clear()
            return None
        trackers = self._make(settings)
        try:
            trackers(0)  # one made now: a tracker that cannot run says so here, not later
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.settings = settings
        log = self.log

        def chain(source: int) -> Sequence[SourceStage]:
            return [*trackers(source), TrackLogStage(log)]

        return chain

    def export_stages(self) -> StageFactory | None:
        """An export's or the wall's stages: the chosen tracker's, each source's made at
        that source's own frame rate (a wall's tiles differ), None when tracking is off."""
        if self.settings is None:
            return None
        return TrackStages(self.settings, make=self._make)
