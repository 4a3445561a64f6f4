"""The fuzz corpus (issue 13, item 15): broken videos, a stream that stalls and broken
models, generated here into temporary folders, each met as a user meets it.

Every case runs through ``framelens run --export --detections`` (a subprocess) and
through the GUI's open path (``Player.open`` and ``resolve_model`` from
framelens.core.api, what gui/common/controller.py calls). A case is either

* refused: exit code 2, ONE line on stderr (``framelens: error: ...``, the same words
  the GUI shows), no traceback, nothing at all in the output folder; or
* processed (the file is damaged but holds frames: a cut, flipped bits, a size change):
  exit code 0, one note on stderr saying what was wrong and what the outputs hold, and
  outputs that are complete: the video decodes to every frame processed and the
  detections list each of them.

No case may take longer than ``TIMEOUT_S`` (the subprocess is killed past it), and no
model may make FrameLens read a file outside the model's folder.

The CLI runs of all cases start together in the background (a module fixture, as many
at once as there are cores) while the tests check the GUI path, so the corpus costs
about a minute of CI on two cores.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import av
import pytest
from framelens.core import api
from loopback_server import LoopbackStreamServer
from media_factory import (
    TRUNCATE_AT,
    mp4_boxes,
    write_bit_flipped,
    write_clip,
    write_huge_frame_header,
    write_size_change,
    write_truncated,
    write_y4m_header,
)
from onnx_factory import (
    dynamic_model,
    external_data_model,
    missing_output_model,
    tiny_detector,
    tiny_detector_with_external_data,
    wrong_dtype_model,
)

TIMEOUT_S = 30.0
"""The longest any case may take, CLI or GUI path; the stalling stream's is FrameLens's
10 s open time-out."""

FRAMES, SIZE = 20, (64, 48)  # the clip every video case is made from

SOURCE_REFUSED = (
    r"(holds no streams|has no video stream|is not a readable video: .+"
    r"|: no frame could be decoded \(.+\)|uses a video codec .+|holds no video frames"
    r"|declares no usable frame size .+|frames of \d+x\d+ are larger .+)"
)
"""What a video FrameLens cannot use is refused with (after the file's path)."""
DAMAGE_NOTE = r": (cut short or damaged, .+|\d+ undecodable packets? w.+|\d+ frames? of another .+)"

README = Path(__file__).resolve().parents[2] / "README.md"


@dataclass(frozen=True)
class Refused:
    pattern: str  # the message, after "framelens: error: "


@dataclass(frozen=True)
class Processed:
    frames: int | None = None  # exactly, or None: any number up to FRAMES
    holds: int = FRAMES  # what the file holds: fewer frames out must come with a note
    note: str | None = None  # the damage note's pattern (after "framelens: <path>")


@dataclass(frozen=True)
class Either:
    """Bits flipped at random: refused as SOURCE_REFUSED says, or processed as stated."""

    processed: Processed = Processed()


CUT = Either(Processed(note=r": cut short or damaged, its frames stop at \d+ of 20; the "))
"""A cut inside the frames; a cut inside the index (moov) is refused (see the test)."""

Expect = Refused | Processed | Either


# --- the corpus ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sound clip: a faststart MP4 (index first, then the frames), 64x48, 20 frames."""
    folder = tmp_path_factory.mktemp("clip")
    options = {"movflags": "+faststart"}
    return write_clip(
        folder / "clip.mp4", frames=FRAMES, size=SIZE, gop=5, container_options=options
    )


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_detector(tmp_path_factory.mktemp("model") / "tiny.onnx")


def _moov_end(clip: Path) -> int:
    at, size = mp4_boxes(clip.read_bytes())["moov"]
    return at + size


def _truncated(fraction: float) -> Callable[[Path, Path], Path]:
    return lambda clip, folder: write_truncated(clip, folder / f"cut-{fraction}.mp4", fraction)


def _flipped(seed: int, flips: int, where: str) -> Callable[[Path, Path], Path]:
    def make(clip: Path, folder: Path) -> Path:
        size, moov = clip.stat().st_size, _moov_end(clip)
        region = {"header": (32, moov), "frames": (moov + 16, size), "anywhere": None}[where]
        path = folder / f"flip-{where}-{seed}.mp4"
        return write_bit_flipped(clip, path, seed=seed, flips=flips, region=region)

    return make


def _moov_renamed(clip: Path, folder: Path) -> Path:
    """One bit flipped in the index box's type ('moov' -> 'mooV'): no index at all."""
    data = bytearray(clip.read_bytes())
    data[mp4_boxes(bytes(data))["moov"][0] + 7] ^= 0x20
    (path := folder / "flip-moov-type.mp4").write_bytes(bytes(data))
    return path


def _renamed(content: str, name: str) -> Callable[[Path, Path], Path]:
    def make(clip: Path, folder: Path) -> Path:
        if content == "mkv":
            data = write_clip(folder / "real.mkv", frames=8, size=SIZE).read_bytes()
        elif content == "onnx":
            data = tiny_detector(folder / "model.onnx").read_bytes()
        else:
            data = clip.read_bytes() if content else b""
        (path := folder / name).write_bytes(data)
        return path

    return make


VIDEO_CASES: dict[str, tuple[Callable[[Path, Path], Path], Expect]] = {
    **{f"cut-{f}": (_truncated(f), CUT) for f in TRUNCATE_AT},
    "flip-moov-type": (_moov_renamed, Refused(r"is not a readable video: .+")),
    "flip-header": (_flipped(100, 4, "header"), Either()),
    "flip-frames": (_flipped(200, 16, "frames"), Either()),
    "flip-anywhere-0": (_flipped(0, 8, "anywhere"), Either()),
    "flip-anywhere-1": (_flipped(1, 8, "anywhere"), Either()),
    "zero-bytes": (
        _renamed("", "empty.mp4"),
        Refused(r"is not a readable video: the file is empty \(0 bytes\)"),
    ),
    "mkv-named-mp4": (_renamed("mkv", "movie.mp4"), Processed(frames=8, holds=8)),
    "mp4-named-txt": (_renamed("mp4", "clip.txt"), Processed(frames=FRAMES)),
    "onnx-named-mp4": (_renamed("onnx", "model.mp4"), Refused(r"is not a readable video: .+")),
    "text-file": (  # FFmpeg opens it, its ansi decoder drawing the text as frames
        lambda clip, folder: Path(shutil.copy(README, folder / "readme.txt")),
        Refused(r"is a text file, not a video \(FFmpeg would draw its text\)"),
    ),
    "16k-header": (
        lambda clip, folder: write_huge_frame_header(folder / "huge.avi"),
        Refused(r"declares no usable frame size \(damaged, or larger than FrameLens .+"),
    ),
    "9000-square-header": (
        lambda clip, folder: write_y4m_header(folder / "huge.y4m", 9000, 9000),
        Refused(r"frames of 9000x9000 are larger than FrameLens decodes .+"),
    ),
    "size-change": (
        lambda clip, folder: write_size_change(folder / "switch.ts", (SIZE, (96, 64))),
        Processed(12, 12, r": 6 frames of another size scaled to 64x48; the outputs hold "),
    ),
    "16k-mid-stream": (
        lambda clip, folder: write_huge_frame_header(
            folder / "jump.avi", 16000, 12000, from_frame=2
        ),
        Processed(2, 4, r": cut short or damaged, .+; 2 undecodable packets were skipped; "),
    ),
}


@pytest.fixture(scope="module")
def corpus(clip: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("corpus")
    return {name: make(clip, folder) for name, (make, _) in VIDEO_CASES.items()}


# --- running a case ------------------------------------------------------------------


@dataclass
class Outcome:
    code: int
    lines: list[str]  # stderr
    summary: dict[str, object] | None
    out: Path  # the output folder: annotated.mp4, detections.json


def framelens_run(source: str, model: Path, out: Path) -> Outcome:
    out.mkdir(parents=True)
    command = [
        sys.executable, "-m", "framelens", "run", source, "--model", str(model), "--quiet",
        "--export", str(out / "annotated.mp4"), "--detections", str(out / "detections.json"),
    ]  # fmt: skip
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"framelens run {source} hung: still running after {TIMEOUT_S:g} s")
    summary = json.loads(proc.stdout) if proc.returncode == 0 else None
    return Outcome(proc.returncode, proc.stderr.splitlines(), summary, out)


def assert_refused(outcome: Outcome, pattern: str) -> str:
    """Exit 2, one line, nothing written; returns the message."""
    assert outcome.code == 2, outcome
    assert len(outcome.lines) == 1, outcome.lines
    line = outcome.lines[0]
    assert line.startswith("framelens: error: ") and "unexpected error" not in line, line
    message = line.removeprefix("framelens: error: ")
    assert re.search(pattern, message), message
    assert os.listdir(outcome.out) == []  # no partial file, no hidden temporary either
    return message


def assert_processed(outcome: Outcome, expect: Processed, source: str) -> int:
    """Exit 0, complete outputs, and a note when the file was damaged: always when fewer
    frames came out than the file holds. Returns the frame count."""
    assert outcome.code == 0, outcome.lines
    assert outcome.summary is not None
    frames = outcome.summary["frames"]
    assert isinstance(frames, int) and 0 < frames <= expect.holds
    assert expect.frames in (None, frames), frames
    assert all(line.startswith("framelens: ") for line in outcome.lines), outcome.lines
    notes = [line for line in outcome.lines if not line.startswith("framelens: wrote ")]
    if expect.note is not None or frames < expect.holds:
        assert len(notes) == 1, outcome.lines
    assert len(notes) <= 1, outcome.lines
    for note in notes:  # one line: the file, what was wrong, what the outputs hold
        assert note.startswith(f"framelens: {source}: "), note
        assert re.search(expect.note or DAMAGE_NOTE, note), note
        assert note.endswith(f"; the outputs hold the {frames} frames processed"), note
    out = outcome.out
    assert sorted(os.listdir(out)) == ["annotated.mp4", "detections.json"]
    with av.open(str(out / "annotated.mp4")) as video:
        decoded = [f for f in video.decode(video=0)]
    assert len(decoded) == frames
    assert {(f.width, f.height) for f in decoded} == {SIZE}
    listed = json.loads((out / "detections.json").read_text())["frames"]
    assert len(listed) == frames
    assert all(f["detections"] for f in listed)  # the tiny detector finds a box in each
    return frames


class Recorder:
    """A GUI's Player callbacks (gui/common/controller.py marshals the same three)."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.results: list[api.FrameResult] = []
        self.state: api.PlayerState | None = None
        self.changed = threading.Event()

    def result(self, r: api.FrameResult) -> None:
        self.results.append(r)
        self.changed.set()

    def on_state(self, s: api.PlayerState) -> None:
        self.state = s

    def error(self, text: str) -> None:
        self.errors.append(text)
        self.changed.set()


def gui_open(source: str, model: Path) -> Recorder:
    """What File > Open does: the Player opens the source with the model's settings; the
    first frame is shown, or one error line comes."""
    settings = api.PipelineSettings(api.resolve_model(str(model)), threads=1)
    rec = Recorder()
    player = api.Player(rec.result, rec.on_state, rec.error)
    try:
        player.open(source, settings)
        deadline = time.monotonic() + TIMEOUT_S
        while not (rec.errors or rec.results):
            assert time.monotonic() < deadline, f"opening {source} hung past {TIMEOUT_S:g} s"
            rec.changed.wait(0.05)
        time.sleep(0.1)  # a second message would come now
    finally:
        player.close()
    return rec


# --- models ------------------------------------------------------------------------


def _linked_out(path: Path) -> Path:
    """External data named in the folder, but a link to a file outside it."""
    (path.parent / "weights.data").symlink_to("/etc/passwd")
    return external_data_model(path, "weights.data")


def _video_named_onnx(path: Path) -> Path:
    path.write_bytes(write_clip(path.with_suffix(".mp4"), frames=3).read_bytes())
    return path


MODEL_CASES: dict[str, tuple[Callable[[Path], Path], str | None]] = {
    "missing-output": (
        missing_output_model,
        r"is not a valid ONNX model: its output 'ghost' is computed by no node",
    ),
    "uint8-input": (
        lambda p: wrong_dtype_model(p, "input"),
        r": input 'images_u8' is not float32 \(ONNX type 2\); FrameLens feeds float32",
    ),
    "int32-output": (
        lambda p: wrong_dtype_model(p, "output"),
        r": output 'output0' is not floating point \(ONNX type 6\); layout yolov8 decodes",
    ),
    "dynamic-everything": (
        dynamic_model,
        r": its metadata lists 2 classes, but output 'output0' is \[a, b, c\], which no layout",
    ),
    "external-etc-passwd": (
        lambda p: external_data_model(p, "../../etc/passwd"),
        r"external data '\.\./\.\./etc/passwd', outside the model's folder .+: refused$",
    ),
    "external-absolute": (
        lambda p: external_data_model(p, "/etc/passwd"),
        r"external data '/etc/passwd', outside the model's folder .+: refused$",
    ),
    "external-link-out": (
        _linked_out,
        r"external data 'weights\.data', outside the model's folder .+: refused$",
    ),
    "external-missing": (
        lambda p: external_data_model(p, "weights.data"),
        r"external data 'weights\.data', which is not in ",
    ),
    "video-named-onnx": (_video_named_onnx, r"model\.onnx is not a valid ONNX model"),
    "external-data-beside-it": (tiny_detector_with_external_data, None),  # sound: it runs
}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each broken model in a folder of its own (what "outside the model's folder" means)."""
    root = tmp_path_factory.mktemp("models")
    built = {}
    for name, (make, _) in MODEL_CASES.items():
        (root / name).mkdir()
        built[name] = make(root / name / "model.onnx")
    return built


# --- the CLI runs, in the background ---------------------------------------------------


@pytest.fixture(scope="module")
def cli(
    corpus: dict[str, Path],
    models: dict[str, Path],
    clip: Path,
    model: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, Future[Outcome]]]:
    """``framelens run`` of every case, started at once (a video case runs its file with
    the tiny detector, a model case runs the clip with its model); a test waits for its
    own."""
    root = tmp_path_factory.mktemp("runs")
    pool = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2))
    runs = {name: (str(path), model) for name, path in corpus.items()}
    runs |= {name: (str(clip), path) for name, path in models.items()}
    yield {name: pool.submit(framelens_run, *run, root / name) for name, run in runs.items()}
    pool.shutdown(cancel_futures=True)


