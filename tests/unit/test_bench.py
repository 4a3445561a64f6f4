"""`framelens bench` measures both loops on the same frames and reports them as JSON."""

from __future__ import annotations

import json
from pathlib import Path

from framelens.cli import main


def test_bench_writes_fps_of_both_loops_and_stage_medians(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    assert main(["bench", "--frames", "12", "--output", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["naive_fps"] > 0 and data["pipeline_fps"] > 0
    # fps are rounded to 0.01 in the JSON, the speedup (to 0.001) is computed before:
    # the rounded fps' ratio is off by at most their rounding, worst way round (a slow
    # naive loop, 2.28 fps, puts that at 0.04)
    fast, slow = data["pipeline_fps"], data["naive_fps"]
    worst = (fast + 0.005) / (slow - 0.005) - fast / slow + 0.0005
    assert abs(data["speedup"] - fast / slow) <= worst
    for key in ("naive_stage_ms", "pipeline_stage_ms"):
        stages = data[key]
        assert {"decode", "preprocess", "inference", "postprocess", "draw", "encode", "e2e"} <= set(
            stages
        )
        assert stages["e2e"] >= stages["inference"] > 0


def test_bench_shows_progress_on_a_terminal_and_none_in_a_pipe(tmp_path: Path) -> None:
    """Rough edge 12: each step of the bench has a progress bar where stderr is a
    terminal (a real pseudo-terminal here); piped output stays clean."""
    import os
    import pty
    import subprocess
    import sys

    command = [sys.executable, "-m", "framelens", "bench", "--frames", "8", "--no-export"]
    master, slave = pty.openpty()
    import fcntl
    import struct
    import termios

    # a terminal 120 columns wide (a fresh pseudo-terminal has none: bars would be empty)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=slave, close_fds=True)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        seen += chunk
    out, _ = proc.communicate(timeout=300)
    os.close(master)
    assert proc.returncode == 0
    text = seen.decode(errors="replace")
    assert "naive loop" in text and "pipeline, 2 workers" in text and "frame" in text
    assert json.loads(out)["pipeline_fps"] > 0  # stdout is still the JSON alone
    piped = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert piped.returncode == 0 and "naive loop" not in piped.stderr


def test_bench_of_a_clip_shorter_than_asked_reports_the_frames_measured(tmp_path: Path) -> None:
    from media_factory import write_clip

    clip = write_clip(tmp_path / "five.mp4", frames=5)
    out = tmp_path / "bench.json"
    assert main(["bench", str(clip), "--frames", "20", "--no-export", "--quiet",
                 "--output", str(out)]) == 0  # fmt: skip
    data = json.loads(out.read_text())
    assert (data["frames"], data["frames_asked"]) == (5, 20)
