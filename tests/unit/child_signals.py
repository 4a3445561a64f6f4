"""Processes the tests start take stop signals as a user's terminal gives them: a test run
started in the background (nohup, ``&`` in a script) hands its children SIGHUP or SIGINT
ignored, and FrameLens, as POSIX programs do, keeps ignored a signal it was started with
ignored (tests/unit/test_cli_signals.py shows that)."""

from __future__ import annotations

import signal

__all__ = ["as_from_a_terminal"]


def as_from_a_terminal() -> None:
    """``preexec_fn`` for a child to be stopped by a signal: the default dispositions."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
