"""The wall paint benchmark's in-process A/Bs (benchmarks/wall_paint.py --glyphs and
--layer-baseline), run small on the CPU: both sides painted and timed, the ratio of their
medians written."""

from __future__ import annotations

import hashlib
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
    tree's: the baseline side is HEAD's gui/wall/tile_layer.py in a module of its own,
    today's side the package's; both paint the same scene, each timed in every run."""
    report = _layer_ab(tmp_path / "layer.json", "--layer-baseline", "HEAD")
    git = ["git", "-C", str(ROOT)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()  # fmt: skip
    committed = subprocess.run([*git, "show", "HEAD:gui/wall/tile_layer.py"],
                               capture_output=True, check=True).stdout  # fmt: skip
    assert report["baseline_revision"] == head
    baseline, now = report["baseline"], report["now"]
    assert baseline["layer_module"] == "baseline_tile_layer"
    assert now["layer_module"] == "framelens.gui.wall.tile_layer"
    assert baseline["layer_source_sha1"] == hashlib.sha1(committed).hexdigest()
    for side in (now, baseline):
        assert len(side["layer_cpu_ms_runs"]) == 2
        assert side["layer_cpu_ms"] > 0
    assert abs(report["now_over_baseline"] - now["layer_cpu_ms"] / baseline["layer_cpu_ms"]) < 0.01


def test_the_layer_a_bs_refuse_options_they_would_ignore() -> None:
    """``--glyphs`` with ``--layer-baseline``, or either with ``--baseline``/``--shared``:
    one line, exit 2, nothing measured."""
    for option in (["--glyphs", "--layer-baseline", "HEAD"], ["--glyphs", "--shared"],
                   ["--layer-baseline", "HEAD", "--baseline", "HEAD"]):  # fmt: skip
        done = subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "wall_paint.py"), *option],
            capture_output=True, text=True, timeout=120, check=False,
            env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
        )  # fmt: skip
        assert done.returncode == 2, option
        assert "Traceback" not in done.stderr
        assert "--glyphs" in done.stderr.strip().splitlines()[-1]
