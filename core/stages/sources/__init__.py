"""Video sources: ``open_source`` picks the right one for a path, URL or camera index."""

from __future__ import annotations

import os
import re
from typing import Literal

from framelens.core.errors import ConfigError, SourceError
from framelens.core.stages.sources.base import Source
from framelens.core.stages.sources.camera import CameraSource
from framelens.core.stages.sources.file import FileSource
from framelens.core.stages.sources.folder import FolderSource
from framelens.core.stages.sources.stream import STREAM_SCHEMES, StreamSource

__all__ = ["Source", "SourceKind", "camera_index", "names_a_file", "open_source", "source_kind"]

SourceKind = Literal["camera", "stream", "folder", "file"]

_DEV_VIDEO = re.compile(r"/dev/video(\d+)")
_URL = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*)://")


def open_source(
    spec: str | int | os.PathLike[str],
    *,
    reconnect_attempts: int = 5,
    backoff_s: float = 0.5,
) -> Source:
    """Open a camera (0, "0", "/dev/video0"), a stream URL, an image folder or a video file.

    ``reconnect_attempts`` and ``backoff_s`` apply to streams only. Raises SourceError
    with a one-line message when the source cannot be opened.
    """
    if reconnect_attempts < 0 or backoff_s < 0:
        raise ConfigError("reconnect_attempts and backoff_s must not be negative")
    if isinstance(spec, bool):  # bool is an int; True is no camera index
        raise SourceError(f"not a video source: {spec!r}")
    if isinstance(spec, int):
        return _camera(spec)
    text = os.fspath(spec)
    if not text:
        raise SourceError("no video source given")
    index = camera_index(text)
    if index is not None:
        return _camera(index)
    kind = source_kind(text)
    if kind == "stream":
        scheme = text.split("://", 1)[0]
        if scheme.lower() not in STREAM_SCHEMES:
            schemes = ", ".join(STREAM_SCHEMES)
            raise SourceError(f"unsupported stream URL {text} (supported: {schemes})")
        return StreamSource(text, reconnect_attempts=reconnect_attempts, backoff_s=backoff_s)
    if kind == "folder":
        return FolderSource(text)
    return FileSource(text)


def camera_index(spec: str) -> int | None:
    """The camera ``spec`` names (``0``, ``/dev/video0``), even where a file has that
    name; None for anything else."""
    if spec.isascii() and spec.isdigit():  # not "²", which int() refuses
        return int(spec)
    if match := _DEV_VIDEO.fullmatch(spec):
        return int(match.group(1))
    return None


def source_kind(spec: str) -> SourceKind:
    """What ``open_source(spec)`` opens, the one reading of a source's text for every
    part that plans, names or stores a source: a camera (its index or ``/dev/videoN``), a
    stream (``scheme://``, supported or not), an image folder (a directory that exists),
    else a file (a video or an image, whether it exists or not)."""
    if camera_index(spec) is not None:
        return "camera"
    if _URL.match(spec):
        return "stream"
    return "folder" if os.path.isdir(spec) else "file"


def names_a_file(spec: str) -> bool:
    """True where ``open_source(spec)`` opens a file (a video or an image) that exists:
    not a camera (``0``, ``/dev/video0``, even where a file has that name), a stream URL
    or a folder."""
    return bool(spec) and source_kind(spec) == "file" and os.path.isfile(spec)


def _camera(index: int) -> Source:
    if index < 0:
        raise SourceError(f"camera index must not be negative: {index}")
    return CameraSource(index)
