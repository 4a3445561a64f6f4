"""Build a directory of outputs beside its target, then rename it into place.

Like atomic.AtomicFile for a set of files (a report: JSON, CSV, plots, HTML): the
directory appears complete or not at all. The staging directory is a hidden
sibling, so the final rename stays on one file system; creating it at once proves
the parent is writable before any long work starts.

An existing target is replaced only when it is empty or holds nothing but the
names the caller declares as its own (a previous report of the same kind), so a
mistyped path can never wipe a user's directory. Replacing is two renames: for an
instant the old directory is set aside and the new one not yet in place.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Iterable
from pathlib import Path

from framelens.core.errors import ExportError
from framelens.core.stages.sinks.atomic import StrPath, _reason, create_sibling, release


def check_dir_target(
    path: StrPath, own_names: Iterable[str] = (), required: Iterable[str] = ()
) -> Path:
    """Fail as one line when ``path`` cannot become (or replace) the output directory:
    a folder that holds files may be replaced only when they are all ``own_names`` and
    include every one of ``required`` (the files an earlier output of this kind always
    has: a user's own ``summary.json`` alone is no earlier report)."""
    target = Path(path).expanduser().absolute()
    parent = target.parent
    if not parent.is_dir():
        raise ExportError(f"cannot write {target}: directory {parent} does not exist")
    if target.exists() or target.is_symlink():
        if not target.is_dir() or target.is_symlink():
            raise ExportError(f"cannot write {target}: it exists and is not a directory")
        allowed = set(own_names)
        try:
            foreign = sorted(p.name for p in target.iterdir() if p.name not in allowed)
        except OSError as exc:
            raise ExportError(f"cannot write {target}: {_reason(exc)}") from None
        if foreign:
            raise ExportError(
                f"cannot write {target}: it holds other files ({', '.join(foreign[:3])}"
                f"{', ...' if len(foreign) > 3 else ''}); choose a new or empty directory"
            )
        held = {p.name for p in target.iterdir()}
        if held and not set(required) <= held:
            raise ExportError(
                f"cannot write {target}: it holds {', '.join(sorted(held)[:3])}, which no "
                "earlier output of this kind left alone; choose a new or empty directory"
            )
    return target


class AtomicDir:
    """A hidden staging directory that becomes ``path`` on commit(); see the module doc."""

    def __init__(
        self, path: StrPath, own_names: Iterable[str] = (), required: Iterable[str] = ()
    ) -> None:
        self.own_names = frozenset(own_names)
        self.required = frozenset(required)
        self.target = check_dir_target(path, self.own_names, self.required)
        self.tmp, self._lock = create_sibling(
            self.target, f".{self.target.name}.partial-", "", Path.mkdir
        )
        self.done = False

    def commit(self) -> Path:
        """Move the finished staging directory onto the target."""
        if self.done:
            raise ExportError(f"cannot write {self.target}: already finished")
        old: Path | None = None
        try:
            # it may have changed meanwhile
            check_dir_target(self.target, self.own_names, self.required)
            if self.target.exists():
                old = self.target.with_name(f".{self.target.name}.old-{secrets.token_hex(4)}")
                os.replace(self.target, old)
            os.replace(self.tmp, self.target)
        except OSError as exc:
            if old is not None and not self.target.exists():
                with contextlib.suppress(OSError):
                    os.replace(old, self.target)
                old = None
            self.discard()
            raise ExportError(f"cannot write {self.target}: {_reason(exc)}") from None
        except BaseException:
            self.discard()
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        self.done = True
        release(self._lock)
        self._lock = None
        return self.target

    def __enter__(self) -> AtomicDir:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        """An exception (an error, Ctrl+C, a cancel) inside the block leaves nothing."""
        if exc_type is not None:
            self.discard()

    def discard(self) -> None:
        """Remove the staging directory and what it holds; safe to call more than once."""
        self.done = True
        shutil.rmtree(self.tmp, ignore_errors=True)
        release(self._lock)
        self._lock = None
