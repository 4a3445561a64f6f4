"""A video stored sideways with a display matrix (a phone's portrait video) is shown,
analysed and exported upright, as every player shows it: before, FrameLens showed it
on its side, and a person lying on their side is not found."""

from __future__ import annotations

import json
from pathlib import Path

import av
import numpy as np
import pytest
from framelens.cli import main
from framelens.core.pipeline import build
from framelens.core.stages.sources import open_source
from framelens.core.stages.sources.rotation import display_turns
from media_factory import encode_frames, sample_frames

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
PERSON = tuple(range(296, 312))  # the person walks through the middle of the picture


def marked(width: int = 96, height: int = 64) -> np.ndarray:
    """A dark picture with a bright block in its top-left corner."""
    image = np.full((height, width, 3), 40, np.uint8)
    image[: height // 3, : width // 3] = 230
    return image


@pytest.mark.parametrize("turns", [0, 1, 2, 3])
def test_a_turned_video_reads_upright_at_its_upright_size(tmp_path: Path, turns: int) -> None:
    video = encode_frames(tmp_path / "phone.mp4", [marked()] * 3, turns=turns)
    with av.open(str(video)) as container:  # stored on its side unless turns is 0 or 2
        stored = container.streams.video[0]
        assert (stored.width, stored.height) == ((64, 96) if turns % 2 else (96, 64))
    source = open_source(str(video))
    try:
        assert (source.info.width, source.info.height) == (96, 64)
        frame = source.read()
        assert frame is not None and frame.image.shape == (64, 96, 3)
        corners = [frame.image[:10, :10], frame.image[:10, -10:], frame.image[-10:, :10]]
        assert [int(c.mean()) > 150 for c in corners] == [True, False, False]
        assert source.fallback_reason == (
            f"turned {90 * turns} degrees for display: decoded and turned on the CPU"
            if turns
            else None
        )
    finally:
        source.close()
    assert display_turns(video) == turns
    assert build.decodes_on_device(str(video)) == (turns == 0)  # NVDEC hands it on its side


def test_seeking_in_a_turned_video_gives_upright_frames(tmp_path: Path) -> None:
    images = sample_frames(SAMPLE, PERSON)
    video = encode_frames(tmp_path / "phone.mp4", images, turns=3, gop=4)
    source = open_source(str(video))
    try:
        source.seek(9)
        frame = source.read()
        assert frame is not None and frame.index == 9
        difference = np.abs(frame.image.astype(np.int16) - images[9].astype(np.int16))
        assert frame.image.shape == images[9].shape and float(difference.mean()) < 6
    finally:
        source.close()


def test_run_finds_and_exports_in_a_turned_video_what_it_finds_upright(tmp_path: Path) -> None:
    """The same frames, recorded upright and recorded turned: the same people in the
    same boxes, and an exported video that plays upright at the upright size."""
    images = sample_frames(SAMPLE, PERSON)
    found = {}
    for name, turns in (("upright", 0), ("turned", 1)):
        video = encode_frames(tmp_path / f"{name}.mp4", images, turns=turns)
        out = tmp_path / f"{name}.json"
        export = tmp_path / f"{name}-annotated.mp4"
        args = ["run", str(video), "--quiet", "--detections", str(out), "--export", str(export)]
        assert main(args) == 0
        found[name] = json.loads(out.read_text())["frames"]
        with av.open(str(export)) as container:
            stream = container.streams.video[0]
            assert (stream.width, stream.height) == (768, 432)
            assert next(container.decode(stream)).rotation == 0
    people = [[d for d in f["detections"] if d["label"] == "person"] for f in found["upright"]]
    assert sum(map(len, people)) >= len(PERSON)  # the comparison compares someone
    for upright, turned in zip(found["upright"], found["turned"], strict=True):
        assert [d["label"] for d in turned["detections"]] == [
            d["label"] for d in upright["detections"]
        ]
        for a, b in zip(upright["detections"], turned["detections"], strict=True):
            assert iou(a["box"], b["box"]) > 0.9, (a, b)  # each file is compressed its own way


def iou(a: list[float], b: list[float]) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - w * h
    return w * h / union
