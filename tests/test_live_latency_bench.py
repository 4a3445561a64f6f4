"""The live-latency benchmark refuses a video that would end inside its timed window
(its rates would read low, as the first H200 run at 4x did), and accepts one long enough."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT / "benchmarks"))  # after the installed packages: never shadows one

from live_latency import SAMPLE, check_long_enough  # noqa: E402


def test_a_video_too_short_for_the_window_is_refused_with_the_frames_needed() -> None:
    with pytest.raises(SystemExit) as info:
        check_long_enough(str(SAMPLE), speed=100.0, seconds=8.0)
    message = str(info.value)
    assert "1394 frames" in message and "need 10001" in message
    assert "make_1080p.py" in message


def test_a_video_long_enough_passes() -> None:
    check_long_enough(str(SAMPLE), speed=8.0, seconds=8.0)  # 641 of 1394 frames
