"""Video sources against real media: the bundled samples, clips generated with PyAV, a
local HTTP stream on 127.0.0.1, and PNG folders. No camera exists here, so only the
camera's error path is covered."""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import pytest
from framelens.core.errors import ConfigError, SourceError
from framelens.core.stages.sources import Source, open_source
from framelens.core.stages.sources.stream import StreamSource
from framelens.core.types import Frame, Image
from loopback_server import LoopbackStreamServer
from media_factory import read_index, write_clip, write_undecodable, write_wav

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "resources" / "samples" / "one-by-one-person-detection.mp4"  # 10 fps
BOTTLE = REPO / "tests" / "data" / "bottle-detection.mp4"  # 179/6 fps
SAMPLE_FRAMES = 1394
KEPT = (0, 1, 137, 500, 1300, SAMPLE_FRAMES - 1)


@dataclass
class Linear:
    """What a plain front-to-back decode of the sample produced."""

    indices: list[int]
    pts: list[float]
    images: dict[int, Image]


def decode_linear(path: Path, keep: tuple[int, ...]) -> Linear:
    with open_source(path) as src:
        frames = [(f.index, f.pts, f.image if f.index in keep else None) for f in src]
    return Linear(
        [i for i, _, _ in frames],
        [p for _, p, _ in frames],
        {i: img for i, _, img in frames if img is not None},
    )


@pytest.fixture(scope="module")
def sample() -> Linear:
    return decode_linear(SAMPLE, KEPT)


def read(src: Source) -> Frame:
    frame = src.read()
    assert frame is not None
    return frame


def assert_bgr(frame: Frame, width: int, height: int) -> None:
    assert frame.image.shape == (height, width, 3)
    assert frame.image.dtype == np.uint8
    assert frame.image.flags.c_contiguous


# --- dispatch ---------------------------------------------------------------------------


@pytest.mark.parametrize("spec", [42, "42", "/dev/video42"])
def test_missing_camera_is_a_one_line_error(spec: int | str) -> None:
    with pytest.raises(SourceError, match=r"^camera 42 could not be opened \(no such device\?\)$"):
        open_source(spec)


@pytest.mark.parametrize("scheme", ["rtsp", "rtsps", "http", "https", "rtmp", "tcp"])
def test_stream_urls_open_as_streams(scheme: str) -> None:
    # Port 1 on loopback refuses at once: the error proves the URL went to the stream
    # opener rather than being taken for a file name. (udp:// has no connection to
    # refuse; it would only fail after the open time-out.)
    url = f"{scheme}://127.0.0.1:1/live"
    with pytest.raises(SourceError, match=rf"^could not open stream {re.escape(url)}: "):
        open_source(url)


def test_unknown_url_scheme_is_rejected() -> None:
    with pytest.raises(SourceError, match="unsupported stream URL ftp://"):
        open_source("ftp://127.0.0.1/video.mp4")


def test_negative_reconnect_settings_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        open_source(SAMPLE, reconnect_attempts=-1)


# --- files: reading and seeking ----------------------------------------------------------


def test_file_info_describes_the_sample() -> None:
    with open_source(SAMPLE) as src:
        info = src.info
    assert (info.kind, info.width, info.height, info.fps) == ("file", 768, 432, 10.0)
    assert (info.frame_count, info.codec, info.seekable, info.has_audio) == (
        SAMPLE_FRAMES,
        "h264",
        True,
        False,
    )


def test_linear_read_numbers_every_frame_and_times_it(sample: Linear) -> None:
    assert sample.indices == list(range(SAMPLE_FRAMES))
    assert sample.pts == pytest.approx([i / 10 for i in range(SAMPLE_FRAMES)], abs=1e-9)
    assert_bgr(Frame(sample.images[500], 500, 50.0), 768, 432)


