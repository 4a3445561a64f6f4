"""Tracks scored against ground truth: HOTA, DetA, AssA, IDF1, MOTA, ID switches, ...

Every number is TrackEval's (github.com/JonathonLuiten/TrackEval, the MOT Challenge's
own evaluation code): its metric classes HOTA, CLEAR and Identity are run on the
sequences in memory, with its box IoU as the similarity, so no metric is computed here.
The MOT Challenge conventions hold: a box matches at IoU >= 0.5 (CLEAR, Identity), HOTA
averages over the IoU thresholds 0.05, 0.10, ..., 0.95, ground-truth rows marked "not
considered" are left out (core/stages/tracking/mot.py ``read_ground_truth``), and every
frame from the first to the last either file names is a frame of the sequence.

The errors over time (false positives, misses and ID switches per frame, for the
report's plot; asked for with ``error_spans``) are TrackEval's CLEAR counts too: CLEAR's
counting is causal, so the counts of frames up to t are CLEAR run on those frames, and a
frame's (or a span's) own counts are differences of such totals. That runs CLEAR once per
span over ever longer prefixes, so long sequences get fewer, longer spans
(``ERROR_SPAN_BUDGET``).
"""

from __future__ import annotations

import contextlib
import io
import itertools
from dataclasses import asdict, dataclass
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt
from framelens.core.errors import ConfigError
from framelens.core.stages.tracking.mot import MotSequence

__all__ = [
    "ERROR_SPANS",
    "ERROR_SPAN_BUDGET",
    "MATCH_IOU",
    "ErrorsOverTime",
    "TrackEvaluation",
    "TrackScores",
    "evaluate_tracks",
]

MATCH_IOU = 0.5
"""The IoU a track's box needs to match a ground-truth box (CLEAR and Identity)."""

ERROR_SPANS = 100
"""At most this many spans of frames in ErrorsOverTime (each frame its own up to this)."""

ERROR_SPAN_BUDGET = 300_000
"""Spans x frames at most (about 10 s of CLEAR here): a sequence of T frames gets at most
this / T spans, and never fewer than 10."""


@dataclass(frozen=True, slots=True)
class TrackScores:
    """One sequence's scores (fractions from 0 to 1, counts as integers).

    HOTA family (TrackEval's HOTA, averaged over the IoU thresholds 0.05 to 0.95):
        hota, deta (detection accuracy), assa (association accuracy), detre, detpr,
        assre, asspr (their recall and precision parts), loca (localisation).
    Identity (IoU >= 0.5): idf1, idp, idr; idtp, idfp, idfn.
    CLEAR MOT (IoU >= 0.5): mota, motp (mean IoU of matches), moda, recall, precision;
        true_positives, false_positives, false_negatives, id_switches, fragmentations,
        mostly_tracked, partially_tracked, mostly_lost (ground-truth objects tracked for
        over 80%, 20 to 80%, under 20% of their life).
    The sizes: frames, gt_objects, gt_boxes, tracks, track_boxes.
    """

    hota: float
    deta: float
    assa: float
    detre: float
    detpr: float
    assre: float
    asspr: float
    loca: float
    idf1: float
    idp: float
    idr: float
    mota: float
    motp: float
    moda: float
    recall: float
    precision: float
    idtp: int
    idfp: int
    idfn: int
    true_positives: int
    false_positives: int
    false_negatives: int
    id_switches: int
    fragmentations: int
    mostly_tracked: int
    partially_tracked: int
    mostly_lost: int
    frames: int
    gt_objects: int
    gt_boxes: int
    tracks: int
    track_boxes: int

    def as_json(self) -> dict[str, float | int]:
        """Plain numbers (fractions rounded to 6 decimals), in the fields' order."""
        return {k: round(v, 6) if isinstance(v, float) else v for k, v in asdict(self).items()}


