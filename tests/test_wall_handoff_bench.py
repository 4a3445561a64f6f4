"""The wall hand-off benchmark (benchmarks/wall_handoff.py), run small on the CPU: the real
wall process against a consumer of a given paint rate, without a window."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.serial  # times itself: runs alone (installer/test.sh)
def test_a_fast_consumer_gets_the_wall_s_results_and_a_slow_one_is_capped_by_its_paints(
    tmp_path: Path,
) -> None:
    """Two tiles at 30 fps: a consumer painting 60 times a second is shown what the wall
    makes; one painting 10 times a second sees each tile at most 10 times a second, the
    rest dropped by core and counted; nothing is drawn over unseen in the hand-off."""
    out = tmp_path / "wall-handoff.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "wall_handoff.py"), "--rates", "60,10",
         "--sources", "2", "--runs", "1", "--seconds", "3", "--warmup", "1",
         "--output", str(out)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    fast, slow = report["rates"]["60"], report["rates"]["10"]
    assert len(fast["runs"]) == len(slow["runs"]) == 1
    # 2 tiles x 30 fps made; the fast consumer shown nearly all, the slow one <= 2 x 10
    assert fast["shown_per_s"] >= 0.8 * 60
    assert slow["shown_per_s"] <= 2 * 10 + 2
    assert slow["dropped_by_core"] > 0
    assert fast["replaced_in_handoff"] == slow["replaced_in_handoff"] == 0


def _refused(script: str, option: list[str]) -> str:
    """``benchmarks/<script>`` with ``option``: it must exit 2 with one line, no
    traceback; that line."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *option],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, option
    assert "Traceback" not in done.stderr
    return done.stderr.strip().splitlines()[-1]


def test_a_late_or_depths_option_that_is_not_one_says_so_in_one_line() -> None:
    """``--late MS,EVERY`` and ``--depths N,...``: anything else is argparse's one-line
    error (exit 2), before any clip is made or wall started."""
    for option in (["--late", "60"], ["--depths", "2,x"], ["--depths", "0"]):
        assert f"argument {option[0]}: invalid" in _refused("wall_handoff.py", option)


def test_the_wall_screen_depths_that_are_not_one_say_so_in_one_line() -> None:
    """benchmarks/wall_screen.py's ``--depths``: a depth that is not one, or depths
    without the wall's own process, are argparse's one-line error (exit 2), before any
    window or clip is made."""
    cases = [
        (["--processes", "--depths", "2,x"], "argument --depths: invalid queue_depths value"),
        (["--depths", "2,5"], "--depths takes a wall in its own process"),
    ]
    for option, says in cases:
        assert says in _refused("wall_screen.py", option)
