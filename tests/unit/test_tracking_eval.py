"""Tracks scored against ground truth by TrackEval (core/stages/tracking/evaluation.py)
and the report of it (evaluation_report.py), checked against py-motmetrics' published
values for its bundled MOT sample data."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from framelens.core.errors import ExportError
from framelens.core.stages.tracking import evaluation
from framelens.core.stages.tracking.evaluation import ERROR_SPANS, evaluate_tracks
from framelens.core.stages.tracking.evaluation_report import (
    EVALUATION_REPORT_FILES,
    write_evaluation_report,
)
from framelens.core.stages.tracking.mot import (
    MotSequence,
    read_ground_truth,
    read_tracks_file,
)
from mot_data import motmetrics_data

# py-motmetrics' published results for its bundled sequences, gt.txt against test.txt at
# IoU >= 0.5: github.com/cheind/py-motmetrics, motmetrics/tests/test_metrics.py,
# test_motchallenge_files (also in the installed motmetrics 1.4.0 package's tests/), in
# its column order idf1, idp, idr, recall, precision, num_unique_objects, mostly_tracked,
# partially_tracked, mostly_lost, num_false_positives, num_misses, num_switches,
# num_fragmentations, mota, motp (motp there is the mean IoU *distance*, 1 - IoU).
PUBLISHED_CLEAR_ID = {
    "TUD-Campus": (0.557659, 0.729730, 0.451253, 0.582173, 0.941441, 8, 1, 6, 1, 13, 150, 7, 7,
                   0.526462, 0.277201),
    "TUD-Stadtmitte": (0.644619, 0.819760, 0.531142, 0.608997, 0.939920, 10, 5, 4, 1, 45, 452,
                       7, 6, 0.564014, 0.345904),
}  # fmt: skip
# HOTA of TUD-Campus: the same repository, motmetrics/tests/test_evaluation.py,
# test_evaluate_motchallenge_files_returns_rich_summary (commit 0d146718).
PUBLISHED_HOTA_TUD_CAMPUS = (0.3913974378451139, 0.418047030142763, 0.36912068120832836)


@pytest.mark.parametrize("sequence", sorted(PUBLISHED_CLEAR_ID))
def test_equals_py_motmetrics_published_values(sequence: str) -> None:
    folder = motmetrics_data(sequence)
    result = evaluate_tracks(
        read_tracks_file(folder / "test.txt"), read_ground_truth(folder / "gt.txt")
    )
    s = result.scores
    idf1, idp, idr, recall, precision, objects, mt, pt, ml, fp, fn, idsw, frag, mota, motp = (
        PUBLISHED_CLEAR_ID[sequence]
    )
    assert (s.idf1, s.idp, s.idr) == pytest.approx((idf1, idp, idr), abs=1e-6)
    assert (s.recall, s.precision) == pytest.approx((recall, precision), abs=1e-6)
    assert (s.mota, s.motp) == pytest.approx((mota, 1.0 - motp), abs=1e-6)
    assert (s.gt_objects, s.mostly_tracked, s.partially_tracked, s.mostly_lost) == (
        objects, mt, pt, ml
    )  # fmt: skip
    assert (s.false_positives, s.false_negatives, s.id_switches, s.fragmentations) == (
        fp, fn, idsw, frag
    )  # fmt: skip


def test_hota_equals_py_motmetrics_published_value() -> None:
    folder = motmetrics_data("TUD-Campus")
    result = evaluate_tracks(
        read_tracks_file(folder / "test.txt"), read_ground_truth(folder / "gt.txt")
    )
    s = result.scores
    assert (s.hota, s.deta, s.assa) == pytest.approx(PUBLISHED_HOTA_TUD_CAMPUS, abs=1e-9)
    assert np.mean(result.hota_by_alpha) == pytest.approx(s.hota)
    assert result.alphas[0] == 0.05 and result.alphas[-1] == 0.95 and len(result.alphas) == 19


def test_perfect_tracker_scores_one() -> None:
    gt = read_ground_truth(motmetrics_data() / "gt.txt")
    s = evaluate_tracks(gt, gt).scores
    for value in (s.hota, s.deta, s.assa, s.idf1, s.mota, s.motp, s.recall, s.precision):
        assert value == pytest.approx(1.0)
    assert (s.id_switches, s.false_positives, s.false_negatives) == (0, 0, 0)
    assert s.mostly_tracked == s.gt_objects


def _swap_ids(seq: MotSequence, a: int, b: int, from_frame: int) -> MotSequence:
    """The same boxes, but objects ``a`` and ``b`` trade IDs from ``from_frame`` on."""
    frames = []
    for frame in seq.frames:
        ids = frame.ids.copy()
        if frame.number >= from_frame:
            ids[frame.ids == a], ids[frame.ids == b] = b, a
        frames.append(replace(frame, ids=ids))
    return replace(seq, frames=tuple(frames))


def test_swapped_ids_lose_association_not_detection() -> None:
    gt = read_ground_truth(motmetrics_data() / "gt.txt")
    both = [f.number for f in gt.frames if {1, 2} <= set(f.ids.tolist())]
    middle = both[len(both) // 2]
    swapped = evaluate_tracks(_swap_ids(gt, 1, 2, middle), gt).scores
    assert swapped.deta == pytest.approx(1.0) and swapped.detre == pytest.approx(1.0)
    assert swapped.assa < 0.95 and swapped.hota < 0.98
    assert swapped.idf1 < 0.95
    assert swapped.id_switches == 2  # each object changed track once
    assert swapped.mota == pytest.approx(1.0 - 2 / swapped.gt_boxes)


def test_errors_over_time_add_up() -> None:
    folder = motmetrics_data()
    tracks, gt = read_tracks_file(folder / "test.txt"), read_ground_truth(folder / "gt.txt")
    assert evaluate_tracks(tracks, gt).errors is None  # only when asked: it costs more
    for spans in (1, 7, 1000):
        result = evaluate_tracks(tracks, gt, error_spans=spans)
        errors, s = result.errors, result.scores
        assert errors is not None
        assert len(errors.starts) == min(spans, s.frames)
        assert errors.starts[0] == 1 and errors.ends[-1] == s.frames
        assert all(b == a + 1 for a, b in zip(errors.ends, errors.starts[1:], strict=False))
        assert sum(errors.false_positives) == s.false_positives
        assert sum(errors.false_negatives) == s.false_negatives
        assert sum(errors.id_switches) == s.id_switches


def test_no_tracks_at_all() -> None:
    gt = read_ground_truth(motmetrics_data() / "gt.txt")
    nothing = replace(gt, frames=tuple(f.select(f.ids < 0) for f in gt.frames))
    s = evaluate_tracks(nothing, gt).scores
    assert s.hota == 0.0 and s.idf1 == 0.0 and s.false_negatives == s.gt_boxes
    assert s.tracks == 0


def test_long_sequences_get_fewer_longer_spans(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(evaluation, "ERROR_SPAN_BUDGET", 10 * 200)  # as if 200 were long
    gt = read_ground_truth(motmetrics_data() / "gt.txt")
    frames = gt.frames * 3  # 213 frames: numbered again from 1
    long = replace(gt, frames=tuple(replace(f, number=k + 1) for k, f in enumerate(frames)))
    result = evaluate_tracks(long, long, error_spans=ERROR_SPANS)
    assert result.errors is not None
    assert len(result.errors.starts) == 10  # the fewest spans
    assert result.errors.ends[-1] == len(frames)


def test_report_folder(tmp_path: Path) -> None:
    folder = motmetrics_data()
    result = evaluate_tracks(
        read_tracks_file(folder / "test.txt"),
        read_ground_truth(folder / "gt.txt"),
        error_spans=ERROR_SPANS,
    )
    out = write_evaluation_report(tmp_path / "report", result)
    assert sorted(p.name for p in out.iterdir()) == sorted(EVALUATION_REPORT_FILES)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]  # no staging left
    assert json.loads((out / "summary.json").read_text()) == result.as_json()
    page = (out / "index.html").read_text()
    assert f"{result.scores.hota:.3f}" in page and "TrackEval" in page
    for png in ("hota.png", "errors.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = (out / "errors.csv").read_text().splitlines()
    assert rows[0] == "first_frame,last_frame,false_positives,false_negatives,id_switches"
    assert len(rows) == 1 + result.scores.frames
    # an earlier report is replaced; a folder of other files is never touched
    write_evaluation_report(out, result)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(ExportError, match="holds other files"):
        write_evaluation_report(mine, result)
    with pytest.raises(ValueError, match="errors over time"):
        write_evaluation_report(tmp_path / "new", replace(result, errors=None))
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "report"]
