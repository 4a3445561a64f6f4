"""`framelens compare` as a user runs it: a subprocess, the real model and sample."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from framelens.cli import sample_video
from framelens.core.pipeline.compare.records import VARIANT_KEYS

SAMPLE = str(sample_video())


def framelens(*args: str, cache: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if cache is not None:  # precision variants go here, not into the user's cache
        env["FRAMELENS_CACHE_DIR"] = str(cache)
    return subprocess.run(
        [sys.executable, "-m", "framelens.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--precisions", "fp32,fp16", "--reference", "int8"], "reference int8 is not among"),
        (["--precisions", "fp32,fp9"], "unknown precision fp9"),
        (["--precisions", "fp32"], "2 to 4"),
    ],
)
def test_bad_options_are_one_line_and_leave_nothing(
    tmp_path: Path, extra: list[str], message: str
) -> None:
    proc = framelens("compare", SAMPLE, "--frames", "2", "--report", str(tmp_path / "r"), *extra)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_unwritable_report_dir_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    report = blocker / "report"
    proc = framelens("compare", SAMPLE, "--precisions", "fp32,fp16", "--report", str(report))
    assert proc.returncode == 2 and "cannot write" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["file"]


def test_compare_writes_the_report(tmp_path: Path) -> None:
    report, cache = tmp_path / "report", tmp_path / "cache"
    frames = 4
    proc = framelens(
        "compare",
        SAMPLE,
        "--precisions",
        "fp16,fp32",
        "--reference",
        "fp32",
        "--start",
        "540",
        "--frames",
        str(frames),
        "--conf",
        "0.3",
        "--quiet",
        "--report",
        str(report),
        cache=cache,
    )
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    data = json.loads((report / "summary.json").read_text())
    assert printed["report"] == str(report) and printed["variants"] == data["variants"]
    assert data["reference"] == "fp32" and set(data["variants"]) == {"fp32", "fp16"}
    for name, variant in data["variants"].items():
        assert set(VARIANT_KEYS) <= set(variant)
        assert variant["precision_mode"] == name and variant["conf"] == 0.3
    assert data["variants"]["fp32"]["f1"] == 1.0
    assert 0.0 <= data["variants"]["fp16"]["f1"] <= 1.0
    assert len(list(csv.DictReader((report / "frames.csv").open()))) == frames
    page = (report / "index.html").read_text()
    assert 'src="latency.png"' in page and (report / "latency.png").stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "report"]