@dataclass(frozen=True, slots=True)
class ErrorsOverTime:
    """CLEAR's errors per span of frames: span k covers frames ``starts[k]`` to
    ``ends[k]`` (from 1, inclusive); one frame a span when the sequence is short
    (ERROR_SPANS, ERROR_SPAN_BUDGET)."""

    starts: tuple[int, ...]
    ends: tuple[int, ...]
    false_positives: tuple[int, ...]
    false_negatives: tuple[int, ...]
    id_switches: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TrackEvaluation:
    """Tracks against ground truth: the scores, HOTA's curves over its IoU thresholds
    (``alphas``), the errors over time (None unless asked for), and which files (or
    sources) were compared."""

    scores: TrackScores
    alphas: tuple[float, ...]
    hota_by_alpha: tuple[float, ...]
    deta_by_alpha: tuple[float, ...]
    assa_by_alpha: tuple[float, ...]
    loca_by_alpha: tuple[float, ...]
    errors: ErrorsOverTime | None
    tracks_path: str
    gt_path: str

    def as_json(self) -> dict[str, Any]:
        """What ``framelens evaluate`` prints: the files, the scores, the curves."""
        return {
            "tracks": self.tracks_path,
            "ground_truth": self.gt_path,
            "match_iou": MATCH_IOU,
            "metrics": self.scores.as_json(),
            "hota_by_alpha": {
                f"{a:.2f}": round(v, 6)
                for a, v in zip(self.alphas, self.hota_by_alpha, strict=True)
            },
            "computed_by": f"TrackEval {_trackeval().__version__} (HOTA, CLEAR, Identity)",
        }


_TRACKEVAL: ModuleType | None = None


def _trackeval() -> ModuleType:
    """TrackEval, imported once and quietly: its package import prints a line about an
    optional dataset loader (BURST, which needs pycocotools) on stdout, where
    ``framelens evaluate`` writes its JSON."""
    global _TRACKEVAL
    if _TRACKEVAL is None:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                import trackeval
        except ImportError as exc:  # pragma: no cover - installed with FrameLens
            raise ConfigError(f"evaluation needs TrackEval: {exc}") from None
        _TRACKEVAL = trackeval
    return _TRACKEVAL


def _box_ious(gt: npt.NDArray[np.float64], tracks: npt.NDArray[np.float64]) -> Any:
    """TrackEval's own IoU of left, top, width, height boxes (gt rows, track columns)."""
    from trackeval.datasets._base_dataset import _BaseDataset

    return _BaseDataset._calculate_box_ious(gt.copy(), tracks.copy(), box_format="xywh")


def _sequence_data(tracks: MotSequence, ground_truth: MotSequence) -> dict[str, Any]:
    """The sequence as TrackEval's metrics take it: per frame the IDs (numbered from 0
    in each file) and the similarity of every ground-truth box to every track box."""
    frames = max(len(tracks.frames), len(ground_truth.frames))
    gt_index = {v: i for i, v in enumerate(ground_truth.track_ids)}
    tr_index = {v: i for i, v in enumerate(tracks.track_ids)}
    gt_ids, tr_ids, similarity = [], [], []
    empty = np.zeros((0, 4), np.float64)
    for k in range(frames):
        gt = ground_truth.frames[k] if k < len(ground_truth.frames) else None
        tr = tracks.frames[k] if k < len(tracks.frames) else None
        gt_ids.append(np.array([gt_index[int(i)] for i in gt.ids] if gt else [], np.int64))
        tr_ids.append(np.array([tr_index[int(i)] for i in tr.ids] if tr else [], np.int64))
        similarity.append(_box_ious(gt.boxes if gt else empty, tr.boxes if tr else empty))
    return {
        "num_timesteps": frames,
        "num_gt_ids": len(gt_index),
        "num_tracker_ids": len(tr_index),
        "num_gt_dets": sum(len(i) for i in gt_ids),
        "num_tracker_dets": sum(len(i) for i in tr_ids),
        "gt_ids": gt_ids,
        "tracker_ids": tr_ids,
        "similarity_scores": similarity,
    }


def _prefix(data: dict[str, Any], frames: int) -> dict[str, Any]:
    """The first ``frames`` frames of a sequence (IDs keep their numbering)."""
    out = dict(data)
    for key in ("gt_ids", "tracker_ids", "similarity_scores"):
        out[key] = data[key][:frames]
    out["num_timesteps"] = frames
    out["num_gt_dets"] = sum(len(i) for i in out["gt_ids"])
    out["num_tracker_dets"] = sum(len(i) for i in out["tracker_ids"])
    return out


