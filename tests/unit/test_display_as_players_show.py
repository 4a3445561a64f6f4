"""A file's frames as every player shows them: a video stored sideways with a display
matrix (a phone's portrait video) is shown, analysed and exported upright (before,
FrameLens showed it on its side, and a person lying on their side is not found), and
non-square pixels (SD, DV, many CCTV recorders) are made square (before, circles were
ovals and people thinner or wider than they are)."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np
import pytest
from framelens.cli import main
from framelens.core.pipeline import decoding
from framelens.core.stages.sinks.detections import frame_detections
from framelens.core.stages.sources import open_source
from framelens.core.stages.sources.display import AS_STORED
from framelens.core.stages.sources.file import display_of
from framelens.core.stages.tasks.detect.agreement import AgreementTotals
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
            f"turned {90 * turns} degrees for display, on the CPU" if turns else None
        )
    finally:
        source.close()
    assert display_of(video) == (f"turned {90 * turns} degrees" if turns else AS_STORED)
    assert decoding.decodes_on_device(str(video)) == (turns == 0)  # NVDEC hands it on its side


# Display matrices as files carry them (FFmpeg's AV_PKT_DATA_DISPLAYMATRIX, 16.16 fixed
# point), not as PyAV's helper writes them: an iPhone's portrait video, and the mirrors
# some cameras add. Where the block of the upright picture's top-left corner shows, as
# FFmpeg's autorotate (transpose, hflip, vflip) shows it.
ONE = 65536
MATRICES = {
    "iphone portrait: turned clockwise": ([0, ONE, 0, -ONE, 0, 0, 0, 0, 1 << 30], "top-right"),
    "transposed (turned and mirrored)": ([0, ONE, 0, ONE, 0, 0, 0, 0, 1 << 30], "top-left"),
    "mirrored left to right": ([-ONE, 0, 0, 0, ONE, 0, 0, 0, 1 << 30], "top-right"),
    "upside down": ([-ONE, 0, 0, 0, -ONE, 0, 0, 0, 1 << 30], "bottom-right"),
    "mirrored top to bottom": ([ONE, 0, 0, 0, -ONE, 0, 0, 0, 1 << 30], "bottom-left"),
}


@pytest.mark.parametrize("name", list(MATRICES))
def test_display_matrices_are_shown_as_ffmpeg_shows_them(tmp_path: Path, name: str) -> None:
    matrix, where = MATRICES[name]
    video = tmp_path / "camera.mp4"
    with av.open(str(video), "w") as out:
        stream = out.add_stream("libx264", rate=10)
        stream.width, stream.height, stream.pix_fmt = 96, 64, "yuv420p"
        stream.set_display_matrix(matrix)
        for packet in stream.encode(av.VideoFrame.from_ndarray(marked(), format="bgr24")):
            out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    with open_source(str(video)) as source:
        frame = source.read()
    assert frame is not None
    turned = "turned" in name or "portrait" in name
    assert frame.image.shape == ((96, 64, 3) if turned else (64, 96, 3))
    corners = {
        "top-left": frame.image[:8, :8],
        "top-right": frame.image[:8, -8:],
        "bottom-left": frame.image[-8:, :8],
        "bottom-right": frame.image[-8:, -8:],
    }
    assert {k for k, c in corners.items() if c.mean() > 150} == {where}


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
    totals = AgreementTotals()
    for upright, turned in zip(found["upright"], found["turned"], strict=True):
        totals.add_frame(frame_detections(upright), frame_detections(turned))
    people = sum(d["label"] == "person" for f in found["upright"] for d in f["detections"])
    assert people >= len(PERSON)  # the comparison compares someone
    # each file is compressed its own way: a detection near the threshold may differ
    assert totals.f1 >= 0.9 and totals.mean_iou >= 0.9, totals.as_dict()


def test_a_batch_redoes_a_turned_video_whose_results_were_recorded_on_its_side(
    tmp_path: Path,
) -> None:
    """Results recorded before turned videos were read upright hold their boxes on the
    side: a re-run redoes those inputs (once; the manifest then says how each is shown)
    and skips the upright ones, as before."""
    from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
    from framelens.core.pipeline.settings import PipelineSettings
    from framelens.core.sessions.archive import run_batch

    archive = tmp_path / "archive"
    archive.mkdir()
    images = sample_frames(SAMPLE, PERSON[:6])
    encode_frames(archive / "upright.mp4", images)
    encode_frames(archive / "phone.mp4", images, turns=1)
    out = tmp_path / "results"
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)
    first = run_batch([str(archive)], out, settings, progress=False)
    assert (first.done, first.skipped) == (2, 0)
    manifest = json.loads((out / "manifest.json").read_text())
    shown = {Path(e["path"]).name: e["settings"]["display"] for e in manifest["inputs"]}
    assert shown == {"upright.mp4": "as stored", "phone.mp4": "turned 90 degrees"}
    for entry in manifest["inputs"]:  # as FrameLens wrote it before
        del entry["settings"]["display"]
    (out / "manifest.json").write_text(json.dumps(manifest))
    again = run_batch([str(archive)], out, settings, progress=False)
    assert (again.done, again.skipped) == (1, 1)
    manifest = json.loads((out / "manifest.json").read_text())
    assert all("display" in e["settings"] for e in manifest["inputs"])
    last = run_batch([str(archive)], out, settings, progress=False)
    assert (last.done, last.skipped) == (0, 2)


def round_thing(width: int, height: int) -> np.ndarray:
    """A white disc on grey, as shown (square pixels)."""
    image = np.full((height, width, 3), 90, np.uint8)
    cv2.circle(image, (width // 2, height // 2), height // 3, (255, 255, 255), -1)
    return image


def disc_size(image: np.ndarray) -> tuple[int, int]:
    """(width, height) of the white disc in ``image``."""
    ys, xs = np.nonzero(image[:, :, 1] > 200)
    return int(xs.max() - xs.min() + 1), int(ys.max() - ys.min() + 1)


@pytest.mark.parametrize(("aspect", "stored", "turns"), [
    (Fraction(12, 11), (704, 576), 0),  # PAL 4:3 (a CCTV recorder's D1)
    (Fraction(16, 11), (704, 576), 0),  # PAL 16:9
    (Fraction(4, 3), (1440, 1080), 0),  # HDV
])  # fmt: skip
def test_non_square_pixels_are_shown_square(
    tmp_path: Path, aspect: Fraction, stored: tuple[int, int], turns: int
) -> None:
    """A disc stored squeezed into non-square pixels reads back round, at the size
    players show, and the run's export is that picture with square pixels."""
    width = 2 * round(stored[0] * aspect / 2)
    shown = round_thing(width, stored[1])
    squeezed = cv2.resize(shown, stored, interpolation=cv2.INTER_AREA)
    video = encode_frames(tmp_path / "sd.mp4", [squeezed] * 3, turns=turns, pixel_aspect=aspect)
    upright = (stored[1], width) if turns % 2 else (width, stored[1])
    with open_source(str(video)) as source:
        assert (source.info.width, source.info.height) == upright
        frame = source.read()
    assert frame is not None
    w, h = disc_size(frame.image)
    assert abs(w - h) <= 3, (w, h)  # round: squeezed it was about 1/aspect as wide
    made_square = f"pixels of {aspect.numerator}:{aspect.denominator} made square"
    assert display_of(video) == (f"{made_square}, turned 90 degrees" if turns else made_square)
    assert not decoding.decodes_on_device(str(video))
    export = tmp_path / "annotated.mp4"
    # --conf 0.99: no box drawn over the disc (YOLOX sees a ball or a clock in it)
    assert main(["run", str(video), "--quiet", "--conf", "0.99", "--export", str(export)]) == 0
    with av.open(str(export)) as container:
        stream = container.streams.video[0]
        assert (stream.width, stream.height) == upright
        assert stream.sample_aspect_ratio in (None, Fraction(0), Fraction(1))
        w, h = disc_size(next(container.decode(stream)).to_ndarray(format="bgr24"))
    assert abs(w - h) <= 3, (w, h)