@pytest.mark.parametrize("target", [500, 0, SAMPLE_FRAMES - 1, 137, 1])
def test_seek_is_frame_accurate(sample: Linear, target: int) -> None:
    with open_source(SAMPLE) as src:
        read(src)
        src.seek(700)  # start somewhere else so a seek backwards is exercised too
        src.seek(target)
        frame = read(src)
        assert frame.index == target
        assert frame.pts == pytest.approx(target / 10)
        assert np.array_equal(frame.image, sample.images[target])
        following = src.read()
        if target == SAMPLE_FRAMES - 1:
            assert following is None
        else:
            assert following is not None and following.index == target + 1


def test_seek_at_a_fractional_frame_rate_is_frame_accurate() -> None:
    targets = (0, 2, 400, 777, 1188)
    linear = decode_linear(BOTTLE, targets)
    assert linear.indices == list(range(1189))
    with open_source(BOTTLE) as src:
        assert src.info.fps == pytest.approx(179 / 6)
        for target in (777, 2, 1188, 400, 0):
            src.seek(target)
            frame = read(src)
            assert frame.index == target
            assert np.array_equal(frame.image, linear.images[target])


@pytest.mark.parametrize("index", [-1, SAMPLE_FRAMES])
def test_seek_out_of_range_fails_and_reading_goes_on(index: int) -> None:
    with open_source(SAMPLE) as src:
        read(src)
        with pytest.raises(SourceError, match=f"frame {index} is out of range"):
            src.seek(index)
        assert read(src).index == 1


def test_seek_after_the_end_rewinds() -> None:
    with open_source(SAMPLE) as src:
        src.seek(SAMPLE_FRAMES - 2)
        assert len(list(src)) == 2
        assert src.read() is None
        src.seek(3)
        assert read(src).index == 3


def test_closed_source_refuses_reads_and_close_is_idempotent() -> None:
    with open_source(SAMPLE) as src:
        read(src)
    with pytest.raises(SourceError, match="closed"):
        src.read()
    src.close()


CODECS = [
    ("mp4", "libx264", "h264"),
    ("mov", "libx264", "h264"),
    ("ts", "libx264", "h264"),
    ("mkv", "libx265", "hevc"),
    ("webm", "libvpx-vp9", "vp9"),
    ("mkv", "libsvtav1", "av1"),
    ("avi", "mpeg4", "mpeg4"),
]


@pytest.mark.parametrize(
    ("ext", "encoder", "codec"), CODECS, ids=[f"{c}.{e}" for e, _, c in CODECS]
)
def test_codecs_and_containers_read_and_seek(
    tmp_path: Path, ext: str, encoder: str, codec: str
) -> None:
    path = write_clip(tmp_path / f"clip.{ext}", codec=encoder, frames=60, gop=12)
    with open_source(path) as src:
        assert src.info.codec == codec
        assert src.info.frame_count is not None and abs(src.info.frame_count - 60) <= 1
        frames = list(src)
        # The index each frame carries is the one stamped into its pixels.
        assert [f.index for f in frames] == list(range(60))
        assert [read_index(f.image) for f in frames] == list(range(60))
        assert_bgr(frames[0], 128, 96)
        for target in (31, 0, 59, 13, 24):  # mid-GOP, first, last, and a keyframe
            src.seek(target)
            frame = read(src)
            assert (frame.index, read_index(frame.image)) == (target, target)


def test_audio_track_is_reported(tmp_path: Path) -> None:
    with open_source(write_clip(tmp_path / "a.mp4", audio=True)) as src:
        assert src.info.has_audio
        assert read(src).index == 0


# --- files: errors and damage ------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.mp4"
    with pytest.raises(SourceError, match=f"^no such file: {re.escape(str(path))}$"):
        open_source(path)