# --- videos --------------------------------------------------------------------------


def test_the_cuts_fall_inside_the_index_and_inside_the_frames(clip: Path) -> None:
    """The clip's index (moov) comes first, and the cuts land on both sides of its end."""
    boxes = mp4_boxes(clip.read_bytes())
    assert boxes["moov"][0] < boxes["mdat"][0]
    inside = [f * clip.stat().st_size < _moov_end(clip) for f in TRUNCATE_AT]
    assert 3 <= sum(inside) <= 7, inside


@pytest.mark.slow
def test_a_stream_that_stalls_is_refused_within_the_timeout(
    model: Path, tmp_path: Path, cli: dict[str, Future[Outcome]]
) -> None:
    """The server sends the stream's first kilobyte, then nothing, the connection open:
    FrameLens gives up after its open time-out (10 s) with one line, CLI and GUI alike.
    (``cli``: the corpus runs in the background while this one waits.)"""
    payload = write_clip(tmp_path / "live.ts", frames=50, size=SIZE, gop=5).read_bytes()
    server = LoopbackStreamServer(payload, bytes_per_s=len(payload), stall_after=1000)
    server.start()
    try:
        started = time.monotonic()
        with ThreadPoolExecutor(1) as one:  # the CLI and the GUI path wait side by side
            run = one.submit(framelens_run, server.url, model, tmp_path / "out")
            rec = gui_open(server.url, model)
            outcome = run.result()
        waited = time.monotonic() - started
    finally:
        server.stop()
    pattern = rf"^could not open stream {re.escape(server.url)}: timed out waiting for data$"
    message = assert_refused(outcome, pattern)
    assert rec.errors == [message]
    assert waited < TIMEOUT_S


