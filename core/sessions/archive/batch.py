"""``run_batch``: the same pipeline over an archive of videos, resumable.

Inputs are discovered (files, folders, globs), hashed and checked against the output
folder's manifest: what is done with the same content and settings is skipped, the rest
is probed in the driver (a corrupt file fails there, with its one-line reason) and run,
locally in this process or on Ray (one job per file, long files split at keyframes
when they run on Ray, unless they are tracked: a tracked file is never split, since its
tracks would break at the segments' boundaries). Each input's outputs are written
atomically: its detections JSON and CSV, its Parquet file in ``DIR/detections/`` (the
archive's dataset), with ``zones`` its events' Parquet file in ``DIR/events/``, and
with ``export_video`` (super-resolution: always) its video.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from framelens.core.errors import ConfigError, FrameLensError, error_message
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.pipeline.variant import prepare_precision
from framelens.core.progress import Progress
from framelens.core.sessions.archive.bars import BatchBars
from framelens.core.sessions.archive.events import EVENTS_DIR
from framelens.core.sessions.archive.inputs import discover_inputs, probe
from framelens.core.sessions.archive.jobs import PARTS_DIR, Job
from framelens.core.sessions.archive.local import run_local
from framelens.core.sessions.archive.manifest import Entry, Manifest, settings_record
from framelens.core.sessions.archive.parquet import DETECTIONS_DIR
from framelens.core.sessions.archive.progress import InputTracker, remove_outputs
from framelens.core.sessions.archive.segments import (
    DEFAULT_SEGMENT_FRAMES,
    WHOLE,
    keyframes,
    plan,
    remove_parts,
)
from framelens.core.sessions.archive.types import BatchSummary, InputProgress
from framelens.core.sessions.outputs import source_name
from framelens.core.sessions.tracks import drawn_or_not, tracker_json, with_tracking
from framelens.core.stages.analytics.stage import AnalyticsStages
from framelens.core.stages.analytics.zones import ZonesFile, zones_as_json
from framelens.core.stages.sinks.atomic import remove_stale
from framelens.core.stages.source_stages import StageFactory, chain_stages
from framelens.core.stages.sources.display import AS_STORED
from framelens.core.stages.sources.file import display_of
from framelens.core.stages.tasks import kind_of
from framelens.core.stages.tracking.settings import TrackerSettings


def _inside(path: str, folder: Path) -> bool:
    return os.path.realpath(path).startswith(os.path.realpath(folder) + os.sep)


def _names(paths: Sequence[str], manifest: Manifest) -> dict[str, str]:
    """Each input's output name: the one the manifest gave it, or its stem, numbered
    "-2", "-3"... past every name taken, so a name never changes between batches."""
    names = {p: manifest.entries[p].name for p in paths if p in manifest.entries}
    names = {p: n for p, n in names.items() if n}
    taken = {e.name for e in manifest.entries.values() if e.name}
    for path in paths:
        if path in names:
            continue
        base = source_name(path)
        name, n = base, 2
        while name in taken:
            name, n = f"{base}-{n}", n + 1
        taken.add(name)
        names[path] = name
    return names


_RECORDED_SINCE_DEC_3 = ("layout", "labels_sha256")
"""Settings a manifest records since 2026-12-03: an older manifest without them still
counts its inputs done when everything it did record matches (not redone in full)."""


def _same_settings(recorded: dict[str, object], record: dict[str, object]) -> bool:
    if recorded == record:
        return True
    missing = [k for k in _RECORDED_SINCE_DEC_3 if k not in recorded]
    return bool(missing) and recorded == {k: v for k, v in record.items() if k not in missing}


DISPLAY = "display"
"""An entry's settings hold how its file is shown (since 2026-12-03 a file's frames are
read as players show them: a phone's video turned, non-square pixels made square):
results recorded before, without it, hold such a file's boxes in its stored frames,
so it is done again (the others are probed once)."""


def _is_done(entry: Entry, output_dir: Path, record: dict[str, object], path: str) -> bool:
    recorded = {k: v for k, v in entry.settings.items() if k != DISPLAY}
    if not (
        entry.state == "done"
        and _same_settings(recorded, record)
        and all((output_dir / rel).exists() for rel in entry.outputs)
    ):
        return False
    if DISPLAY not in entry.settings:
        if display_of(path) != AS_STORED:
            return False
        entry.settings[DISPLAY] = AS_STORED  # not probed again
    return True


def run_batch(
    inputs: Sequence[str],
    output_dir: str | Path,
    settings: PipelineSettings,
    *,
    export_video: bool = False,
    ray: str | None = None,
    gpus_per_worker: float = 1.0,
    workers: int | None = None,
    on_progress: Callable[[InputProgress], None] | None = None,
    cancel: threading.Event | None = None,
    progress: Progress = False,
    segment_frames: int = DEFAULT_SEGMENT_FRAMES,
    stages: StageFactory | None = None,
    tracker: TrackerSettings | None = None,
    on_message: Callable[[str], None] | None = None,
    zones: ZonesFile | None = None,
) -> BatchSummary:
    """Run ``settings``' pipeline over every video ``inputs`` name into ``output_dir``.

    ``ray``: None runs here, in this process; "local", "auto" or a cluster's address
    run on Ray (core/sessions/archive/ray_runner.py) with ``workers`` actors (default:
    one per CPU, or per ``gpus_per_worker`` GPUs when the device is CUDA); inputs longer
    than ``segment_frames`` are split there. ``on_progress`` receives every state change
    and progress report (at most ten a second per running job), on this thread;
    ``cancel`` stops the batch: running inputs go back to pending, their partial outputs
    removed, and a later batch resumes. ``progress`` draws the terminal's bars.
    ``stages``: per-source stages after the task (core/stages/source_stages.py), fresh
    for every job (a picklable factory on Ray). ``tracker``: each input tracked before
    ``stages`` (IDs from 1 per input; Parquet's ``track_id``), part of the settings a
    done input is recognised by. Stateful stages need a file's frames in one run: with a
    tracker or ``stages``, no file is split into segments, and a file that would have
    been is said in ``on_message`` (and the summary's ``notes``). ``zones``: lines and
    zones counted after the tracker (core/stages/analytics; a tracker is needed): each
    input's events as Parquet in ``DIR/events/`` (core/sessions/archive/events.py) and
    its counts in the manifest and the summary's inputs (``analytics``).
    """
    notes: list[str] = []

    def say(text: str) -> None:
        notes.append(text)
        if on_message is not None:
            on_message(text)

    started = time.perf_counter()
    out = Path(output_dir).expanduser().absolute()
    if segment_frames < 1:
        raise ConfigError("segments must hold at least one frame")
    if zones is not None and tracker is None:
        raise ConfigError("lines and zones count tracks: add a tracker (--track)")
    # before the results folder is made: a refused batch leaves nothing in the inputs
    paths = [p for p in discover_inputs(inputs) if not _inside(p, out)]
    if not paths:  # the output folder is the inputs' (or holds them): its files are skipped
        raise ConfigError(
            f"every video found is inside the results folder {out}: choose a results "
            "folder outside the inputs"
        )
    try:
        (out / DETECTIONS_DIR).mkdir(parents=True, exist_ok=True)
        if zones is not None:
            (out / EVENTS_DIR).mkdir(exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create {out}: {exc.strerror or exc}") from None
    lock = DirLock(out)
    try:
        manifest = Manifest(out)
        video_only = not kind_of(settings.model).writes_outputs
        export_video = export_video or video_only  # what a super-resolution batch writes
        bars = BatchBars(0, progress)
        listeners: list[Callable[[InputProgress], None]] = [bars]
        if on_progress is not None:
            listeners.append(on_progress)
        progress_of = InputTracker(
            manifest, out, listeners,
            labels=settings.model.labels, faces=settings.model.layout == "yunet",
        )  # fmt: skip
        cancelled, where = False, None
        skipped: set[str] = set()
        try:
            record = settings_record(settings, export_video=export_video)
            tracker = drawn_or_not(tracker, export_video)
            if tracker is not None:  # tracked results differ (track IDs): done again
                record["tracker"] = tracker_json(tracker)
            if zones is not None:  # other lines or zones: other events, done again
                record["zones"] = zones_as_json(zones)  # other lines or zones redo the inputs
            todo, skipped = _check(paths, manifest, progress_of, record)
            bars.overall.total = sum(frames for _, frames in todo) or None
            manifest.save()
            if todo and cancel is not None and cancel.is_set():
                cancelled = True
            elif todo:  # with nothing to do, Ray is not even started
                settings, _ = prepare_precision(
                    todo[0][0], settings, progress=progress, cancel=cancel
                )
                split = ray is not None and not export_video
                whole = tracker is not None or stages is not None  # stateful: never split
                if split and whole:
                    for path, frames in todo:
                        if frames > segment_frames:
                            say(f"{path}: {frames} frames tracked in one job, not split into "
                                f"segments of {segment_frames} (tracks would break at their "
                                "boundaries)")  # fmt: skip
                jobs = _jobs(
                    todo, manifest, out, split and not whole, segment_frames,
                    detections=not video_only, video=export_video,
                    zones=None if video_only else zones,
                )  # fmt: skip
                if zones is not None and not video_only:
                    labels = dict(enumerate(settings.model.labels))
                    stages = chain_stages(stages, AnalyticsStages(zones, labels))
                stages = with_tracking(stages, tracker)
                for path, _ in todo:
                    progress_of.add([j for j in jobs if j.path == path])
                if ray is None:
                    cancelled = run_local(jobs, settings, progress_of, cancel, stages=stages)
                else:
                    from framelens.core.sessions.archive.ray_runner import run_on_ray

                    cancelled, where = run_on_ray(
                        jobs, settings, progress_of, cancel, address=ray,
                        gpus_per_worker=gpus_per_worker, workers=workers, stages=stages,
                    )  # fmt: skip
        finally:
            for entry in manifest.entries.values():
                if entry.state == "running":  # stopped by an exception: to be done again
                    entry.state = "pending"
            manifest.save()
            bars.close()
            _sweep(out)
    finally:
        lock.release()
    final = [manifest.entry(p).progress("skipped" if p in skipped else None) for p in paths]
    return BatchSummary(
        output_dir=str(out),
        done=sum(e.state == "done" for e in final),
        failed=sum(e.state == "failed" for e in final),
        skipped=len(skipped),
        cancelled=cancelled,
        frames=progress_of.frames,
        wall_s=round(time.perf_counter() - started, 3),
        ray=None if ray is None else (where or ray),
        inputs=tuple(final),
        notes=tuple(notes),
    )


def _check(
    paths: Sequence[str], manifest: Manifest, tracker: InputTracker, record: dict[str, object]
) -> tuple[list[tuple[str, int]], set[str]]:
    """Each input against the manifest: skipped when done with the same content and
    settings, else its old outputs removed and the file probed (a corrupt one fails
    here). Returns the inputs to run with their frame counts, and those skipped."""
    out = tracker.output_dir
    manifest.adopt(paths)
    names = _names(paths, manifest)
    todo: list[tuple[str, int]] = []
    skipped: set[str] = set()
    for path in paths:
        entry = manifest.entry(path)
        entry.name = names[path]
        try:
            changed = manifest.refresh_hash(entry, path)
        except OSError as exc:
            tracker.fail(path, f"cannot read {path}: {exc.strerror or exc}")
            continue
        if not changed and _is_done(entry, out, record, path):
            skipped.add(path)
            tracker.emit(entry, "skipped")
            continue
        remove_outputs(out, entry.outputs)
        remove_parts(out / PARTS_DIR / entry.name)
        entry.state, entry.error, entry.settings, entry.outputs = "pending", None, record, []
        entry.frames, entry.fps, entry.worker, entry.analytics = 0, 0.0, "", None
        try:
            found = probe(path)
        except FrameLensError as exc:
            tracker.fail(path, error_message(exc))
            continue
        entry.frames_total = found.frames or 0
        entry.settings = {**record, DISPLAY: found.display}
        todo.append((path, entry.frames_total))
        tracker.emit(entry)
    return todo, skipped


def _jobs(
    todo: Sequence[tuple[str, int]],
    manifest: Manifest,
    out: Path,
    split: bool,
    segment_frames: int,
    *,
    detections: bool,
    video: bool,
    zones: ZonesFile | None = None,
) -> list[Job]:
    """One job per input, or per segment of an input longer than ``segment_frames``
    (``split``: on Ray, without a video, which is written whole)."""
    jobs: list[Job] = []
    for path, frames in todo:
        segments = [WHOLE]
        if split and frames > segment_frames:
            try:
                segments = plan(frames, keyframes(path), segment_frames)
            except FrameLensError:
                segments = [WHOLE]  # the run reads it whole and reports what it finds
        for segment in segments:
            count = segment.frames if segment.frames is not None else frames - segment.start
            jobs.append(
                Job(
                    path=path,
                    file=os.path.abspath(path),
                    name=manifest.entry(path).name,
                    output_dir=str(out),
                    segment=segment,
                    segments=len(segments),
                    frames_total=max(0, count),
                    detections=detections,
                    video=video,
                    zones=zones,
                )
            )
    return jobs


_PARTIAL = re.compile(r"\.(?P<stem>.+)\.partial-[0-9a-f]{8}(?P<suffix>\.[^.]*)?")


def _sweep(out: Path) -> None:
    """Remove what killed writers left (temporaries no live writer holds) and the
    segments' folder: nothing runs once a batch ends."""
    for folder in (out, out / DETECTIONS_DIR, out / EVENTS_DIR):
        try:
            names = [p.name for p in folder.iterdir()]
        except OSError:
            continue
        for name in names:
            if m := _PARTIAL.fullmatch(name):
                stem, suffix = m["stem"], m["suffix"] or ""
                remove_stale(folder / f"{stem}{suffix}", f".{stem}.partial-", suffix)
    remove_parts(out / PARTS_DIR)


class DirLock:
    """One batch at a time per output folder: an exclusive lock on ``DIR/.batch.lock``,
    held from the batch's start to its end (or the process's death), the file removed
    when released.

    Removing it is safe because a lock counts only while the name still leads to the
    locked file: one who opened the file before its holder removed it, and locks it
    after, finds the name gone (or another file there) and tries again on the new one."""

    LOCK_NAME = ".batch.lock"

    def __init__(self, out: Path) -> None:
        self._path = out / self.LOCK_NAME
        self._fd: int | None = None
        for _ in range(16):
            fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o666)
            if sys.platform == "win32":
                self._fd = fd
                return
            import fcntl

            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise ConfigError(f"another batch is writing to {out}") from None
            if self._still_named(fd):
                self._fd = fd
                return
            os.close(fd)  # removed by the batch that just ended: lock the new one
        raise ConfigError(f"another batch is writing to {out}")

    def _still_named(self, fd: int) -> bool:
        try:
            named = os.stat(self._path)
        except OSError:
            return False
        mine = os.fstat(fd)
        return (named.st_dev, named.st_ino) == (mine.st_dev, mine.st_ino)

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):  # removed while held: the name is free
                self._path.unlink()
            os.close(self._fd)
            self._fd = None
