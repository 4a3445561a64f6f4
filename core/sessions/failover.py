"""Where a session's sources go when their device fails mid-run (out of memory, a driver
error): another GPU of the session that has not failed, else the CPU; each source
reopened at the frame it is to hand out next. The one failover policy of every session
(core/sessions/session.py): runs of one or many sources, archives and the wall; the
player (core/sessions/playback/player.py) and compare's panes
(core/pipeline/compare/panes.py ``CompareRunner``, given a Failover by
core/sessions/compare/) take the same targets in the same order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from framelens.core.errors import FrameLensError, GpuError, SourceError, error_message
from framelens.core.pipeline import build
from framelens.core.pipeline.plan import Plan
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.opening import SourceOpener
from framelens.core.stages.sources import Source

__all__ = ["Failover", "Reopened", "device_words"]


def device_words(device: str) -> str:
    return "the CPU" if device == "cpu" else device


@dataclass
class Reopened:
    """The sources reopened on the new device, the positions (in the list asked for) of
    those reopened, and of the others why not."""

    sources: list[Source]
    kept: list[int]
    not_kept: dict[int, str]


@dataclass
class Failover:
    """One group's moves: the run's devices, those that failed (under it, or under
    another group of this process: ``failed`` may be shared), those its sources went on
    on in turn."""

    devices: Sequence[str]
    workers: int | None  # inference workers per device (None: the path's default)
    say: Callable[[str], None]
    failed: list[str] = field(default_factory=list)
    spinning: bool = True  # ONNX Runtime's busy-wait (off where a GUI needs the core)
    moved: list[str] = field(default_factory=list)

    def candidates(self, settings: PipelineSettings) -> list[PipelineSettings]:
        """Other GPUs of the run, in the order listed, that have not failed; the CPU
        (with ONNX Runtime) last."""
        out = {settings.device, *self.failed}
        gpus = [d for d in dict.fromkeys(self.devices) if d.startswith("cuda") and d not in out]
        return [replace(settings, device=d) for d in gpus] + [build.after_gpu_failure(settings)]

    def targets(self, settings: PipelineSettings) -> list[PipelineSettings]:
        """``settings``' device has failed: where to go on, in order (``candidates``)."""
        self.failed.append(settings.device)
        return self.candidates(settings)

    def move(
        self,
        settings: PipelineSettings,
        specs: Sequence[str],
        at: Sequence[tuple[int, int]],
        *,
        planned: Plan | None = None,
        why: str = "",
    ) -> tuple[PipelineSettings, build.Workers, Reopened]:
        """Workers on the first candidate that can take ``specs`` (each at its next frame
        of ``at``), and the sources reopened there. The workers' plan is the session's
        (``planned``) made again for that device, saying where the sources went and
        ``why`` (build.replan_move); without one, a plan of its own."""
        failed = settings.device
        for target in self.targets(settings):
            on_gpu = target.device.startswith("cuda")
            try:
                if planned is None:
                    replanned = build.plan(target, specs, count=self.workers)
                else:
                    because = f"{failed} failed ({why})" if why else f"{failed} failed"
                    because += ", each source from the frame it had reached"
                    replanned = build.replan_move(
                        planned, target, specs, because, count=self.workers
                    )
                built = build.workers(
                    target, planned=replanned, notify=self.say, count=self.workers,
                    spinning=self.spinning,
                )  # fmt: skip
            except FrameLensError as exc:
                if not on_gpu:
                    raise
                self.cannot(target.device, exc)
                continue
            try:
                reopened = reopen_at(specs, at, built, on_gpu=on_gpu, say=self.say)
            except GpuError as exc:  # a source that cannot be opened or sought there
                built.close()
                if not on_gpu:
                    raise
                self.cannot(target.device, exc)
                continue
            except BaseException:
                built.close()
                raise
            self.moved.append(target.device)
            return target, built, reopened
        raise AssertionError("the CPU is always a candidate")  # pragma: no cover

    def cannot(self, device: str, exc: BaseException) -> None:
        """``device`` could not take a failed device's work either: marked failed, and said."""
        self.failed.append(device)
        self.say(f"{device} cannot take the sources of a failed device ({error_message(exc)})")


def reopen_at(
    specs: Sequence[str],
    at: Sequence[tuple[int, int]],
    built: build.Workers,
    *,
    on_gpu: bool = False,
    say: Callable[[str], None] | None = None,
) -> Reopened:
    """``specs`` opened for ``built``'s pipelines, each at its (next frame, frames handed
    out) of ``at``. A live source, which cannot seek, goes on from now. On a GPU
    (``on_gpu``) a source that cannot be opened or sought there (they all were on the
    failed device: no frame buffers, no decoder) is the device's failure, GpuError; on
    the CPU it is the source's own, and the others go on."""
    opener = SourceOpener(built.pipelines[0], plan=built.plan, say=say)
    opened: list[Source] = []
    kept: list[int] = []
    not_kept: dict[int, str] = {}

    def cannot(spec: str, exc: SourceError, j: int) -> None:
        if on_gpu:
            raise GpuError(f"{spec}: {error_message(exc)}") from exc
        not_kept[j] = error_message(exc)

    try:
        for j, (spec, (next_index, _)) in enumerate(zip(specs, at, strict=True)):
            try:
                source = opener.open(spec).source
            except SourceError as exc:
                cannot(spec, exc, j)
                continue
            try:
                if source.info.seekable and next_index:
                    source.seek(next_index)
            except SourceError as exc:
                build.close_quietly([source])
                cannot(spec, exc, j)
                continue
            opened.append(source)
            kept.append(j)
        return Reopened(opened, kept, not_kept)
    except BaseException:
        build.close_quietly(opened)
        raise
