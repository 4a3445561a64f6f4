"""A device failing in the middle of a run of several sources: its sources go on on
another GPU of the run, or on the CPU, each from the frame it had reached; nothing lost,
nothing written twice, one message (issue: two GPUs, the GPU-failure path).

This machine has no GPU, so each "GPU" is stood in for by real CPU pipelines, the failing
one raising GpuError on one frame as a GPU out of memory would (tests/gpu injects the
fault into the real GPU pipeline on the H200). What is tested is the move.
"""

from __future__ import annotations

import collections
import itertools
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import av
import pytest
from framelens.core.errors import EngineError, GpuError, SourceError
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline import build, decoding
from framelens.core.pipeline.build import Workers
from framelens.core.pipeline.processor import FrameProcessor
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.failover import Failover
from framelens.core.sessions.runs import run_many, run_to_outputs
from framelens.core.sessions.summary import RunSummary
from framelens.core.types import Frame, FrameResult, StageTimes
from media_factory import encode_frames, sample_clips, sample_frames, write_broken_folder

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
FRAMES = 30
FAIL_AT = 11  # the failing device's pipeline raises on this frame of any of its sources


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Three 30-frame clips of the sample where the person is in view, each its own."""
    return sample_clips(tmp_path_factory.mktemp("clips"), SAMPLE, (290, 330, 600), FRAMES)


def failing(
    settings: PipelineSettings,
    at: int | None,
    *,
    nth: bool = False,
    after: tuple[int, int] | None = None,
) -> FrameProcessor:
    """A real CPU pipeline that raises GpuError on frame ``at`` of any source (``nth``:
    on the ``at``-th frame it is given, for a live stream, whose indices skip).
    ``after`` (source, count): not before it was given ``count`` frames of that source,
    then on the first frame from ``at`` on of another; sources are read as their frames
    are ready, so without it a short source may or may not be complete by then."""
    pipeline = build.host_pipeline(settings)
    real = pipeline.infer_batch
    given = [0]
    of_source: collections.Counter[int] = collections.Counter()

    def due(frames: Sequence[Frame]) -> Frame | None:
        """The frame to fail on, if any."""
        if at is None:
            return None
        if nth:
            return frames[-1] if given[0] > at else None
        if after is not None and of_source[after[0]] < after[1]:
            return None
        hits = [f for f in frames if f.index == at or (after and f.index >= at)]
        return next((f for f in hits if after is None or f.source_id != after[0]), None)

    def infer_batch(frames: Sequence[Frame], times_each: Sequence[StageTimes]) -> list[FrameResult]:
        given[0] += len(frames)
        if (frame := due(frames)) is not None:
            raise GpuError(f"frame {frame.index}: out of memory (injected)")
        of_source.update(f.source_id for f in frames)
        return real(frames, times_each)

    pipeline.infer_batch = infer_batch  # type: ignore[method-assign]
    return pipeline


def stand_ins(
    monkeypatch: pytest.MonkeyPatch,
    fail_at: dict[str, int | None],
    *,
    builds: dict[str, int] | None = None,
    nth: bool = False,
    after: tuple[int, int] | None = None,
) -> list[str]:
    """Stand-in GPUs (CPU pipelines in fact), device -> the frame it fails on (None:
    works); ``builds``: device -> how many times workers can be built on it (then it is
    out of memory). Returns the devices workers were asked of, in order."""
    real = build.workers
    built: list[str] = []

    def workers(settings: PipelineSettings, **kw: Any) -> Workers:
        built.append(settings.device)
        if settings.device not in fail_at:
            return real(settings, **kw)
        if builds is not None and built.count(settings.device) > builds.get(settings.device, 9):
            raise GpuError("GPU frame buffers: out of memory (injected)")
        cpu = replace(settings, device="cpu", threads=1)
        at = fail_at[settings.device]
        return Workers(
            [failing(cpu, at, nth=nth, after=after)], f"gpu pipeline (stand-in {settings.device})"
        )

    monkeypatch.setattr(build, "workers", workers)
    return built


@pytest.fixture
def stand_in_gpus(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """cuda:0 fails at FAIL_AT, cuda:1 works."""
    return stand_ins(monkeypatch, {"cuda:0": FAIL_AT, "cuda:1": None})


def frames_of(path: Path) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = json.loads(path.read_text())["frames"]
    return frames


def run_on(
    specs: list[str], out: Path, devices: list[str], **kw: Any
) -> tuple[RunSummary, list[str]]:
    """run_many on the stand-in devices: its summary and the messages it gave."""
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)
    messages: list[str] = []
    summary = run_many(
        specs, settings, str(out), devices=devices, progress=False, on_message=messages.append,
        **kw,
    )  # fmt: skip
    return summary, messages


def assert_every_frame_once(summary: RunSummary, out: Path) -> None:
    for entry in summary.sources:
        frames = frames_of(out / f"{entry.name}.json")
        assert [f["index"] for f in frames] == list(range(FRAMES))


def video_frames(path: Path) -> int:
    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


def assert_same(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> None:
    assert [f["index"] for f in a] == [f["index"] for f in b]
    for fa, fb in zip(a, b, strict=True):
        assert [d["label"] for d in fa["detections"]] == [d["label"] for d in fb["detections"]]
        for x, y in zip(fa["detections"], fb["detections"], strict=True):
            assert max(abs(p - q) for p, q in zip(x["box"], y["box"], strict=True)) < 0.05


@pytest.mark.parametrize(
    ("devices", "goes_to"),
    [
        (["cuda:0", "cuda:1"], "2 sources going on on cuda:1"),
        (["cuda:0"], "3 sources going on on the CPU"),
    ],
)
def test_a_failing_device_hands_its_sources_on_from_where_each_stopped(
    clips: list[str],
    tmp_path: Path,
    stand_in_gpus: list[str],
    devices: list[str],
    goes_to: str,
) -> None:
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)
    messages: list[str] = []
    summary = run_many(
        clips, settings, str(tmp_path / "moved"), devices=devices, progress=False,
        on_message=messages.append,
    )  # fmt: skip
    moves = [m for m in messages if m.startswith("cuda:0 failed")]
    assert len(moves) == 1 and "\n" not in moves[0], messages
    assert f"frame {FAIL_AT}: out of memory" in moves[0]
    assert f"); {goes_to}, each from the frame it had reached" in moves[0]
    assert stand_in_gpus.count("cuda:0") == 1  # built once, then its sources moved
    assert [s.frames for s in summary.sources] == [FRAMES] * 3
    assert all(s.error is None for s in summary.sources)
    reference = run_many(clips, settings, str(tmp_path / "cpu"), progress=False)
    found = 0
    for entry in reference.sources:
        name = entry.name
        moved = frames_of(tmp_path / "moved" / f"{name}.json")
        assert [f["index"] for f in moved] == list(range(FRAMES))  # none lost, none twice
        assert_same(moved, frames_of(tmp_path / "cpu" / f"{name}.json"))
        assert video_frames(tmp_path / "moved" / f"{name}.mp4") == FRAMES
        found += sum(len(f["detections"]) for f in moved)
    assert found > 30  # the person is in view: the comparison compared boxes
    assert not list((tmp_path / "moved").glob(".*"))  # no staging files left


def test_a_source_moved_to_a_gpu_that_fails_too_goes_on_on_the_cpu_not_back(
    clips: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One source on cuda:0 (the run lists cuda:1 too): cuda:0 fails at frame 11 and
    hands it to cuda:1, which fails at frame 20: it goes on on the CPU, not back."""
    built = stand_ins(monkeypatch, {"cuda:0": FAIL_AT, "cuda:1": 20})
    summary, messages = run_on(clips[:1], tmp_path / "out", ["cuda:0", "cuda:1"])
    failed = [m.split(" failed")[0] for m in messages if " failed (frame " in m]
    assert failed == ["cuda:0", "cuda:1"], messages
    assert summary.sources[0].frames == FRAMES
    assert built == ["cuda:0", "cuda:1", "cpu"]
    assert_every_frame_once(summary, tmp_path / "out")


