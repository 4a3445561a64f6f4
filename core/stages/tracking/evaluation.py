"""Tracks scored against ground truth: HOTA, DetA, AssA, IDF1, MOTA, ID switches, ...

Every number is TrackEval's (github.com/JonathonLuiten/TrackEval, the MOT Challenge's
own evaluation code): its metric classes HOTA, CLEAR and Identity are run on the
sequences in memory, with its box IoU as the similarity, so no metric is computed here.
The MOT Challenge conventions hold: a box matches at IoU >= 0.5 (CLEAR, Identity), HOTA
averages over the IoU thresholds 0.05, 0.10, ..., 0.95, and every frame from the first
to the last either file names is a frame of the sequence.

Which ground-truth rows count is the MOT Challenge's own preprocessing, run by TrackEval's
MotChallenge2DBox dataset (``get_preprocessed_seq_data``) on the sequence in memory, so the
numbers are those of the official evaluation (the ``protocol``):

- MOT16/17/20 ground truth (a class on each line, core/stages/tracking/mot.py): in each
  frame the track boxes are matched (Hungarian, IoU >= 0.5) to every ground-truth box,
  those matched to a distractor (2 person on vehicle, 7 static person, 8 distractor,
  12 reflection; on MOT20 also 6 non-MOT vehicle) are removed, and only the rows of
  class 1 (pedestrian) not marked "not considered" (7th field 0) are counted. A class
  outside MOT Challenge's 1 to 13 is an error (TrackEval's check, here on every frame).
  Which benchmark (MOT20 or the MOT16/17 rules) is guessed from the ground truth's path
  unless given; ``preprocess=False`` is TrackEval's DO_PREPROC off: every considered row
  counts, whatever its class, and no track box is removed.
- MOT15 ground truth (no class): the rows marked "not considered" are left out, nothing
  else (TrackEval does no preprocessing for MOT15).
- Tracks taken as ground truth (a comparison's reference pane): every box counts.

The errors over time (false positives, misses and ID switches per frame, for the
report's plot; asked for with ``error_spans``) are TrackEval's CLEAR counts too: CLEAR's
counting is causal, so the counts of frames up to t are CLEAR run on those frames, and a
frame's (or a span's) own counts are differences of such totals. That runs CLEAR once per
span over ever longer prefixes, so long sequences get fewer, longer spans
(``ERROR_SPAN_BUDGET``).
"""

from __future__ import annotations

import contextlib
import functools
import io
import itertools
import re
from dataclasses import asdict, dataclass
from types import ModuleType
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from framelens.core.errors import ConfigError, TrackFileError
from framelens.core.stages.tracking.mot import MotFrame, MotSequence

__all__ = [
    "BENCHMARKS",
    "ERROR_SPANS",
    "ERROR_SPAN_BUDGET",
    "MATCH_IOU",
    "ErrorsOverTime",
    "TrackEvaluation",
    "TrackScores",
    "evaluate_tracks",
    "guess_benchmark",
    "protocol_text",
]

