"""The structure the next engineer relies on: the architecture map points at real files,
no module grows into several jobs, pipelines are constructed by the builder only, and
the executor is driven by the session's drive only."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 800
"""About 500 lines is a smell to look at, not a law: modules are split by responsibility,
never by size. Past 800 lines a module surely holds several jobs."""


def test_every_file_the_architecture_map_names_exists() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"(?<![\w/])((?:core|gui|app|kernels)/[\w/]+\.(?:py|cu))\b", text))
    assert len(named) >= 8
    missing = sorted(p for p in named if not (ROOT / p).is_file())
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"


def test_no_module_in_core_or_gui_grows_into_several_jobs() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for folder in ("core", "gui", "app")
        for p in (ROOT / folder).rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"split these modules: {long}"


def test_pipelines_are_constructed_in_the_builder_only() -> None:
    construct = re.compile(r"(?<!class )\b(?:Gpu)?FramePipeline\(")  # a call, not a class line
    places = sorted(
        str(p.relative_to(ROOT))
        for folder in ("core", "gui", "app", "benchmarks")
        for p in (ROOT / folder).rglob("*.py")
        if construct.search(p.read_text(encoding="utf-8"))
    )
    assert places == ["core/pipeline/build.py"]


def test_the_executor_is_made_and_driven_by_the_sessions_drive_only() -> None:
    """One driver (issue 25): runs, archives, the wall, playback and compare all read
    their frames through core/sessions/drive.py, so opening, stages and failover are
    the session's, never a consumer's own loop over an executor."""
    construct = re.compile(r"(?<!class )\bExecutor(?:\.open)?\(")  # a call, not a class line
    places = sorted(
        str(p.relative_to(ROOT))
        for folder in ("core", "gui", "app")
        for p in (ROOT / folder).rglob("*.py")
        if construct.search(p.read_text(encoding="utf-8"))
    )
    assert places == ["core/sessions/drive.py"]


def test_the_main_window_is_composed_of_feature_objects_not_mixins() -> None:
    """Each job of the main window is an object the window holds, handed its shared parts
    (gui/player/main_window_parts.py); none inherits another's ``self``."""
    player = ROOT / "gui" / "player"
    bases = {
        node.name: [ast.unparse(b) for b in node.bases]
        for p in player.glob("main_*.py")
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef)
    }
    assert bases.pop("MainWindow") == ["QMainWindow"]
    assert bases.pop("WindowParts") == [] and bases.pop("Shown") == []
    assert bases and all(b == ["QObject"] for b in bases.values()), bases


def test_the_main_window_builds_and_wires_and_shows_nothing_itself() -> None:
    """Results and the player's state reach the screen through the display feature
    (gui/player/main_display.py), not the window's own slots."""
    tree = ast.parse((ROOT / "gui" / "player" / "main_window.py").read_text(encoding="utf-8"))
    window = next(
        n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "MainWindow"
    )
    connected = {
        ast.unparse(node.func.value)
        for node in ast.walk(window)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "connect"
    }
    assert not {c for c in connected if c.endswith(("resultReady", "stateChanged"))}, connected


def test_one_gui_module_reads_a_task_s_own_types() -> None:
    """The GUI asks the task registry (produces_image, has_thresholds, ...) or a result's
    generic parts; a task's own output or parameter types are read by its own feature
    only: super-resolution's Upscaled by gui/player/main_superres.py."""
    own = {"Upscaled", "SuperResParams", "DetectParams"}

    def names(path: Path) -> set[str]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        used |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        return used

    readers = sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "gui").rglob("*.py") if names(p) & own
    )
    assert readers == ["gui/player/main_superres.py"]
