"""The hand-off benchmark (benchmarks/handoff.py), run small: it drives the session that
``framelens run`` uses, each run in a process of its own, and reports per frame what
docs/benchmarks.md quotes (fps, CPU time, context switches; the GPU-like row against its
decoder alone; a profile of every thread)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.serial  # times itself: runs alone (installer/test.sh)
def test_the_handoff_benchmark_measures_the_session_and_profiles_its_threads(
    tmp_path: Path,
) -> None:
    out = tmp_path / "handoff.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "handoff.py"), "--runs", "1",
         "--frames", "60", "--configs", "batch1-2w,gpu-like-batch1-2w", "--profile",
         "--output", str(out)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    live = result["batch1-2w"]["now"]
    assert live["driver"] == "session"  # the path framelens run takes, not a copy of it
    assert live["fps"]["median"] > 0 and live["switches_per_frame"]["median"] >= 0
    assert live["cpu_us_per_frame"]["median"] > 0
    like = result["gpu-like-batch1-2w"]["now"]
    # the decoder's own rate bounds the run: the run may not beat it by much
    assert 0 < like["of_decoder_alone"]["median"] < 1.2
    threads = result["batch1-2w"]["profile"]["threads"]
    assert {"fl-decode-ahead", "fl-worker", "consumer"} <= set(threads)
    assert threads["fl-worker"]["threads"] == 2


def test_the_handoff_benchmark_tracks_every_source_of_a_process_with_and_without(
    tmp_path: Path,
) -> None:
    """``--boxes 3 --track-ab``: one process of a 4-source run, ByteTrack on and off
    alternated; the tracked runs follow each source's three boxes (3 tracks a source on
    its last frame)."""
    out = tmp_path / "track.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "handoff.py"), "--runs", "1",
         "--frames", "40", "--configs", "4src-batch8-2w", "--boxes", "3", "--track-ab", "1",
         "--output", str(out)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["sources"] == {"4src-batch8-2w": 4} and result["boxes_per_frame"] == 3
    entry = result["4src-batch8-2w"]
    assert entry["now"]["fps"]["median"] > 0
    tracking = entry["tracking"]
    assert len(tracking["fps_with"]) == len(tracking["fps_without"]) == 1
    assert tracking["tracks_on_last_frames"] == [12]  # 4 sources x 3 boxes, each a track
