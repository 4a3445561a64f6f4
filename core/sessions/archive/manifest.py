"""``DIR/manifest.json``: what a batch knows of each input, so a re-run skips what is
done and redoes what failed, changed or was cut short.

    {"version": 1, "inputs": [{"path", "sha256", "state", "error", "settings",
                               "size", "mtime_ns", "name", "frames", "frames_total",
                               "fps", "worker", "outputs", "analytics"}]}

``settings`` is what decides the results (model and its hash, precision, the task's
parameters, whether a video is written): a file done with other settings is done again.
``sha256`` is the file's content; it is computed again only when the file's size or
modification time differ from what the manifest holds. ``analytics``: a batch that
counted lines and zones (``--zones``) records each input's counts by line and zone,
direction and class, and its zones' dwell times (docs/analytics.md); null otherwise.
The file is rewritten atomically (temporary then rename), at most every
``SAVE_EVERY_S`` while a batch runs, and at its end.
``state`` on disk is "done", "failed" or "pending": an input being processed is written
as pending (a batch whose driver is killed leaves it to be done again).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from framelens.core.errors import ConfigError
from framelens.core.models.catalog import model_sha256
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.archive.types import InputProgress, InputState
from framelens.core.stages.sinks.atomic import write_bytes_atomic

MANIFEST = "manifest.json"
VERSION = 1
SAVE_EVERY_S = 2.0


@dataclass
class Entry:
    """One input as the manifest records it. ``outputs`` are relative to DIR."""

    path: str
    sha256: str = ""
    state: InputState = "pending"
    error: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    size: int = 0
    mtime_ns: int = 0
    name: str = ""
    frames: int = 0
    frames_total: int = 0
    fps: float = 0.0
    worker: str = ""
    outputs: list[str] = field(default_factory=list)
    analytics: dict[str, Any] | None = None  # counts by line and zone (--zones)
    real: str = ""  # the file's absolute path, links resolved: one file however named

    def progress(self, state: InputState | None = None) -> InputProgress:
        return InputProgress(
            self.path,
            state or self.state,
            self.frames,
            self.frames_total,
            self.fps,
            self.worker,
            self.error,
            self.analytics,
        )


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's content, read in chunks (any size, flat memory)."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def settings_record(settings: PipelineSettings, *, export_video: bool) -> dict[str, Any]:
    """What decides a batch's results, as the manifest records it (JSON-safe): the
    model's file, layout and labels (a hash of them: 80 names per input would swell the
    manifest of a large archive), precision, task parameters and whether a video is
    written. The device, backend, batch and threads decide how fast, not what, and are
    left out."""
    params: dict[str, Any] = {}
    for f in fields(settings.params):
        value = getattr(settings.params, f.name)
        params[f.name] = sorted(value) if isinstance(value, frozenset) else value
    labels = "\n".join(settings.model.labels).encode()
    return {
        "model": settings.model.name,
        "model_sha256": model_sha256(settings.model.path),
        "task": settings.model.task,
        "layout": settings.model.layout,  # --layout: how the model's outputs are read
        "labels_sha256": hashlib.sha256(labels).hexdigest(),  # --labels: the rows' labels
        "precision": settings.precision,
        "params": params,
        "export_video": export_video,
    }


class Manifest:
    """The manifest of one output folder: read at the start of a batch, kept up to date."""

    def __init__(self, output_dir: str | os.PathLike[str]) -> None:
        self.path = Path(output_dir) / MANIFEST
        self.entries: dict[str, Entry] = {}
        self._saved = 0.0
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            rows = data["inputs"]
            known = {f.name for f in fields(Entry)}
            for row in rows:
                entry = Entry(**{k: v for k, v in row.items() if k in known})
                self.entries[entry.path] = entry
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                f"{self.path} is not a FrameLens batch manifest ({type(exc).__name__}: {exc}); "
                "move it away or choose another --output"
            ) from None

    def entry(self, path: str) -> Entry:
        """The entry of ``path``, a new pending one if the manifest has none."""
        entry = self.entries.get(path)
        if entry is None:
            entry = self.entries[path] = Entry(path)
        if not entry.real:  # new, or recorded before 2026-12-07
            entry.real = os.path.realpath(path)
        return entry

    def adopt(self, paths: Sequence[str]) -> None:
        """Inputs named another way than the manifest recorded them (``cams/a.mp4``
        then ``/data/cams/a.mp4``, or from another folder) take over the entry of the
        same file, with its name, outputs and state: a batch run again that way skips
        what is done instead of doing it twice into the same archive."""
        by_real = {e.real: key for key, e in self.entries.items() if e.real}
        for path in paths:
            if path in self.entries:
                continue
            key = by_real.get(os.path.realpath(path))
            if key is not None and key not in paths:
                entry = self.entries.pop(key)
                entry.path = path
                self.entries[path] = entry

    def refresh_hash(self, entry: Entry, file: str) -> bool:
        """Bring ``entry``'s size, time and hash up to date with the file; True when
        its content changed since the manifest recorded it."""
        st = os.stat(file)
        if entry.sha256 and (entry.size, entry.mtime_ns) == (st.st_size, st.st_mtime_ns):
            return False
        digest = file_sha256(file)
        changed = digest != entry.sha256
        entry.sha256, entry.size, entry.mtime_ns = digest, st.st_size, st.st_mtime_ns
        return changed

    def save(self, *, force: bool = True) -> None:
        """Write the manifest (atomically); without ``force``, only if the last write
        is more than SAVE_EVERY_S old."""
        now = time.monotonic()
        if not force and now - self._saved < SAVE_EVERY_S:
            return
        self._saved = now
        rows = [asdict(e) for e in sorted(self.entries.values(), key=lambda e: e.path)]
        for row in rows:  # on disk: done, failed or pending (what a next batch would do)
            if row["state"] not in ("done", "failed"):
                row["state"] = "pending"
        text = json.dumps({"version": VERSION, "inputs": rows}, indent=1, ensure_ascii=False)
        write_bytes_atomic(self.path, (text + "\n").encode())


def read_manifest(output_dir: str | os.PathLike[str]) -> list[InputProgress]:
    """The states recorded in ``DIR/manifest.json`` (an empty list when there is none)."""
    manifest = Manifest(output_dir)
    return [manifest.entries[p].progress() for p in sorted(manifest.entries)]
