"""Tracking in playback: which tracker the player's stages run, and the log of its tracks.

No Qt. The window's Tracking menu chooses a tracker (or none); ``stages`` turns that into
the player's per-source stage factory: the tracker's stages
(core/stages/tracking/stage.py), then the stage that feeds ``log`` (the track list's
rows, core/stages/tracking/track_log.py), then the lines and zones counted live
(``analytics``, core/sessions/playback/analytics.py). File > Export gets the tracker's
stages and a counting of its own (``export_stages``), so an export tracks, counts and
draws the lines and zones as the window does without touching its list or its counts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from framelens.core.errors import ConfigError
from framelens.core.sessions.playback.analytics import PlaybackAnalytics
from framelens.core.sessions.tracks import TrackStages
from framelens.core.stages.analytics.stage import AnalyticsStages
from framelens.core.stages.source_stages import SourceStage, StageFactory, chain_stages
from framelens.core.stages.tracking.settings import TrackerSettings
from framelens.core.stages.tracking.stage import tracking_stages
from framelens.core.stages.tracking.track_log import TrackLog, TrackLogStage

__all__ = ["PlaybackTracking", "StageMaker"]

StageMaker = Callable[[TrackerSettings], StageFactory]
"""A tracker's per-source stages from its settings."""


class PlaybackTracking:
    """The tracker chosen for playback and its track log."""

    def __init__(
        self, make: StageMaker | None = None, analytics: PlaybackAnalytics | None = None
    ) -> None:
        self._make: StageMaker = make or tracking_stages
        self.settings: TrackerSettings | None = None  # None: tracking off
        self.log = TrackLog()
        self.analytics = analytics if analytics is not None else PlaybackAnalytics()

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
        log, analytics = self.log, self.analytics

        def log_and_counts(source: int) -> Sequence[SourceStage]:
            del source
            return [TrackLogStage(log), analytics.stage()]

        # chained: the chain readies the tracker's code (prepare) on the player's thread
        return chain_stages(trackers, log_and_counts)

    def export_stages(self, *, zones: bool = False) -> StageFactory | None:
        """An export's or the wall's stages: the chosen tracker's, each source's made at
        that source's own frame rate (a wall's tiles differ), None when tracking is off;
        with ``zones`` (an export of the video playing), its lines and zones counted and
        drawn after the tracker, from the export's first frame."""
        if self.settings is None:
            return None
        tracking = TrackStages(self.settings, make=self._make)
        spec = self.analytics.spec
        if not zones or not spec:
            return tracking
        return chain_stages(tracking, AnalyticsStages(spec, self.analytics.labels, draw=True))
