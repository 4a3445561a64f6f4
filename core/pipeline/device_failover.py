"""Where a run's sources go when their device fails mid-run (out of memory, a driver
error): another GPU of the run, else the CPU, each source reopened at the frame its
outputs are to write next. Used by a run of several sources (core/pipeline/multi_run.py);
a run of one source goes on on the CPU the same way (core/pipeline/run.py)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import replace

from framelens.core.pipeline import build
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.stages.sources import Source
from framelens.core.stages.sources.merged import MergedSource

__all__ = ["device_words", "reopen_at", "replace_workers", "settings_after_failure"]


def settings_after_failure(
    settings: PipelineSettings, devices: Sequence[str], failed: Collection[str] = ()
) -> PipelineSettings:
    """Another GPU of the run (the first listed that is neither the one that failed now
    nor one of ``failed`` before), else the CPU with ONNX Runtime."""
    out = {settings.device, *failed}
    spare = next((d for d in devices if d.startswith("cuda") and d not in out), None)
    if spare is not None:
        return replace(settings, device=spare)
    return build.after_gpu_failure(settings)


def device_words(device: str) -> str:
    return "the CPU" if device == "cpu" else device


def replace_workers(
    built: build.Workers,
    merged: MergedSource,
    settings: PipelineSettings,
    notify: Callable[[str], None],
    count: int | None,
) -> build.Workers:
    """Close the failed device's workers and sources (quietly: a broken CUDA context
    fails its own teardown) and build the workers of ``settings``."""
    built.close()
    build.close_quietly([merged])
    return build.workers(settings, notify=notify, count=count)


def reopen_at(
    specs: Sequence[str],
    at: Sequence[tuple[int, int]],
    built: build.Workers,
    frames: int | None,
) -> MergedSource:
    """``specs`` opened for ``built``'s pipelines, read together; each at its (next frame
    to write, frames written so far) of ``at``, so that with ``frames`` (at most that
    many of each) no source gives more than it had left. A live source, which cannot
    seek, goes on from now."""
    opened: list[Source] = []
    try:
        for spec, (next_index, _) in zip(specs, at, strict=True):
            source, _ = build.open_frames(spec, built.pipelines[0])
            opened.append(source)
            if source.info.seekable and next_index:
                source.seek(next_index)
        limits = [None if frames is None else max(0, frames - written) for _, written in at]
        return MergedSource(opened, limits=limits)
    except BaseException:
        build.close_quietly(opened)
        raise