@pytest.mark.parametrize("kind", ["phone mp4 turned", "pal ts with non-square pixels"])
def test_a_video_served_over_http_is_shown_as_players_show_it(tmp_path: Path, kind: str) -> None:
    """The same for a file opened by its URL (a real HTTP server on 127.0.0.1): a phone's
    MP4 (index first, as it downloads) upright, an MPEG-TS feed's pixels made square."""
    from loopback_server import LoopbackStreamServer

    if kind.startswith("phone"):
        video = encode_frames(tmp_path / "phone.mp4", [marked()] * 20, turns=3, faststart=True)
        size, corner = (96, 64), "top-left"
    else:
        shown = round_thing(768, 576)
        squeezed = cv2.resize(shown, (704, 576), interpolation=cv2.INTER_AREA)
        video = encode_frames(tmp_path / "d1.ts", [squeezed] * 20, pixel_aspect=Fraction(12, 11))
        size, corner = (768, 576), ""
    server = LoopbackStreamServer(video.read_bytes(), bytes_per_s=4e6)
    server.start()
    try:
        with open_source(server.url) as source:
            assert (source.info.width, source.info.height) == size
            frame = source.read()
    finally:
        server.stop()
    assert frame is not None and frame.image.shape[:2] == (size[1], size[0])
    if corner:
        assert frame.image[:8, :8].mean() > 150 and frame.image[-8:, -8:].mean() < 100
    else:
        w, h = disc_size(frame.image)
        assert abs(w - h) <= 3, (w, h)
