"""What the window's playback shows and may do, without Qt (core/sessions/playback/view.py
and delivery.py): the real Player's reports, handed over in order as the GUI's controller
hands them, real exports and snapshots of the bundled sample video."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import cv2
import pytest
from framelens.core.errors import ExportError
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.models.spec import ModelSpec
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.precision.int8_settings import CalibrationSettings
from framelens.core.precision.jobs import PrecisionJob
from framelens.core.precision.report import SensitivityReport
from framelens.core.sessions.export import ExportRequest
from framelens.core.sessions.playback.choice import PlaybackChoice
from framelens.core.sessions.playback.delivery import ResultGate
from framelens.core.sessions.playback.player import Player
from framelens.core.sessions.playback.view import PlaybackView
from framelens.core.types import FrameResult
from loopback_server import LoopbackStreamServer
from media_factory import write_clip

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4")
BOTTLE = str(ROOT / "tests" / "data" / "bottle-detection.mp4")


class Listener:
    """A PlaybackChoice's listener that only says what the player is to run."""

    def __init__(self) -> None:
        self.runs: list[PipelineSettings] = []

    def run(self, settings: PipelineSettings) -> None:
        self.runs.append(settings)

    def model_changed(self, spec: ModelSpec | None) -> None:
        del spec

    def precision_changed(
        self, precision: str, report: SensitivityReport | None, chosen: bool
    ) -> None:
        del precision, report, chosen

    def precision_failed(self, precision: str, message: str, restoring: bool) -> None:
        del precision, message, restoring

    def prepare(
        self,
        job: PrecisionJob,
        spec: ModelSpec,
        source: str | None,
        calibration: CalibrationSettings,
    ) -> None:
        del job, spec, source, calibration


class Screen:
    """The GUI thread as the controller is to it: the player's reports queued from its
    threads and handed to the view in order, on the test's thread."""

    def __init__(self, view: PlaybackView) -> None:
        self.view = view
        self._queue: queue.Queue[tuple[str, object]] = queue.Queue()
        self.errors: list[str] = []
        self.player = Player(
            lambda r: self._queue.put(("result", r)),
            lambda s: self._queue.put(("state", s)),
            lambda e: self._queue.put(("error", e)),
            on_open_failed=lambda spec: self._queue.put(("failed", spec)),
        )
        self.failed: list[str] = []

    def open(self, spec: str, settings: PipelineSettings | None) -> None:
        self.view.opening(spec)
        self.player.open(spec, settings, play=False)

    def until(self, done: Callable[[], bool], timeout: float = 60.0) -> None:
        """Hand over the player's reports until ``done`` holds."""
        while not done():
            kind, item = self._queue.get(timeout=timeout)
            if kind == "state":
                self.view.state_changed(item)  # type: ignore[arg-type]
            elif kind == "result":
                self.view.shown(item)  # type: ignore[arg-type]
            elif kind == "failed":
                self.view.open_failed(str(item))
                self.failed.append(str(item))
            else:
                self.errors.append(str(item))


@pytest.fixture
def choice() -> PlaybackChoice:
    return PlaybackChoice(Listener())


@pytest.fixture
def view(choice: PlaybackChoice) -> PlaybackView:
    return PlaybackView(choice)


@pytest.fixture
def screen(view: PlaybackView) -> Iterator[Screen]:
    s = Screen(view)
    yield s
    s.player.close()


def playing(view: PlaybackView, spec: str) -> bool:
    info = view.state.source
    return info is not None and info.uri == spec and view.last_result is not None


def test_the_source_asked_for_is_current_once_it_replaces_the_one_open(
    choice: PlaybackChoice, view: PlaybackView, screen: Screen
) -> None:
    screen.open(SAMPLE, None)
    assert view.source == SAMPLE  # nothing was open: current at once
    assert choice.source == SAMPLE  # INT8 is calibrated on it
    screen.until(lambda: playing(view, SAMPLE))
    first = view.last_result
    screen.open(str(ROOT / "no-such-video.mp4"), None)
    screen.until(lambda: bool(screen.errors))
    assert view.source == SAMPLE  # a failed open: the video that plays stays current
    assert view.last_result is first  # and its frame on screen
    screen.open(BOTTLE, None)
    assert view.source == SAMPLE  # not before the player has let the sample go
    screen.until(lambda: view.source == BOTTLE)
    assert choice.source == BOTTLE
    assert view.last_result is None  # the sample's frame is not the bottle's
    screen.until(lambda: playing(view, BOTTLE))
    assert view.last_result is not None and view.last_result.frame.index == 0


