"""Detection agreement (F1 between two detectors) on hand-built detections."""

from __future__ import annotations

import math

import numpy as np
import pytest
from framelens.core.stages.tasks.detect.agreement import AgreementTotals, box_iou, match_frame
from framelens.core.types import Detections


def dets(*rows: tuple[float, float, float, float, float, int]) -> Detections:
    """Detections from (x1, y1, x2, y2, score, class) rows."""
    if not rows:
        return Detections.empty()
    a = np.array([r[:5] for r in rows], dtype=np.float32)
    return Detections(a[:, :4].copy(), a[:, 4].copy(), np.array([r[5] for r in rows], np.int32))


def test_box_iou_known_values() -> None:
    a = np.array([[0, 0, 10, 10]], np.float32)
    b = np.array([[0, 0, 10, 10], [5, 0, 15, 10], [20, 20, 30, 30], [0, 0, 0, 0]], np.float32)
    assert box_iou(a, b)[0] == pytest.approx([1.0, 50 / 150, 0.0, 0.0])


def test_identical_frames_agree_perfectly() -> None:
    ref = dets((0, 0, 10, 10, 0.9, 0), (20, 20, 40, 40, 0.6, 2))
    totals = AgreementTotals()
    m = totals.add_frame(ref, ref)
    assert (m.tp, m.fp, m.fn) == (2, 0, 0)
    assert totals.f1 == 1.0 and totals.mean_iou == 1.0 and totals.mean_score_diff == 0.0


def test_iou_threshold_is_inclusive_and_class_must_match() -> None:
    ref = dets((0, 0, 10, 10, 0.9, 0))
    # IoU exactly 0.5: [0,0,10,10] vs [0,0,10,5] -> 50/100.
    assert match_frame(ref, dets((0, 0, 10, 5, 0.8, 0))).tp == 1
    assert match_frame(ref, dets((0, 0, 10, 4.9, 0.8, 0))).tp == 0
    other_class = match_frame(ref, dets((0, 0, 10, 10, 0.8, 1)))
    assert (other_class.tp, other_class.fp, other_class.fn) == (0, 1, 1)


def test_greedy_in_descending_test_score_order() -> None:
    # One reference box, two overlapping test boxes: the higher-scoring one takes it,
    # even though the lower-scoring one overlaps better.
    ref = dets((0, 0, 10, 10, 0.9, 0))
    test = dets((0, 0, 10, 9, 0.3, 0), (0, 0, 10, 7, 0.8, 0))
    m = match_frame(ref, test)
    assert [(t, r) for t, r, _ in m.pairs] == [(1, 0)]
    assert m.pairs[0][2] == pytest.approx(0.7)
    assert m.unmatched_test == (0,) and m.unmatched_ref == ()
    assert len(m.score_diffs) == 1 and m.score_diffs[0] == pytest.approx(0.1)


def test_each_test_box_takes_its_best_unmatched_reference() -> None:
    ref = dets((0, 0, 10, 10, 0.9, 0), (1, 0, 11, 10, 0.5, 0))
    test = dets((1, 0, 11, 10, 0.7, 0), (0, 0, 10, 10, 0.6, 0))
    m = match_frame(ref, test)
    assert sorted((t, r) for t, r, _ in m.pairs) == [(0, 1), (1, 0)]


def test_totals_are_summed_over_frames_before_the_metrics() -> None:
    totals = AgreementTotals()
    a = dets((0, 0, 10, 10, 0.9, 0))
    b = dets((50, 50, 60, 60, 0.4, 0))
    totals.add_frame(a, a)  # tp 1
    totals.add_frame(a, dets())  # fn 1
    totals.add_frame(dets(), b)  # fp 1
    totals.add_frame(a, dets((0, 0, 10, 8, 0.7, 0), (50, 50, 60, 60, 0.4, 0)))  # tp 1, fp 1
    assert (totals.tp, totals.fp, totals.fn, totals.frames) == (2, 2, 1, 4)
    assert totals.precision == pytest.approx(0.5)
    assert totals.recall == pytest.approx(2 / 3)
    assert totals.f1 == pytest.approx(2 * 2 / (2 * 2 + 2 + 1))
    assert totals.mean_iou == pytest.approx((1.0 + 0.8) / 2)
    assert totals.mean_score_diff == pytest.approx((0.0 + 0.2) / 2)
    d = totals.as_dict()
    assert d["tp"] == 2 and d["f1"] == pytest.approx(totals.f1)


def test_empty_on_both_sides_is_full_agreement() -> None:
    totals = AgreementTotals()
    totals.add_frame(dets(), dets())
    assert (totals.precision, totals.recall, totals.f1) == (1.0, 1.0, 1.0)
    assert math.isnan(totals.mean_iou) and math.isnan(totals.mean_score_diff)


def test_rejects_a_meaningless_iou_threshold() -> None:
    with pytest.raises(ValueError):
        match_frame(dets(), dets(), iou=0.0)
