"""Many sources in one run (the CPU half of "Many streams at once"): real videos through
PyAV, a real image folder that breaks mid-run, the real YOLOX-Nano, batches across
sources, outputs per source exactly as single runs write them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import pytest
from child_signals import as_from_a_terminal
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.outputs import output_names, source_name
from framelens.core.sessions.runs import run_many, run_to_outputs
from framelens.core.stages.sources import open_source
from framelens.core.stages.sources.merged import MergedSource
from loopback_server import LoopbackStreamServer
from media_factory import encode_frames, sample_frames, write_broken_folder, write_clip

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
FRAMES = 24
START = 290  # the person is in view: detections to compare


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Four sources: three 24-frame clips of the sample cut at different places (so each
    has its own detections) and one at a different size (768x432 -> 640x360)."""
    folder = tmp_path_factory.mktemp("clips")
    paths = []
    for n, (start, size) in enumerate([(290, None), (320, None), (600, None), (300, (640, 360))]):
        frames = sample_frames(SAMPLE, tuple(range(start, start + FRAMES)))
        if size is not None:
            frames = [np.ascontiguousarray(cv2.resize(f, size)) for f in frames]
        paths.append(str(encode_frames(folder / f"clip{n}.mp4", frames)))
    return paths


def detections(path: Path) -> list[dict[str, object]]:
    frames: list[dict[str, object]] = json.loads(path.read_text())["frames"]
    return frames


def assert_same_detections(a: list[dict[str, object]], b: list[dict[str, object]]) -> None:
    assert [f["index"] for f in a] == [f["index"] for f in b]
    for fa, fb in zip(a, b, strict=True):
        da, db = fa["detections"], fb["detections"]
        assert isinstance(da, list) and isinstance(db, list) and len(da) == len(db), fa["index"]
        for x, y in zip(da, db, strict=True):
            assert x["label"] == y["label"]
            assert (
                np.allclose(x["box"], y["box"], atol=0.05) and abs(x["score"] - y["score"]) < 1e-3
            )


def test_four_sources_give_the_detections_of_four_single_runs(
    clips: list[str], tmp_path: Path
) -> None:
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)
    summary = run_many(clips, settings, str(tmp_path / "all"), progress=False)
    assert summary.batch > 1 and summary.mean_batch > 1  # sources share engine calls
    assert [s.frames for s in summary.sources] == [FRAMES] * 4  # every frame, no drops
    # the throughput figure is the processing rate: building the engine is not in it
    assert summary.frames / summary.fps < summary.wall_s
    found = 0
    for clip, entry in zip(clips, summary.sources, strict=True):
        alone = tmp_path / f"{Path(clip).stem}-alone.json"
        run_to_outputs(clip, settings, detections=str(alone), progress=False)
        together = tmp_path / "all" / f"{entry.name}.json"
        assert str(together) in entry.outputs and (tmp_path / "all" / f"{entry.name}.mp4").is_file()
        assert_same_detections(detections(together), detections(alone))
        found += sum(len(f["detections"]) for f in detections(alone))  # type: ignore[arg-type]
    assert found > 40  # the clips show the person: the comparison compared something


def test_a_source_that_breaks_mid_run_is_reported_and_the_others_finish(
    clips: list[str], tmp_path: Path
) -> None:
    folder = write_broken_folder(tmp_path / "frames", SAMPLE, 300, 10, bad=5)
    out = tmp_path / "out"
    notes: list[str] = []
    summary = run_many(
        [clips[0], str(folder), clips[1]], PipelineSettings(resolve_model(DEFAULT_MODEL)),
        str(out), progress=False, on_message=notes.append,
    )  # fmt: skip
    broken = summary.sources[1]
    assert broken.name == "frames" and "005.jpg" in broken.error
    assert broken.frames == 5  # what it gave before it broke
    assert not (out / "frames.mp4").exists() and not (out / "frames.json").exists()
    assert not list(out.glob(".*"))  # no staging left behind
    assert [s.frames for s in (summary.sources[0], summary.sources[2])] == [FRAMES] * 2
    assert any("005.jpg" in n for n in notes)


def test_a_source_alone_on_its_device_slot_breaks_alone(clips: list[str], tmp_path: Path) -> None:
    """Two device slots, one source each: the broken one is reported, and the other
    slot's source is written whole (a slot of one source breaking must not stop the run)."""
    folder = write_broken_folder(tmp_path / "frames", SAMPLE, 300, 10, bad=5)
    summary = run_many(
        [clips[0], str(folder)], PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1),
        str(tmp_path / "out"), devices=["cpu", "cpu"], videos=False, progress=False,
    )  # fmt: skip
    good, broken = summary.sources
    assert "005.jpg" in (broken.error or "") and broken.frames == 5
    assert good.error is None and good.frames == FRAMES
    assert len(detections(tmp_path / "out" / "clip0.json")) == FRAMES
    assert not (tmp_path / "out" / "frames.json").exists()


