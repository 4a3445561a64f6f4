"""What a comparison keeps: one row per frame and pane, totals per pane, the summary.

The summary is the content of summary.json::

    {"reference": "fp32",
     "variants": {"fp32": {...}, "fp16": {
         "latency_ms_median",   # inference stage alone, median over frames
         "e2e_ms_median",       # decode + preprocess + inference + postprocess (+ draw)
         "fps",                 # frames / total e2e time: the pane's rate on its own
         "f1", "precision", "recall", "mean_iou", "mean_score_diff",  # vs the reference
         "tp", "fp", "fn",      # the sums behind precision/recall/F1
         "psnr_db", "ssim",     # mean image agreement; null for detection panes
         "model", "precision_mode", "backend", "device", "conf",  # what the pane ran
         "tracking",            # only when the panes tracked: see tracks.py
         "analytics"},          # only when they tracked and counted lines and zones:
       ...},                    # see events.py
     "frames", "match_iou", ...metadata given by the caller
     "ground_truth",            # only with ground truth: its file, and which of its
     "ground_truth_protocol",   # rows count (evaluation.py: MOT17's preprocessing ...)
     "zones", "event_tolerance_frames"}  # only with lines and zones: their names

The reference is listed among the variants (agreeing with itself). Undefined values
(NaN: a mean over no matched pair) are written as null, and so is an infinite PSNR
(identical images; their SSIM is then 1).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from framelens.core.pipeline.compare.events import EVENT_TOLERANCE, PaneFrame, events_summary
from framelens.core.pipeline.compare.panes import MATCH_IOU, CompareStep, PaneSpec
from framelens.core.pipeline.compare.tracks import pane_tracks, tracks_summary
from framelens.core.stages.tasks.detect.agreement import AgreementTotals, FrameMatch

if TYPE_CHECKING:
    from framelens.core.stages.analytics.counting import Event
    from framelens.core.stages.analytics.zones import ZonesFile
    from framelens.core.stages.tracking.mot import MotFrame, MotSequence

__all__ = ["VARIANT_KEYS", "CompareLog", "FrameRow", "PaneRow", "frame_row"]

VARIANT_KEYS = (
    "latency_ms_median",
    "e2e_ms_median",
    "fps",
    "f1",
    "precision",
    "recall",
    "mean_iou",
    "mean_score_diff",
)
"""The keys every variant of summary.json has (the issue's schema); more may follow."""


@dataclass(frozen=True, slots=True)
class PaneRow:
    """One pane on one frame; ``tracks``: its tracked boxes when it tracked, else None."""

    detections: int
    tp: int
    fp: int
    fn: int
    inference_ms: float
    e2e_ms: float
    psnr_db: float | None = None
    ssim: float | None = None
    tracks: MotFrame | None = None

    @property
    def f1(self) -> float:
        """This frame's F1 against the reference; 1 when neither side found anything."""
        denominator = 2 * self.tp + self.fp + self.fn
        return 2 * self.tp / denominator if denominator else 1.0


@dataclass(frozen=True, slots=True)
class FrameRow:
    index: int
    pts: float
    panes: tuple[PaneRow, ...]


def frame_row(step: CompareStep) -> tuple[FrameRow, tuple[FrameMatch, ...]]:
    """What a log keeps of one step (no images): its row, and each pane's match."""
    panes = []
    for pane in step.panes:
        t = pane.times
        panes.append(
            PaneRow(
                detections=len(pane.result.output),
                tp=pane.match.tp,
                fp=pane.match.fp,
                fn=pane.match.fn,
                inference_ms=t.inference,
                e2e_ms=t.e2e,
                psnr_db=pane.image.psnr_db if pane.image else None,
                ssim=pane.image.ssim if pane.image else None,
                tracks=pane_tracks(pane.result.output, step.frame.index + 1),
            )
        )
    row = FrameRow(step.frame.index, step.frame.pts, tuple(panes))
    return row, tuple(pane.match for pane in step.panes)


def _number(value: float | None, digits: int) -> float | None:
    """A JSON-safe rounded number: NaN and infinities become None."""
    if value is None or not math.isfinite(value):
        return None
    return round(value, digits)


def _median(values: Sequence[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return statistics.median(finite) if finite else math.nan


def _mean(values: Sequence[float | None]) -> float | None:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.fmean(finite) if finite else None


class CompareLog:
    """Collects a comparison's steps (pass it as ``on_step``) and summarises them.

    It keeps its own totals, so a GUI resetting the runner's running agreement
    (after a seek) does not change what the log reports. ``ground_truth``: the
    comparison's tracks are also scored against it (frame 1 = the first frame logged).
    ``zones``: each pane's tracks are counted against these lines and zones, and its
    events held against the reference's, as the same within ``event_tolerance`` frames
    (events.py).
    """

    def __init__(
        self,
        specs: Sequence[PaneSpec],
        reference: int,
        ground_truth: MotSequence | None = None,
        zones: ZonesFile | None = None,
        event_tolerance: int = EVENT_TOLERANCE,
    ) -> None:
        self.notes: list[str] = []  # what happened on the way (a pane's GPU failing)
        self.specs = tuple(specs)
        self.reference = reference
        self.ground_truth = ground_truth
        self.rows: list[FrameRow] = []
        self.totals = [AgreementTotals() for _ in self.specs]
        self.zones = zones
        self.event_tolerance = event_tolerance
        self._counted: tuple[int, list[dict[str, Any]], list[list[Event]]] | None = None

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(s.label for s in self.specs)

    @property
    def reference_label(self) -> str:
        return self.specs[self.reference].label

    @property
    def has_images(self) -> bool:
        """True when the panes output images, so PSNR/SSIM were measured."""
        return any(p.ssim is not None for r in self.rows for p in r.panes)

    @property
    def tracked(self) -> bool:
        """True when the panes tracked (their boxes have track IDs)."""
        return any(p.tracks is not None for r in self.rows for p in r.panes)

    def __call__(self, step: CompareStep) -> None:
        self.add(*frame_row(step))

    def add(self, row: FrameRow, matches: Sequence[FrameMatch]) -> None:
        """One frame kept earlier (frame_row): its row, and each pane's match for the totals."""
        for totals, match in zip(self.totals, matches, strict=True):
            totals.add(match)
        self.rows.append(row)

    def pane_rows(self, pane: int) -> list[PaneRow]:
        return [r.panes[pane] for r in self.rows]

    @property
    def counted(self) -> bool:
        """True when the panes tracked and lines and zones were given: events counted."""
        return self.zones is not None and self.tracked

    def analytics(self) -> tuple[list[dict[str, Any]], list[list[Event]]]:
        """Each pane's "analytics" entry (events.py) and its events, over the rows so
        far (computed once per number of rows); empty lists when nothing is counted."""
        if self.zones is None or not self.tracked:
            return [], []
        if self._counted is None or self._counted[0] != len(self.rows):
            frames = [
                [PaneFrame(r.index, r.pts, r.panes[i].tracks) for r in self.rows]
                for i in range(len(self.specs))
            ]
            labels = [dict(enumerate(s.settings.model.labels)) for s in self.specs]
            entries, events = events_summary(
                frames, self.reference, self.zones, labels, self.event_tolerance
            )
            self._counted = (len(self.rows), entries, events)
        return self._counted[1], self._counted[2]

    def variant(self, pane: int) -> dict[str, Any]:
        """One entry of summary.json's "variants"."""
        rows = self.pane_rows(pane)
        totals = self.totals[pane]
        e2e_total_s = sum(r.e2e_ms for r in rows if not math.isnan(r.e2e_ms)) / 1000.0
        s = self.specs[pane].settings
        return {
            "latency_ms_median": _number(_median([r.inference_ms for r in rows]), 3),
            "e2e_ms_median": _number(_median([r.e2e_ms for r in rows]), 3),
            "fps": _number(len(rows) / e2e_total_s if e2e_total_s > 0 else math.nan, 2),
            "f1": _number(totals.f1, 4),
            "precision": _number(totals.precision, 4),
            "recall": _number(totals.recall, 4),
            "mean_iou": _number(totals.mean_iou, 4),
            "mean_score_diff": _number(totals.mean_score_diff, 4),
            "tp": totals.tp,
            "fp": totals.fp,
            "fn": totals.fn,
            "psnr_db": _number(_mean([r.psnr_db for r in rows]), 3),
            "ssim": _number(_mean([r.ssim for r in rows]), 4),
            "model": s.model.name,
            "precision_mode": s.precision,
            "backend": s.backend,
            "device": s.device,
            "conf": getattr(s.params, "conf", None),
        }

    def summary(self, **meta: Any) -> dict[str, Any]:
        """summary.json's content (see the module doc); ``meta`` keys are appended."""
        variants = {label: self.variant(i) for i, label in enumerate(self.labels)}
        if self.tracked:
            frames = [[r.tracks for r in self.pane_rows(i)] for i in range(len(self.labels))]
            scored = tracks_summary(self.labels, self.reference, frames, self.ground_truth)
            for variant, tracking in zip(variants.values(), scored, strict=True):
                variant["tracking"] = tracking
        counted: dict[str, Any] = {}
        if self.counted and self.zones is not None:
            entries, _ = self.analytics()
            for variant, analytics in zip(variants.values(), entries, strict=True):
                variant["analytics"] = analytics
            names = [s.name for s in self.zones.lines] + [s.name for s in self.zones.zones]
            counted = {"zones": names, "event_tolerance_frames": self.event_tolerance}
        truth: dict[str, str] = {}
        if self.ground_truth is not None:
            from framelens.core.stages.tracking.evaluation import protocol_text

            truth = {
                "ground_truth": self.ground_truth.path,
                "ground_truth_protocol": protocol_text(self.ground_truth),
            }
        return {
            "reference": self.reference_label,
            "variants": variants,
            "frames": len(self.rows),
            "match_iou": MATCH_IOU,
            **truth,
            **counted,
            **meta,
        }
