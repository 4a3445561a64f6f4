"""Lines, zones and events from tracks (docs/analytics.md)."""

from framelens.core.stages.analytics.counting import Counter, Event, anchor_points
from framelens.core.stages.analytics.events import (
    EVENT_COLUMNS,
    EVENTS_SUFFIX,
    EventSink,
    EventsWriter,
)
from framelens.core.stages.analytics.stage import AnalyticsStage, AnalyticsStages, Tally
from framelens.core.stages.analytics.zones import (
    ANCHORS,
    LineSpec,
    ZonesFile,
    ZoneSpec,
    load_zones,
    parse_zones,
)

__all__ = [
    "ANCHORS",
    "EVENTS_SUFFIX",
    "EVENT_COLUMNS",
    "AnalyticsStage",
    "AnalyticsStages",
    "Counter",
    "Event",
    "EventSink",
    "EventsWriter",
    "LineSpec",
    "Tally",
    "ZoneSpec",
    "ZonesFile",
    "anchor_points",
    "load_zones",
    "parse_zones",
]
