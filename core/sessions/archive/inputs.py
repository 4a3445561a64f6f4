"""An archive's inputs: found in files, folders and globs, then probed in the driver
(opened with PyAV and their first frame decoded, by the sources the run uses) before
anything is scheduled, so a corrupt file fails there with its one-line reason."""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from framelens.core.errors import ConfigError
from framelens.core.stages.sources import open_source
from framelens.core.stages.sources.display import AS_STORED
from framelens.core.stages.sources.suffixes import VIDEO_SUFFIXES

VIDEO_EXTENSIONS = VIDEO_SUFFIXES
"""What a folder's videos are: found recursively by these extensions (any case)."""

_GLOB = set("*?[")


def _videos_in(folder: Path) -> list[str]:
    """The videos under ``folder``, recursively; hidden files and folders (a writer's
    temporaries among them) are left out."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if not name.startswith(".") and name.lower().endswith(VIDEO_EXTENSIONS):
                found.append(os.path.join(root, name))
    return found


def discover_inputs(inputs: Sequence[str]) -> list[str]:
    """The videos ``inputs`` name: files as given, folders searched recursively by
    extension (VIDEO_EXTENSIONS), globs expanded (``**`` recurses); sorted, each file
    once (the first spelling of a file named twice is kept). ConfigError when an input
    names nothing, or nothing is found at all."""
    found: list[str] = []
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            found.extend(_videos_in(path))
        elif path.is_file():
            found.append(item)
        elif _GLOB & set(item):
            matches = sorted(glob.glob(item, recursive=True))
            for match in matches:
                if Path(match).is_dir():
                    found.extend(_videos_in(Path(match)))
                elif match.lower().endswith(VIDEO_EXTENSIONS):
                    found.append(match)
            if not matches:
                raise ConfigError(f"{item} matches no file")
        else:
            raise ConfigError(f"no such file or folder: {item}")
    seen: set[str] = set()
    unique = []
    for spelling in found:
        key = os.path.realpath(spelling)
        if key not in seen:
            seen.add(key)
            unique.append(spelling)
    if not unique:
        raise ConfigError(
            f"no videos found in {', '.join(inputs)} (looked for {' '.join(VIDEO_EXTENSIONS)})"
        )
    return sorted(unique)


@dataclass(frozen=True)
class Probe:
    """What the driver learnt of an input by opening it."""

    frames: int | None  # the container's frame count (an estimate without an index)
    fps: float
    width: int
    height: int
    display: str = AS_STORED  # how its frames are shown: "turned 90 degrees"...


def probe(path: str) -> Probe:
    """Open ``path`` as a run would (PyAV, its first frame decoded) and close it again;
    SourceError with the one-line reason when it is not a readable video."""
    with open_source(path) as source:
        info = source.info
        display = getattr(source, "display", None)
        shown = display.describe() if display is not None else AS_STORED
        return Probe(info.frame_count, info.fps, info.width, info.height, shown)
