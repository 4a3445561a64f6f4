"""The wall paint benchmark's in-process A/Bs (benchmarks/wall_paint.py --glyphs and
--layer-baseline), run small on the CPU: both sides painted and timed, the ratio of their
medians written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _layer_ab(out: Path, *mode: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "wall_paint.py"), *mode, "--runs", "2",
         "--paints", "4", "--warmup", "1", "--output", str(out)],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def test_the_glyphs_a_b_times_both_sides_and_writes_their_ratio(tmp_path: Path) -> None:
    report = _layer_ab(tmp_path / "layer.json", "--glyphs")
    assert report["glyphs_below_px"] > 0  # the wall's own threshold, not 0
    for side in ("glyphs", "outlines"):
        assert len(report[side]["layer_cpu_ms_runs"]) == 2
        assert report[side]["layer_cpu_ms"] > 0
    ratio = report["glyphs"]["layer_cpu_ms"] / report["outlines"]["layer_cpu_ms"]
    assert abs(report["glyphs_over_outlines"] - ratio) < 0.01


def test_the_layer_a_b_paints_a_revision_s_layer_beside_today_s(tmp_path: Path) -> None:
    """The committed layer (HEAD: a clone of any depth has it) against the working
    tree's: both paint the same scene, each side timed in every run."""
    report = _layer_ab(tmp_path / "layer.json", "--layer-baseline", "HEAD")
    assert report["baseline_revision"] == "HEAD"
    for side in ("now", "baseline"):
        assert len(report[side]["layer_cpu_ms_runs"]) == 2
        assert report[side]["layer_cpu_ms"] > 0
    ratio = report["now"]["layer_cpu_ms"] / report["baseline"]["layer_cpu_ms"]
    assert abs(report["now_over_baseline"] - ratio) < 0.01
