"""Lossless exports for evidence work: what a run computed is exactly what decoding the
export gives back (FFV1 in .mkv, or one PNG per frame), and provenance travels with it.
Real frames of the sample upscaled by the bundled ESPCN x2, written by the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import av
import cv2
import numpy as np
import pytest
from framelens.core.models.catalog import resolve_model
from framelens.core.pipeline import build
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.stages.sources.file import FileSource
from framelens.core.types import Image, StageTimes

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
START, COUNT = 300, 3


@pytest.fixture(scope="module")
def expected() -> list[Image]:
    """The upscaled frames as the pipeline computes them, straight from the decoder."""
    pipeline = build.host_pipeline(PipelineSettings(resolve_model("espcn-x2")))
    out: list[Image] = []
    try:
        with FileSource(SAMPLE) as src:
            src.seek(START)
            for _ in range(COUNT):
                frame = src.read()
                assert frame is not None
                image = pipeline.infer(frame, StageTimes()).output.image
                assert image is not None
                out.append(image)
    finally:
        pipeline.close()
    return out


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "framelens", "run", str(SAMPLE), "--task", "superres",
         "--start", str(START), "--frames", str(COUNT), "--device", "cpu", "--quiet", *args],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_ffv1_export_decodes_to_the_computed_pixels(tmp_path: Path, expected: list[Image]) -> None:
    out = tmp_path / "evidence.mkv"
    done = _run("--export", str(out), "--lossless")
    assert done.returncode == 0, done.stderr
    with av.open(str(out)) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name == "ffv1"
        frames = [f.to_ndarray(format="bgr24") for f in container.decode(stream)]
        tags = {k.lower(): v for k, v in container.metadata.items()}  # Matroska: upper
    assert len(frames) == COUNT
    for got, want in zip(frames, expected, strict=True):
        assert np.array_equal(got, want)
    assert tags["framelens_model"] == "espcn-x2" and tags["framelens_scale"] == "2"
    assert tags["framelens_precision"] == "fp32"
    assert [p.name for p in tmp_path.iterdir()] == ["evidence.mkv"]  # nothing half-written


def test_png_folder_export_holds_every_frame_exactly(tmp_path: Path, expected: list[Image]) -> None:
    folder = tmp_path / "frames"
    done = _run("--export", f"{folder}/")
    assert done.returncode == 0, done.stderr
    names = sorted(p.name for p in folder.iterdir())
    # each file named by its frame's index in the video (--start 300: frame_000300.png)
    indexes = list(range(START, START + COUNT))
    assert names == [*(f"frame_{i:06d}.png" for i in indexes), "provenance.json"]
    for i, want in zip(indexes, expected, strict=True):
        assert np.array_equal(cv2.imread(str(folder / f"frame_{i:06d}.png")), want)
    record = json.loads((folder / "provenance.json").read_text())
    assert record["index"] == indexes
    assert record["model"] == "espcn-x2" and record["scale"] == 2 and record["frames"] == COUNT
    assert len(record["pts_s"]) == COUNT and record["pts_s"] == sorted(record["pts_s"])
    # a second export replaces its own earlier one; a folder of other files is refused
    assert _run("--export", f"{folder}/").returncode == 0
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("keep me")
    done = _run("--export", f"{tmp_path / 'other'}/")
    assert done.returncode == 2 and "holds other files" in done.stderr
    assert (tmp_path / "other" / "notes.txt").read_text() == "keep me"


def test_lossless_asks_for_a_container_that_can_hold_it(tmp_path: Path) -> None:
    done = _run("--export", str(tmp_path / "x.mp4"), "--lossless")
    assert done.returncode == 2 and "use OUT.mkv (FFV1) or a folder DIR/" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())
