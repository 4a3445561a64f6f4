"""How far two detectors agree on the same frames (FP32 against FP16/INT8, model A against B).

Definition (the one the compare view, the CLI and the precision tests share):
detections already filtered at the run's confidence threshold are matched per frame
and per class, greedily in descending score order of the *test* detections: each
takes the unmatched reference detection of its class with the highest IoU, and the
two form a pair when that IoU is >= ``iou`` (0.5). Pairs are true positives,
unmatched test detections false positives, unmatched reference detections misses.
TP/FP/misses are summed over all frames; precision, recall and F1 come from the sums;
mean IoU and mean absolute score difference are taken over all matched pairs.

Conventions for empty sets: precision is 1 when the test side found nothing, recall
is 1 when the reference found nothing, and F1 is 1 when both found nothing (the two
detectors agree perfectly on empty frames).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from framelens.core.types import Detections

__all__ = ["AgreementTotals", "FrameMatch", "box_iou", "match_frame"]


def box_iou(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    """Pairwise IoU of (N, 4) and (M, 4) xyxy boxes: an (N, M) array."""
    a64 = np.asarray(a, dtype=np.float64).reshape(-1, 4)
    b64 = np.asarray(b, dtype=np.float64).reshape(-1, 4)
    x1 = np.maximum(a64[:, None, 0], b64[None, :, 0])
    y1 = np.maximum(a64[:, None, 1], b64[None, :, 1])
    x2 = np.minimum(a64[:, None, 2], b64[None, :, 2])
    y2 = np.minimum(a64[:, None, 3], b64[None, :, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area_a = np.clip(a64[:, 2] - a64[:, 0], 0, None) * np.clip(a64[:, 3] - a64[:, 1], 0, None)
    area_b = np.clip(b64[:, 2] - b64[:, 0], 0, None) * np.clip(b64[:, 3] - b64[:, 1], 0, None)
    union = area_a[:, None] + area_b[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = np.where(union > 0, inter / union, 0.0)
    return iou


@dataclass(frozen=True)
class FrameMatch:
    """The matching of one frame.

    pairs: (test index, reference index, IoU) of each matched pair, in matching order.
    unmatched_test / unmatched_ref: indices into the test / reference detections.
    """

    pairs: tuple[tuple[int, int, float], ...]
    unmatched_test: tuple[int, ...]
    unmatched_ref: tuple[int, ...]
    score_diffs: tuple[float, ...]  # |test score - ref score| per pair, same order

    @property
    def tp(self) -> int:
        return len(self.pairs)

    @property
    def fp(self) -> int:
        return len(self.unmatched_test)

    @property
    def fn(self) -> int:
        return len(self.unmatched_ref)


def match_frame(ref: Detections, test: Detections, iou: float = 0.5) -> FrameMatch:
    """Match one frame's test detections against the reference (see the module doc)."""
    if not 0.0 < iou <= 1.0:
        raise ValueError(f"iou must be in (0, 1], got {iou}")
    pairs: list[tuple[int, int, float]] = []
    diffs: list[float] = []
    ref_used = np.zeros(len(ref), dtype=bool)
    test_used = np.zeros(len(test), dtype=bool)
    if len(ref) and len(test):
        ious = box_iou(test.boxes, ref.boxes)
        same_class = test.class_ids[:, None] == ref.class_ids[None, :]
        ious = np.where(same_class, ious, -1.0)
        # Stable sort: equal scores keep their order, so the result is deterministic.
        for t in np.argsort(-test.scores.astype(np.float64), kind="stable"):
            candidates = np.where(ref_used, -1.0, ious[t])
            r = int(np.argmax(candidates))
            if candidates[r] >= iou:
                ref_used[r] = True
                test_used[t] = True
                pairs.append((int(t), r, float(candidates[r])))
                diffs.append(abs(float(test.scores[t]) - float(ref.scores[r])))
    return FrameMatch(
        pairs=tuple(pairs),
        unmatched_test=tuple(int(i) for i in np.flatnonzero(~test_used)),
        unmatched_ref=tuple(int(i) for i in np.flatnonzero(~ref_used)),
        score_diffs=tuple(diffs),
    )


@dataclass
class AgreementTotals:
    """TP/FP/misses summed over frames, and the metrics derived from the sums."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    frames: int = 0
    iou_sum: float = 0.0
    score_diff_sum: float = 0.0
    _pairs: int = field(default=0, repr=False)

    def add(self, match: FrameMatch) -> FrameMatch:
        """Count one frame's match; returns it for chaining."""
        self.tp += match.tp
        self.fp += match.fp
        self.fn += match.fn
        self.frames += 1
        self.iou_sum += sum(p[2] for p in match.pairs)
        self.score_diff_sum += sum(match.score_diffs)
        self._pairs += len(match.pairs)
        return match

    def add_frame(self, ref: Detections, test: Detections, iou: float = 0.5) -> FrameMatch:
        """Match one frame and count it."""
        return self.add(match_frame(ref, test, iou))

    @property
    def precision(self) -> float:
        found = self.tp + self.fp
        return self.tp / found if found else 1.0

    @property
    def recall(self) -> float:
        expected = self.tp + self.fn
        return self.tp / expected if expected else 1.0

    @property
    def f1(self) -> float:
        denominator = 2 * self.tp + self.fp + self.fn
        return 2 * self.tp / denominator if denominator else 1.0

    @property
    def mean_iou(self) -> float:
        """Mean IoU of matched pairs; NaN when nothing matched."""
        return self.iou_sum / self._pairs if self._pairs else float("nan")

    @property
    def mean_score_diff(self) -> float:
        """Mean |score difference| of matched pairs; NaN when nothing matched."""
        return self.score_diff_sum / self._pairs if self._pairs else float("nan")

    def as_dict(self) -> dict[str, Any]:
        return {
            "frames": self.frames,
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "mean_iou": self.mean_iou,
            "mean_score_diff": self.mean_score_diff,
        }