def test_a_device_one_group_saw_fail_is_no_other_groups_refuge() -> None:
    """Groups in threads of one process share what failed: once cuda:0 failed under one,
    another whose cuda:1 fails goes to the CPU, not to cuda:0."""
    shared: list[str] = []
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), device="cuda:0")
    devices = ["cuda:0", "cuda:1"]
    first = Failover(devices, None, lambda _: None, failed=shared)
    second = Failover(devices, None, lambda _: None, failed=shared)
    assert [c.device for c in second.candidates(replace(settings, device="cuda:1"))] == [
        "cuda:0", "cpu",
    ]  # fmt: skip
    first.failed.append("cuda:0")  # what move() notes first
    assert [c.device for c in second.candidates(replace(settings, device="cuda:1"))] == ["cpu"]


def test_a_gpu_that_cannot_take_the_sources_is_passed_over_for_the_cpu(
    clips: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cuda:1, busy with its own sources, has no memory for cuda:0's: they go on on the
    CPU, and the messages say both."""
    stand_ins(monkeypatch, {"cuda:0": FAIL_AT, "cuda:1": None}, builds={"cuda:1": 1})
    summary, messages = run_on(clips, tmp_path / "out", ["cuda:0", "cuda:1"])
    assert any(m.startswith("cuda:1 cannot take the sources of a failed device") for m in messages)
    assert any(m.startswith("cuda:0 failed") and "2 sources going on on the CPU" in m
               for m in messages), messages  # fmt: skip
    assert [list(d.moved_to) for d in summary.devices] == [["cpu"], []]
    assert_every_frame_once(summary, tmp_path / "out")


class FailingDecoder:
    """A source whose decoding fails on the GPU at one frame (as NVDEC can): a stand-in
    around the real source."""

    def __init__(self, source: Any, at: int) -> None:
        self._source, self._at = source, at

    def read(self) -> Frame | None:
        frame: Frame | None = self._source.read()
        if frame is not None and frame.index == self._at:
            raise GpuError(f"NVDEC: decode failed at frame {self._at} (injected)")
        return frame

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            object.__setattr__(self, name, value)
        else:
            setattr(self._source, name, value)


def test_a_decoder_failing_on_the_gpu_moves_its_sources_too(
    clips: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not the engine but one source's GPU decoder fails (frame 14): the device's
    sources move to the CPU, that one with them, rather than it being dropped."""
    stand_ins(monkeypatch, {"cuda:0": None})
    real_open = decoding.open_frames

    def open_frames(spec: str, pipeline: Any, workers: int) -> tuple[Any, str]:
        source, name = real_open(spec, pipeline, workers)
        on_gpu = pipeline is not None and pipeline.settings.device == "cpu" and "clip1" in spec
        if on_gpu and not getattr(open_frames, "done", False):
            open_frames.done = True  # type: ignore[attr-defined]  # the first opening only
            return FailingDecoder(source, 14), name
        return source, name

    monkeypatch.setattr(decoding, "open_frames", open_frames)
    summary, messages = run_on(clips, tmp_path / "out", ["cuda:0"])
    assert any("decode failed at frame 14" in m and "3 sources going on on the CPU" in m
               for m in messages), messages  # fmt: skip
    assert all(s.error is None for s in summary.sources)
    assert_every_frame_once(summary, tmp_path / "out")


def test_a_live_stream_moved_goes_on_counting_where_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream cannot seek: reopened on the new device it counts from 0 again (a live
    source numbers its frames by time); the outputs go on numbering and timing from
    where they were: never back, never twice."""
    from loopback_server import LoopbackStreamServer
    from media_factory import write_clip

    clip = tmp_path / "live.ts"
    write_clip(clip, frames=40, fps=10, size=(160, 128), gop=5)
    server = LoopbackStreamServer(clip.read_bytes(), bytes_per_s=4e6)
    server.start()
    try:
        stand_ins(monkeypatch, {"cuda:0": FAIL_AT}, nth=True)
        summary, messages = run_on([server.url], tmp_path / "out", ["cuda:0"], frames=FRAMES)
    finally:
        server.stop()
    assert any("1 source going on on the CPU" in m for m in messages), (messages, summary)
    name = summary.sources[0].name
    frames = frames_of(tmp_path / "out" / f"{name}.json")
    assert len(frames) == FRAMES == summary.sources[0].frames
    indices, pts = [f["index"] for f in frames], [f["pts"] for f in frames]
    assert all(b > a for a, b in itertools.pairwise(indices)), indices
    assert all(b > a for a, b in itertools.pairwise(pts)), pts


def test_a_gpu_without_frame_buffers_for_them_is_passed_over_for_the_cpu(
    clips: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cuda:1 builds its engine but has no memory left for the decoder's frame buffers
    (NVDEC says so as the source's error): that is cuda:1's failure, not the source's;
    it goes on on the CPU rather than being dropped."""
    stand_ins(monkeypatch, {"cuda:0": FAIL_AT, "cuda:1": None})
    real_open = decoding.open_frames
    opened = [0]

    def open_frames(spec: str, pipeline: Any, workers: int) -> tuple[Any, str]:
        opened[0] += 1
        if opened[0] == 2:  # the reopening after the move, on cuda:1
            raise SourceError("GPU frame buffers: out of memory (injected)")
        return real_open(spec, pipeline, workers)

    monkeypatch.setattr(decoding, "open_frames", open_frames)
    summary, messages = run_on(clips[:1], tmp_path / "out", ["cuda:0", "cuda:1"])
    assert any(m.startswith("cuda:1 cannot take the sources") and "frame buffers" in m
               for m in messages), messages  # fmt: skip
    assert any("1 source going on on the CPU" in m for m in messages), messages
    assert_every_frame_once(summary, tmp_path / "out")


def test_when_no_device_can_take_the_sources_finished_outputs_are_kept(
    clips: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cuda:0 fails at frame 11 and even the CPU cannot build its workers: the source
    that had every frame written keeps its outputs; the others are reported, one line."""
    short = tmp_path / "short.mp4"
    encode_frames(short, sample_frames(SAMPLE, tuple(range(300, 306))))
    stand_ins(monkeypatch, {"cuda:0": FAIL_AT}, after=(1, 6))
    real_workers = build.workers

    def workers(settings: PipelineSettings, **kw: Any) -> Workers:
        if settings.device == "cpu":
            raise EngineError("no memory for the CPU session (injected)")
        return real_workers(settings, **kw)

    monkeypatch.setattr(build, "workers", workers)
    summary, messages = run_on([clips[0], str(short)], tmp_path / "out", ["cuda:0"])
    first, done = summary.sources
    assert first.error == "cuda:0 failed and no device could take it"
    assert done.frames == 6 and done.error is None
    assert len(frames_of(tmp_path / "out" / "short.json")) == 6
    assert not (tmp_path / "out" / "clip0.json").exists()
    moves = [m for m in messages if "no device could take its sources" in m]
    assert len(moves) == 1 and "no memory for the CPU session" in moves[0], messages


def test_a_device_failing_with_nothing_left_to_move_keeps_what_was_finished(
    clips: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The short clip is complete and the other breaks on its own (a bad frame) right
    a few frames after the frame the device fails on: the complete one's outputs are kept (the
    summary once failed on the closed workers, losing them). Whether the broken one's
    error was read before the device failed (nothing left to move) or after (it is
    moved and breaks on the CPU) is a race; either way it ends with its own error."""
    short = tmp_path / "short.mp4"
    encode_frames(short, sample_frames(SAMPLE, tuple(range(300, 306))))
    broken = write_broken_folder(tmp_path / "frames", SAMPLE, 300, 30, bad=25)
    stand_ins(monkeypatch, {"cuda:0": 19}, after=(1, 6))
    summary, messages = run_on([str(broken), str(short)], tmp_path / "out", ["cuda:0"])
    failed = [m for m in messages if m.startswith("cuda:0 failed (frame ")]
    assert len(failed) == 1 and 19 <= int(failed[0].split()[3].rstrip(":")) < 25, messages
    gone, done = summary.sources
    assert "025" in gone.error and done.frames == 6 and done.error is None
    assert len(frames_of(tmp_path / "out" / "short.json")) == 6


def test_a_run_whose_source_cannot_be_opened_closes_the_workers_it_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An export of a file that cannot be opened (the GUI's, again and again) leaves no
    engine behind: the workers built for it are closed."""
    built: list[Workers] = []
    real_workers = build.workers

    def workers(settings: PipelineSettings, **kw: Any) -> Workers:
        made = real_workers(settings, **kw)
        built.append(made)
        return made

    monkeypatch.setattr(build, "workers", workers)
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)
    with pytest.raises(SourceError):
        run_to_outputs(str(tmp_path / "missing.mp4"), settings,
                       detections=str(tmp_path / "d.json"), progress=False)  # fmt: skip
    assert built and all(not w.pipelines for w in built)  # closed (close empties the list)
    assert not list(tmp_path.iterdir())  # and nothing written