def test_the_merged_source_reads_every_frame_of_each_in_order_and_takes_turns(
    clips: list[str],
) -> None:
    merged = MergedSource([open_source(c) for c in clips[:3]], limits=10)
    try:
        deadline = time.monotonic() + 10
        while any(q.qsize() < 2 for q in merged._queues) and time.monotonic() < deadline:
            time.sleep(0.01)  # every reader has frames ready: now turns decide the order
        got = [(f.source_id, f.index) for f in merged]
    finally:
        merged.close()
    for sid in range(3):
        assert [i for s, i in got if s == sid] == list(range(10))
    assert [s for s, _ in got[:6]] == [0, 1, 2, 0, 1, 2]  # in turn, nobody waits for another
    assert merged.failures == {}


def test_output_names_from_stems_addresses_and_cameras() -> None:
    assert source_name("/data/cam/front door.mp4") == "front door"
    assert source_name("rtsp://10.0.0.5:554/live/ch1?token=x") == "10.0.0.5-554-live-ch1"
    assert source_name("0") == "camera-0" and source_name("/dev/video2") == "camera-2"
    # x-2.mp4 keeps its own name: x-2.json is its, not b/x.mp4's (which was numbered
    # past it); the numbers go on past every name taken
    assert output_names(["a/x.mp4", "b/x.mp4", "x-2.mp4", "c/x.mkv"]) == [
        "x", "x-3", "x-2", "x-4",
    ]  # fmt: skip
    assert output_names(["x-2.mp4", "x.mp4", "b/x.mp4"]) == ["x-2", "x", "x-3"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "framelens", "run", *args],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_cli_several_sources_need_an_export_dir_and_write_one_pair_each(
    clips: list[str], tmp_path: Path
) -> None:
    missing = _cli(clips[0], clips[1], "--quiet")
    assert missing.returncode == 2 and "--export-dir" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1 and "Traceback" not in missing.stderr
    shutil.copy(clips[0], tmp_path / "clip0.mp4")  # the same stem twice
    done = _cli(
        clips[0], str(tmp_path / "clip0.mp4"), "--export-dir", str(tmp_path / "o"), "--quiet"
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert [s["name"] for s in summary["sources"]] == ["clip0", "clip0-2"]
    for name in ("clip0", "clip0-2"):
        assert (tmp_path / "o" / f"{name}.mp4").stat().st_size > 1000
        assert len(detections(tmp_path / "o" / f"{name}.json")) == FRAMES


@pytest.fixture
def slow_stream(tmp_path: Path) -> Iterator[LoopbackStreamServer]:
    """A live HTTP stream on 127.0.0.1 that plays a 5 fps clip in real time."""
    path = tmp_path / "live.ts"
    write_clip(path, frames=40, fps=5, size=(160, 128), gop=5)
    payload = path.read_bytes()
    server = LoopbackStreamServer(payload, bytes_per_s=len(payload) / 8.0)  # 40 frames in 8 s
    server.start()
    yield server
    server.stop()


@pytest.mark.serial  # times itself: runs alone (installer/test.sh)
def test_a_slow_live_source_does_not_stall_a_file_beside_it(
    clips: list[str], slow_stream: LoopbackStreamServer
) -> None:
    """The muxer hands out whatever source has a frame: the file's 24 frames come out at
    decoding speed while the live stream trickles in at 5 fps."""
    merged = MergedSource([open_source(slow_stream.url), open_source(clips[0])], limits=FRAMES)
    start = time.monotonic()
    when: dict[int, list[float]] = {0: [], 1: []}
    try:
        for frame in merged:
            when[frame.source_id].append(time.monotonic() - start)
            if len(when[1]) == FRAMES and len(when[0]) >= 5:
                break
    finally:
        merged.close()
    assert len(when[1]) == FRAMES  # every frame of the file
    assert when[1][-1] < 2.0  # not paced by the stream
    assert len(when[0]) >= 5 and when[0][4] > when[1][-1]  # the stream was still trickling


@pytest.mark.serial  # times itself: runs alone (installer/test.sh)
def test_a_batch_waits_no_longer_than_asked_for_a_late_source(
    clips: list[str], slow_stream: LoopbackStreamServer, tmp_path: Path
) -> None:
    """DeepStream's batched-push-timeout: with a live stream at 5 fps beside a file, the
    file's frames are not held back waiting for the stream to fill a batch."""
    summary = run_many(
        [clips[0], slow_stream.url], PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1),
        str(tmp_path / "o"), videos=False, frames=10, progress=False, max_wait_ms=5,
    )  # fmt: skip
    file_entry, stream_entry = summary.sources
    assert file_entry.frames == stream_entry.frames == 10
    assert summary.batch == 8 and summary.mean_batch < 8  # batches sent before full
    # ~0.3 s of CPU inference a batch; waiting for 8 of the stream's frames would be 1.6 s
    assert file_entry.p99_ms < 1000


