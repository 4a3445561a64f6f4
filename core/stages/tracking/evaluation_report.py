"""The report of an evaluation (``framelens evaluate --report DIR``): a folder with
summary.json (what ``framelens evaluate`` prints), errors.csv (CLEAR's errors over
time), hota.png (HOTA, DetA, AssA and LocA over HOTA's IoU thresholds), errors.png
(false positives, misses and ID switches over the frames) and index.html showing them.

The folder is staged beside its target and renamed when complete (AtomicDir), so it
appears whole or not at all. Plots are drawn as the compare report draws them
(core/pipeline/compare/report.py): matplotlib's Agg canvas on a bare Figure, no pyplot
state, matplotlib imported only when plotting starts.
"""

from __future__ import annotations

import csv
import html
import json
from pathlib import Path
from typing import TYPE_CHECKING

from framelens.core.errors import ExportError
from framelens.core.stages.sinks.atomic import StrPath, _reason
from framelens.core.stages.sinks.atomic_dir import AtomicDir
from framelens.core.stages.tracking.evaluation import MATCH_IOU, ErrorsOverTime, TrackEvaluation

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["EVALUATION_REPORT_FILES", "write_evaluation_report"]

SUMMARY, CSV_FILE, HTML_FILE, HOTA_PNG, ERRORS_PNG = (
    "summary.json",
    "errors.csv",
    "index.html",
    "hota.png",
    "errors.png",
)
EVALUATION_REPORT_FILES = frozenset({SUMMARY, CSV_FILE, HTML_FILE, HOTA_PNG, ERRORS_PNG})
"""Every name an evaluation report holds: a folder with only these may be replaced."""


def _figure() -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3.6), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)  # attaches itself to the figure: savefig renders with Agg
    return fig


def _hota_plot(path: Path, evaluation: TrackEvaluation) -> None:
    fig = _figure()
    ax = fig.add_subplot()
    curves = (
        ("HOTA", evaluation.hota_by_alpha, evaluation.scores.hota),
        ("DetA", evaluation.deta_by_alpha, evaluation.scores.deta),
        ("AssA", evaluation.assa_by_alpha, evaluation.scores.assa),
        ("LocA", evaluation.loca_by_alpha, evaluation.scores.loca),
    )
    for i, (name, values, mean) in enumerate(curves):
        ax.plot(evaluation.alphas, values, marker=".", color=f"C{i}", label=f"{name} {mean:.3f}")
    ax.set_ylim(0.0, 1.05)
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel("IoU threshold (alpha); the scores are the means over these")
    ax.set_ylabel("score")
    ax.set_title("HOTA and its parts over the IoU thresholds")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize="small")
    fig.savefig(path)


def _errors_plot(path: Path, errors: ErrorsOverTime) -> None:
    """One panel per error, a bar per frame (or per span of frames), frames from 1."""
    fig = _figure()
    fig.set_size_inches(8, 5.4)
    per_frame = all(s == e for s, e in zip(errors.starts, errors.ends, strict=True))
    left = [s - 0.5 for s in errors.starts]
    width = [e - s + 1 for s, e in zip(errors.starts, errors.ends, strict=True)]
    series = (
        ("false positives", errors.false_positives),
        ("misses", errors.false_negatives),
        ("ID switches", errors.id_switches),
    )
    from matplotlib.ticker import MaxNLocator

    axes = fig.subplots(len(series), 1, sharex=True)
    for i, (ax, (name, values)) in enumerate(zip(axes, series, strict=True)):
        ax.bar(left, values, width=width, align="edge", color=f"C{i + 3}")
        ax.set_ylim(0, max([1, *values]) * 1.1)  # none at all: 0 at the bottom, not the middle
        ax.set_ylabel(f"{name}\n(total {sum(values)})", fontsize="small")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(axis="y", alpha=0.3)
    axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
    unit = "per frame" if per_frame else "per span of frames"
    axes[-1].set_xlabel(f"frame (MOT Challenge numbering: from 1); counts {unit}")
    axes[0].set_title(f"Errors over time (CLEAR, IoU >= {MATCH_IOU})")
    fig.savefig(path)


def _write_csv(path: Path, errors: ErrorsOverTime) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(
            ["first_frame", "last_frame", "false_positives", "false_negatives", "id_switches"]
        )
        out.writerows(
            zip(
                errors.starts,
                errors.ends,
                errors.false_positives,
                errors.false_negatives,
                errors.id_switches,
                strict=True,
            )
        )