def _errors_over_time(clear: Any, data: dict[str, Any], spans: int) -> ErrorsOverTime:
    frames = int(data["num_timesteps"])
    spans = min(spans, max(10, ERROR_SPAN_BUDGET // max(frames, 1)))
    ends = sorted({max(1, round(frames * (k + 1) / spans)) for k in range(spans)}) if frames else []
    totals = [(0, 0, 0)]
    for end in ends:
        res = clear.eval_sequence(_prefix(data, end))
        totals.append((int(res["CLR_FP"]), int(res["CLR_FN"]), int(res["IDSW"])))
    diffs = [tuple(b[i] - a[i] for i in range(3)) for a, b in itertools.pairwise(totals)]
    return ErrorsOverTime(
        starts=tuple([1, *(e + 1 for e in ends[:-1])]) if ends else (),
        ends=tuple(ends),
        false_positives=tuple(d[0] for d in diffs),
        false_negatives=tuple(d[1] for d in diffs),
        id_switches=tuple(d[2] for d in diffs),
    )


def _mean(values: Any) -> float:
    return float(np.mean(values))


def evaluate_tracks(
    tracks: MotSequence, ground_truth: MotSequence, *, error_spans: int = 0
) -> TrackEvaluation:
    """Score ``tracks`` (core/stages/tracking/mot.py ``read_tracks_file``, or a
    tracker's frames) against ``ground_truth`` (``read_ground_truth``; or another
    tracker's tracks, for agreement between two). Boxes with ID -1 are not tracks and
    are left out. ``error_spans`` > 0: also the errors over time, in at most that many
    spans of frames (ERROR_SPANS for a report; it costs more than the scores)."""
    if error_spans < 0:
        raise ConfigError("error_spans must not be negative")
    trackeval = _trackeval()
    data = _sequence_data(tracks.only_tracked(), ground_truth.only_tracked())
    hota_metric = trackeval.metrics.HOTA()
    clear_metric = trackeval.metrics.CLEAR({"THRESHOLD": MATCH_IOU, "PRINT_CONFIG": False})
    identity_metric = trackeval.metrics.Identity({"THRESHOLD": MATCH_IOU, "PRINT_CONFIG": False})
    hota = hota_metric.eval_sequence(data)
    clear = clear_metric.eval_sequence(data)
    identity = identity_metric.eval_sequence(data)
    scores = TrackScores(
        hota=_mean(hota["HOTA"]),
        deta=_mean(hota["DetA"]),
        assa=_mean(hota["AssA"]),
        detre=_mean(hota["DetRe"]),
        detpr=_mean(hota["DetPr"]),
        assre=_mean(hota["AssRe"]),
        asspr=_mean(hota["AssPr"]),
        loca=_mean(hota["LocA"]),
        idf1=float(identity["IDF1"]),
        idp=float(identity["IDP"]),
        idr=float(identity["IDR"]),
        mota=float(clear["MOTA"]),
        motp=float(clear["MOTP"]),
        moda=float(clear["MODA"]),
        recall=float(clear["CLR_Re"]),
        precision=float(clear["CLR_Pr"]),
        idtp=int(identity["IDTP"]),
        idfp=int(identity["IDFP"]),
        idfn=int(identity["IDFN"]),
        true_positives=int(clear["CLR_TP"]),
        false_positives=int(clear["CLR_FP"]),
        false_negatives=int(clear["CLR_FN"]),
        id_switches=int(clear["IDSW"]),
        fragmentations=int(clear["Frag"]),
        mostly_tracked=int(clear["MT"]),
        partially_tracked=int(clear["PT"]),
        mostly_lost=int(clear["ML"]),
        frames=int(data["num_timesteps"]),
        gt_objects=int(data["num_gt_ids"]),
        gt_boxes=int(data["num_gt_dets"]),
        tracks=int(data["num_tracker_ids"]),
        track_boxes=int(data["num_tracker_dets"]),
    )
    return TrackEvaluation(
        scores=scores,
        alphas=tuple(round(float(a), 2) for a in hota_metric.array_labels),
        hota_by_alpha=tuple(float(v) for v in hota["HOTA"]),
        deta_by_alpha=tuple(float(v) for v in hota["DetA"]),
        assa_by_alpha=tuple(float(v) for v in hota["AssA"]),
        loca_by_alpha=tuple(float(v) for v in hota["LocA"]),
        errors=_errors_over_time(clear_metric, data, error_spans) if error_spans else None,
        tracks_path=tracks.path,
        gt_path=ground_truth.path,
    )