Benchmark = Literal["MOT16", "MOT17", "MOT20"]
BENCHMARKS: tuple[Benchmark, ...] = ("MOT16", "MOT17", "MOT20")
"""The MOT Challenge benchmarks whose ground truth has classes (their preprocessing)."""

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
    sources) were compared, and which ground-truth rows counted (``protocol``: see the
    module doc)."""

    scores: TrackScores
    alphas: tuple[float, ...]
    hota_by_alpha: tuple[float, ...]
    deta_by_alpha: tuple[float, ...]
    assa_by_alpha: tuple[float, ...]
    loca_by_alpha: tuple[float, ...]
    errors: ErrorsOverTime | None
    tracks_path: str
    gt_path: str
    protocol: str
    classes: tuple[str, ...] = ()  # the tracks' classes scored (none named: all of them)

    def as_json(self) -> dict[str, Any]:
        """What ``framelens evaluate`` prints: the files, the scores, the curves."""
        return {
            "tracks": self.tracks_path,
            **({"tracks_classes": list(self.classes)} if self.classes else {}),
            "ground_truth": self.gt_path,
            "protocol": self.protocol,
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


def guess_benchmark(path: str) -> Benchmark:
    """The benchmark a ground-truth file's path names (MOT16, MOT17 or MOT20, as in
    MOT20-01/gt/gt.txt or MOT17-train/...), the last one named; MOT17 when none."""
    named = re.findall(r"MOT(16|17|20)(?![0-9])", path.upper())
    return "MOT16" if named[-1:] == ["16"] else "MOT20" if named[-1:] == ["20"] else "MOT17"


@dataclass(frozen=True, slots=True)
class _Protocol:
    """How TrackEval's MotChallenge2DBox is set up for a ground truth: its BENCHMARK and
    DO_PREPROC, whether the 7th field marks rows not to count, and what reports say."""

    benchmark: str
    preprocess: bool
    flags: bool
    text: str


def _protocol(ground_truth: MotSequence, preprocess: bool, benchmark: str | None) -> _Protocol:
    if not ground_truth.ground_truth:
        return _Protocol("MOT15", False, False, "tracks as ground truth: every box")
    if not ground_truth.has_classes:
        return _Protocol("MOT15", False, True, "MOT15: all considered rows")
    if not preprocess:
        return _Protocol("MOT17", False, True, "no preprocessing: all considered rows, every class")
    name = benchmark or guess_benchmark(ground_truth.path)
    if name not in BENCHMARKS:
        raise ConfigError(f"benchmark {name!r}: one of {', '.join(BENCHMARKS)}")
    removed = "distractors and non-MOT vehicles" if name == "MOT20" else "distractors"
    return _Protocol(name, True, True, f"{name}: {removed} removed, pedestrians only")


def protocol_text(
    ground_truth: MotSequence, preprocess: bool = True, benchmark: str | None = None
) -> str:
    """Which of ``ground_truth``'s rows an evaluation counts, as its JSON and reports
    say it (the module's docstring)."""
    return _protocol(ground_truth, preprocess, benchmark).text


@functools.cache
def _mot_challenge(benchmark: str, preprocess: bool) -> Any:
    """TrackEval's MotChallenge2DBox dataset, used only for its preprocessing of a
    sequence held in memory (``get_preprocessed_seq_data``). Its constructor reads no
    data; it checks that each sequence's ground-truth file exists, so it is given one
    sequence of known length (SEQ_INFO), no tracker, and as that "file" TrackEval's own
    source file, which exists wherever TrackEval does and is never opened."""
    import inspect

    dataset_class = _trackeval().datasets.MotChallenge2DBox
    existing = inspect.getfile(dataset_class).replace("{", "{{").replace("}", "}}")
    config = {
        "BENCHMARK": benchmark,
        "DO_PREPROC": preprocess,
        "SEQ_INFO": {"sequence": 1},
        "GT_LOC_FORMAT": existing,
        "SKIP_SPLIT_FOL": True,
        "TRACKERS_TO_EVAL": [],
        "PRINT_CONFIG": False,
    }
    return dataset_class(config)


def _check_classes(ground_truth: MotSequence, valid: list[int]) -> None:
    """TrackEval's check that every ground-truth class is a MOT Challenge class, as one
    line (TrackEval prints the classes on stdout and raises)."""
    allowed = np.asarray(valid, np.int64)
    for frame in ground_truth.frames:
        bad = np.flatnonzero(~np.isin(frame.class_ids, allowed))
        if len(bad):
            k = bad[0]
            raise TrackFileError(
                f"cannot evaluate against {ground_truth.path}: frame {frame.number}, object "
                f"{int(frame.ids[k])} has class {int(frame.class_ids[k])}, not a MOT Challenge "
                f"class ({min(valid)} to {max(valid)}); without preprocessing (framelens "
                "evaluate --no-preprocess) classes are not looked at"
            )


def _sequence_data(tracks: MotSequence, ground_truth: MotSequence, protocol: _Protocol) -> Any:
    """The sequence as TrackEval's metrics take it, after MotChallenge2DBox's
    preprocessing: per frame the IDs (numbered from 0) and the similarity of every
    ground-truth box to every track box. The raw data is what its file loader gives
    (IDs numbered from 0 in each file first, so huge IDs cost nothing); track boxes
    are all of class 1 (pedestrian), as in a tracker's file without a class."""
    frames = max(len(tracks.frames), len(ground_truth.frames))
    gt_index = {v: i for i, v in enumerate(ground_truth.track_ids)}
    tr_index = {v: i for i, v in enumerate(tracks.track_ids)}
    keys = ("ids", "classes", "dets")
    raw: dict[str, Any] = {f"{w}_{k}": [] for w in ("gt", "tracker") for k in keys}
    raw |= {"gt_extras": [], "tracker_confidences": [], "similarity_scores": []}
    for k in range(frames):
        gt = ground_truth.frames[k] if k < len(ground_truth.frames) else MotFrame.empty(k + 1)
        tr = tracks.frames[k] if k < len(tracks.frames) else MotFrame.empty(k + 1)
        raw["gt_ids"].append(np.array([gt_index[int(i)] for i in gt.ids], np.int64))
        raw["gt_classes"].append(gt.class_ids.astype(np.int64))
        raw["gt_dets"].append(gt.boxes)
        # "not considered": 0 (TrackEval truncates the field to an integer, which would
        # drop a conf of 0.85 where tracks written as MOT text serve as ground truth)
        marked = (gt.scores != 0) if protocol.flags else np.ones(len(gt), np.bool_)
        raw["gt_extras"].append({"zero_marked": marked.astype(np.int64)})
        raw["tracker_ids"].append(np.array([tr_index[int(i)] for i in tr.ids], np.int64))
        raw["tracker_classes"].append(np.ones(len(tr), np.int64))
        raw["tracker_dets"].append(tr.boxes)
        raw["tracker_confidences"].append(tr.scores)
        raw["similarity_scores"].append(_box_ious(gt.boxes, tr.boxes))
    raw |= {"num_timesteps": frames, "seq": ground_truth.path}
    dataset = _mot_challenge(protocol.benchmark, protocol.preprocess)
    if protocol.preprocess:
        _check_classes(ground_truth, dataset.valid_class_numbers)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            return dataset.get_preprocessed_seq_data(raw, "pedestrian")
    except _trackeval().utils.TrackEvalException as exc:  # pragma: no cover - checked above
        raise TrackFileError(f"cannot evaluate against {ground_truth.path}: {exc}") from None


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
    tracks: MotSequence,
    ground_truth: MotSequence,
    *,
    error_spans: int = 0,
    preprocess: bool = True,
    benchmark: str | None = None,
) -> TrackEvaluation:
    """Score ``tracks`` (core/stages/tracking/mot.py ``read_tracks_file``, or a
    tracker's frames) against ``ground_truth`` (``read_ground_truth``; or another
    tracker's tracks, for agreement between two). Boxes with ID -1 are not tracks and
    are left out. ``error_spans`` > 0: also the errors over time, in at most that many
    spans of frames (ERROR_SPANS for a report; it costs more than the scores).
    ``preprocess`` and ``benchmark`` (one of BENCHMARKS; None: ``guess_benchmark``)
    choose the MOT Challenge preprocessing of MOT16/17/20 ground truth (module doc)."""
    if error_spans < 0:
        raise ConfigError("error_spans must not be negative")
    trackeval = _trackeval()
    protocol = _protocol(ground_truth, preprocess, benchmark)
    data = _sequence_data(tracks.only_tracked(), ground_truth.only_tracked(), protocol)
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
        protocol=protocol.text,
    )
