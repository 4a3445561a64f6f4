"""The files of a compare report: summary.json, frames.csv, PNG plots, index.html, and
when the panes counted lines and zones, events.csv (each pane's events, one row each).

``write_report_files`` fills a directory that the caller stages (AtomicDir), so the
report appears complete or not at all. Plots are drawn with matplotlib's Agg
canvas on a bare Figure: no pyplot state and no GUI toolkit, safe off the main
thread. matplotlib is imported only when plotting starts: it is slow to import, and
on its very first import it builds a font cache and says so on stderr.
"""

from __future__ import annotations

import csv
import html
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from framelens.core.errors import ExportError
from framelens.core.pipeline.compare.records import CompareLog, PaneRow
from framelens.core.stages.sinks.atomic_dir import check_dir_target

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["REPORT_FILES", "write_report_files"]

SUMMARY, CSV_FILE, HTML_FILE = "summary.json", "frames.csv", "index.html"
EVENTS_FILE = "events.csv"
LATENCY_PNG, AGREEMENT_PNG, FPS_PNG, IMAGE_PNG = (
    "latency.png",
    "agreement.png",
    "fps.png",
    "image_agreement.png",
)
REPORT_FILES = frozenset(
    {SUMMARY, CSV_FILE, HTML_FILE, EVENTS_FILE, LATENCY_PNG, AGREEMENT_PNG, FPS_PNG, IMAGE_PNG}
)
"""Every name a report may hold: a directory with only these may be replaced."""

_PANE_COLUMNS = ("detections", "tp", "fp", "fn", "inference_ms", "e2e_ms")
_IMAGE_COLUMNS = ("psnr_db", "ssim")


def _cell(value: float | int | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return "inf" if math.isinf(value) else f"{value:.3f}"
    return str(value)


def write_csv(path: Path, log: CompareLog) -> None:
    """One row per frame: index, pts, then per pane ``<label>_<column>``."""
    columns = _PANE_COLUMNS + (_IMAGE_COLUMNS if log.has_images else ())
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["index", "pts", *(f"{lb}_{c}" for lb in log.labels for c in columns)])
        for row in log.rows:
            cells = [str(row.index), f"{row.pts:.3f}"]
            for pane in row.panes:
                cells += [_cell(getattr(pane, c)) for c in columns]
            out.writerow(cells)


def write_events_csv(path: Path, log: CompareLog) -> bool:
    """Each pane's events, one row each: ``pane`` then the events CSV's columns
    (core/stages/analytics/events.py). False (nothing written) when none were counted."""
    if not log.counted:
        return False
    from framelens.core.pipeline.compare.events import event_json
    from framelens.core.stages.analytics.events import EVENT_COLUMNS

    _, events = log.analytics()
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["pane", *EVENT_COLUMNS])
        for spec, made in zip(log.specs, events, strict=True):
            labels = dict(enumerate(spec.settings.model.labels))
            for event in made:
                row = event_json(event, labels)
                row["time_s"] = f"{event.time_s:.3f}"
                out.writerow([spec.label, *(row[c] for c in EVENT_COLUMNS)])
    return True


def _figure() -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3.6), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)  # attaches itself to the figure: savefig renders with Agg
    return fig


