"""Tracks in a comparison: does another precision (or model) change the tracks?

When a comparison tracks (every pane its own tracker, core/stages/tracking), each pane's
tracks over the frames compared are scored twice with core/stages/tracking/evaluation.py
``evaluate_tracks`` (TrackEval's HOTA, CLEAR and Identity):

- against the reference pane's tracks, taken as ground truth: how many ID switches the
  pane's tracks make where the reference's keep one ID, and how well its tracks agree
  with the reference's (IDF1; HOTA and AssA, HOTA's association part). The reference
  agrees with itself (IDF1 1, no switch), as it does in the detection agreement;
- against ground truth, when one is given: HOTA, IDF1, MOTA and ID switches. Its frames
  count from the comparison's first frame (frame 1 = the first frame compared); frames
  past the last compared are left out.

Only boxes of a confirmed track (ID >= 1) count. A pane's frames are the MotFrames its
tracker gave (``pane_tracks``), kept per frame by records.py. The trackers' package
(and SciPy, TrackEval) is imported only when a comparison tracks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from framelens.core.types import Detections

if TYPE_CHECKING:
    from framelens.core.stages.tracking.evaluation import TrackScores
    from framelens.core.stages.tracking.mot import MotFrame, MotSequence

__all__ = ["GT_KEYS", "TRACK_KEYS", "pane_tracks", "track_count", "tracks_summary"]

TRACK_KEYS = ("tracks", "id_switches", "idf1", "hota", "assa")
"""What each variant's "tracking" holds against the reference (``tracks`` is its own)."""

GT_KEYS = ("hota", "idf1", "mota", "id_switches")
"""What each variant's "tracking" holds against ground truth ("ground_truth")."""


def pane_tracks(output: object, number: int) -> MotFrame | None:
    """A pane's tracked boxes on one frame (``number`` counted from 1); None when no
    tracker ran on it (its output has no track IDs)."""
    if not isinstance(output, Detections) or output.track_ids is None:
        return None
    from framelens.core.stages.tracking.mot import MotFrame

    return MotFrame.from_detections(number, output)


def _sequence(label: str, frames: Sequence[MotFrame | None]) -> MotSequence:
    """``frames`` (one per frame compared, in order) as a sequence from frame 1."""
    from framelens.core.stages.tracking.mot import MotFrame, MotSequence

    numbered = tuple(
        MotFrame(k + 1) if f is None else dataclasses.replace(f, number=k + 1)
        for k, f in enumerate(frames)
    )
    return MotSequence(label, "mot", numbered)


def track_count(frames: Sequence[MotFrame | None]) -> int:
    """How many tracks (distinct IDs) ``frames`` hold."""
    ids = [f.ids for f in frames if f is not None and len(f)]
    return len(np.unique(np.concatenate(ids))) if ids else 0


def _rounded(value: float | int) -> float | int:
    return round(value, 4) if isinstance(value, float) else value


def _scores(scores: TrackScores, keys: Sequence[str]) -> dict[str, float | int]:
    return {k: _rounded(getattr(scores, k)) for k in keys}


def tracks_summary(
    labels: Sequence[str],
    reference: int,
    frames: Sequence[Sequence[MotFrame | None]],
    ground_truth: MotSequence | None = None,
) -> list[dict[str, Any]]:
    """Each pane's "tracking" entry of summary.json; ``frames[pane]``: its tracked boxes
    on every frame compared, in order.

    ``{"tracks": n, "id_switches", "idf1", "hota", "assa"}`` against the reference's
    tracks (null when neither pane has a track: nothing to agree on), and with
    ``ground_truth`` ``"ground_truth": {"hota", "idf1", "mota", "id_switches"}``.
    """
    from framelens.core.stages.tracking.evaluation import evaluate_tracks

    ref = _sequence(labels[reference], frames[reference])
    truth = None
    if ground_truth is not None:
        n = len(frames[reference])  # the frames compared, no more
        truth = dataclasses.replace(ground_truth, frames=ground_truth.frames[:n])
    out: list[dict[str, Any]] = []
    for label, pane in zip(labels, frames, strict=True):
        seq = _sequence(label, pane)
        entry: dict[str, Any] = {"tracks": track_count(pane)}
        if seq.num_boxes or ref.num_boxes:
            agreement = evaluate_tracks(seq, ref, error_spans=1).scores
            entry |= _scores(agreement, TRACK_KEYS[1:])
        else:
            entry |= dict.fromkeys(TRACK_KEYS[1:])
        if truth is not None:
            against_truth = evaluate_tracks(seq, truth, error_spans=1).scores
            entry["ground_truth"] = _scores(against_truth, GT_KEYS)
        out.append(entry)
    return out