def test_an_open_that_fails_is_named_by_the_player_not_guessed_from_its_message(
    view: PlaybackView, screen: Screen, tmp_path: Path
) -> None:
    """The window learnt that an open failed by looking for the video's name in the error
    line; a message without it (a stream, a camera) left the title on a video that never
    opened. The player now names the source it could not open."""
    fake = tmp_path / "holiday.mp4"
    fake.write_text("not a video")
    screen.open(str(fake), None)
    screen.until(lambda: bool(screen.failed))
    assert screen.failed == [str(fake)] and screen.errors  # said why, then which
    assert view.source is None  # nothing was open, and nothing opened
    screen.open(SAMPLE, None)
    screen.until(lambda: playing(view, SAMPLE))
    screen.open("http://127.0.0.1:9/live", None)  # nothing listens there
    screen.until(lambda: len(screen.failed) == 2)
    assert screen.failed[-1] == "http://127.0.0.1:9/live"
    assert view.source == SAMPLE  # the video that plays stays current
    screen.open(BOTTLE, None)
    screen.until(lambda: view.source == BOTTLE)  # no stale open got in the way


def test_going_to_a_frame_and_exporting_need_a_video_open(
    view: PlaybackView, screen: Screen
) -> None:
    assert view.seek_refusal() == "open a video first, then go to one of its frames"
    assert view.export_refusal() == "nothing to export: open a video first"
    assert view.snapshot_refusal() == "nothing to save: open a video first"
    screen.open(SAMPLE, None)
    screen.until(lambda: playing(view, SAMPLE))
    assert (view.seek_refusal(), view.export_refusal(), view.snapshot_refusal()) == (
        None,
        None,
        None,
    )


def test_a_live_stream_has_no_frame_to_go_to_and_is_not_exported(
    view: PlaybackView, screen: Screen, tmp_path: Path
) -> None:
    ts = write_clip(tmp_path / "live.ts", frames=100, fps=25, size=(160, 128), gop=25)
    data = ts.read_bytes()
    server = LoopbackStreamServer(data, bytes_per_s=len(data) / 4)
    server.start()
    try:
        screen.open(server.url, None)
        screen.until(lambda: playing(view, server.url))
        assert view.seek_refusal() == "stream sources play live: there is no frame to go to"
        assert view.export_refusal() == "export works on files; record a camera or stream first"
        assert view.snapshot_refusal() is None  # the frame on screen can be saved
    finally:
        screen.player.close()
        server.stop()


def test_a_snapshot_needs_a_frame_on_screen_and_saves_that_frame(
    view: PlaybackView, screen: Screen, tmp_path: Path
) -> None:
    with pytest.raises(ExportError, match="nothing to save: open a video first"):
        view.save_snapshot(tmp_path / "none.png")
    assert not (tmp_path / "none.png").exists()
    screen.open(SAMPLE, PipelineSettings(resolve_model(DEFAULT_MODEL)))
    screen.until(lambda: playing(view, SAMPLE))
    shown = view.last_result
    assert isinstance(shown, FrameResult)
    written = view.save_snapshot(tmp_path / "shot.png")
    image = cv2.imread(str(written))
    assert image is not None and image.shape == shown.frame.image.shape


def test_an_export_needs_a_model_and_runs_one_at_a_time(tmp_path: Path) -> None:
    choice = PlaybackChoice(Listener())
    view = PlaybackView(choice)
    request = ExportRequest(SAMPLE, str(tmp_path / "out.mp4"), count=3)
    with pytest.raises(ExportError, match="choose a model before exporting"):
        view.start_export(request)
    choice.use_model(resolve_model(DEFAULT_MODEL))
    job = view.start_export(request)
    assert view.exporting
    with pytest.raises(ExportError, match="an export is already running"):
        view.start_export(request)
    done: list[tuple[int, int]] = []
    outcome = view.run_export(job, lambda n, total: done.append((n, total)))
    assert outcome == [str(tmp_path / "out.mp4")] and done[-1][0] == 3
    assert not view.exporting  # the next may start
    assert cv2.VideoCapture(str(tmp_path / "out.mp4")).get(cv2.CAP_PROP_FRAME_COUNT) == 3


def test_a_cancelled_export_says_so_and_leaves_no_file(tmp_path: Path) -> None:
    choice = PlaybackChoice(Listener())
    view = PlaybackView(choice)
    choice.use_model(resolve_model(DEFAULT_MODEL))
    job = view.start_export(ExportRequest(SAMPLE, str(tmp_path / "out.mp4")))
    view.cancel_export()
    assert view.run_export(job, lambda n, total: None) == "cancelled"
    assert not view.exporting and list(tmp_path.iterdir()) == []


def test_results_wait_for_the_screen_a_few_at_a_time() -> None:
    gate = ResultGate(in_flight=3, wait_s=0.05)
    assert [gate.admit() for _ in range(3)] == [True, True, True]
    assert not gate.admit()  # the screen is behind: this one is dropped
    gate.taken()
    assert gate.admit()


def test_a_result_waiting_for_room_goes_through_when_the_screen_takes_one() -> None:
    gate = ResultGate(in_flight=1, wait_s=30.0)
    assert gate.admit()
    admitted: list[bool] = []
    waiting = threading.Thread(target=lambda: admitted.append(gate.admit()))
    waiting.start()
    gate.taken()  # whenever the waiting thread gets there: it is let through
    waiting.join(30.0)
    assert admitted == [True]
