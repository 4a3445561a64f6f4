"""A saved video wall: its sources and its grid, in a small JSON file (``.flwall``).

    {"framelens_wall": 1, "layout": "2x2", "sources": ["cam1.mp4", "rtsp://...", "0"]}

Files are stored relative to the layout's own folder when they lie beside or below it,
so a folder of footage with its layout can be moved or shared as a whole; other files
stay absolute; stream addresses and camera indexes are kept as given. Opening a layout
whose files are gone still opens the wall: the missing sources say so on their tiles.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from framelens.core.errors import ConfigError, ExportError
from framelens.core.gpu.wall_composite import LAYOUTS
from framelens.core.stages.sinks.atomic import write_bytes_atomic
from framelens.core.stages.sources import source_kind

__all__ = ["WALL_LAYOUT_SUFFIX", "WallLayout", "load_wall_layout", "save_wall_layout"]

WALL_LAYOUT_SUFFIX = ".flwall"
_FORMAT = 1
_LAYOUT_NAMES = (*LAYOUTS, "auto")


@dataclass(frozen=True)
class WallLayout:
    """The sources of a wall (as ``open_source`` takes them) and its grid."""

    sources: tuple[str, ...]
    layout: str = "auto"


def _is_file_spec(spec: str) -> bool:
    """A path on disk (a file or an image folder), not a stream address nor a camera."""
    return source_kind(spec) in ("file", "folder")


def save_wall_layout(path: str | os.PathLike[str], wall: WallLayout) -> Path:
    """Write ``wall`` to ``path`` (atomically); ExportError in one line on failure."""
    target = Path(path)
    if not wall.sources:
        raise ExportError("a wall layout needs at least one source")
    folder = Path(os.path.abspath(target)).parent  # links kept as given, not followed
    sources = []
    for spec in wall.sources:
        if not spec.strip():
            raise ExportError("a wall layout's sources cannot be empty")
        if _is_file_spec(spec):
            file = Path(os.path.abspath(spec))
            spec = file.relative_to(folder).as_posix() if file.is_relative_to(folder) else str(file)
            if not _is_file_spec(spec):  # a file called "0" beside the layout: not camera 0
                spec = f"./{spec}"
        sources.append(spec)
    data = {"framelens_wall": _FORMAT, "layout": wall.layout, "sources": sources}
    return write_bytes_atomic(target, (json.dumps(data, indent=2) + "\n").encode())


def load_wall_layout(path: str | os.PathLike[str]) -> WallLayout:
    """The wall saved at ``path``, its file sources made absolute; ConfigError in one line
    when the file is not a wall layout FrameLens can read."""
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read wall layout {file}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ConfigError(f"{file} is not a FrameLens wall layout (not JSON)") from None
    if not isinstance(data, dict) or "framelens_wall" not in data:
        raise ConfigError(f"{file} is not a FrameLens wall layout")
    if data["framelens_wall"] != _FORMAT:
        raise ConfigError(
            f"{file}: wall layout format {data['framelens_wall']!r} is not known to this "
            f"FrameLens (it reads format {_FORMAT})"
        )
    sources, layout = data.get("sources"), data.get("layout", "auto")
    if (
        not isinstance(sources, list)
        or not sources
        or not all(isinstance(s, str) and s.strip() for s in sources)
    ):
        raise ConfigError(f"{file}: 'sources' must be a non-empty list of paths or addresses")
    if layout not in _LAYOUT_NAMES:
        raise ConfigError(f"{file}: unknown layout {layout!r} (use {', '.join(_LAYOUT_NAMES)})")
    folder = Path(os.path.abspath(file)).parent
    specs = tuple(str(folder / s) if _is_file_spec(s) else s for s in sources)
    return WallLayout(specs, layout)
