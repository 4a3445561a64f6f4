"""Starting FrameLens: what installer/setup.sh says at its end, and the window's one
clear line where there is no display (not Qt's abort about libxcb-cursor0)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FRAMELENS = str(Path(sys.executable).with_name("framelens"))


def headless_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.pop("QT_QPA_PLATFORM", None)
    return {**env, **extra}


@pytest.mark.parametrize("args", [[], ["gui"], ["gui", "clip.mp4"]], ids=" ".join)
def test_without_a_display_the_window_says_so_in_one_line(args: list[str]) -> None:
    done = subprocess.run(
        [FRAMELENS, *args], env=headless_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr and "xcb" not in done.stderr
    assert lines[0].startswith("framelens: error: no display: ")
    assert lines[0].endswith("use `framelens run` for the command line")


def test_a_display_or_a_headless_platform_is_enough() -> None:
    from framelens.cli import no_display

    assert no_display({}, "linux") is not None
    assert no_display({"QT_QPA_PLATFORM": "xcb"}, "linux") is not None  # xcb needs X
    assert no_display({"DISPLAY": ":1"}, "linux") is None
    assert no_display({"WAYLAND_DISPLAY": "wayland-0"}, "linux") is None
    assert no_display({"QT_QPA_PLATFORM": "offscreen"}, "linux") is None
    assert no_display({"QT_QPA_PLATFORM": "vnc:size=800x600"}, "linux") is None
    assert no_display({}, "win32") is None and no_display({}, "darwin") is None


def test_setup_ends_by_saying_how_to_start_framelens(tmp_path: Path) -> None:
    """installer/setup.sh run for real, in a copy of the checkout whose system tools are
    stand-ins (every apt package present, an environment whose pip installs nothing):
    its last lines name .venv/bin/framelens and how to activate the environment."""
    folder = tmp_path / "FrameLens"
    (folder / "installer").mkdir(parents=True)
    shutil.copy(ROOT / "installer" / "setup.sh", folder / "installer" / "setup.sh")
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (folder / ".venv" / "bin").mkdir(parents=True)
    for tool in (stubs / "dpkg", folder / ".venv" / "bin" / "python"):
        tool.write_text("#!/bin/sh\nexit 0\n")
        tool.chmod(0o755)
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(
        ["bash", str(folder / "installer" / "setup.sh")], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"{folder}/.venv/bin/framelens" in out
    assert f"source {folder}/.venv/bin/activate" in out
    assert out.rstrip().splitlines()[-1].strip() == "framelens"
    guide = (ROOT / "docs" / "user-guide.md").read_text(encoding="utf-8")
    assert "`.venv/bin/framelens`" in guide and "`source .venv/bin/activate`" in guide