@pytest.mark.parametrize("name", list(VIDEO_CASES))
def test_a_broken_video_is_refused_in_one_line_or_processed_whole(
    name: str,
    corpus: dict[str, Path],
    clip: Path,
    model: Path,
    cli: dict[str, Future[Outcome]],
) -> None:
    expect = VIDEO_CASES[name][1]
    if expect == CUT and float(name[4:]) * clip.stat().st_size < _moov_end(clip):
        expect = Refused(SOURCE_REFUSED)  # cut inside the index: nothing can be read
    source = str(corpus[name])
    rec = gui_open(source, model)
    outcome = cli[name].result()
    if isinstance(expect, Refused) or (isinstance(expect, Either) and outcome.code != 0):
        pattern = expect.pattern if isinstance(expect, Refused) else SOURCE_REFUSED
        message = assert_refused(outcome, pattern)
        assert message.startswith(source), message  # it names the file
        # the GUI: the same line, and nothing opened (a video playing would stay)
        assert rec.errors == [message] and not rec.results
        assert rec.state is None or rec.state.source is None
    else:
        assert_processed(
            outcome, expect if isinstance(expect, Processed) else expect.processed, source
        )
        assert rec.errors == [] and rec.results, rec.errors
        assert rec.results[0].frame.image.shape == (SIZE[1], SIZE[0], 3)