def test_sources_spread_over_device_slots_give_the_same_detections(
    clips: list[str], tmp_path: Path
) -> None:
    """``--device cuda:0,cuda:1`` spreads the sources round robin, one batcher and engine
    per device, all at once; written for any number of devices, tested here with two
    slots on the CPU (tests/gpu: two slots on one GPU)."""
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)
    spread = run_many(
        clips, settings, str(tmp_path / "two"), devices=["cpu", "cpu"], progress=False
    )
    # one device, three inference workers taking batches from the one batcher
    one = run_many(clips, settings, str(tmp_path / "one"), progress=False, workers=3)
    assert one.inference_workers == 3
    assert [list(d.sources) for d in spread.devices] == [["clip0", "clip2"], ["clip1", "clip3"]]
    assert all(d.frames == 2 * FRAMES for d in spread.devices)
    assert [s.frames for s in spread.sources] == [FRAMES] * 4
    for name in ("clip0", "clip1", "clip2", "clip3"):
        assert_same_detections(
            detections(tmp_path / "two" / f"{name}.json"),
            detections(tmp_path / "one" / f"{name}.json"),
        )
    assert spread.device == "cpu,cpu" and spread.inference_workers == 2  # 1 per slot


def test_cli_bad_several_source_options_are_one_line_errors(
    clips: list[str], tmp_path: Path
) -> None:
    for args, says in (
        ([clips[0], clips[1], "--export-dir", str(tmp_path), "--batch-wait", "-1"], "--batch-wait"),
        ([clips[0], "--device", "cpu,cpu"], "list of devices"),
        ([clips[0], clips[1], "--export-dir", str(tmp_path), "--start", "5"], "--start"),
        ([clips[0], clips[1], "--export-dir", str(tmp_path), "--workers", "0"], "--workers"),
        ([clips[0], clips[1], "--export-dir", str(tmp_path), "--processes", "0"], "--processes"),
        ([clips[0], clips[1], "--export-dir", str(tmp_path), "--processes", "many"], "many"),
        ([clips[0], "--processes", "many"], "many"),  # one source: the value still checked
        ([clips[0], clips[1], "--export-dir", str(tmp_path), "--device", "cpu,cpu,cpu",
          "--processes", "2"], "fewer than the 3 devices"),
    ):  # fmt: skip
        done = _cli(*args, "--quiet")
        assert done.returncode == 2, (args, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and says in lines[0] and "Traceback" not in done.stderr
    assert not list(tmp_path.glob("*.mp4"))  # nothing written for a refused run


class CountingBar:
    """The progress bar's part a run feeds: frames counted as they are reported."""

    def __init__(self) -> None:
        self.n = 0

    def update(self, n: int = 1) -> None:
        self.n += n


def test_device_slots_in_processes_write_what_threads_write(
    clips: list[str], tmp_path: Path
) -> None:
    """``--processes``: each device slot's sources in a process of its own (no GIL shared
    between the groups); the same outputs, summary and progress as slots in threads."""
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)
    threads = run_many(clips, settings, str(tmp_path / "t"), devices=["cpu", "cpu"], progress=False)
    procs = run_many(
        clips, settings, str(tmp_path / "p"), devices=["cpu", "cpu"], progress=False,
        processes=True,
    )  # fmt: skip
    assert [list(d.sources) for d in procs.devices] == [["clip0", "clip2"], ["clip1", "clip3"]]
    assert [s.frames for s in procs.sources] == [FRAMES] * 4
    assert procs.fps > 0 and procs.frames == threads.frames == 4 * FRAMES
    for name in ("clip0", "clip1", "clip2", "clip3"):
        assert detections(tmp_path / "p" / f"{name}.json") == detections(
            tmp_path / "t" / f"{name}.json"
        )
        assert (tmp_path / "p" / f"{name}.mp4").is_file()
    from framelens.core.sessions.processes import run_groups_in_processes
    from framelens.core.sessions.runs import GroupJob
    from framelens.core.sessions.session import SessionOptions

    bar = CountingBar()
    (tmp_path / "bar").mkdir()
    job = GroupJob(str(tmp_path / "bar"), videos=False, lossless=False,
                   options=SessionOptions(draw="none", pixels=False, frames=5),
                   devices=("cpu", "cpu"))  # fmt: skip
    parts = run_groups_in_processes(
        job, [[0], [1]], ["cpu", "cpu"], clips[:2], ["a", "b"], settings, counter=bar,
        on_message=None, cancel=None,
    )  # fmt: skip
    assert bar.n == 10 and [p.frames for p in parts] == [5, 5]


