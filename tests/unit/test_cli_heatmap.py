"""`framelens run --track --heatmap [--heatmap-png]` on the sample video (app/cli.py,
core/stages/analytics/heatmap.py): the heatmap is drawn into the exported frames and
saved as a PNG where the tracked people stood, and nowhere else; bad combinations are
one line, exit 2, nothing written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt
import pytest
from framelens.cli import sample_video

SAMPLE = str(sample_video())
FRAMES = 110  # the first person comes in (tracked from frame 64) and stands at the table
REACH = 60  # pixels either way of a tested point the heat can reach (5 cells of 8 its cell
# and the kernel, and a cell of blur from scaling the grid up)


def framelens(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "framelens", *args], capture_output=True, text=True, timeout=300
    )


def _near_tracks(detections: Path, shape: tuple[int, int]) -> npt.NDArray[np.bool_]:
    """Pixels within REACH (either way) of a tracked box's bottom centre in any frame."""
    near = np.zeros(shape, np.uint8)
    for frame in json.loads(detections.read_text())["frames"]:
        for d in frame["detections"]:
            if d["track_id"] > 0:
                x1, _y1, x2, y2 = d["box"]
                x, y = round((x1 + x2) / 2), round(y2)
                cv2.rectangle(near, (x - REACH, y - REACH), (x + REACH, y + REACH), 1, -1)
    return near.astype(bool)


def _source_frame(index: int) -> npt.NDArray[np.uint8]:
    """Frame ``index`` of the sample as FrameLens decodes it."""
    from framelens.core.stages.sources import open_source

    source = open_source(SAMPLE)
    try:
        source.seek(index)
        frame = source.read()
        assert frame is not None
        return frame.image
    finally:
        source.close()


def test_the_heatmap_is_drawn_into_the_export_and_saved_where_people_stood(
    tmp_path: Path,
) -> None:
    heated, plain = tmp_path / "heated", tmp_path / "plain"
    png, dets = tmp_path / "heat.png", tmp_path / "d.json"
    common = ["--track", "--frames", str(FRAMES), "--quiet"]
    proc = framelens("run", SAMPLE, *common, "--heatmap", "--heatmap-png", str(png),
                     "--export", f"{heated}/", "--detections", str(dets))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert str(png) in proc.stderr.splitlines()[-1]  # said as written
    assert framelens("run", SAMPLE, *common, "--export", f"{plain}/").returncode == 0
    last = f"frame_{FRAMES - 1:06d}.png"
    a, b = cv2.imread(str(heated / last)), cv2.imread(str(plain / last))
    near = _near_tracks(dets, a.shape[:2])
    assert near.any() and near.mean() < 0.2  # somebody was tracked, in a small part
    differs = np.any(a != b, axis=2)
    assert differs.sum() > 500  # the heat is in the exported frame...
    assert not differs[~near].any()  # ...only where tracked people stood (the boxes agree)
    heat = cv2.imread(str(png))
    source = _source_frame(FRAMES - 1)
    assert heat.shape == source.shape
    on_frame = np.any(heat != source, axis=2)
    assert on_frame.sum() > 500 and not on_frame[~near].any()  # no boxes: the clean frame
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())  # no temporary left


def test_several_sources_each_get_their_heatmap_png(tmp_path: Path) -> None:
    out = tmp_path / "out"
    sources = []
    for name in ("a", "b"):
        (tmp_path / f"{name}.mp4").write_bytes(Path(SAMPLE).read_bytes())
        sources.append(str(tmp_path / f"{name}.mp4"))
    proc = framelens("run", *sources, "--export-dir", str(out), "--track", "--frames", "80",
                     "--quiet", "--heatmap", "decay", "--heatmap-png")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    a, b = cv2.imread(str(out / "a.heatmap.png")), cv2.imread(str(out / "b.heatmap.png"))
    assert a.shape == (432, 768, 3) and np.array_equal(a, b)  # the same video, the same heat


@pytest.mark.parametrize(
    "args, message",
    [
        (["--heatmap"], "--heatmap shows where tracks have been: add --track"),
        (["--track", "--heatmap-png", "h.png"], "--heatmap-png writes the heatmap: add --heatmap"),
        (["--track", "--heatmap", "--heatmap-half-life", "3"], "add --heatmap decay"),
        (["--track", "--heatmap", "--heatmap-png"], "--heatmap-png needs a file"),
        (["--track", "--heatmap", "--heatmap-png", "h.jpg"], "does not end in .png"),
        (["--track", "--heatmap", "--heatmap-png", "nodir/h.png"], "does not exist"),
        (["--track", "--heatmap", "decay", "--heatmap-half-life", "0"], "half-life must be"),
    ],
)
def test_bad_heatmap_options_are_one_line_exit_2_and_nothing_written(
    tmp_path: Path, args: list[str], message: str
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "framelens", "run", SAMPLE, "--frames", "2", "--quiet",
         "--detections", "d.json", *args],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []
