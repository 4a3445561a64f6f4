"""The public MOT sample data that ships inside py-motmetrics (TUD-Campus, TUD-Stadtmitte:
a ground truth and a tracker's output each), found without importing motmetrics (its
import needs pandas, which FrameLens does not install)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


def motmetrics_data(sequence: str = "TUD-Campus") -> Path:
    """The folder of ``sequence`` in py-motmetrics' data (gt.txt, test.txt); the test is
    skipped when py-motmetrics is not installed (installer/setup.sh --dev installs it)."""
    spec = importlib.util.find_spec("motmetrics")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("py-motmetrics (its sample data) is not installed")
    folder = Path(next(iter(spec.submodule_search_locations))) / "data" / sequence
    if not (folder / "gt.txt").is_file():
        pytest.skip(f"py-motmetrics ships no {sequence} here")
    return folder
