"""Frame k is the k-th frame a file presents, whatever its timestamps say, with FFmpeg as
the oracle: a video that drops from 30 to 15 fps half way, a GIF of 8 and 9 centisecond
delays, B-frames with open GOPs, jittered timestamps, turned and non-square videos,
HEVC, VP9 and AV1. Every frame shows its own index as blocks, so every check is by
content: FFmpeg's count is FrameLens's, reading gives each frame once in order, seeking
lands on the frame asked for, and ``framelens run --start K --frames N`` exports frames
K..K+N-1 at their own times (before, FrameLens numbered frames by timestamp x rate: the
30->15 fps file ended at frame_000091.png and --start 29 gave frames 39-43)."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable, Iterator
from fractions import Fraction
from itertools import pairwise
from pathlib import Path
from typing import Any

import av
import cv2
import pytest
from archive_media import SAMPLE, json_rows, parquet_rows, sorted_rows
from frame_exact_media import (
    FFPROBE,
    Made,
    content,
    encodable,
    ffmpeg_made,
    ffprobe_count,
    ffprobe_frames,
    jittered,
    loudness,
    rate_change,
    uneven_gif,
    with_tone,
    write_stamped,
)
from framelens.cli import main
from framelens.core.api import frames_at, run_batch
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.archive.segments import keyframes
from framelens.core.sessions.playback.player import Player
from framelens.core.stages.sources import frame_index as frame_index_module
from framelens.core.stages.sources import open_source
from framelens.core.stages.sources.file import FileReader
from framelens.core.stages.sources.frame_index import frame_index
from media_factory import sample_frames
from test_player import Recorder

pytestmark = pytest.mark.skipif(FFPROBE is None, reason="needs ffprobe (Debian's ffmpeg)")

TB25 = Fraction(1, 25)
OPEN_GOP = {"bf": "3", "x264-params": "open-gop=1:keyint=12:min-keyint=12:scenecut=0"}
GOP12 = {"g": "12"}
HEVC = {"x265-params": "log-level=error:bframes=3:keyint=12:open-gop=1"}
GIF, VFR, JITTER = "GIF, 8 and 9 cs delays", "30 then 15 fps", "jittered timestamps"


def _constant(folder: Path, name: str, frames: int = 40, **kwargs: Any) -> Made:
    return write_stamped(folder / name, range(frames), TB25, **kwargs)


X264 = ("-c:v", "libx264", "-bf", "3", "-g", "12", "-x264-params", "open-gop=1")


def _src(folder: Path, frames: int = 60) -> Made:
    return _constant(folder, f"src{frames}.mp4", frames=frames)


def _cut(folder: Path) -> Made:
    whole = ffmpeg_made(_src(folder, 120), folder / "whole.mp4", *X264)
    cut = ffmpeg_made(whole, folder / "cut.mp4", "-c", "copy", seek="1.3")
    assert cut.first % 12, "the cut should start between keyframes"
    return cut


MAKERS: dict[str, tuple[str, Callable[[Path], Made]]] = {
    "constant rate": ("", lambda p: _constant(p, "c.mp4")),
    "B-frames, open GOPs": ("", lambda p: _constant(p, "b.mp4", options=OPEN_GOP, frames=60)),
    VFR: ("", lambda p: rate_change(p / "vfr.mp4")),
    JITTER: ("", lambda p: jittered(p / "jitter.mkv")),
    GIF: ("", lambda p: uneven_gif(p / "uneven.gif")),
    "turned (phone)": ("", lambda p: _constant(p, "turned.mp4", turns=1)),
    "non-square pixels": ("", lambda p: _constant(p, "wide.mp4", pixel_aspect=Fraction(4, 3))),
    "HEVC": ("libx265", lambda p: _constant(p, "hevc.mp4", codec="libx265", options=HEVC)),
    "VP9": ("libvpx-vp9", lambda p: _constant(p, "vp9.webm", codec="libvpx-vp9", options=GOP12)),
    "FFmpeg's MPEG-TS, B-frames": ("", lambda p: ffmpeg_made(_src(p), p / "ffmpeg.ts", *X264)),
    # a stream copy cut between keyframes: an edit list hides the frames decoded only
    # for the first shown one's sake
    "FFmpeg's cut (edit list)": ("", lambda p: _cut(p)),
    "AV1": ("libsvtav1", lambda p: _constant(
        p, "av1.mkv", codec="libsvtav1", size=(96, 64), options={"preset": "12", "g": "12"}
    )),
}  # fmt: skip


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], Made]]:
    folder = tmp_path_factory.mktemp("frame-exact")
    files: dict[str, Made] = {}

    def get(name: str) -> Made:
        encoder, make = MAKERS[name]
        if encoder and not encodable(encoder):
            pytest.skip(f"this PyAV build cannot encode {name} ({encoder})")
        if name not in files:
            files[name] = make(folder)
        return files[name]

    yield get


@pytest.mark.parametrize("name", list(MAKERS))
def test_reads_every_frame_once_as_ffmpeg_does(name: str, made: Callable[[str], Made]) -> None:
    clip = made(name)
    count = ffprobe_count(clip.path)
    times = ffprobe_frames(clip.path)
    assert count == clip.frames == len(times)
    with open_source(clip.path) as src:
        assert src.info.frame_count == count
        frames = list(src)
    # no frame dropped or repeated, each numbered by its place, whatever its timestamp
    assert [f.index for f in frames] == list(range(count))
    assert [content(f.image, clip) for f in frames] == list(range(count))
    # and shown at its own time (FFmpeg's, from the first frame)
    assert [round(f.pts, 3) for f in frames] == [round(t - times[0], 3) for t in times]


@pytest.mark.parametrize("name", list(MAKERS))
def test_seeking_lands_on_the_frame_asked_for(name: str, made: Callable[[str], Made]) -> None:
    clip = made(name)
    n = clip.frames
    # the last, the first, the middle (where the rate changes), just after it, a frame
    # inside a GOP, backwards and forwards
    targets = [n - 1, 0, n // 2, n // 2 + 1, 29, 13, n - 2, 1]
    times = ffprobe_frames(clip.path)
    with open_source(clip.path) as src:
        for k in targets:
            src.seek(k)
            frame = src.read()
            assert frame is not None
            assert (frame.index, content(frame.image, clip)) == (k, k), f"seek({k})"
            assert round(frame.pts, 3) == round(times[k] - times[0], 3)
            after = src.read()  # and reading goes on from there
            if k + 1 < n:
                assert after is not None and content(after.image, clip) == after.index == k + 1
            else:
                assert after is None


@pytest.mark.parametrize("name", [VFR, GIF])
def test_duration_and_rate_are_the_files_own(name: str, made: Callable[[str], Made]) -> None:
    clip = made(name)
    times = ffprobe_frames(clip.path)
    with open_source(clip.path) as src:
        info = src.info
    assert info.duration is not None
    last = times[-1] - times[0]
    # to the end of the last frame: after its start, by less than the longest gap
    gaps = [b - a for a, b in pairwise(times)]
    assert last < info.duration <= last + max(gaps) + 1e-6
    # the average over the file (the GIF: 11.8 fps, not the 12.5 its first delay gives)
    assert info.fps == pytest.approx(len(times) / info.duration, rel=1e-6)


def _export(clip: Made, out: str, start: int, frames: int | None, *more: str) -> None:
    args = ["run", str(clip.path), "--device", "cpu", "--quiet", "--export", out, *more]
    args += ["--start", str(start)] + (["--frames", str(frames)] if frames else [])
    assert main(args) == 0


@pytest.mark.parametrize(
    ("name", "start", "frames"),
    [(VFR, 29, 5), (VFR, 85, None), (GIF, 36, None)],
)
def test_png_export_names_frames_by_their_place(
    name: str, start: int, frames: int | None, made: Callable[[str], Made], tmp_path: Path
) -> None:
    clip = made(name)
    _export(clip, f"{tmp_path / 'frames'}{os.sep}", start, frames)
    want = list(range(start, start + frames if frames else clip.frames))
    names = sorted(p.name for p in (tmp_path / "frames").glob("*.png"))
    assert names == [f"frame_{k:06d}.png" for k in want]
    for k in want:
        image = cv2.imread(str(tmp_path / "frames" / f"frame_{k:06d}.png"))
        assert content(image, clip) == k
    record = json.loads((tmp_path / "frames" / "provenance.json").read_text())
    assert record["index"] == want
    times = ffprobe_frames(clip.path)
    assert [round(t, 3) for t in record["pts_s"]] == [round(times[k] - times[0], 3) for k in want]


@pytest.mark.parametrize(
    ("name", "target"),
    [
        (VFR, "out.mp4"),
        (JITTER, "out.mp4"),
        (GIF, "out.mp4"),
        (VFR, "out.mkv"),
        (VFR, "out.mov"),
        (VFR, "lossless.mkv"),
    ],
)
def test_exported_video_keeps_each_frames_time(
    name: str, target: str, made: Callable[[str], Made], tmp_path: Path
) -> None:
    clip = made(name)
    start = 20
    out = tmp_path / target
    _export(clip, str(out), start, None, *(["--lossless"] if target.endswith(".mkv") else []))
    source = ffprobe_frames(clip.path)[start:]
    written = ffprobe_frames(out)
    assert len(written) == len(source) == clip.frames - start
    # every gap as in the source (variable rate stays variable), to the millisecond
    assert [round(t - written[0], 3) for t in written] == [round(t - source[0], 3) for t in source]
    with open_source(out) as src:
        assert [content(f.image, clip) for f in src] == list(range(start, clip.frames))


def test_exported_sound_starts_with_the_first_frame(
    made: Callable[[str], Made], tmp_path: Path
) -> None:
    """--start 60 on the 30 -> 15 fps file: frame 60 is at 2.5 s, where a tone starts;
    the export's sound starts there too (before: at 60 frames / the average rate =
    2.98 s, half a second late, and the tone was gone)."""
    clip = with_tone(made(VFR), tmp_path / "sound.mp4", 2.5, 2.7)
    out = tmp_path / "out.mp4"
    _export(clip, str(out), 60, None)
    assert loudness(out, 0.03, 0.15) > 0.3  # the tone, from the start
    assert loudness(out, 0.3, 1.0) < 0.05
    with open_source(out) as src:
        assert [content(f.image, clip) for f in src] == list(range(60, clip.frames))


def test_index_of_a_long_file_is_cached_and_follows_changes(
    made: Callable[[str], Made], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FRAMELENS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(frame_index_module, "CACHE_MIN_FRAMES", 10)
    video = rate_change(tmp_path / "vfr.mp4").path
    first = frame_index(str(video))
    assert first is not None and len(first) == 90
    cached = list((tmp_path / "cache" / "frame-index").glob("*.json"))
    assert len(cached) == 1
    assert frame_index(str(video)) == first  # read back from the cache
    # the file replaced by another: a new index, not the cached one
    rate_change(video, frames=60)
    os.utime(video, ns=(1, 1))
    again = frame_index(str(video))
    assert again is not None and len(again) == 60
    with open_source(video) as src:
        assert src.info.frame_count == 60


@pytest.fixture
def player() -> Iterator[tuple[Player, Recorder]]:
    rec = Recorder()
    p = Player(rec.on_result, rec.on_state, rec.on_error)
    yield p, rec
    p.close()


def test_player_seeked_to_29_shows_frame_29(
    made: Callable[[str], Made], player: tuple[Player, Recorder]
) -> None:
    clip = made(VFR)
    p, rec = player
    p.open(str(clip.path), PipelineSettings(resolve_model(DEFAULT_MODEL)))
    rec.wait(lambda: len(rec.results) >= 1)
    for k in (29, 60, clip.frames - 1, 29):
        p.seek(k)
        rec.wait(lambda k=k: bool(rec.errors) or rec.last.frame.index == k)  # type: ignore[misc]
        assert not rec.errors, rec.errors
        assert content(rec.last.frame.image, clip) == k
    assert rec.state.frame_count == clip.frames


def test_player_plays_a_gif_to_its_last_frame(
    made: Callable[[str], Made], player: tuple[Player, Recorder]
) -> None:
    clip = made(GIF)
    p, rec = player
    p.open(str(clip.path), PipelineSettings(resolve_model(DEFAULT_MODEL)))
    rec.wait(lambda: len(rec.results) >= 1)
    p.set_realtime(False)
    p.play()
    rec.wait(lambda: rec.state.status == "ended")
    shown = [r.frame.index for r in rec.results]
    assert shown == list(range(clip.frames))  # 41/41 at the end, not 43/41
    assert [content(r.frame.image, clip) for r in rec.results] == shown
    assert rec.state.frame_count == clip.frames
    p.step(-1)  # Left at the end goes back one frame
    rec.wait(lambda: rec.last.frame.index == clip.frames - 2)
    assert content(rec.last.frame.image, clip) == clip.frames - 2 and not rec.errors


def test_batch_numbers_a_gifs_frames_as_they_are_stored(tmp_path: Path) -> None:
    """A batch over an animated GIF of people: its detections JSON holds frames 0..40
    at their own times and its Parquet rows (what the results browser lists) point at
    those frames (before: indices skipped 38 and 39 and ended at 42 for 41 frames)."""
    people = [cv2.resize(p, (384, 216)) for p in sample_frames(SAMPLE, tuple(range(290, 331)))]
    (tmp_path / "in").mkdir()
    clip = uneven_gif(tmp_path / "in" / "people.gif", pictures=people)
    out = tmp_path / "results"
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)
    summary = run_batch([str(clip.path.parent)], out, settings, progress=False)
    assert (summary.done, summary.failed) == (1, 0)
    frames = json.loads((out / "people.json").read_text())["frames"]
    times = ffprobe_frames(clip.path)
    assert [f["index"] for f in frames] == list(range(41))
    assert [round(f["pts"], 3) for f in frames] == [round(t - times[0], 3) for t in times]
    rows = parquet_rows(out)
    assert rows and {r["frame"] for r in rows} <= set(range(41))
    assert rows == sorted_rows(json_rows(out / "people.json", str(clip.path)))
    # a hit's frame, fetched as the results browser fetches its thumbnail, is that frame
    hit = rows[-1]
    ((index, thumb),) = frames_at(str(clip.path), [hit["frame"]])
    assert content(thumb, clip) == index == hit["frame"]


def test_segments_start_on_keyframes_numbered_by_place(made: Callable[[str], Made]) -> None:
    """A long input split for Ray workers starts each segment on a keyframe numbered as
    the source numbers frames (before: timestamp x average rate, so 30 -> 15 fps put
    keyframe 80 at 72 and a segment started on a frame that needs earlier ones)."""
    clip = made(VFR)  # a keyframe every 10 frames
    assert keyframes(str(clip.path)) == list(range(0, 90, 10))


class PacketReader(FileReader[av.Packet]):
    """A reader whose "decoder" hands on every packet it is given as a picture, as
    NVDEC does (FFmpeg's decoders drop an edit list's hidden frames themselves): the
    numbering the GPU readers share with the CPU one, without a GPU."""

    def _decode_packet(self, packet: av.Packet | None) -> list[av.Packet]:
        return [packet] if packet is not None and packet.size else []


def test_a_decoder_that_hands_on_hidden_frames_numbers_as_ffmpeg(
    made: Callable[[str], Made],
) -> None:
    clip = made("FFmpeg's cut (edit list)")  # 99 packets, 87 frames shown
    reader = PacketReader(clip.path)
    try:
        indices = []
        while (decoded := reader.read_decoded()) is not None:
            indices.append(decoded.index)
    finally:
        reader.close()
    assert reader.info.frame_count == clip.frames == ffprobe_count(clip.path)
    assert sorted(indices) == list(range(clip.frames))  # none hidden shown, none twice


def test_compare_reports_the_frames_asked_for(
    made: Callable[[str], Made], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`framelens compare --start 85` on the 90-frame 30 -> 15 fps file compares frames
    85-89 at their own times (before: 4 frames, numbered from 87)."""
    monkeypatch.setenv("FRAMELENS_CACHE_DIR", str(tmp_path / "cache"))
    clip = made(VFR)
    report = tmp_path / "report"
    args = ["compare", str(clip.path), "--precisions", "fp32,fp16", "--start", "85"]
    assert main([*args, "--device", "cpu", "--quiet", "--report", str(report)]) == 0
    rows = list(csv.DictReader((report / "frames.csv").open()))
    times = ffprobe_frames(clip.path)
    assert [int(r["index"]) for r in rows] == [85, 86, 87, 88, 89]
    assert [r["pts"] for r in rows] == [f"{times[k] - times[0]:.3f}" for k in range(85, 90)]
