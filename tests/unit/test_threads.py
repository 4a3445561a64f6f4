"""Threads named for the operating system (core/threads.py): what ``top -H``, ``perf``
and the benchmarks' per-thread CPU readings (benchmarks/wall_screen.py) show."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest
from framelens.core.threads import NamedThread

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")


def os_name(native_id: int) -> str:
    return Path(f"/proc/self/task/{native_id}/comm").read_text().strip()


def test_a_named_thread_carries_its_name_into_the_kernel_cut_to_15_bytes() -> None:
    seen: dict[str, str] = {}

    def record() -> None:
        seen["name"] = os_name(threading.get_native_id())

    for name, expected in (
        ("fl-worker-3", "fl-worker-3"),
        ("fl-compare-tracks", "fl-compare-trac"),
    ):
        thread = NamedThread(target=record, name=name, daemon=True)
        thread.start()
        thread.join(5)
        assert seen.pop("name") == expected


def test_the_pipelines_threads_are_named_where_a_profile_reads_them() -> None:
    """A run's decode-ahead thread and inference workers, as the kernel names them."""
    from framelens.core.api import PipelineSettings, resolve_model
    from framelens.core.models.catalog import DEFAULT_MODEL
    from framelens.core.sessions.session import Session, SessionOptions

    sample = Path(__file__).resolve().parents[2] / "resources" / "samples"
    video = str(sample / "one-by-one-person-detection.mp4")
    names: set[str] = set()
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL))
    with Session([video], settings, options=SessionOptions(frames=6, draw="none")) as session:
        for _ in session.results():
            names |= {os_name(t.native_id) for t in threading.enumerate() if t.native_id}
    assert "fl-decode-ahead" in names
    assert any(n.startswith("fl-worker-") for n in names), names
