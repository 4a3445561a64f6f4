"""Write-then-rename, so an export is either complete on disk or absent.

The temporary file lives in the target's directory (os.replace is only atomic
within one file system) under a hidden name that keeps the extension, because
muxers choose the container from it: ``.<stem>.partial-<8 hex><suffix>``. The
writer holds an advisory lock (flock) on it until it is renamed or removed, so the
temporaries of a process that was killed are told apart from live ones: the lock
died with it. Creating the next temporary for the same target removes those.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import sys
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Self, TextIO

from framelens.core.errors import ExportError

StrPath = str | os.PathLike[str]


def _reason(exc: OSError) -> str:
    return exc.strerror.lower() if exc.strerror else str(exc)


def error_text(exc: BaseException) -> str:
    """An export failure in one line: an OS error's own words ("no space left on device",
    not the temporary file's name), anything else its text on one line."""
    if isinstance(exc, OSError) and exc.strerror:
        return _reason(exc)
    return " ".join(str(exc).split()) or type(exc).__name__


def check_target(path: StrPath) -> Path:
    """Fail early, as one line, when ``path`` cannot be written. Returns it absolute."""
    target = Path(path).expanduser().absolute()
    parent = target.parent
    if not parent.exists():
        raise ExportError(f"cannot write {target}: directory {parent} does not exist")
    if not parent.is_dir():
        raise ExportError(f"cannot write {target}: {parent} is not a directory")
    if target.is_dir():
        raise ExportError(f"cannot write {target}: it is a directory")
    return target


def _lock(path: Path) -> int | None:
    """An open descriptor of ``path`` holding an exclusive flock, or None when another
    process holds one (or the file system has no locks, or it is gone)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    if sys.platform != "win32":
        import fcntl

        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held by a live writer, or no locking here: not ours to take
            os.close(fd)
            return None
    return fd


def remove_stale(target: Path, prefix: str, suffix: str) -> list[Path]:
    """Remove the temporaries of ``target`` (prefix + 8 hex + suffix) that no live
    writer holds: left by a killed process. Returns what was removed."""
    pattern = re.compile(re.escape(prefix) + "[0-9a-f]{8}" + re.escape(suffix))
    try:
        names = [p for p in target.parent.iterdir() if pattern.fullmatch(p.name)]
    except OSError:
        return []
    removed = []
    for path in names:
        fd = _lock(path)
        if fd is None:
            continue
        try:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            removed.append(path)
        finally:
            os.close(fd)
    return removed


def _file_prefix(target: Path) -> str:
    """The start of an AtomicFile's temporary names: ``.<stem>.partial-``."""
    return f".{target.stem}.partial-"


def remove_stale_file_temps(target: Path) -> list[Path]:
    """Remove the temporaries that AtomicFiles for ``target`` left when their process was
    killed (no live writer holds them). Returns what was removed."""
    return remove_stale(target, _file_prefix(target), target.suffix)


def create_sibling(
    target: Path, prefix: str, suffix: str, create: Callable[[Path], None]
) -> tuple[Path, int | None]:
    """A new hidden sibling of ``target`` named prefix + random + suffix, made by
    ``create`` (which must fail with FileExistsError when the name is taken), and the
    descriptor that holds its lock (None without locks): close it when done with it.
    Stale siblings of earlier, killed writers are removed first."""
    remove_stale(target, prefix, suffix)
    for _ in range(16):
        tmp = target.with_name(f"{prefix}{secrets.token_hex(4)}{suffix}")
        try:
            create(tmp)
        except FileExistsError:
            continue
        except OSError as exc:
            raise ExportError(f"cannot write {target}: {_reason(exc)}") from None
        return tmp, _lock(tmp)
    raise ExportError(f"cannot write {target}: no free temporary name")  # pragma: no cover


def release(fd: int | None) -> None:
    """Close a lock descriptor from create_sibling; safe with None."""
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


