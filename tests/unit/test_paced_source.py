"""A file played as a camera delivers it (core/stages/sources/paced.py, ``framelens run
--realtime``): frames released at their own time, those a slow reader did not take in
time dropped and counted, latency counted from each frame's release."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.runs import run_many, run_to_outputs
from framelens.core.stages.sources import open_source
from framelens.core.stages.sources.base import Source
from framelens.core.stages.sources.paced import Realtime, RealtimeSource
from framelens.core.types import Frame, SourceInfo
from media_factory import write_clip

FPS = 25.0
INTERVAL_MS = 1000.0 / FPS


class Clip(Source):
    """``count`` frames at ``FPS`` (what a file gives), each read counted and released
    frames recorded: a real Source, read as any is."""

    def __init__(self, count: int) -> None:
        self.info = SourceInfo("clip.mp4", "file", 8, 8, FPS, count)
        self.count = count
        self.next = 0
        self.released: list[int] = []

    def read(self) -> Frame | None:
        if self.next >= self.count:
            return None
        frame = _Tracked(np.zeros((8, 8, 3), np.uint8), self.next, self.next / FPS, self)
        self.next += 1
        return frame

    def seek(self, index: int) -> None:
        self.next = index

    def close(self) -> None:
        pass


class _Tracked(Frame):
    __slots__ = ("clip",)

    def __init__(self, image: np.ndarray, index: int, pts: float, clip: Clip) -> None:
        super().__init__(image, index, pts)
        self.clip = clip

    def release(self, stream: object = None) -> None:
        self.clip.released.append(self.index)


class Clock:
    """Milliseconds that pass only when someone sleeps or the reader works."""

    def __init__(self) -> None:
        self.ms = 1000.0

    def __call__(self) -> float:
        return self.ms

    def sleep(self, ms: float) -> None:
        self.ms += ms


def test_a_reader_that_keeps_up_gets_every_frame_at_its_own_time() -> None:
    clock = Clock()
    clip = Clip(10)
    paced = RealtimeSource(clip, clock=clock, sleep=clock.sleep)
    got = []
    while (frame := paced.read()) is not None:
        assert frame.arrived is not None
        got.append((frame.index, frame.arrived, clock.ms))
        clock.ms += 5.0  # the reader's work on it: less than a frame's interval
    assert [i for i, _, _ in got] == list(range(10))
    start = got[0][1]
    # released at its timestamp after the first, and handed out then, not before
    for i, arrived, handed in got:
        assert arrived == pytest.approx(start + i * INTERVAL_MS)
        assert handed == pytest.approx(arrived)
    assert paced.dropped == 0 and clip.released == []


def test_frames_a_slow_reader_did_not_take_in_time_are_dropped_and_counted() -> None:
    clock = Clock()
    clip = Clip(20)
    paced = RealtimeSource(clip, clock=clock, sleep=clock.sleep)
    got = []
    while (frame := paced.read()) is not None:
        got.append(frame.index)
        clock.ms += 2.5 * INTERVAL_MS  # the reader takes two and a half intervals a frame
    # a camera holding one frame: the reader finds the newest released, the ones before
    # it were overwritten, each counted, each given back to its decoder at once
    assert paced.dropped == 20 - len(got) > 0
    assert sorted(clip.released) == sorted(set(range(20)) - set(got))
    assert got == sorted(got) and got[0] == 0
    # nothing queues without bound: a frame handed out is less than a frame interval old
    # when the reader comes for it
    assert len(got) == pytest.approx(20 / 2.5, abs=2)


def test_a_cameras_frames_are_its_time_those_dropped_included() -> None:
    clock = Clock()
    clip = Clip(40)
    paced = RealtimeSource(clip, frames=10, clock=clock, sleep=clock.sleep)
    got = []
    while (frame := paced.read()) is not None:
        got.append(frame.index)
        clock.ms += 2.5 * INTERVAL_MS
    assert paced.dropped > 0 and len(got) + paced.dropped == 10 and max(got) < 10


def test_a_bigger_camera_buffer_keeps_frames_a_short_stall_would_lose() -> None:
    clock = Clock()
    stalls = {3: 3.5 * INTERVAL_MS}  # once, after frame 3: frames 4, 5 and 6 come meanwhile
    for buffer, lost in ((1, 2), (4, 0)):
        clip = Clip(12)
        paced = RealtimeSource(clip, buffer=buffer, clock=clock, sleep=clock.sleep)
        got = []
        while (frame := paced.read()) is not None:
            got.append(frame.index)
            clock.ms += stalls.get(frame.index, 1.0)
        assert paced.dropped == lost and len(got) == 12 - lost


def test_live_sources_are_not_paced() -> None:
    live = Clip(3)
    live.info = SourceInfo("rtsp://cam", "stream", 8, 8, FPS, None)
    assert Realtime()(live) is live
    assert isinstance(Realtime()(Clip(3)), RealtimeSource)


def test_end_to_end_time_counts_from_the_frames_release(tmp_path: Path) -> None:
    """A frame released earlier than its decode began (it waited in a queue) has that
    wait in its end-to-end time: the executor counts from ``Frame.arrived``."""
    from framelens.core.pipeline.execute import Executor
    from framelens.core.stages.timing import now_ms
    from framelens.core.types import FrameResult, StageTimes

    class Stamped(Clip):
        def read(self) -> Frame | None:
            frame = super().read()
            if frame is not None:
                frame.arrived = now_ms() - 400.0  # released 400 ms ago
            return frame

    class Echo:
        def run(self, batch: Sequence[tuple[Frame, float]]) -> list[FrameResult]:
            return [FrameResult(frame, None, StageTimes()) for frame, _ in batch]

        def update(self, **changes: object) -> None:
            pass

        def close(self) -> None:
            pass

    executor: Executor[FrameResult] = Executor.open(Stamped(3), [Echo()], batch=1)
    try:
        got = [item.value.times.e2e for item in executor.in_order()]
    finally:
        executor.close(close_source=True)
    assert len(got) == 3 and min(got) >= 400.0


@pytest.fixture(scope="module")
def clip10(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A 10 fps clip of 20 frames: 2 s when played at its own rate."""
    path = tmp_path_factory.mktemp("paced") / "ten.mp4"
    return str(write_clip(path, frames=20, fps=10, size=(160, 120)))


def test_a_realtime_run_plays_the_file_at_its_rate_and_accounts_for_every_frame(
    clip10: str, tmp_path: Path
) -> None:
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)
    began = time.perf_counter()
    summary = run_many([clip10, clip10], settings, str(tmp_path / "out"), videos=False,
                       realtime=True)  # fmt: skip
    took = time.perf_counter() - began
    assert took >= 1.9  # 20 frames at 10 fps: 1.9 s from the first to the last release
    for source in summary.sources:
        assert source.dropped is not None and source.frames + source.dropped == 20
        assert source.p99_ms is not None and source.p99_ms >= source.p50_ms > 0  # type: ignore[operator]
        assert source.as_json()["dropped"] == source.dropped
    plain = run_to_outputs(clip10, settings, progress=False)
    assert plain.sources[0].dropped is None and "dropped" not in plain.sources[0].as_json()
    with open_source(clip10) as src:
        assert src.dropped is None


def test_framelens_run_realtime_says_each_sources_drops(clip10: str, tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "framelens", "run", clip10, "--realtime", "--frames", "10",
         "--detections", str(tmp_path / "d.json"), "--quiet", "--threads", "1"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    source = json.loads(out.stdout)["sources"][0]
    assert source["dropped"] + source["frames"] == 10