def test_processes_n_spreads_one_device_over_n_processes(clips: list[str], tmp_path: Path) -> None:
    """``--processes 2`` with one device: two slots of it, each in a process of its own,
    the sources taken in turn; each source's detections as a run in one process gives."""
    one = _cli(*clips[:2], "--export-dir", str(tmp_path / "one"), "--device", "cpu",
               "--frames", "4", "--threads", "1", "--quiet")  # fmt: skip
    two = _cli(*clips[:2], "--export-dir", str(tmp_path / "two"), "--device", "cpu",
               "--frames", "4", "--threads", "1", "--processes", "2", "--quiet")  # fmt: skip
    assert one.returncode == 0 and two.returncode == 0, two.stderr
    spread = json.loads(two.stdout)
    assert [d["sources"] for d in spread["devices"]] == [["clip0"], ["clip1"]]
    assert "devices" not in json.loads(one.stdout)  # one slot: no spread
    for name in ("clip0", "clip1"):
        assert detections(tmp_path / "two" / f"{name}.json") == detections(
            tmp_path / "one" / f"{name}.json"
        )


def test_many_sources_on_one_gpu_take_a_process_per_four() -> None:
    """The default (auto): 8 or more sources on one CUDA device spread over a process per
    4 (what the H200 measured best), never more than half the CPU cores; the CPU, fewer
    sources, cameras and streams (whose messages a process holds back), or devices listed
    by the user stay as they are."""
    from framelens.core.pipeline.devices import device_slots

    assert device_slots(["cuda:0"], 16, None, cpus=16) == (["cuda:0"] * 4, True)
    assert device_slots(["cuda:0"], 8, "auto", cpus=16) == (["cuda:0"] * 2, True)
    assert device_slots(["cuda:0"], 16, None, cpus=4) == (["cuda:0"] * 2, True)
    assert device_slots(["cuda:0"], 16, None, cpus=2) == (["cuda:0"], False)
    assert device_slots(["cuda:0"], 4, None, cpus=16) == (["cuda:0"], False)
    assert device_slots(["cpu"], 16, None, cpus=16) == (["cpu"], False)
    assert device_slots(["cuda:0", "cuda:1"], 16, None, cpus=16) == (["cuda:0", "cuda:1"], False)
    assert device_slots(["cuda:0", "cuda:1"], 4, "2") == (["cuda:0", "cuda:1"], True)
    assert device_slots(["cuda:0"], 16, None, files=False, cpus=16) == (["cuda:0"], False)
    assert device_slots(["cuda:0", "cuda:1"], 8, "4") == (["cuda:0", "cuda:1"] * 2, True)
    assert device_slots(["cuda:0"], 16, "1", cpus=16) == (["cuda:0"], False)


def test_a_group_process_that_dies_is_one_line_and_its_outputs_are_not_written(
    clips: list[str], tmp_path: Path
) -> None:
    """A device's process killed mid-run (out of memory, a driver crash): the run says so
    in one line, the other group is told to stop, and no output appears half-written."""
    import multiprocessing
    import os
    import signal
    import threading

    from framelens.core.errors import FrameLensError

    long_clip = str(write_clip(tmp_path / "long.mp4", frames=240, size=(640, 360)))
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            run_many(
                [long_clip, long_clip], settings, str(tmp_path / "out"), devices=["cpu", "cpu"],
                progress=False, processes=True,
            )  # fmt: skip
        except BaseException as exc:
            outcome.append(exc)

    runner = threading.Thread(target=run)
    runner.start()
    deadline = time.monotonic() + 120
    victim = None
    while victim is None and time.monotonic() < deadline:
        named = [p for p in multiprocessing.active_children() if p.name == "fl-device-1"]
        started = list((tmp_path / "out").glob(".*")) if (tmp_path / "out").is_dir() else []
        victim = named[0] if named and started else None  # its outputs are being written
        time.sleep(0.1)
    assert victim is not None and victim.pid is not None
    os.kill(victim.pid, signal.SIGKILL)
    runner.join(120)
    assert not runner.is_alive() and len(outcome) == 1
    error = outcome[0]
    assert isinstance(error, FrameLensError) and "ended unexpectedly" in str(error)
    assert "\n" not in str(error)
    assert list((tmp_path / "out").iterdir()) == []  # neither outputs nor temporaries


