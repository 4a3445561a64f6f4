"""The per-source stage slot (core/stages/source_stages.py) in every way of watching.

A stage that numbers its source's frames stands in for a tracker: it must see every
result of its own source once, in frame order, before any consumer; a seek must tell it
(reset) before the first frame after it; and what it changes must be what the consumers
get. The same stage runs in a one-source run, a four-source run, playback, the wall and
an archive's job, each driven by the one session (or the player) with no code of its own.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.archive import run_batch
from framelens.core.sessions.archive.parquet import DETECTIONS_DIR
from framelens.core.sessions.playback.player import Player, PlayerState
from framelens.core.sessions.runs import run_many, run_to_outputs
from framelens.core.sessions.wall import WallPlayer, WallState
from framelens.core.stages.source_stages import SourceStage
from framelens.core.stages.tasks import DetectParams
from framelens.core.types import Detections, FrameResult
from media_factory import sample_clips

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
FRAMES = 12
RESET = -1  # what the log records for a reset, in place of a frame index


class Numbering:
    """Numbers its source's frames from 0 (what a tracker's frame count is), logging
    (source, frame index, number), and keeps no detection on odd-numbered frames: what
    a stage changes is what the writers and screens must get."""

    def __init__(self, source_id: int, log: list[tuple[int, int, int]]) -> None:
        self.source_id, self.log, self.count = source_id, log, 0
        self.seen_from: int | None = None  # the session's number of the source it serves

    def __call__(self, result: FrameResult) -> None:
        if self.seen_from is None:
            self.seen_from = result.frame.source_id
        assert result.frame.source_id == self.seen_from  # its own source's results only
        self.log.append((self.source_id, result.frame.index, self.count))
        if self.count % 2:
            result.output = Detections.empty()
        self.count += 1

    def reset(self) -> None:
        self.log.append((self.source_id, RESET, self.count))
        self.count = 0


class NumberingStages:
    """The stage factory: one Numbering per source, one shared log (picklable)."""

    def __init__(self) -> None:
        self.log: list[tuple[int, int, int]] = []
        self._lock = threading.Lock()

    def __call__(self, source_id: int) -> list[SourceStage]:
        with self._lock:
            return [Numbering(source_id, self.log)]

    def seen(self, source_id: int) -> list[int]:
        """The frame indices the source's stage saw, in order (resets as RESET)."""
        return [index for s, index, _ in self.log if s == source_id]

    def numbers(self, source_id: int) -> list[int]:
        return [n for s, index, n in self.log if s == source_id and index != RESET]

    def __getstate__(self) -> dict[str, Any]:
        return {"log": self.log}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.log, self._lock = state["log"], threading.Lock()


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Four 12-frame clips of the sample where the person is in view."""
    folder = tmp_path_factory.mktemp("stage_clips")
    return sample_clips(folder, SAMPLE, (290, 320, 600, 640), FRAMES)


@pytest.fixture(scope="module")
def settings() -> PipelineSettings:
    return PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)


def boxes_per_frame(path: Path) -> dict[int, int]:
    frames = json.loads(path.read_text())["frames"]
    return {int(f["index"]): len(f["detections"]) for f in frames}


def assert_written_after_the_stage(path: Path, first: int = 0) -> None:
    """The detections file holds what the stage left: nothing on its odd frames, and
    the person on the even ones (the model ran; the stage came after it)."""
    boxes = boxes_per_frame(path)
    assert all(n == 0 for index, n in boxes.items() if (index - first) % 2), boxes
    assert sum(n for index, n in boxes.items() if (index - first) % 2 == 0) > 0, boxes


def test_a_one_source_run_passes_every_frame_through_the_stage_in_order(
    clips: list[str], settings: PipelineSettings, tmp_path: Path
) -> None:
    stages = NumberingStages()
    out = tmp_path / "one.json"
    run_to_outputs(
        clips[0], settings, detections=str(out), start=2, frames=8, progress=False,
        stages=stages,
    )  # fmt: skip
    assert stages.seen(0) == list(range(2, 10))
    assert stages.numbers(0) == list(range(8))
    assert_written_after_the_stage(out, first=2)


def test_the_annotated_export_draws_what_the_stage_left_not_what_the_model_found(
    clips: list[str], settings: PipelineSettings, tmp_path: Path
) -> None:
    """Overlays are drawn after the stages (a tracker's IDs must be in the picture): the
    frames where the stage removed the detections are exported as decoded, the others
    with the person's box drawn."""
    import av

    out = tmp_path / "frames"
    run_to_outputs(clips[0], settings, export=f"{out}/", frames=6, progress=False,
                   stages=NumberingStages())  # fmt: skip
    with av.open(clips[0]) as container:
        decoded = [f.to_ndarray(format="bgr24") for f in container.decode(video=0)][:6]
    import cv2

    exported = [cv2.imread(str(p)) for p in sorted(out.glob("*.png"))]
    assert len(exported) == 6
    for index, (frame, drawn) in enumerate(zip(decoded, exported, strict=True)):
        changed = int(np.count_nonzero(np.abs(frame.astype(int) - drawn.astype(int)) > 40))
        if index % 2:
            assert changed == 0, f"frame {index}: a box drawn that the stage removed"
        else:
            assert changed > 200, f"frame {index}: the person's box is missing"


def test_four_sources_each_have_a_stage_of_their_own_that_sees_only_them_in_order(
    clips: list[str], settings: PipelineSettings, tmp_path: Path
) -> None:
    stages = NumberingStages()
    summary = run_many(clips, settings, str(tmp_path / "four"), videos=False, progress=False,
                       stages=stages)  # fmt: skip
    assert summary.mean_batch > 1  # the sources shared engine calls
    for source in range(4):
        assert stages.seen(source) == list(range(FRAMES))  # once each, in frame order
        assert stages.numbers(source) == list(range(FRAMES))  # its own count, not shared
        assert_written_after_the_stage(tmp_path / "four" / f"clip{source}.json")


def test_stages_are_numbered_by_the_sources_place_in_the_run_on_every_device_slot(
    clips: list[str], settings: PipelineSettings, tmp_path: Path
) -> None:
    """Four sources over two device slots: each source's stage is made for its own
    number in the run (0..3), not its place in its slot's group (0..1 twice)."""
    stages = NumberingStages()
    run_many(clips, settings, str(tmp_path / "slots"), devices=["cpu", "cpu"], videos=False,
             progress=False, stages=stages)  # fmt: skip
    for source in range(4):
        assert stages.seen(source) == list(range(FRAMES))


class PlaybackRecorder:
    def __init__(self) -> None:
        self.results: list[tuple[int, int]] = []  # (frame index, boxes) as shown
        self.states: list[PlayerState] = []
        self.errors: list[str] = []
        self.cond = threading.Condition()

    def on_result(self, result: FrameResult) -> None:
        with self.cond:
            self.results.append((result.frame.index, len(result.output)))
            self.cond.notify_all()

    def on_state(self, state: PlayerState) -> None:
        with self.cond:
            self.states.append(state)
            self.cond.notify_all()

    def wait(self, predicate: Callable[[], bool], timeout: float = 60.0) -> None:
        with self.cond:
            assert self.cond.wait_for(predicate, timeout), "timed out"


def test_playback_passes_shown_frames_through_the_stage_and_a_seek_resets_it(
    clips: list[str], settings: PipelineSettings
) -> None:
    stages = NumberingStages()
    rec = PlaybackRecorder()
    player = Player(rec.on_result, rec.on_state, rec.errors.append, stages=stages)
    try:
        player.open(clips[0], settings)
        rec.wait(lambda: len(rec.results) >= 1)
        for n in range(2, 5):
            player.step(1)
            rec.wait(lambda n=n: len(rec.results) >= n)  # type: ignore[misc]
        player.seek(8)
        rec.wait(lambda: rec.results[-1][0] == 8)
        player.step(1)
        rec.wait(lambda: rec.results[-1][0] == 9)
        player.step(-1)  # back one frame: a seek, the stage starts afresh
        rec.wait(lambda: len(rec.results) >= 7)
    finally:
        player.close()
    assert not rec.errors
    assert [index for index, _ in rec.results] == [0, 1, 2, 3, 8, 9, 8]
    # the seek and the step back each reset the stage before the frame they showed
    assert stages.seen(0) == [0, 1, 2, 3, RESET, 8, 9, RESET, 8]
    assert stages.numbers(0) == [0, 1, 2, 3, 0, 1, 0]
    # what was shown is what the stage left: no box on its odd-numbered frames
    assert [boxes for index, boxes in rec.results][1] == 0
    assert rec.results[5] == (9, 0)


class WallRecorder:
    def __init__(self) -> None:
        self.results: dict[int, list[tuple[int, int]]] = {}
        self.state = WallState()
        self.lock = threading.Lock()

    def on_result(self, result: FrameResult) -> None:
        with self.lock:
            tile = self.results.setdefault(result.frame.source_id, [])
            tile.append((result.frame.index, len(result.output)))

    def on_state(self, state: WallState) -> None:
        self.state = state


def test_the_wall_gives_every_tile_its_own_stage_before_the_screen(
    clips: list[str], settings: PipelineSettings
) -> None:
    stages = NumberingStages()
    rec = WallRecorder()
    errors: list[str] = []
    wall = WallPlayer(rec.on_result, rec.on_state, errors.append, realtime=False,
                      display_depth=FRAMES, stages=stages)  # fmt: skip
    try:
        wall.open(clips[:3], settings)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            s = rec.state
            if s.status == "ended" and all(t.shown + t.dropped == t.frames for t in s.tiles):
                break
            time.sleep(0.05)
    finally:
        wall.close()
    assert not errors
    for tile in range(3):
        assert stages.seen(tile) == list(range(FRAMES))
        shown = rec.results[tile]
        assert [index for index, _ in shown] == list(range(FRAMES))
        assert all(boxes == 0 for index, boxes in shown if index % 2)


def test_an_archive_job_passes_its_frames_through_the_stage(
    clips: list[str], settings: PipelineSettings, tmp_path: Path
) -> None:
    stages = NumberingStages()
    summary = run_batch([clips[1]], tmp_path / "archive", settings, progress=False,
                        stages=stages)  # fmt: skip
    assert summary.done == 1
    assert stages.seen(0) == list(range(FRAMES))
    assert_written_after_the_stage(tmp_path / "archive" / "clip1.json")
    table = pq.read_table(tmp_path / "archive" / DETECTIONS_DIR / "clip1.parquet")
    frames = np.asarray(table.column("frame").to_pylist())
    assert len(frames) and not np.any(frames % 2)  # the Parquet rows too: even frames only


def test_compare_panes_each_have_stages_that_see_every_frame_and_a_restart_resets_them(
    clips: list[str], settings: PipelineSettings, tmp_path: Path
) -> None:
    """The compare report (CLI) and the compare view's feed: a chain per pane, every
    frame in order before the pane is measured, reset when the view plays again."""
    from framelens.core.pipeline.compare.panes import CompareRunner, PaneSpec
    from framelens.core.pipeline.decode_ahead import End
    from framelens.core.sessions.compare.lockstep import LockstepFeed
    from framelens.core.sessions.compare.to_report import compare_to_report
    from framelens.core.stages.sources import open_source

    fp32 = PaneSpec("fp32", settings)
    strict = PaneSpec("strict", replace(settings, params=DetectParams(conf=0.6)))
    logs: list[NumberingStages] = []

    def per_pane(source_id: int) -> list[SourceStage]:
        logs.append(NumberingStages())  # one log per pane, to tell the panes apart
        return logs[-1](source_id)

    summary = compare_to_report(clips[0], [fp32, strict], tmp_path / "report", frames=8,
                                progress=False, stages=per_pane)  # fmt: skip
    assert summary["frames"] == 8 and len(logs) == 2
    assert [log.seen(0) for log in logs] == [list(range(8))] * 2

    logs.clear()
    with open_source(clips[0]) as source, CompareRunner([fp32, strict], stages=per_pane) as runner:
        feed = LockstepFeed(source, runner)
        try:
            steps = [feed.next(30.0) for _ in range(3)]
            assert all(not isinstance(s, End) and s is not None for s in steps)
            feed.restart()
            again = feed.next(30.0)
            assert again is not None and not isinstance(again, End) and again.frame.index == 0
        finally:
            feed.close()
    for log in logs:  # steps computed ahead of the view may be seen before the restart
        seen = log.seen(0)
        cut = seen.index(RESET)
        assert seen[:cut] == list(range(cut)) and cut >= 3
        assert seen[cut + 1] == 0  # after the restart: from the first frame, afresh
