"""The wall paint benchmark's in-process A/B (benchmarks/wall_paint.py --glyphs), run
small on the CPU: both sides painted and timed, the ratio of their medians written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_glyphs_a_b_times_both_sides_and_writes_their_ratio(tmp_path: Path) -> None:
    out = tmp_path / "layer.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "wall_paint.py"), "--glyphs", "--runs", "2",
         "--paints", "4", "--warmup", "1", "--output", str(out)],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["glyphs_below_px"] > 0  # the wall's own threshold, not 0
    for side in ("glyphs", "outlines"):
        assert len(report[side]["layer_cpu_ms_runs"]) == 2
        assert report[side]["layer_cpu_ms"] > 0
    ratio = report["glyphs"]["layer_cpu_ms"] / report["outlines"]["layer_cpu_ms"]
    assert abs(report["glyphs_over_outlines"] - ratio) < 0.01