_ROWS = (
    ("hota", "HOTA", "higher order tracking accuracy: sqrt(DetA x AssA)"),
    ("deta", "DetA", "detection accuracy"),
    ("assa", "AssA", "association accuracy: do the boxes of one object keep one ID"),
    ("detre", "DetRe", "detection recall"),
    ("detpr", "DetPr", "detection precision"),
    ("assre", "AssRe", "association recall"),
    ("asspr", "AssPr", "association precision"),
    ("loca", "LocA", "localisation accuracy (mean IoU of matches)"),
    ("idf1", "IDF1", "identity F1: the share of boxes given their object's own ID"),
    ("idp", "IDP", "identity precision"),
    ("idr", "IDR", "identity recall"),
    ("mota", "MOTA", "1 - (misses + false positives + ID switches) / ground-truth boxes"),
    ("motp", "MOTP", "mean IoU of the matched boxes"),
    ("moda", "MODA", "MOTA without ID switches"),
    ("recall", "recall", "matched / ground-truth boxes"),
    ("precision", "precision", "matched / track boxes"),
)
_COUNTS = (
    ("id_switches", "ID switches"),
    ("false_positives", "false positives"),
    ("false_negatives", "misses (false negatives)"),
    ("true_positives", "matches"),
    ("fragmentations", "fragmentations"),
    ("mostly_tracked", "mostly tracked objects (> 80%)"),
    ("partially_tracked", "partially tracked objects"),
    ("mostly_lost", "mostly lost objects (< 20%)"),
    ("idtp", "IDTP"),
    ("idfp", "IDFP"),
    ("idfn", "IDFN"),
    ("frames", "frames"),
    ("gt_objects", "ground-truth objects"),
    ("gt_boxes", "ground-truth boxes"),
    ("tracks", "tracks"),
    ("track_boxes", "track boxes"),
)


def _html(evaluation: TrackEvaluation, computed_by: str) -> str:
    e = html.escape
    scores = evaluation.scores.as_json()
    rows = "\n".join(
        f"<tr><th>{e(name)}</th><td>{scores[key]:.3f}</td><td class=l>{e(what)}</td></tr>"
        for key, name, what in _ROWS
    )
    counts = "\n".join(
        f"<tr><th>{e(name)}</th><td>{scores[key]}</td></tr>" for key, name in _COUNTS
    )
    images = "\n".join(f'<p><img src="{p}" alt="{p}"></p>' for p in (HOTA_PNG, ERRORS_PNG))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>FrameLens tracking evaluation</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse;margin:1em 0}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}td.l{{text-align:left}}
img{{max-width:100%}}</style>
</head><body>
<h1>FrameLens tracking evaluation</h1>
<p>tracks: {e(evaluation.tracks_path)}<br>ground truth: {e(evaluation.gt_path)}<br>
ground-truth rows counted: {e(evaluation.protocol)}</p>
<p>Computed by {e(computed_by)}. CLEAR and Identity match boxes at IoU &ge; {MATCH_IOU};
HOTA, DetA, AssA and LocA are means over the IoU thresholds 0.05 to 0.95.
Errors over time: <a href="{CSV_FILE}">{CSV_FILE}</a>,
summary: <a href="{SUMMARY}">{SUMMARY}</a>.</p>
<table><tr><th>metric</th><th>score</th><th>what it says</th></tr>
{rows}
</table>
<table><tr><th>count</th><th></th></tr>
{counts}
</table>
{images}
</body></html>
"""


def write_evaluation_report(folder: StrPath, evaluation: TrackEvaluation) -> Path:
    """Write the report into ``folder`` (new, empty, or an earlier evaluation report,
    replaced), complete or not at all; returns its path. ExportError when it cannot.
    ``evaluation`` must hold the errors over time (``evaluate_tracks(...,
    error_spans=ERROR_SPANS)``)."""
    errors = evaluation.errors
    if errors is None:
        raise ValueError("a report needs the errors over time: evaluate with error_spans")
    summary = evaluation.as_json()
    with AtomicDir(folder, EVALUATION_REPORT_FILES, EVALUATION_REPORT_FILES) as staging:
        tmp = staging.tmp
        try:
            (tmp / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
            _write_csv(tmp / CSV_FILE, errors)
            _hota_plot(tmp / HOTA_PNG, evaluation)
            _errors_plot(tmp / ERRORS_PNG, errors)
            page = _html(evaluation, summary["computed_by"])
            (tmp / HTML_FILE).write_text(page, encoding="utf-8")
        except OSError as exc:
            staging.discard()
            raise ExportError(f"cannot write {staging.target}: {_reason(exc)}") from None
        return staging.commit()
