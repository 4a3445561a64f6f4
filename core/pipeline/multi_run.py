"""Many sources in one run: ``framelens run SRC1 SRC2 ... --export-dir DIR``.

Every source keeps its own decoder (NVDEC on the GPU) and its own outputs; frames of all
of them go through one executor, whose workers take up to ``batch`` frames at a time
from whichever sources have them (core/stages/sources/merged.py), so one engine call
serves several sources: DeepStream's nvstreammux -> nvinfer -> nvstreamdemux. Results
are handed back per source, in each source's frame order, to that source's exporter
(``DIR/<name>.mp4``) and detections (``DIR/<name>.json``, as ``--detections`` writes for
one source). File sources are read to their end, every frame. A source that fails is
reported and the others go on; its partial outputs are discarded, never renamed in.
A device that fails mid-run (out of memory, a driver error) hands its sources to another
device of the run, or to the CPU, each from the frame it had reached: nothing is lost
or written twice, and a message says so.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from framelens.core.errors import (
    Cancelled,
    ConfigError,
    FrameLensError,
    GpuError,
    SourceError,
    error_message,
)
from framelens.core.pipeline import build
from framelens.core.pipeline.device_failover import Failover, device_words
from framelens.core.pipeline.run import run_meta
from framelens.core.pipeline.runner import PipelineRunner, RunRange
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.pipeline.source_outputs import SourceOutputs, output_names
from framelens.core.pipeline.stats import RunStats
from framelens.core.stages.sinks.lossless import open_exporter
from framelens.core.stages.sinks.video import provenance_metadata
from framelens.core.stages.sources import Source
from framelens.core.stages.sources.merged import MergedSource
from framelens.core.types import FrameResult
from tqdm import tqdm

MULTI_BATCH = 8
"""Frames per engine call, across sources, when none is asked for: batches fill with the
frames that are ready (never waiting for a late source), so this is an upper bound."""

MAX_BATCH = 32


class CancelFlag(Protocol):
    """A threading.Event, or the shared stop flag of a group in a process of its own
    (core/pipeline/multi_process.py)."""

    def is_set(self) -> bool: ...


def run_many(
    specs: Sequence[str],
    settings: PipelineSettings,
    export_dir: str,
    *,
    devices: Sequence[str] | None = None,
    videos: bool = True,
    lossless: bool = False,
    frames: int | None = None,
    progress: bool = True,
    on_message: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
    max_wait_ms: float | None = None,
    workers: int | None = None,
    processes: bool = False,
) -> dict[str, Any]:
    """Process every frame of ``specs`` together; outputs per source in ``export_dir``.

    ``devices``: several ("cuda:0", "cuda:1", ... or the same one twice: two device
    slots) spread the sources round robin, one batcher, engine and set of workers per
    device, all running at once; None: ``settings.device``. ``frames``: at most that many
    of each source. ``max_wait_ms``: how long a batch waits for more frames after its
    first (DeepStream's batched-push-timeout; None: the executor's default of a few ms).
    ``workers``: inference workers (pipelines, each with its stream and thread) per
    device; None: the run path's default. ``processes``: each device's group in a process
    of its own (core/pipeline/multi_process.py) instead of a thread of this one.
    Returns a summary with one entry per source (its outputs, frames, and why it stopped
    early if it did) and, with several devices, one per device; its ``fps`` counts the
    frames over the time they were being processed, ``wall_s`` the whole call (engines
    built, sources opened, outputs closed)."""
    if len(specs) < 1:
        raise ConfigError("give at least one source")
    out_dir = Path(export_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create {out_dir}: {exc.strerror or exc}") from None
    names = output_names(specs)
    slots = list(devices) if devices else [settings.device]
    groups = [list(range(k, len(specs), len(slots))) for k in range(len(slots))]
    groups = [g for g in groups if g]
    bar = tqdm(total=None, unit="frame", disable=not progress or None, file=sys.stderr)
    start = time.perf_counter()
    options: dict[str, Any] = {
        "videos": videos, "lossless": lossless, "frames": frames, "bar": bar,
        "on_message": on_message, "cancel": cancel, "max_wait_ms": max_wait_ms,
        "workers": workers, "devices": slots,
    }  # fmt: skip
    try:
        if len(groups) == 1:  # on the caller's thread: Ctrl+C reaches the run itself
            group = groups[0]
            parts = [
                run_group(
                    [specs[i] for i in group], [names[i] for i in group],
                    replace(settings, device=slots[0]), out_dir, **options,
                )
            ]  # fmt: skip
        elif processes:
            from framelens.core.pipeline.multi_process import run_groups_in_processes

            parts = run_groups_in_processes(
                groups, slots, specs, names, settings, out_dir, **options
            )
        else:
            parts = _run_groups(groups, slots, specs, names, settings, out_dir, **options)
    finally:
        bar.close()
    wall = time.perf_counter() - start
    by_index: dict[int, dict[str, Any]] = {}
    for group, part in zip(groups, parts, strict=True):
        for i, entry in zip(group, part["sources"], strict=True):
            by_index[i] = entry
    total = sum(int(p["frames"]) for p in parts)
    # throughput over the span frames were processed (the groups run at once), not over
    # the setup: engines built, decoders opened and outputs closed are in wall_s
    span = max(p["run_finished"] for p in parts) - min(p["run_started"] for p in parts)
    batched = sum(int(p["frames_run"]) for p in parts)
    calls = sum(int(p["batches_run"]) for p in parts)
    first = parts[0]
    summary: dict[str, Any] = {
        "sources": [by_index[i] for i in range(len(specs))],
        "frames": total,
        "fps": round(total / span, 2) if span > 0 else 0.0,
        "wall_s": round(wall, 2),
        "stage_ms": first["stage_ms"],
        "batch": first["batch"],
        "mean_batch": round(batched / calls, 2) if calls else 0.0,
        "inference_workers": sum(int(p["inference_workers"]) for p in parts),
        "path": first["path"],
        "notes": [n for p in parts for n in p["notes"]],
        "model": settings.model.name,
        "precision": settings.precision,
        "backend": first["backend"],
        "device": ",".join(slots),
    }
    if len(parts) > 1:
        summary["devices"] = [
            {
                "device": slots[k],
                "sources": [names[i] for i in group],
                "frames": part["frames"],
                "fps": part["fps"],
                "mean_batch": part["mean_batch"],
                "path": part["path"],
                "moved_to": part["moved_to"],
            }
            for k, (group, part) in enumerate(zip(groups, parts, strict=True))
        ]
    return summary


def _run_groups(
    groups: list[list[int]],
    slots: Sequence[str],
    specs: Sequence[str],
    names: Sequence[str],
    settings: PipelineSettings,
    out_dir: Path,
    **options: Any,
) -> list[dict[str, Any]]:
    """Each device's group of sources on a thread of its own; the first error of any
    group is raised once all have stopped."""
    parts: list[dict[str, Any] | None] = [None] * len(groups)
    errors: list[BaseException] = []
    cancel = options.get("cancel") or threading.Event()
    options["cancel"] = cancel
    options["failed_devices"] = []  # shared: a device one group saw fail, no group moves to

    def run(k: int) -> None:
        try:
            parts[k] = run_group(
                [specs[i] for i in groups[k]], [names[i] for i in groups[k]],
                replace(settings, device=slots[k]), out_dir, **options,
            )  # fmt: skip
        except BaseException as exc:  # the others are told to stop; raised below
            errors.append(exc)
            cancel.set()

    threads = [
        threading.Thread(target=run, args=(k,), name=f"fl-device-{k}", daemon=True)
        for k in range(len(groups))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return [p for p in parts if p is not None]


def run_group(
    specs: Sequence[str],
    names: Sequence[str],
    settings: PipelineSettings,
    out_dir: Path,
    *,
    videos: bool,
    lossless: bool,
    frames: int | None,
    bar: Any,
    on_message: Callable[[str], None] | None,
    cancel: CancelFlag | None,
    max_wait_ms: float | None,
    workers: int | None,
    devices: Sequence[str] = (),
    failed_devices: list[str] | None = None,
) -> dict[str, Any]:
    """One device's sources through one executor: the run of ``run_many`` for them
    (in a thread of its own or a process of its own with several devices). If the
    device fails, the sources go on on another GPU among ``devices`` (the run's), else
    on the CPU."""
    all_specs, all_names = list(specs), list(names)
    if settings.batch == 1 and len(specs) > 1:
        # as DeepStream's batch-size: one slot per source, at least MULTI_BATCH, capped
        settings = replace(settings, batch=min(MAX_BATCH, max(MULTI_BATCH, len(specs))))
    notes: list[str] = []
    built = build.workers(settings, notify=notes.append, count=workers)
    opened: list[Source] = []
    outputs: list[SourceOutputs] = []
    merged: MergedSource | None = None
    unopened: dict[int, str] = {}  # a source that cannot be opened: reported, the rest run
    try:
        for i, spec in enumerate(specs):
            try:
                source, _ = build.open_frames(spec, built.pipelines[0])
            except SourceError as exc:
                unopened[i] = error_message(exc)
                continue
            opened.append(source)
        if not opened:
            raise SourceError(f"no source could be opened: {'; '.join(unopened.values())}")
        live = [i for i in range(len(specs)) if i not in unopened]
        specs, names = [specs[i] for i in live], [names[i] for i in live]
        merged = MergedSource(opened, limits=frames, raise_gpu_errors=True)
        task = built.pipelines[0].task
        ran = built.pipelines[0].settings
        for spec, name, source in zip(specs, names, opened, strict=True):
            info = source.info
            meta = run_meta(spec, replace(settings, backend=ran.backend), info)
            video = None
            if videos:
                out_w, out_h = task.output_size(info.width, info.height)
                suffix = ".mkv" if lossless else ".mp4"
                video = open_exporter(
                    out_dir / f"{name}{suffix}", lossless=lossless, width=out_w, height=out_h,
                    fps=info.fps if info.fps > 0 else 30.0, meta=meta,
                    tags=provenance_metadata(meta),
                )  # fmt: skip
            writer = None
            if task.name != "superres":
                writer = task.open_writer(out_dir / f"{name}.json", meta)
            outputs.append(SourceOutputs(video, writer, info.fps))

        def say(text: str) -> None:
            notes.append(text)
            if on_message is not None:
                on_message(text)

        for text in notes:
            if on_message is not None:
                on_message(text)
        stats = RunStats()
        group_device = settings.device
        route = list(range(len(specs)))  # the merged source's source_id -> output
        failures: dict[int, str] = {}  # output -> why its source stopped early
        complete: set[int] = set()  # outputs that have every frame of their source
        base = [0] * len(specs)  # frames each output had when the current sources opened

        def sink(result: FrameResult) -> None:
            outputs[route[result.frame.source_id]].add(result)

        latency: list[list[float]] = [[] for _ in specs]  # end to end, ms, per source

        def report(result: FrameResult) -> None:
            latency[route[result.frame.source_id]].append(result.times.e2e)
            bar.update()
            if cancel is not None and cancel.is_set():
                runner.cancel()

        run_started = time.perf_counter()
        shared = failed_devices if failed_devices is not None else []
        failover = Failover(devices, workers, frames, say, failed=shared)
        calls = [0, 0]  # engine calls and the frames in them, over every device used
        ran_as = _ran_as(built)  # what the summary says ran (the last device's workers)
        while True:
            runner = PipelineRunner(
                merged, built.pipelines[0], [sink], observers=[stats, report],
                draw=videos, extra_pipelines=built.pipelines[1:], max_wait_ms=max_wait_ms,
            )  # fmt: skip
            try:
                runner.run(RunRange(0, None))
                break
            except GpuError as exc:
                if not settings.device.startswith("cuda"):
                    raise
                gone, merged = merged, None
                try:
                    built.close()
                finally:
                    build.close_quietly([gone])  # a broken CUDA context fails its teardown
                failures.update({route[k]: why for k, why in gone.failures.items()})
                # read to its end is not enough: every frame read must have been written
                complete.update(
                    route[k] for k, n in gone.read_all.items()
                    if outputs[route[k]].frames - base[route[k]] == n
                )  # fmt: skip
                left = [i for i in range(len(specs)) if i not in failures and i not in complete]
                failed_device = settings.device
                if not left:
                    say(f"{failed_device} failed ({exc}) with no source left to move")
                    break
                if cancel is not None and cancel.is_set():
                    raise Cancelled("cancelled") from exc
                at = [(outputs[i].next_index, outputs[i].frames) for i in left]
                try:
                    settings, built, reopened = failover.move(
                        settings, [specs[i] for i in left], at
                    )
                except FrameLensError as move_error:  # not even the CPU: they end here
                    text = (
                        f"{failed_device} failed ({exc}); no device could take its sources: "
                        f"{error_message(move_error)}"
                    )
                    say(text)
                    why = f"{failed_device} failed and no device could take it"
                    failures.update((i, why) for i in left)
                    break
                merged = reopened.merged
                ran_as = _ran_as(built)
                for j, reason in reopened.not_kept.items():
                    failures[left[j]] = reason
                say(
                    f"{failed_device} failed ({exc}); {_count(reopened.kept)} going on on "
                    f"{device_words(settings.device)}, each from the frame it had reached"
                )
                if merged is None:
                    break
                route = [left[j] for j in reopened.kept]
                base = [o.frames for o in outputs]
                for k, source in enumerate(merged.sources):
                    outputs[route[k]].rebase = not source.info.seekable
            finally:
                calls[0] += runner.batches_run
                calls[1] += runner.frames_run
        run_finished = time.perf_counter()
        if merged is not None:
            failures.update({route[k]: why for k, why in merged.failures.items()})
        stats.stop()
        per_source = []
        for i, (spec, name, out) in enumerate(zip(specs, names, outputs, strict=True)):
            failed = failures.get(i)
            entry: dict[str, Any] = {"source": spec, "name": name, "frames": out.frames}
            if latency[i]:
                p50, p99 = np.percentile(latency[i], [50, 99])
                entry["p50_ms"], entry["p99_ms"] = round(float(p50), 2), round(float(p99), 2)
            if failed is not None:
                out.abort()  # a partial video is no evidence: nothing renamed in
                entry["error"] = failed
                if on_message is not None:
                    on_message(f"{spec} failed after {out.frames} frames: {failed}")
            else:
                entry["outputs"] = out.close()
            per_source.append(entry)
        for i, why in sorted(unopened.items()):
            per_source.insert(i, {"source": all_specs[i], "name": all_names[i], "frames": 0,
                                  "error": why})  # fmt: skip
            if on_message is not None:
                on_message(f"{all_specs[i]} not opened: {why}")
        return {
            "sources": per_source,
            "frames": sum(o.frames for o in outputs),
            "fps": round(stats.fps, 2),
            "run_started": run_started,
            "run_finished": run_finished,
            "stage_ms": stats.medians(),
            "batch": ran_as["batch"],
            "mean_batch": round(calls[1] / calls[0], 2) if calls[0] else 0.0,
            "batches_run": calls[0],
            "frames_run": calls[1],
            "inference_workers": ran_as["inference_workers"],
            "path": ran_as["path"],
            "notes": notes,
            "model": settings.model.name,
            "precision": settings.precision,
            "backend": ran_as["backend"],
            "device": group_device,
            "moved_to": failover.moved,
        }
    except BaseException:
        for out in outputs:
            out.abort()
        raise
    finally:
        built.close()
        if merged is not None:
            merged.close()  # its reader threads, then every source
        elif opened:
            build.close_quietly(opened)


def _count(indices: Sequence[int]) -> str:
    return f"{len(indices)} source{'' if len(indices) == 1 else 's'}"


def _ran_as(built: build.Workers) -> dict[str, Any]:
    """What the summary says of the workers a group ran on."""
    first = built.pipelines[0].settings
    return {
        "batch": first.batch, "path": built.path, "backend": first.backend,
        "inference_workers": len(built.pipelines),
    }  # fmt: skip
