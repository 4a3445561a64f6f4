"""Processes the tests start take stop signals as a user's terminal gives them: a test run
started in the background (nohup, ``&`` in a script) hands its children SIGHUP or SIGINT
ignored, and FrameLens, as POSIX programs do, keeps ignored a signal it was started with
ignored (tests/unit/test_cli_signals.py shows that)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable

__all__ = ["as_from_a_terminal", "signalled"]


def as_from_a_terminal() -> None:
    """``preexec_fn`` for a child to be stopped by a signal: the default dispositions."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def signalled(
    args: list[str],
    ready: Callable[[], bool],
    signum: int,
    what: str,
    preexec: Callable[[], None] = as_from_a_terminal,
) -> tuple[int, str, str]:
    """``framelens ARGS`` sent ``signum`` once ``ready()`` (its work under way, within
    120 s, else the test fails saying ``what``); its exit code, stdout and stderr (within
    60 s of the signal)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "framelens", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=preexec,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not ready():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, what
            time.sleep(0.02)
        proc.send_signal(signum)
        stdout, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, stdout, err