@pytest.mark.parametrize("content", [b"", b"this is a text file, not a video\n" * 50])
def test_not_a_video(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "fake.mp4"
    path.write_bytes(content)
    with pytest.raises(SourceError, match=f"^{re.escape(str(path))} is not a readable video: .+"):
        open_source(path)


def test_file_without_video_stream(tmp_path: Path) -> None:
    path = write_wav(tmp_path / "speech.wav")
    with pytest.raises(SourceError, match=r"speech\.wav has no video stream$"):
        open_source(path)


def test_codec_without_decoder(tmp_path: Path) -> None:
    path = write_undecodable(tmp_path / "avs2.avi")
    with pytest.raises(SourceError, match=r"avs2\.avi uses a video codec that this FFmpeg build"):
        open_source(path)


def test_file_cut_in_half_yields_what_is_there(tmp_path: Path, sample: Linear) -> None:
    data = SAMPLE.read_bytes()  # index (moov) at the front, so half a file still opens
    half = tmp_path / "half.mp4"
    half.write_bytes(data[: len(data) // 2])
    with open_source(half) as src:
        frames = {f.index: f.image for f in src}
        assert src.read() is None
        assert getattr(src, "truncated", None) is True
        assert 500 < len(frames) < SAMPLE_FRAMES
        assert sorted(frames) == list(range(len(frames)))
        assert np.array_equal(frames[500], sample.images[500])
        with pytest.raises(SourceError, match="ends before it"):
            src.seek(SAMPLE_FRAMES - 1)


def test_cut_stream_file_yields_its_first_frames(tmp_path: Path) -> None:
    data = write_clip(tmp_path / "full.ts", frames=60).read_bytes()
    cut = tmp_path / "cut.ts"
    cut.write_bytes(data[: len(data) // 2])
    with open_source(cut) as src:
        stamps = [read_index(f.image) for f in src]
    assert 10 < len(stamps) < 60
    assert stamps == list(range(len(stamps)))


def test_cut_mp4_without_front_index_is_reported(tmp_path: Path) -> None:
    data = write_clip(tmp_path / "full.mp4", frames=60).read_bytes()
    assert data.find(b"moov") > data.find(b"mdat"), "expected the index at the end"
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(SourceError, match=r"cut\.mp4 is not a readable video"):
        open_source(cut)


def test_damage_mid_file_is_skipped_and_counted(tmp_path: Path, sample: Linear) -> None:
    data = bytearray(SAMPLE.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 50_000] = np.random.default_rng(0).bytes(50_000)
    damaged = tmp_path / "damaged.mp4"
    damaged.write_bytes(bytes(data))
    with open_source(damaged) as src:
        frames = {f.index: f.image for f in src}
        assert getattr(src, "decode_errors", 0) > 0
    indices = list(frames)
    assert indices == sorted(set(indices))
    assert indices[-1] == SAMPLE_FRAMES - 1
    # Frames lost in the damage must not shift the numbering of everything after it.
    assert np.array_equal(frames[1300], sample.images[1300])
    assert np.array_equal(frames[137], sample.images[137])


def test_file_where_nothing_decodes_is_an_error(tmp_path: Path) -> None:
    data = bytearray(SAMPLE.read_bytes())
    start = data.find(b"mdat") + 8
    data[start:] = np.random.default_rng(1).bytes(len(data) - start)
    garbage = tmp_path / "garbage.mp4"
    garbage.write_bytes(bytes(data))
    # found when the source opens (it decodes its first frame), so a player keeps what
    # it was playing
    with pytest.raises(SourceError, match=r"no frame could be decoded \(\d+ undecodable packets\)"):
        open_source(garbage)


# --- image folders -----------------------------------------------------------------------


def write_png(path: Path, value: int, size: tuple[int, int] = (40, 30)) -> None:
    width, height = size
    image = np.full((height, width, 3), value, np.uint8)
    assert cv2.imwrite(str(path), image)


def test_folder_plays_images_in_natural_order_at_first_size(tmp_path: Path) -> None:
    write_png(tmp_path / "frame10.png", 30)
    write_png(tmp_path / "frame2.png", 20, size=(80, 60))  # sized differently
    write_png(tmp_path / "frame1.png", 10)
    cv2.imwrite(str(tmp_path / "frame3.JPG"), np.zeros((30, 40), np.uint8))  # grey JPEG
    (tmp_path / "notes.txt").write_text("not an image")
    with open_source(tmp_path) as src:
        assert (src.info.kind, src.info.frame_count, src.info.fps) == ("folder", 4, 25.0)
        assert (src.info.width, src.info.height) == (40, 30)
        frames = list(src)
        assert [f.index for f in frames] == [0, 1, 2, 3]
        assert [f.pts for f in frames] == [0.0, 0.04, 0.08, 0.12]
        assert [int(f.image[0, 0, 0]) for f in frames] == [10, 20, 0, 30]
        for frame in frames:
            assert_bgr(frame, 40, 30)
        src.seek(3)
        assert int(read(src).image[0, 0, 0]) == 30
        with pytest.raises(SourceError, match="out of range"):
            src.seek(4)


def test_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "readme.txt").write_text("no images here")
    with pytest.raises(SourceError, match="contains no images"):
        open_source(tmp_path)


def test_a_folder_of_videos_opened_as_images_says_what_it_holds(tmp_path: Path) -> None:
    """``framelens run videos/``: the folder is read as an image folder; its videos are
    named, and what to do with them, so the analyst is not left with 'no images'."""
    write_clip(tmp_path / "b.mp4", frames=2)
    write_clip(tmp_path / "a.mp4", frames=2)
    named = r"contains no images .* but 2 videos \(a\.mp4, b\.mp4\): choose one of its videos"
    with pytest.raises(SourceError, match=named):
        open_source(tmp_path)
    write_clip(tmp_path / "c.mp4", frames=2)
    named = r"but 3 videos \(a\.mp4, b\.mp4, \.\.\.\): choose one of its videos"
    with pytest.raises(SourceError, match=named):
        open_source(tmp_path)


def test_a_folder_of_one_video_names_it_without_an_ellipsis(tmp_path: Path) -> None:
    write_clip(tmp_path / "clip.mp4", frames=2)
    named = r"but 1 video \(clip\.mp4\): choose the video, or run the folder as a batch$"
    with pytest.raises(SourceError, match=named):
        open_source(tmp_path)


def test_unreadable_image_is_named(tmp_path: Path) -> None:
    write_png(tmp_path / "a.png", 10)
    (tmp_path / "b.png").write_bytes(b"\x89PNG but not really")
    with open_source(tmp_path) as src:
        assert read(src).index == 0
        with pytest.raises(SourceError, match=r"cannot read image .*b\.png"):
            src.read()


# --- network streams ---------------------------------------------------------------------

STREAM_FRAMES, STREAM_FPS = 300, 25
SPEED = 4  # the server plays the clip 4x faster than real time to keep the tests short


@pytest.fixture(scope="module")
def live_ts(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("live") / "live.ts"
    write_clip(path, frames=STREAM_FRAMES, fps=STREAM_FPS, size=(160, 128), gop=25)
    return path.read_bytes()


@pytest.fixture
def server(live_ts: bytes) -> Iterator[LoopbackStreamServer]:
    seconds = STREAM_FRAMES / STREAM_FPS
    srv = LoopbackStreamServer(live_ts, bytes_per_s=len(live_ts) / seconds * SPEED)
    srv.start()
    yield srv
    srv.stall.clear()
    srv.stop()


def test_stream_delivers_frames_in_order(server: LoopbackStreamServer) -> None:
    with open_source(server.url) as src:
        info = src.info
        assert (info.kind, info.width, info.height) == ("stream", 160, 128)
        assert (info.seekable, info.frame_count) == (False, None)
        frames = [read(src) for _ in range(10)]
        with pytest.raises(SourceError, match="cannot seek"):
            src.seek(0)
    indices = [f.index for f in frames]
    assert indices == sorted(set(indices))
    # First connection: the count of decoded frames is the position in the clip.
    assert [read_index(f.image) for f in frames] == indices
    assert all(b.pts >= a.pts for a, b in itertools.pairwise(frames))
    assert_bgr(frames[0], 160, 128)


@pytest.mark.serial  # times itself: runs alone (installer/test.sh)
def test_slow_reader_gets_the_latest_frame_not_a_backlog(server: LoopbackStreamServer) -> None:
    with open_source(server.url) as src:
        first = read(src)
        time.sleep(0.6)  # ~60 frames arrive meanwhile at 4x speed
        later = read(src)
    assert later.index - first.index > 15
    assert read_index(later.image) == later.index


def test_stream_loss_raises_after_backing_off(server: LoopbackStreamServer) -> None:
    with open_source(server.url, reconnect_attempts=3, backoff_s=0.05) as src:
        read(src)
        cut_at = time.monotonic()
        server.stop()
        with pytest.raises(SourceError) as caught:
            while True:  # frames already decoded may still come out first
                read(src)
        waited = time.monotonic() - cut_at
    message = str(caught.value)
    assert message.startswith(f"stream {server.url} lost after 3 reconnect attempts")
    assert "\n" not in message
    assert 0.05 + 0.1 + 0.2 <= waited < 10


def test_stream_recovers_when_the_server_comes_back(server: LoopbackStreamServer) -> None:
    with open_source(server.url, reconnect_attempts=5, backoff_s=0.2) as src:
        before = read(src)
        while read_index(before.image) < 60:  # well into the clip, see below
            before = read(src)
        server.stop()
        time.sleep(0.4)  # the first reconnect attempts fail
        server.start()
        deadline = time.monotonic() + 10
        after = read(src)
        # The new connection replays the clip from its start; wait for its frames.
        while read_index(after.image) > read_index(before.image):
            assert time.monotonic() < deadline
            after = read(src)
        assert after.index > before.index  # numbering goes on across the reconnect
        assert isinstance(src, StreamSource) and src.reconnects == 1
    assert server.connections == 2


def test_stalled_stream_times_out(server: LoopbackStreamServer) -> None:
    with StreamSource(server.url, frame_timeout_s=0.5, read_timeout_s=30) as src:
        read(src)
        server.stall.set()
        time.sleep(0.3)  # let the frames already sent be decoded
        with pytest.raises(SourceError, match=r"no frame for 0\.5 s"):
            for _ in range(1000):
                read(src)


def test_close_releases_a_blocked_reader(server: LoopbackStreamServer) -> None:
    src = StreamSource(server.url, read_timeout_s=30)
    read(src)
    server.stall.set()
    errors: list[BaseException] = []

    def drain() -> None:
        try:
            while True:
                read(src)
        except SourceError as exc:
            errors.append(exc)

    reader = threading.Thread(target=drain)
    reader.start()
    time.sleep(0.3)
    src.close()
    reader.join(timeout=2)
    assert not reader.is_alive()
    assert "closed" in str(errors[0])


def test_a_file_cut_short_counts_the_frames_it_holds(tmp_path: Path) -> None:
    """frames_there: None for a whole file; for one cut short, read to its end, the
    frames it really holds (each read back by the index stamped in its pixels), not the
    count its index claims. The player shows that count at such an end."""
    from framelens.core.stages.sources.file import FileSource

    clip = write_clip(
        tmp_path / "whole.mp4", frames=200, container_options={"movflags": "faststart"}
    )
    with FileSource(clip) as whole:
        assert sum(1 for _ in whole) == 200 and whole.frames_there is None
    data = clip.read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: int(len(data) * 0.6)])
    with FileSource(cut) as source:
        # the frame index counts the packets there, not the 200 the container claims
        packets = source.info.frame_count
        assert packets is not None and packets < 200
        indices = [read_index(frame.image) for frame in source]
        assert source.truncated and source.frames_there == len(indices) <= packets
        note = source.damage_note()
        assert note is not None and f"stop at {len(indices)} of 200" in note
        assert indices == list(range(len(indices)))
