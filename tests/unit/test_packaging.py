"""Rough edge 12: the package builds without setuptools' warnings (the licence as an
SPDX string, the data folders as packages of their own), and the wheel holds what the
app reads at run time (the bundled models, the sample, the icons, the kernels)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_builds_quietly_and_holds_the_apps_data(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v",
         "-w", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    log = proc.stdout + proc.stderr
    assert "BuildBackendWarning" not in log and "SetuptoolsDeprecationWarning" not in log, [
        line for line in log.splitlines() if "Warning" in line
    ][:5]
    (wheel,) = tmp_path.glob("framelens-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for wanted in (
        "framelens/resources/samples/one-by-one-person-detection.mp4",
        "framelens/resources/samples/ATTRIBUTION.md",
        "framelens/resources/icons/play.svg",
        "framelens/resources/user-guide.md",  # Help > User Guide, installed
        "framelens/models/yolox_nano.onnx",
        "framelens/models/ESPCN_x2.onnx",
        "framelens/models/LICENSES.md",
        "framelens/kernels/sr_color.ptx",
        "framelens/core/sessions/runs.py",
    ):
        assert wanted in names, wanted
