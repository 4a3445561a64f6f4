"""Rough edge 14, the soak: an 11,000-frame ``framelens run --export --detections``
grows host memory (RSS) by at most 40 MiB from 25 s after its start to its end.

Marker ``soak``: not in the main test run (it takes minutes); CI runs it as a step of
its own (``pytest -m soak tests/soak``). The video is small (160x120) so the run path is
what is measured, not 1080p decoding; the model is the default one, at its own input.
RSS is sampled from /proc every 0.25 s.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

pytestmark = pytest.mark.soak

FRAMES = 11_000
SETTLE_S = 25.0  # the baseline: after engine start-up and arena growth
GROWTH_MIB = 40.0


def write_long_clip(path: Path, frames: int) -> Path:
    """A moving pattern (so detection and encoding do real work), H.264, 30 fps."""
    w, h = 160, 120
    yy, xx = np.mgrid[0:h, 0:w].astype(np.uint8)  # uint8 sums wrap: (xx + i) % 256
    img = np.zeros((h, w, 3), np.uint8)  # one buffer: from_ndarray copies it
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
        stream.codec_context.time_base = Fraction(1, 30)
        stream.codec_context.options = {"preset": "ultrafast"}
        for i in range(frames):
            np.add(xx, np.uint8(i % 256), out=img[..., 0])
            np.add(yy * np.uint8(2), np.uint8(i // 3 % 256), out=img[..., 1])
            img[..., 2] = 0
            img[40:80, (i % 120) : (i % 120) + 40] = 255
            out.mux(stream.encode(av.VideoFrame.from_ndarray(img, format="bgr24")))
        out.mux(stream.encode(None))
    return path


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc (Linux)")
def test_an_11000_frame_export_does_not_grow_host_memory(tmp_path: Path) -> None:
    video = write_long_clip(tmp_path / "long.mp4", FRAMES)
    out, dets = tmp_path / "out.mp4", tmp_path / "out.json"
    exe = Path(sys.executable).with_name("framelens")
    cmd = [str(exe), "run", str(video), "--export", str(out), "--detections", str(dets)]
    proc = subprocess.Popen([*cmd, "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    start = time.monotonic()
    samples: list[tuple[float, float]] = []
    while proc.poll() is None:
        value = rss_mib(proc.pid)
        if value is not None:
            samples.append((time.monotonic() - start, value))
        time.sleep(0.25)
        assert time.monotonic() - start < 1500, "the soak run hung"
    _, err = proc.communicate()
    assert proc.returncode == 0, err.decode(errors="replace")
    wall = time.monotonic() - start
    assert wall > SETTLE_S + 10, f"the run took {wall:.0f} s: too short to say anything"
    baseline = next(v for t, v in samples if t >= SETTLE_S)
    peak_after = max(v for t, v in samples if t >= SETTLE_S)
    growth = peak_after - baseline
    report = (
        f"soak: {FRAMES} frames in {wall:.0f} s, RSS {baseline:.0f} MiB at {SETTLE_S:.0f} s,"
        f" peak after {peak_after:.0f} MiB: +{growth:.1f} MiB"
    )
    print(report)
    if path := os.environ.get("FRAMELENS_SOAK_REPORT"):
        Path(path).write_text(report + "\n")
    assert growth <= GROWTH_MIB, report
    with av.open(str(out)) as container:  # every frame exported
        assert sum(1 for _ in container.demux(video=0) if _.size) == FRAMES
    assert dets.stat().st_size > 0
