"""The heatmap in playback: a heatmap stage after the tracker, its mode changed live.

No Qt. While tracking is on, the player's stages end with a heatmap stage
(core/stages/analytics/heatmap.py) that keeps accumulating whether the heatmap is shown
or not, so showing it (the overlay style's ``heatmap``, Tracking > Show Heatmap)
shows where objects have been since the video was opened or last sought, at once.
``mode`` (accumulate or decay) is read by the stages at every frame: changing it does
not restart the tracker. File > Export gets the same stage after its tracker, so an
export draws the heatmap the window shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from framelens.core.stages.analytics.heatmap import (
    HeatmapMode,
    HeatmapSettings,
    HeatmapStage,
    HeatmapStages,
)
from framelens.core.stages.source_stages import SourceStage, StageFactory, chain_stages
from framelens.core.types import FrameResult

__all__ = ["PlaybackHeatmap"]


class _LiveHeatmapStage(HeatmapStage):
    """A heatmap stage whose settings are its owner's at each frame."""

    def __init__(self, owner: PlaybackHeatmap) -> None:
        super().__init__(owner.settings)
        self._owner = owner

    def __call__(self, result: FrameResult) -> None:
        self.settings = self._owner.settings
        if self.heatmap is not None:
            self.heatmap.settings = self.settings
        super().__call__(result)


class PlaybackHeatmap:
    """The heatmap's settings in playback and the stages that follow the tracker's."""

    def __init__(self, settings: HeatmapSettings | None = None) -> None:
        self.settings = settings or HeatmapSettings()

    @property
    def mode(self) -> HeatmapMode:
        return self.settings.mode

    def set_mode(self, mode: HeatmapMode) -> None:
        """Accumulate or decay from the next frame on (the heat so far kept)."""
        self.settings = replace(self.settings, mode=mode)

    def after(self, stages: StageFactory | None) -> StageFactory | None:
        """The player's ``stages`` (a tracker's; None: tracking off, nothing to map)
        followed by a live heatmap stage per source."""
        if stages is None:
            return None
        tracked = stages

        def chain(source: int) -> Sequence[SourceStage]:
            return [*tracked(source), _LiveHeatmapStage(self)]

        return chain

    def after_export(self, stages: StageFactory | None) -> StageFactory | None:
        """An export's ``stages`` (its tracker's) followed by a heatmap stage with the
        settings of now."""
        if stages is None:
            return None
        return chain_stages(stages, HeatmapStages(self.settings))
