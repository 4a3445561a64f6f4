"""Rough edge 16: live streams come back after a cut and after a stall, with backoff,
over RTSP (a real GStreamer RTSP server on 127.0.0.1, in its own process) and HTTP (the
loopback server), and the player says so while they are down."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from child_signals import as_from_a_terminal
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.playback.player import Player, PlayerState
from framelens.core.stages.sources import open_source
from framelens.core.stages.sources.stream import StreamSource
from framelens.core.types import Frame, FrameResult
from loopback_server import LoopbackStreamServer
from media_factory import read_index, write_clip
from rtsp_server import RtspServer, unavailable

WHY_NO_RTSP = unavailable()
needs_rtsp = pytest.mark.skipif(WHY_NO_RTSP is not None, reason=WHY_NO_RTSP or "")


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rtsp") / "live.mp4"
    return write_clip(path, frames=250, fps=25, size=(160, 128), gop=25)


@pytest.fixture
def rtsp(clip: Path) -> Iterator[RtspServer]:
    server = RtspServer(clip)
    server.start()
    yield server
    server.stop()


def read(src: StreamSource) -> Frame:
    frame = src.read()
    assert frame is not None
    return frame


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def frames_after(src: StreamSource, index: int, count: int) -> list[Frame]:
    """``count`` frames numbered after ``index`` (read() blocks through a reconnect)."""
    got: list[Frame] = []
    while len(got) < count:
        frame = read(src)
        if frame.index > index:
            got.append(frame)
    return got


@needs_rtsp
def test_rtsp_stream_comes_back_after_the_server_is_cut(rtsp: RtspServer) -> None:
    src = open_source(rtsp.url, reconnect_attempts=6, backoff_s=0.2)
    assert isinstance(src, StreamSource)
    with src:
        assert (src.info.kind, src.info.width, src.info.height) == ("stream", 160, 128)
        before = [read(src) for _ in range(5)]
        assert 0 <= read_index(before[-1].image) < 250  # the clip's own frames
        rtsp.stop()
        wait_until(lambda: src.reconnecting, 15, "the cut to be noticed")
        time.sleep(0.5)  # an attempt or two fail against the closed port (the backoff)
        rtsp.start()  # same port
        after = frames_after(src, before[-1].index, 5)
        assert src.reconnects == 1 and not src.reconnecting
        assert [f.index for f in after] == sorted({f.index for f in after})  # numbering goes on


@needs_rtsp
def test_rtsp_stream_comes_back_after_a_stall(rtsp: RtspServer) -> None:
    # a frozen server keeps the connection open and sends nothing: the read time-out
    # (1 s here) turns the stall into a drop, reconnects wait for the server to answer
    with StreamSource(
        rtsp.url, reconnect_attempts=8, backoff_s=0.2, read_timeout_s=1.0, open_timeout_s=1.0
    ) as src:
        last = read(src)
        rtsp.stall()
        wait_until(lambda: src.reconnecting, 15, "the stall to be noticed")
        time.sleep(1.0)
        rtsp.resume()
        frames_after(src, last.index, 5)
        assert src.reconnects >= 1 and not src.reconnecting


def test_http_stream_comes_back_after_a_stall(tmp_path: Path) -> None:
    ts = write_clip(tmp_path / "live.ts", frames=250, fps=25, size=(160, 128), gop=25)
    data = ts.read_bytes()
    server = LoopbackStreamServer(data, bytes_per_s=len(data) / 10 * 2)
    server.start()
    try:
        with StreamSource(
            server.url, reconnect_attempts=8, backoff_s=0.2, read_timeout_s=1.0
        ) as src:
            last = read(src)
            server.stall.set()
            wait_until(lambda: src.reconnecting, 15, "the stall to be noticed")
            server.stall.clear()
            frames_after(src, last.index, 5)
            assert src.reconnects >= 1 and not src.reconnecting
            assert server.connections >= 2
    finally:
        server.stall.clear()
        server.stop()


@needs_rtsp
def test_the_player_says_reconnecting_while_a_stream_is_down(rtsp: RtspServer) -> None:
    states: list[PlayerState] = []
    results: list[FrameResult] = []
    errors: list[str] = []
    cond = threading.Condition()

    def add(items: list[object]) -> Callable[[object], None]:
        def on(item: object) -> None:
            with cond:
                items.append(item)
                cond.notify_all()

        return on

    def wait(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
        with cond:
            assert cond.wait_for(predicate, timeout), "timed out"

    player = Player(add(results), add(states), add(errors))  # type: ignore[arg-type]
    try:
        player.open(rtsp.url, PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1))
        wait(lambda: len(results) >= 1)
        player.play()
        wait(lambda: len(results) >= 5)
        rtsp.stop()
        wait(lambda: bool(states) and states[-1].reconnecting)
        shown = len(results)
        rtsp.start()
        wait(lambda: len(results) > shown + 3 and not states[-1].reconnecting)
        assert not errors, errors
    finally:
        player.close()


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_ctrl_c_ends_a_stream_recording_and_keeps_it(tmp_path: Path, signame: str) -> None:
    """A stream has no end: Ctrl+C is how its recording stops, and what was recorded
    is kept, complete (a file run interrupted keeps nothing: it was cut half way);
    SIGTERM (``kill``) does the same."""
    import json
    import signal
    import subprocess
    import sys

    import av

    ts = write_clip(tmp_path / "live.ts", frames=250, fps=25, size=(160, 128), gop=25)
    data = ts.read_bytes()
    server = LoopbackStreamServer(data, bytes_per_s=len(data) / 10)
    server.start()
    exe = str(Path(sys.executable).with_name("framelens"))
    out, dets = tmp_path / "rec.mp4", tmp_path / "rec.json"
    try:
        proc = subprocess.Popen(
            [exe, "run", server.url, "--export", str(out), "--detections", str(dets), "--quiet"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=as_from_a_terminal,
        )  # fmt: skip
        # the outputs' temporaries appear with the first frame processed (after the
        # engine's start-up); then two seconds of the stream, 50 frames in real time
        wait_until(lambda: any(".partial-" in p.name for p in tmp_path.iterdir()), 60,
                   "the recording to start")  # fmt: skip
        time.sleep(2.0)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(getattr(signal, signame))
        _, err = proc.communicate(timeout=60)
    finally:
        server.stop()
    assert proc.returncode == 0, err
    assert "stopped by Ctrl+C after" in err and "Traceback" not in err
    with av.open(str(out)) as container:
        frames = sum(1 for _ in container.decode(video=0))
    assert frames > 5
    assert len(json.loads(dets.read_text())["frames"]) == frames


def _recording(tmp_path: Path, frames: int) -> Path:
    """A file as a web server holds one: its index first, so it plays as it downloads."""
    return write_clip(tmp_path / "recording.mp4", frames=frames, fps=25, size=(160, 128),
                      gop=25, container_options={"movflags": "+faststart"})  # fmt: skip


def _read_all(src: StreamSource, slow_s: float) -> list[Frame]:
    frames = []
    while (frame := src.read()) is not None:
        frames.append(frame)
        time.sleep(slow_s)  # a consumer slower than the download
    return frames


def test_a_recording_over_http_is_read_once_every_frame_in_order(tmp_path: Path) -> None:
    """A file on a web server is read as a file is: each of its frames once, in order,
    to its end (before, it was taken for a live feed: frames skipped whenever the model
    was slower than the download, and at its end it was fetched again, forever)."""
    clip = _recording(tmp_path, 60)
    server = LoopbackStreamServer(clip.read_bytes(), bytes_per_s=2e6)
    server.start()
    try:
        with open_source(server.url) as src:
            assert isinstance(src, StreamSource) and src.recorded
            frames = _read_all(src, 0.01)
    finally:
        server.stop()
    assert [read_index(f.image) for f in frames] == list(range(60))
    assert [f.index for f in frames] == list(range(60))
    assert [f.pts for f in frames] == pytest.approx([i / 25 for i in range(60)])
    assert server.connections == 1


def test_a_recording_cut_half_way_goes_on_after_its_last_frame(tmp_path: Path) -> None:
    """The connection lost half way: made again, and the reading goes on after the last
    frame handed out, none twice, none missing."""
    clip = _recording(tmp_path, 100)
    payload = clip.read_bytes()
    server = LoopbackStreamServer(payload, bytes_per_s=len(payload) / 3)  # 3 s to send
    server.start()
    try:
        with open_source(server.url) as src:
            assert isinstance(src, StreamSource)
            first = [read(src) for _ in range(10)]
            server.stop()  # cut mid-body
            server.start()
            frames = first + _read_all(src, 0.0)
            assert src.reconnects >= 1
    finally:
        server.stop()
    assert [read_index(f.image) for f in frames] == list(range(100))
    assert [f.index for f in frames] == list(range(100))


def test_a_live_feed_over_http_still_keeps_only_its_newest_frame(tmp_path: Path) -> None:
    """An MPEG-TS feed (no length, no duration) is live: not a recording."""
    clip = write_clip(tmp_path / "live.ts", frames=50, fps=25, size=(160, 128), gop=25)
    server = LoopbackStreamServer(clip.read_bytes(), bytes_per_s=1e6)
    server.start()
    try:
        with open_source(server.url) as src:
            assert isinstance(src, StreamSource) and not src.recorded
    finally:
        server.stop()


def test_a_recording_over_http_plays_at_its_own_time_on_the_wall(tmp_path: Path) -> None:
    """A wall's tile of a recording over HTTP is paced by its timestamps, as a file's
    is (read every frame now, it would otherwise play as fast as the model goes); a
    live feed is not (its frames come at its own time)."""
    from framelens.core.sessions.wall import PacedSource, _Pacing

    clip = _recording(tmp_path, 30)  # 25 fps
    server = LoopbackStreamServer(clip.read_bytes(), bytes_per_s=4e6)
    server.start()
    pacing = _Pacing()
    pacing.playing.set()
    try:
        with open_source(server.url) as src:
            paced = PacedSource(src, pacing)
            t0 = time.perf_counter()
            frames = [paced.read() for _ in range(13)]
            took = time.perf_counter() - t0
    finally:
        server.stop()
    assert [f.index for f in frames if f is not None] == list(range(13))
    assert took >= 12 / 25 * 0.95, took  # frame 12 is due 0.48 s after frame 0
