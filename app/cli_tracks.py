"""`framelens evaluate`: tracks scored against ground truth.

    framelens evaluate TRACKS --gt GT.txt [--report DIR]

TRACKS is MOT Challenge text or a FrameLens detections JSON of a run that tracked; GT is
MOT Challenge text. The metrics (TrackEval's HOTA, CLEAR and Identity) go to stdout as
JSON; --report writes a folder with the same JSON, plots and index.html. A file that
cannot be read is one line naming it and the line (exit 2), and nothing is written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_parsers", "cmd_evaluate"]


def add_parsers(sub: Any) -> None:
    evaluate = sub.add_parser(
        "evaluate", help="score tracks against ground truth (HOTA, IDF1, MOTA, ...) as JSON"
    )
    evaluate.add_argument(
        "tracks", metavar="TRACKS", help="MOT Challenge text, or a FrameLens detections JSON"
    )
    evaluate.add_argument(
        "--gt", required=True, metavar="GT.txt", help="ground truth, MOT Challenge text"
    )
    evaluate.add_argument(
        "--report",
        metavar="DIR",
        help="also write an HTML report with plots (a new or empty folder, or an earlier "
        "evaluation report)",
    )


def cmd_evaluate(args: argparse.Namespace) -> int:
    from framelens.core.stages.sinks.atomic_dir import check_dir_target
    from framelens.core.stages.tracking.evaluation import ERROR_SPANS, evaluate_tracks
    from framelens.core.stages.tracking.evaluation_report import (
        EVALUATION_REPORT_FILES,
        write_evaluation_report,
    )
    from framelens.core.stages.tracking.mot import read_ground_truth, read_tracks_file

    if args.report:  # refused before the work, as one line
        check_dir_target(args.report, EVALUATION_REPORT_FILES)
    tracks = read_tracks_file(args.tracks)
    ground_truth = read_ground_truth(args.gt)
    evaluation = evaluate_tracks(
        tracks, ground_truth, error_spans=ERROR_SPANS if args.report else 0
    )
    report = write_evaluation_report(args.report, evaluation) if args.report else None
    print(json.dumps(evaluation.as_json(), indent=2))
    if report is not None:
        _print_written([report])
    return 0


def _print_written(outputs: list[Path]) -> None:
    """The last line, on stderr (stdout stays the JSON): what was written."""
    from framelens.core.stages.sinks.written import wrote_line

    sys.stdout.flush()
    print(f"framelens: {wrote_line(outputs)}", file=sys.stderr)