class AtomicFile:
    """A temporary sibling of ``path`` that becomes ``path`` on commit().

    Creating it proves the directory is writable (os.access lies for root and
    for some network file systems, so the real check is to create the file).
    """

    def __init__(self, path: StrPath) -> None:
        self.target = check_target(path)

        def create(tmp: Path) -> None:
            # O_EXCL: never clobber anything; mode 0o666 lets the umask decide,
            # as for any ordinarily created file (mkstemp would force 0o600).
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))

        self.tmp, self._lock = create_sibling(
            self.target, _file_prefix(self.target), self.target.suffix, create
        )
        self.done = False

    def commit(self) -> Path:
        """Move the finished temporary file onto the target."""
        if self.done:
            raise ExportError(f"cannot write {self.target}: already finished")
        try:
            os.replace(self.tmp, self.target)
        except OSError as exc:
            self.discard()
            raise ExportError(f"cannot write {self.target}: {_reason(exc)}") from None
        self.done = True
        release(self._lock)
        self._lock = None
        return self.target

    def write_bytes(self, data: bytes) -> Path:
        """Write ``data`` to the temporary file and commit it; on failure it is removed
        (ExportError, one line, for an OS error)."""
        try:
            with open(self.tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())  # the rename must not become visible before the data
        except OSError as exc:
            self.discard()
            raise ExportError(f"cannot write {self.target}: {_reason(exc)}") from None
        except BaseException:
            self.discard()
            raise
        return self.commit()

    def discard(self) -> None:
        """Remove the temporary file; safe to call more than once."""
        self.done = True
        with contextlib.suppress(FileNotFoundError):
            self.tmp.unlink()
        release(self._lock)
        self._lock = None


@contextlib.contextmanager
def atomic_output(path: StrPath) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path``.

    On any exception the temporary file is removed and the exception propagates.
    """
    f = AtomicFile(path)
    try:
        yield f.tmp
    except BaseException:
        f.discard()
        raise
    f.commit()


def write_bytes_atomic(path: StrPath, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; ExportError on failure."""
    return AtomicFile(path).write_bytes(data)


class AtomicWriter(ABC):
    """An output that is committed by close() and thrown away by abort().

    As a context manager: closed when the block succeeds, aborted when it raises.
    """

    @abstractmethod
    def close(self) -> Path:
        """Finish writing and move the output into place; returns its path."""

    @abstractmethod
    def abort(self) -> None:
        """Stop and remove everything written so far; safe to call twice."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class AtomicTextWriter(AtomicWriter):
    """A text file written piece by piece into its temporary sibling and moved onto
    ``path`` by close(): what the detections file and the MOT tracks file share.
    Subclasses write through ``_write`` and end the text in ``_finish``. Collected
    without close() or abort(), it still leaves nothing behind."""

    def __init__(self, path: StrPath, newline: str = "\n") -> None:
        self._file = AtomicFile(path)
        self.path: Path = self._file.target
        self._finalizer = weakref.finalize(self, self._file.discard)
        self._closed = False
        self._aborted = False
        try:
            # stays open across writes; closed by close()/abort()
            self._fh: TextIO = open(self._file.tmp, "w", encoding="utf-8", newline=newline)  # noqa: SIM115
        except OSError as exc:
            self.abort()
            raise ExportError(f"cannot write {self.path}: {_reason(exc)}") from None

    def _check_open(self) -> None:
        if self._closed:
            raise ExportError(f"cannot write {self.path}: writer is closed")

    def _write(self, text: str) -> None:
        try:
            self._fh.write(text)
        except OSError as exc:
            self.abort()
            raise ExportError(f"cannot write {self.path}: {_reason(exc)}") from None

    def _finish(self) -> None:
        """The text's end, written before the file is closed (nothing by default)."""

    def close(self) -> Path:
        """Finish the file and move it onto the target path."""
        if self._closed:
            if not self._aborted:
                return self.path
            raise ExportError(f"cannot write {self.path}: writer was aborted")
        try:
            self._finish()
            self._fh.close()
        except OSError as exc:
            self.abort()
            raise ExportError(f"cannot write {self.path}: {_reason(exc)}") from None
        self._closed = True
        self._finalizer.detach()
        self._file.commit()
        return self.path

    def abort(self) -> None:
        """Stop and remove the partial file; safe to call repeatedly."""
        self._closed = True
        self._aborted = True
        fh = getattr(self, "_fh", None)
        if fh is not None:
            with contextlib.suppress(OSError):  # flushing into a full disk: thrown away
                fh.close()
        self._finalizer.detach()
        self._file.discard()
