"""Which INT8 variant a video file was calibrated into, found without reading it again.

An INT8 entry's key holds the digest of its calibration frames, so finding the entry
from the frames means decoding and preprocessing them (50 frames spread over the file:
seconds). A file unchanged since gives the same frames: a small link, keyed by the file
as it is on disk (resolved path, size, modification time), the model, its spec and the
settings, names the entry those frames made. Switching to INT8 again on the same video
looks the link up and reads no frame. Cameras, streams and image folders have no such
identity (their frames change): they are read every time.

Links live in ``<variants>/int8-sources/<key>.json``, written whole (temporary file,
then rename); one naming an entry that is gone is ignored.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from dataclasses import asdict
from pathlib import Path
from typing import Any

from framelens.core.cache import digest
from framelens.core.models.spec import ModelSpec
from framelens.core.precision.int8_settings import CalibrationSettings
from framelens.core.stages.sources import source_kind

LINKS_DIR = "int8-sources"


def file_identity(source: str) -> list[Any] | None:
    """(resolved path, size, modification time in ns) of a regular file; None for any
    other source (a camera index, a URL, a folder, a file that is not there)."""
    if source_kind(source.strip()) != "file":
        return None
    path = Path(source).expanduser()
    try:
        st = path.stat()
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return [str(path.resolve()), st.st_size, st.st_mtime_ns]


def link_for(
    root: Path,
    base: tuple[Any, ...],
    spec: ModelSpec,
    source: str,
    settings: CalibrationSettings,
) -> Path | None:
    """Where the link of ``source`` calibrated for ``spec`` with ``settings`` lives;
    ``base``: the key parts of the model (format version, model hash, ONNX Runtime).
    None when ``source`` is not a file."""
    identity = file_identity(source)
    if identity is None:
        return None
    key = digest(*base, asdict(spec), identity, settings.variant_key())
    return root / LINKS_DIR / f"{key[:32]}.json"


def read_link(link: Path) -> tuple[str, str] | None:
    """(entry name, entry key) a link names, None when absent or unreadable."""
    try:
        data = json.loads(link.read_text(encoding="utf-8"))
        entry, key = data["entry"], data["key"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not (isinstance(entry, str) and isinstance(key, str)) or "/" in entry or "\\" in entry:
        return None
    return entry, key


def write_link(link: Path, entry: Path, key: str) -> None:
    """Record that ``link``'s file calibrates into ``entry`` (best effort: a cache that
    cannot be written only costs the next switch its frames)."""
    tmp = link.with_name(f".{link.name}.{os.getpid()}.tmp")
    with contextlib.suppress(OSError):
        link.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"entry": entry.name, "key": key}), encoding="utf-8")
        os.replace(tmp, link)
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)
