"""What a run wrote, output by output, for the message that ends an export.

The CLI's last line (``framelens run``) and File > Export's message name every output:
a video or detections file by its path; a folder of PNG frames (``--export DIR/``) by
the folder, how many frames it holds, the first and last frame's names, and its
``provenance.json``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from framelens.core.stages.sinks.atomic import StrPath
from framelens.core.stages.sinks.lossless import PROVENANCE

__all__ = ["describe_outputs", "wrote_line"]


def _describe(output: StrPath) -> str:
    path = Path(output)
    if not path.is_dir():
        return str(path)
    frames = sorted(p.name for p in path.glob("frame_*.png"))
    parts = []
    if frames:
        span = frames[0] if len(frames) == 1 else f"{frames[0]} … {frames[-1]}"
        parts.append(f"{len(frames)} PNG frame{'s' if len(frames) != 1 else ''}: {span}")
    if (path / PROVENANCE).is_file():
        parts.append(PROVENANCE)
    folder = f"{path}{os.sep}"
    return f"{folder} ({' and '.join(parts)})" if parts else folder


def describe_outputs(outputs: Sequence[StrPath]) -> list[str]:
    """One line per output, in order: a file's path, or a frame folder with its contents."""
    return [_describe(o) for o in outputs]


def wrote_line(outputs: Sequence[StrPath]) -> str:
    """One line: "wrote A", "wrote 2 outputs: A, B", or "nothing written" (none asked)."""
    lines = describe_outputs(outputs)
    if not lines:
        return "nothing written"
    if len(lines) == 1:
        return f"wrote {lines[0]}"
    return f"wrote {len(lines)} outputs: {', '.join(lines)}"
