"""Export under faults (issue 13, item 17): a disk that fills up and a process killed in
the middle of an export.

* Disk full: a 1 MiB tmpfs mounted by the test (root only: CI runs as root; skipped
  where mounting is refused) is filled to leave a little room. The run fails with one
  line naming the output and "no space left on device", exit code 2, and the disk holds
  nothing of it afterwards: no partial file, no hidden temporary, and no output of the
  run either (video and detections are committed together or not at all).
* Killed: ``framelens run --export`` gets SIGKILL once its first frames are on disk.
  Outputs are written to hidden temporaries (``.<name>.partial-<8 hex><ext>``) and
  renamed when complete, so nothing is under the final names; the temporaries (which
  the dead process no longer holds locked) are removed by the next export to the same
  place, which writes complete outputs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import av
import numpy as np
import pytest
from framelens.core import api
from onnx_factory import tiny_detector

TIMEOUT_S = 60.0  # a run here that takes longer hangs
SAMPLE = Path(api.bundled_sample())  # 1394 frames at 768x432: still running when killed


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_detector(tmp_path_factory.mktemp("model") / "tiny.onnx")


@pytest.fixture(scope="module")
def noise(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 frames of noise at 160x120: every output of it is large (~9 KB a frame as H.264,
    ~57 KB as PNG or FFV1), so a little room fills up within a few frames."""
    path = tmp_path_factory.mktemp("noise") / "noise.mp4"
    rng = np.random.default_rng(0)
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 160, 120, "yuv420p"
        for _ in range(40):
            image = rng.integers(0, 256, (120, 160, 3), dtype=np.uint8)
            out.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")))
        out.mux(stream.encode(None))
    return path


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs of its own, unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command here")
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        why = proc.stderr.strip() or f"exit code {proc.returncode}"
        pytest.skip(f"cannot mount a 1 MiB tmpfs (needs root): {why}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def leave_free(disk: Path, free: int) -> None:
    """Fill ``disk`` with a file so that only ``free`` bytes (in whole pages) are left."""
    stat = os.statvfs(disk)
    with open(disk / "filler", "wb") as fh:
        fh.write(bytes(stat.f_bavail * stat.f_frsize - free))


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "framelens", "run", *args, "--quiet"]
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)


# --- a full disk ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "options", "free"),
    [
        ("annotated.mp4", [], 0),  # no room at all: fails before the first frame
        ("annotated.mp4", [], 64 * 1024),  # fills up after a few frames
        ("annotated.mkv", ["--lossless"], 64 * 1024),  # FFV1
        ("frames/", [], 64 * 1024),  # one PNG per frame, the folder staged beside it
    ],
    ids=["mp4-no-room", "mp4-fills-up", "ffv1-fills-up", "png-folder-fills-up"],
)
def test_a_full_disk_is_one_line_and_leaves_nothing(
    disk: Path, noise: Path, model: Path, target: str, options: list[str], free: int
) -> None:
    leave_free(disk, free)
    export = f"{disk}/{target}"  # "DIR/": a folder of PNGs
    proc = run_cli(
        str(noise), "--model", str(model), "--export", export,
        "--detections", str(disk / "detections.json"), *options,
    )  # fmt: skip
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1, lines
    assert lines[0].startswith("framelens: error: cannot write "), lines[0]
    assert export.rstrip("/") in lines[0] and "Traceback" not in proc.stderr
    assert lines[0].endswith(": no space left on device"), lines[0]
    assert os.listdir(disk) == ["filler"]  # nothing of the run, not even hidden


def test_outputs_are_committed_together_or_not_at_all_as_the_disk_fills(
    disk: Path, noise: Path, model: Path, tmp_path: Path
) -> None:
    """The GUI's export (run_to_outputs, through core.api) with just about room for its
    video and detections: below, in page steps, it fails with ExportError and leaves
    nothing (not the video alone when only the detections did not fit); above, both
    outputs are complete."""
    settings = api.PipelineSettings(api.resolve_model(str(model)), threads=1)

    def export(folder: Path) -> dict[str, object]:
        return api.run_to_outputs(
            str(noise), settings, export=str(folder / "annotated.mp4"),
            detections=str(folder / "detections.json"), progress=False,
        )  # fmt: skip

    export(tmp_path)  # how much room a complete export takes
    needed = sum(
        p.stat().st_size for p in (tmp_path / "annotated.mp4", tmp_path / "detections.json")
    )
    page = os.statvfs(disk).f_frsize
    outcomes, messages = [], []
    for free in range(needed - 3 * page, needed + 6 * page, page):
        for path in list(disk.iterdir()):
            path.unlink()
        leave_free(disk, free)
        try:
            summary = export(disk)
        except api.ExportError as exc:
            assert str(exc).endswith(": no space left on device"), exc
            assert os.listdir(disk) == ["filler"], (free, os.listdir(disk))
            outcomes.append("refused")
            messages.append(str(exc))
        else:
            assert sorted(os.listdir(disk)) == ["annotated.mp4", "detections.json", "filler"]
            assert summary.frames == 40
            with av.open(str(disk / "annotated.mp4")) as video:
                assert sum(1 for _ in video.decode(video=0)) == 40
            assert len(json.loads((disk / "detections.json").read_text())["frames"]) == 40
            outcomes.append("written")
    assert outcomes[0] == "refused" and outcomes[-1] == "written", outcomes
    assert outcomes == sorted(outcomes), outcomes  # refused below some size, written above
    # the detections (~5 KB, written last) did not fit after the video was in place: the
    # video was taken back out
    assert any("detections.json: " in m for m in messages), messages


# --- a process killed mid-export -------------------------------------------------------

PARTIAL = re.compile(r"\.(annotated|frames|detections)\.partial-[0-9a-f]{8}(\.mp4|\.json)?")


@pytest.mark.slow
@pytest.mark.parametrize("target", ["annotated.mp4", "frames/"], ids=["mp4", "png-folder"])
def test_a_killed_export_leaves_only_temporaries_that_the_next_run_removes(
    model: Path, tmp_path: Path, target: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    export, detections = out / target, out / "detections.json"
    given = f"{out}/{target}"  # "DIR/": a folder of PNGs
    command = [
        sys.executable, "-m", "framelens", "run", str(SAMPLE), "--model", str(model),
        "--quiet", "--export", given, "--detections", str(detections),
    ]  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not _frames_on_disk(out):
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "no frame was written"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(10)
        if proc.stderr:
            proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    left = sorted(os.listdir(out))
    assert not export.exists() and not detections.exists(), left  # never under the names
    assert left and all(PARTIAL.fullmatch(name) for name in left), left

    again = run_cli(
        str(SAMPLE), "--model", str(model), "--frames", "5",
        "--export", given, "--detections", str(detections),
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert sorted(os.listdir(out)) == sorted([export.name, detections.name])  # stale: gone
    assert len(json.loads(detections.read_text())["frames"]) == 5
    if export.is_dir():
        assert len(list(export.glob("frame_*.png"))) == 5
    else:
        with av.open(str(export)) as video:
            assert sum(1 for _ in video.decode(video=0)) == 5


def _frames_on_disk(out: Path) -> bool:
    """The run's temporaries hold some frames: video data past its header, or PNGs."""
    for path in out.iterdir():
        if path.name.startswith(".annotated.partial-") and path.stat().st_size > 32 * 1024:
            return True
        if path.name.startswith(".frames.partial-") and len(list(path.glob("*.png"))) >= 3:
            return True
    return False