@pytest.mark.serial  # times itself: runs alone (installer/test.sh)
def test_ctrl_c_while_the_groups_start_is_one_line_and_leaves_nothing(
    clips: list[str], tmp_path: Path
) -> None:
    """Ctrl+C reaches every process of the terminal's group: the groups, still importing,
    ignore it (no traceback from each), the run stops and says so in one line."""
    import os
    import signal

    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "framelens", "run", *clips[:2], "--export-dir", str(out),
         "--device", "cpu,cpu", "--processes", "2", "--quiet"],
        stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=as_from_a_terminal,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _children_of(proc.pid):
        time.sleep(0.05)
    assert _children_of(proc.pid), "the groups' processes did not start"
    time.sleep(0.3)  # the groups are importing
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "framelens: interrupted"
    assert not [p for p in out.iterdir() if not p.name.startswith(".")] if out.exists() else True


def _children_of(pid: int) -> list[str]:
    """The process ids whose parent is ``pid`` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(entry.name)
    return found


def _audio_s(path: Path) -> float | None:
    """The audio stream's length in a file, as FFmpeg's ffprobe reads it (None: none)."""
    probe = subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "a", "-show_entries",
         "stream=duration", "-of", "csv=p=0", str(path)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    text = probe.stdout.strip()
    return float(text) if text else None


def _loud(path: Path) -> Path:
    """3 s of FFmpeg's test picture with a 440 Hz tone (MP4, or MPEG-TS for a stream)."""
    subprocess.run(
        ["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc=size=320x180:rate=25",
         "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-t", "3",
         "-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac", str(path)],
        check=True,
    )  # fmt: skip
    return path


def test_each_source_keeps_its_own_sound_in_its_video_as_a_single_run_does(
    clips: list[str], tmp_path: Path
) -> None:
    """A several-source run's videos keep each source's audio, cut to the frames run,
    as a one-source run's does (before: several sources' videos came out silent). The
    clip with sound is made by FFmpeg, and FFmpeg's ffprobe reads what the outputs hold."""
    loud = _loud(tmp_path / "loud.mp4")
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)
    summary = run_many([str(loud), clips[0]], settings, str(tmp_path / "all"), frames=50)
    assert [s.frames for s in summary.sources] == [50, FRAMES]
    kept = _audio_s(tmp_path / "all" / "loud.mp4")
    assert kept is not None and abs(kept - 50 / 25) < 0.1  # the 2 s run, not the 3 s file
    assert _audio_s(tmp_path / "all" / "clip0.mp4") is None  # a silent source stays silent
    alone = tmp_path / "alone.mp4"
    run_to_outputs(str(loud), settings, export=str(alone), frames=50)
    single = _audio_s(alone)
    assert single is not None and abs(single - kept) < 0.05


def test_a_streams_sound_is_not_fetched_over_another_connection(tmp_path: Path) -> None:
    """A stream with sound recorded: the video comes without it, over no more
    connections than a run that writes no video takes (its sound would come over one
    more, out of step with the frames, and many cameras take only so many clients;
    before, it was fetched so: one connection more)."""
    payload = _loud(tmp_path / "loud.ts").read_bytes()
    # served in real time (3 s), of which each run takes 10 frames (0.4 s): neither run
    # reaches the stream's end, where it would connect again (so, before, a run slowed by
    # a busy machine counted one connection more or fewer than the other)
    server = LoopbackStreamServer(payload, bytes_per_s=len(payload) // 3)
    server.start()
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)
    try:
        run_to_outputs(server.url, settings, detections=str(tmp_path / "d.json"), frames=10)
        frames_only, server.connections = server.connections, 0
        out = tmp_path / "recorded.mp4"
        summary = run_to_outputs(server.url, settings, export=str(out), frames=10)
    finally:
        server.stop()
    assert summary.frames == 10 and out.is_file()
    assert _audio_s(out) is None
    assert server.connections == frames_only