def _per_frame_plot(
    path: Path,
    log: CompareLog,
    panes: Sequence[int],
    value: str,
    ylabel: str,
    title: str,
    unit_range: bool = False,
) -> Figure:
    fig = _figure()
    ax = fig.add_subplot()
    x = [r.index + 1 for r in log.rows]  # frames counted as the window counts them: 1 to N
    for i in panes:
        rows: list[PaneRow] = log.pane_rows(i)
        y = [getattr(r, value) for r in rows]
        y = [math.nan if v is None or math.isinf(v) else v for v in y]
        ax.plot(x, y, marker="." if len(x) < 60 else None, label=log.labels[i], color=f"C{i}")
    if unit_range:  # agreement scores: keep 0..1 in view so a small dip reads as small
        ax.set_ylim(0.0, 1.05)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # frame numbers, never 541.25
    ax.set_xlabel("frame (1 = the video's first; frames.csv's index + 1)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    fig.savefig(path)
    return fig


def _fps_plot(path: Path, summary: dict[str, Any]) -> None:
    fig = _figure()
    ax = fig.add_subplot()
    labels = list(summary["variants"])
    fps = [summary["variants"][lb]["fps"] or 0.0 for lb in labels]
    bars = ax.bar(labels, fps, color=[f"C{i}" for i in range(len(labels))])
    ax.bar_label(bars, fmt="%.1f")
    ax.set_ylabel("frames per second")
    ax.set_title("Throughput of each variant on its own (decode to result)")
    ax.grid(axis="y", alpha=0.3)
    fig.savefig(path)


def write_plots(folder: Path, log: CompareLog, summary: dict[str, Any]) -> list[str]:
    """The PNG plots; returns their file names in display order."""
    others = [i for i in range(len(log.labels)) if i != log.reference]
    ref = log.reference_label
    _per_frame_plot(
        folder / LATENCY_PNG,
        log,
        range(len(log.labels)),
        "inference_ms",
        "inference ms",
        "Inference latency per frame",
    )
    _per_frame_plot(
        folder / AGREEMENT_PNG,
        log,
        others,
        "f1",
        "F1",
        f"Detection agreement with {ref} (F1)",
        True,
    )
    _fps_plot(folder / FPS_PNG, summary)
    names = [LATENCY_PNG, AGREEMENT_PNG, FPS_PNG]
    if log.has_images:
        _per_frame_plot(
            folder / IMAGE_PNG,
            log,
            others,
            "ssim",
            "SSIM",
            f"Image agreement with {ref} (SSIM)",
            True,
        )
        names.append(IMAGE_PNG)
    return names


_TABLE_KEYS = (
    ("latency_ms_median", "inference ms (median)"),
    ("e2e_ms_median", "end to end ms (median)"),
    ("fps", "fps"),
    ("f1", "F1"),
    ("precision", "precision"),
    ("recall", "recall"),
    ("mean_iou", "mean IoU"),
    ("mean_score_diff", "mean |score diff|"),
    ("psnr_db", "PSNR dB"),
    ("ssim", "SSIM"),
)


_TRACK_KEYS = (
    ("tracks", "tracks"),
    ("id_switches", "ID switches"),
    ("idf1", "IDF1"),
    ("hota", "HOTA"),
    ("assa", "AssA"),
)
_GT_KEYS = (
    ("hota", "HOTA"),
    ("idf1", "IDF1"),
    ("mota", "MOTA"),
    ("id_switches", "ID switches"),
)


def _tracks_html(summary: dict[str, Any]) -> str:
    """The tracks table, when the panes tracked: against the reference's tracks, and
    against ground truth when there was one."""
    variants = summary["variants"]
    if not any("tracking" in v for v in variants.values()):
        return ""
    e = html.escape
    ref = summary["reference"]
    truth = summary.get("ground_truth")
    head = "".join(f"<th>{t}</th>" for _, t in _TRACK_KEYS)
    span = f'<th colspan="{len(_TRACK_KEYS) - 1}">against {e(ref)}\'s tracks</th>'
    top = f"<tr><th></th><th></th>{span}"
    if truth is not None:
        head += "".join(f"<th>{t}</th>" for _, t in _GT_KEYS)
        top += f'<th colspan="{len(_GT_KEYS)}">against the ground truth</th>'
    body = []
    for label, v in variants.items():
        t = v.get("tracking", {})
        keys = [t.get(k) for k, _ in _TRACK_KEYS]
        if truth is not None:
            keys += [t.get("ground_truth", {}).get(k) for k, _ in _GT_KEYS]
        cells = "".join(f"<td>{'n/a' if x is None else x}</td>" for x in keys)
        name = f"{e(label)} (reference)" if label == ref else e(label)
        body.append(f"<tr><th>{name}</th>{cells}</tr>")
    gt_note = (
        f" Ground truth: {e(str(truth))} (its frame 1 is the first frame compared;"
        f" {e(str(summary.get('ground_truth_protocol', '')))})."
        if truth is not None
        else ""
    )
    return f"""<h2>Tracks ({e(str(summary.get("tracker", "")))})</h2>
<p>Each pane tracked its own boxes. Against {e(ref)}'s tracks, taken as ground truth:
how often a pane's IDs switch where the reference keeps one, and how well the tracks
agree (IDF1; HOTA and its association part AssA; TrackEval, IoU &ge; 0.5 for IDF1 and ID
switches). n/a: neither pane has a track.{gt_note}</p>
<table>{top}</tr><tr><th>variant</th>{head}</tr>
{chr(10).join(body)}
</table>
"""


_SHOWN_DIFFERENCES = 50  # per pane and side; events.csv and summary.json hold them all


def _event_text(event: dict[str, Any]) -> str:
    what = " ".join(str(event[k]) for k in ("kind", "name", "direction") if event[k])
    return (
        f"frame {event['frame']} ({event['time_s']:.3f} s): {what}, {event['class']} "
        f"#{event['track_id']}"
    )


def _counts_html(summary: dict[str, Any]) -> str:
    """The counts per line and zone of every pane, each with its difference from the
    reference's, and the events a pane lacks or adds, when lines and zones were counted."""
    variants = summary["variants"]
    if not any("analytics" in v for v in variants.values()):
        return ""
    e = html.escape
    ref = summary["reference"]
    counts = {label: v["analytics"]["counts"] for label, v in variants.items()}
    head = "".join(
        f"<th>{e(label)}{' (reference)' if label == ref else ''}</th>" for label in variants
    )
    body = []
    for table, keys in (("lines", ("in", "out")), ("zones", ("enter", "exit", "loiter"))):
        for name in counts[ref].get(table, {}):
            for key in keys:
                cells = []
                for label, v in variants.items():
                    value = counts[label][table][name][key]
                    change = v["analytics"]["vs_reference"]["count_changes"][name][key]
                    shown = f"{value} ({change:+d})" if change else str(value)
                    style = ' style="background:#fdd"' if change else ""
                    cells.append(f"<td{style}>{shown}</td>")
                body.append(f"<tr><th>{e(name)}</th><th>{key}</th>{''.join(cells)}</tr>")
    rows: dict[str, list[int]] = {"events": [], "matched": [], "missing": [], "extra": []}
    for v in variants.values():
        a = v["analytics"]
        vs = a["vs_reference"]
        rows["events"].append(a["counts"]["events"])
        rows["matched"].append(vs["matched"])
        rows["missing"].append(len(vs["missing"]))
        rows["extra"].append(len(vs["extra"]))
    titles = {"events": "events", "matched": f"matched with {ref}'s",
              "missing": f"{ref}'s it lacks", "extra": f"not in {ref}'s"}  # fmt: skip
    for key, values in rows.items():
        numbers = "".join(f"<td>{x}</td>" for x in values)
        body.append(f'<tr><th colspan="2">{e(titles[key])}</th>{numbers}</tr>')
    lists = []
    for label, v in variants.items():
        vs = v["analytics"]["vs_reference"]
        if label == ref or not (vs["missing"] or vs["extra"]):
            continue
        items = [f"<li>lacks {e(_event_text(x))}</li>" for x in vs["missing"][:_SHOWN_DIFFERENCES]]
        items += [f"<li>adds {e(_event_text(x))}</li>" for x in vs["extra"][:_SHOWN_DIFFERENCES]]
        lists.append(f"<h3>{e(label)} against {e(ref)}</h3>\n<ul>{''.join(items)}</ul>")
    if not lists:
        lists.append(f"<p>Every pane has the events {e(ref)} has, and no other.</p>")
    tolerance = summary.get("event_tolerance_frames", 0)
    return f"""<h2>Counts (lines and zones)</h2>
<p>Each pane's tracks counted against the same lines and zones; in brackets, the
difference from {e(ref)}'s count. An event of a pane and one of {e(ref)} are the same
when kind, line or zone, direction and class agree and their frames are at most
{tolerance} apart. Every event: <a href="{EVENTS_FILE}">{EVENTS_FILE}</a>.</p>
<table><tr><th>line or zone</th><th>count</th>{head}</tr>
{chr(10).join(body)}
</table>
{chr(10).join(lists)}
"""


def _html(summary: dict[str, Any], plots: Sequence[str]) -> str:
    e = html.escape
    ref = summary["reference"]
    head = "".join(f"<th>{e(title)}</th>" for _, title in _TABLE_KEYS)
    body = []
    for label, v in summary["variants"].items():
        name = f"{e(label)} (reference)" if label == ref else e(label)
        cells = "".join(f"<td>{'n/a' if v[k] is None else v[k]}</td>" for k, _ in _TABLE_KEYS)
        body.append(f"<tr><th>{name}</th>{cells}</tr>")
    images = "\n".join(f'<p><img src="{e(p)}" alt="{e(p)}"></p>' for p in plots)
    meta = ", ".join(
        f"{e(k)}: {e(str(summary[k]))}" for k in ("source", "frames", "match_iou") if k in summary
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>FrameLens comparison</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}img{{max-width:100%}}</style>
</head><body>
<h1>FrameLens comparison against {e(ref)}</h1>
<p>{meta}</p>
<p>Detections at each variant's confidence threshold, matched per frame and class
against the reference (IoU &ge; {e(str(summary.get("match_iou", 0.5)))}).
n/a: not applicable (no matched pair; PSNR/SSIM for image outputs only).
Per-frame data: <a href="{CSV_FILE}">{CSV_FILE}</a>, summary: <a href="{SUMMARY}">{SUMMARY}</a>.</p>
<table><tr><th>variant</th>{head}</tr>
{chr(10).join(body)}
</table>
{_tracks_html(summary)}{_counts_html(summary)}{images}
</body></html>
"""


def write_report_files(folder: Path, log: CompareLog, summary: dict[str, Any]) -> list[Path]:
    """Write every file of the report into ``folder``; returns their paths."""
    (folder / SUMMARY).write_text(
        json.dumps(summary, indent=2, allow_nan=False) + "\n", encoding="utf-8"
    )
    write_csv(folder / CSV_FILE, log)
    events = [EVENTS_FILE] if write_events_csv(folder / EVENTS_FILE, log) else []
    plots = write_plots(folder, log, summary)
    (folder / HTML_FILE).write_text(_html(summary, plots), encoding="utf-8")
    return [folder / n for n in (SUMMARY, CSV_FILE, *events, *plots, HTML_FILE)]


def compare_report_folder(folder: str | Path, stem: str) -> Path:
    """Where a compare report chosen to go in ``folder`` is written.

    ``folder`` itself when it is empty or holds an earlier report (overwritten), else a
    new ``<stem>_compare`` subfolder in it (``_2``, ``_3``... when taken).
    """
    try:
        return check_dir_target(folder, REPORT_FILES)
    except ExportError:
        base = Path(folder) / f"{stem or 'video'}_compare"
        target, n = base, 2
        while target.exists():
            try:
                return check_dir_target(target, REPORT_FILES)
            except ExportError:
                target = base.with_name(f"{base.name}_{n}")
                n += 1
        return check_dir_target(target, REPORT_FILES)
