"""The streams benchmark and its paced mode (benchmarks/streams.py, paced.py), run small on
the CPU as they run on the H200: the JSON keys the checks read, every run kept, the
hardware ceiling measured in the same call, drops and latency of paced cameras."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT / "benchmarks"))  # after the installed packages: never shadows one
sys.path.append(str(ROOT / "tests" / "unit"))

from media_factory import write_clip  # noqa: E402
from paced import window_figures  # noqa: E402


def bench(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "streams.py"), *args],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def test_streams_rows_keep_every_run_and_the_ceiling_measured_in_the_same_call(
    tmp_path: Path,
) -> None:
    video = write_clip(tmp_path / "small.mp4", frames=40, fps=30, size=(320, 180))
    out = tmp_path / "h200-streams.json"
    done = bench("--device", "cpu", "--sources", "2", "--processes", "1,2", "--frames", "12",
                 "--repeats", "2", "--ceiling", "2x1,2x2", "--ceiling-frames", "20",
                 "--video", str(video), "--output", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    # a progress line per run: a run cut short still shows what it measured
    assert done.stdout.count("sources in") == 4 and done.stdout.count("ceiling 2 decoders") == 4
    report = json.loads(out.read_text())
    assert not out.with_name(f".{out.name}.partial").exists()
    configs = report["hardware_nvdec"]["configs"]
    assert [(c["streams"], c["processes"]) for c in configs] == [(2, 1), (2, 2)]
    assert all(len(c["fps_runs"]) == 2 and c["fps"] > 0 for c in configs)
    ceiling = report["hardware_nvdec_fps"]
    assert ceiling == max(c["fps"] for c in configs)
    rows = report["streams"]
    assert [(r["sources"], r["processes"]) for r in rows] == [(2, 1), (2, 2)]
    for row in rows:
        runs = row["aggregate_fps_runs"]
        assert len(runs) == 2 and row["aggregate_fps"] == pytest.approx(
            float(np.median(runs)), abs=0.01
        )
        assert row["aggregate_fps_min_max"] == [min(runs), max(runs)]
        assert row["hardware_nvdec_fps"] == ceiling
        assert row["of_hardware_nvdec"] == pytest.approx(row["aggregate_fps"] / ceiling, abs=1e-3)
        # the whole call (setup included) takes longer than the frames' own span
        assert row["whole_call_fps"] < row["aggregate_fps"]
        assert row["wall_s"] > row["frames"] / row["aggregate_fps"]
        assert 0 < row["p50_ms"] <= row["p99_ms"]
        assert len(row["p99_ms_runs"]) == 2 and row["frames"] == 2 * 12


@pytest.mark.serial  # times itself: runs alone (installer/test.sh)
def test_paced_cameras_find_the_largest_n_with_every_frame_in_time(tmp_path: Path) -> None:
    video = write_clip(tmp_path / "ten.mp4", frames=30, fps=10, size=(320, 180))
    out = tmp_path / "h200-paced.json"
    done = bench("--paced", "--device", "cpu", "--sources", "1,2", "--seconds", "1.5",
                 "--settle-s", "0.5", "--step", "1", "--threads", "1", "--p99-ms", "1000",
                 "--video", str(video), "--output", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    runs = report["runs"]
    assert runs and all(r["sources"] in (1, 2) for r in runs)
    for r in runs:
        assert r["dropped"] >= 0 and r["dropped_whole_run"] >= r["dropped"]
        assert r["p99_ms"] >= r["p50_ms"] > 0
        # every frame of the run is accounted for: processed, or dropped by its camera
        assert r["frames"] + r["dropped_whole_run"] == 20 * r["sources"]
        assert r["meters"]["host_cpu_pct_median"] is not None
        assert r["passed"] == (r["dropped"] == 0 and r["p99_ms"] < 1000)
    passed = [r["sources"] for r in runs if r["passed"]]
    assert report["max_live_sources"] == max(passed, default=0)
    # paced: 15 frames at 10 fps take at least 1.4 s of camera time after the first
    assert all(r["wall_s"] >= 1.4 for r in runs)


def test_window_counts_drops_after_settling_from_the_frames_never_seen() -> None:
    fps, frames = 10.0, 30
    seen = np.array([i for i in range(frames) if i not in (2, 12, 13)])  # 2 is before 1 s
    probe = {"index": seen, "pts": seen / fps, "e2e": np.full(len(seen), 20.0),
             "t": seen * 100.0}  # fmt: skip
    probe["e2e"][-1] = 500.0  # one frame late: the p99 of 27 shows it
    got = window_figures([probe, probe], frames, fps, settle_s=1.0)
    assert got["dropped"] == 4 and got["missing_whole_run"] == 6
    assert got["p50_ms"] == 20.0 and got["p99_ms"] > 100.0 and got["max_ms"] == 500.0
    assert got["frames_in_window"] == 2 * (frames - 10 - 2)
