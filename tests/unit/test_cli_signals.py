"""``kill`` (SIGTERM) and a closed terminal (SIGHUP) stop ``framelens run`` as Ctrl+C does:
a real ``framelens run`` of the bundled sample, killed half way, leaves nothing in its
output folder (no ``.partial-*`` temporaries, no half file) and says so in one line.
(A live source's recording is kept, complete: test_stream_reconnect.py.)"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from child_signals import as_from_a_terminal, signalled

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"


def signalled_run(
    out: Path, args: list[str], signum: int, preexec: Callable[[], None]
) -> tuple[int, str, str]:
    """``framelens run SAMPLE ARGS --device cpu --quiet``, sent ``signum`` once its outputs'
    temporaries appear in ``out`` (the first frame processed; the rest of the run takes
    seconds more on the CPU); its exit code, stdout and stderr."""
    return signalled(
        ["run", str(SAMPLE), *args, "--device", "cpu", "--quiet"],
        lambda: any(".partial-" in p.name for p in out.iterdir()),
        signum, "the run did not start writing", preexec,
    )  # fmt: skip


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_killed_file_run_leaves_nothing_in_its_folder(
    tmp_path: Path, signum: signal.Signals
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    args = ["--export", str(out / "int.mp4"), "--detections", str(out / "int.json")]
    code, stdout, err = signalled_run(out, args, signum, as_from_a_terminal)
    assert sorted(p.name for p in out.iterdir()) == []  # neither outputs nor temporaries
    assert code == 128 + signum, err
    assert stdout == ""  # no summary: the run did not complete
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "framelens: interrupted"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_ignored_when_the_run_started_stays_ignored(
    tmp_path: Path, signum: signal.Signals
) -> None:
    """``nohup framelens run ...`` (SIGHUP ignored) and a run a script started in the
    background (Ctrl+C ignored) go on to the end when that signal comes, as POSIX
    programs do: the run wrote its outputs."""
    out = tmp_path / "out"
    out.mkdir()

    def ignore() -> None:
        signal.signal(signum, signal.SIG_IGN)

    args = ["--frames", "40", "--detections", str(out / "run.json")]
    code, _, err = signalled_run(out, args, signum, ignore)
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["run.json"]


def test_a_batch_stopped_by_kill_exits_as_a_run_does(tmp_path: Path) -> None:
    """SIGTERM stops a batch as Ctrl+C does (what finished is kept, a later batch
    resumes), and its exit code says which signal, as ``run``'s does: 128 + 15."""
    import shutil

    (tmp_path / "in").mkdir()
    shutil.copy(SAMPLE, tmp_path / "in" / "walkers.mp4")
    results = tmp_path / "results"
    code, _, err = signalled(
        ["batch", str(tmp_path / "in"), "--output", str(results), "--device", "cpu"],
        (results / "manifest.json").exists,
        signal.SIGTERM,
        "the batch did not start",
    )
    assert code == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
