"""The variant cache: <cache root>/variants/<entry>/, each entry complete or absent.

An entry is built in a hidden staging directory beside it and renamed into place
in one step, so a cancelled or crashed calibration leaves no entry behind (only a
staging directory, which is removed on the way out or, after a hard kill, by the
next build a day later). Two processes building the same entry both succeed; the
second one's rename finds the first one's entry and keeps it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import time
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from framelens.core.errors import ConfigError

CACHE_ENV = "FRAMELENS_CACHE_DIR"
META_FILE = "variant.json"
MODEL_FILE = "model.onnx"
STAGING_PREFIX = ".staging-"
_STALE_S = 24 * 3600


def cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The FrameLens cache root: ``cache_dir``, else $FRAMELENS_CACHE_DIR, else the
    platform's user cache directory (platformdirs)."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("framelens", appauthor=False))


def variants_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    return cache_root(cache_dir) / "variants"


def digest(*parts: Any) -> str:
    """A stable hex key of JSON-able parts (bytes are hashed as they are)."""
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, bytes | bytearray | memoryview):
            h.update(b"b")
            h.update(bytes(part))
        else:
            h.update(b"j")
            h.update(json.dumps(part, sort_keys=True, default=str).encode())
        h.update(b"\0")
    return h.hexdigest()


def read_entry(entry: Path) -> dict[str, Any] | None:
    """The metadata of a complete entry, or None when it is absent or unreadable."""
    try:
        meta = json.loads((entry / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict):
        return None
    for name in meta.get("files", []):
        file = inside(entry, str(name))
        if file is None or not file.is_file():  # outside: not written by commit()
            return None
    return meta


def inside(root: Path, name: str) -> Path | None:
    """``root``/``name`` for a relative POSIX path that stays inside ``root``, else None
    (empty, absolute, or climbing out with "..")."""
    rel = PurePosixPath(name)
    if not name or rel.is_absolute() or ".." in rel.parts:
        return None
    return root.joinpath(*rel.parts)


class Staging:
    """A hidden directory beside ``entry`` that becomes ``entry`` on commit()."""

    def __init__(self, entry: Path) -> None:
        self.entry = entry
        parent = entry.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create the cache directory {parent}: {exc}") from None
        _remove_stale(parent)
        self.path = parent / f"{STAGING_PREFIX}{entry.name}-{secrets.token_hex(4)}"
        try:
            self.path.mkdir()
        except OSError as exc:
            raise ConfigError(f"cannot write to the cache directory {parent}: {exc}") from None
        self.done = False

    def commit(self, meta: dict[str, Any]) -> Path:
        """Write the metadata last, then rename; returns the entry (perhaps another's)."""
        meta = dict(meta)
        # every file, those in subfolders too (a model's external data may sit there)
        meta["files"] = sorted(
            p.relative_to(self.path).as_posix()
            for p in self.path.rglob("*")
            if p.is_file() and p.name != META_FILE
        )
        (self.path / META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")
        try:
            os.replace(self.path, self.entry)
        except OSError:
            # The entry appeared meanwhile (another process, same key): keep theirs.
            if read_entry(self.entry) is None:
                self.discard()
                raise
        self.discard()
        return self.entry

    def discard(self) -> None:
        self.done = True
        shutil.rmtree(self.path, ignore_errors=True)


@contextlib.contextmanager
def staging(entry: Path) -> Iterator[Staging]:
    """A Staging that is removed on any exception (cancel included)."""
    stage = Staging(entry)
    try:
        yield stage
    finally:
        stage.discard()


def _remove_stale(parent: Path) -> None:
    """Staging directories left by a killed process, after a day."""
    now = time.time()
    with contextlib.suppress(OSError):
        for p in parent.glob(f"{STAGING_PREFIX}*"):
            with contextlib.suppress(OSError):
                if now - p.stat().st_mtime > _STALE_S:
                    shutil.rmtree(p, ignore_errors=True)