# --- models ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(MODEL_CASES))
def test_a_broken_model_is_refused_in_one_line(
    name: str, models: dict[str, Path], clip: Path, cli: dict[str, Future[Outcome]]
) -> None:
    pattern = MODEL_CASES[name][1]
    path = models[name]
    outcome = cli[name].result()
    if pattern is None:  # the sound control case
        assert_processed(outcome, Processed(frames=FRAMES), str(clip))
        assert gui_open(str(clip), path).errors == []
        return
    message = assert_refused(outcome, pattern)
    # the GUI's model import (controller.resolve): the same line
    with pytest.raises(api.FrameLensError) as caught:
        api.resolve_model(str(path))
    assert api.error_message(caught.value) == message


def test_external_data_outside_the_folder_is_never_opened(clip: Path, tmp_path: Path) -> None:
    """The weights named are a FIFO outside the model's folder: opening it for reading
    would release the writer waiting on its other end. Nobody may open it, CLI or GUI."""
    folder = tmp_path / "models" / "spy"
    folder.mkdir(parents=True)
    fifo = folder.parent / "canary"
    os.mkfifo(fifo)
    opened = threading.Event()

    def wait_for_a_reader() -> None:
        with open(fifo, "wb"):  # blocks until someone opens the FIFO to read it
            opened.set()

    watcher = threading.Thread(target=wait_for_a_reader, daemon=True)
    watcher.start()
    path = external_data_model(folder / "model.onnx", "../canary")
    try:
        outcome = framelens_run(str(clip), path, tmp_path / "out")
        message = assert_refused(outcome, r"external data '\.\./canary', outside the model")
        with pytest.raises(api.FrameLensError):
            api.resolve_model(str(path))
        assert message and not opened.is_set()
    finally:
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))  # let the watcher go
        watcher.join(5)
