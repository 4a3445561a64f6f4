"""Lock-step comparison: every frame decoded once, then run through 2 to 4 pipelines.

The panes may differ in anything a PipelineSettings holds (precision variant,
backend, model, thresholds). On each frame they run one after another, never side
by side, so that no pane's latency includes waiting for a core another pane holds;
the ONNX Runtime sessions are made without spinning threads for the same reason
(an idle session's spinning would steal the cores from the one that runs next).

Times per pane are the pipeline's own StageTimes; ``e2e`` is the frame's decode
time plus that pane's own processing, i.e. what the pane would take alone. Before
a pane's first timed frame (and after a change of frame size) it runs the frame
once untimed, so one-off session warm-up does not weigh on one variant only.

A CompareRunner is not thread-safe: one thread (a CLI loop, a GUI worker) calls
``step``; the results it returns are plain data that may be handed to other threads.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from framelens.core.errors import ConfigError, FrameLensError, GpuError
from framelens.core.pipeline import build
from framelens.core.pipeline.processor import FrameProcessor, draw_after_stages
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.stages.source_stages import SourceStages, StageFactory
from framelens.core.stages.tasks import MATCH_IOU, produces_image
from framelens.core.stages.tasks.detect.agreement import AgreementTotals, FrameMatch
from framelens.core.stages.tasks.detect.diff import DetectionDiff, detection_diff
from framelens.core.stages.tasks.superres.metrics import ImageAgreement, image_agreement
from framelens.core.stages.timing import now_ms
from framelens.core.types import Frame, FrameResult, Image, StageTimes

__all__ = [
    "MATCH_IOU",
    "MAX_PANES",
    "MIN_PANES",
    "CompareRunner",
    "CompareStep",
    "PaneFailover",
    "PaneResult",
    "PaneSpec",
]

MIN_PANES, MAX_PANES = 2, 4

ImageOf = Callable[[FrameResult], Image | None]


@dataclass(frozen=True)
class PaneSpec:
    """One pane: what it shows (``label``, unique in a comparison) and how it computes."""

    label: str
    settings: PipelineSettings

    @staticmethod
    def of(settings: PipelineSettings, label: str | None = None) -> PaneSpec:
        """A pane labelled ``label`` or, by default, "model precision backend"."""
        s = settings
        return PaneSpec(label or f"{s.model.name} {s.precision} {s.backend}", settings)


@dataclass(frozen=True)
class PaneResult:
    """One pane's outcome for one frame, measured against the reference pane.

    ``match``: this frame's matching against the reference (the reference pane is
    matched against itself). ``running``: a snapshot of the agreement summed since
    the runner started or was last reset. ``image``: PSNR/SSIM of the pane's output
    image against the reference's, None when the panes output no images.
    """

    label: str
    result: FrameResult
    match: FrameMatch
    running: AgreementTotals
    image: ImageAgreement | None = None

    @property
    def times(self) -> StageTimes:
        return self.result.times


@dataclass(frozen=True)
class CompareStep:
    """All panes' results for one frame; ``panes[reference]`` is the reference pane."""

    frame: Frame
    panes: tuple[PaneResult, ...]
    reference: int

    def difference(self, pane: int) -> DetectionDiff:
        """Detections of ``pane`` and of the reference that the other does not have."""
        ref = self.panes[self.reference].result.output
        p = self.panes[pane]
        return detection_diff(ref, p.result.output, p.match)


def _reference_index(labels: Sequence[str], reference: int | str) -> int:
    if isinstance(reference, str):
        if reference not in labels:
            raise ConfigError(f"reference {reference!r} is not one of {', '.join(labels)}")
        return labels.index(reference)
    if not 0 <= reference < len(labels):
        raise ConfigError(f"reference pane {reference} does not exist ({len(labels)} panes)")
    return reference


def check_panes(panes: Sequence[PaneSpec], reference: int | str = 0) -> int:
    """Validate a comparison's panes; returns the reference's index. ConfigError if wrong."""
    labels = [p.label for p in panes]
    if not MIN_PANES <= len(panes) <= MAX_PANES:
        raise ConfigError(f"a comparison needs {MIN_PANES} to {MAX_PANES} panes, got {len(panes)}")
    duplicates = sorted({x for x in labels if labels.count(x) > 1})
    if duplicates:
        raise ConfigError(f"pane labels must differ: {', '.join(duplicates)} repeated")
    upscalers = [p.label for p in panes if produces_image(p.settings.model)]
    if upscalers:  # their agreement is an image's, not the detection totals panes keep
        raise ConfigError(
            f"{', '.join(upscalers)}: super-resolution models are not compared in lock-step "
            "panes, which measure detection agreement; framelens compare --task superres "
            "measures them"
        )
    return _reference_index(labels, reference)


class PaneFailover(Protocol):
    """Where a pane whose GPU failed goes on: the session's one failover policy
    (core/sessions/failover.py ``Failover``: another GPU of the comparison, else the CPU)."""

    def targets(self, settings: PipelineSettings) -> Sequence[PipelineSettings]:
        """``settings`` on each device that may take over, in order (the CPU last);
        ``settings.device`` is marked failed."""
        ...

    def cannot(self, device: str, exc: BaseException) -> None:
        """``device`` could not take over either: marked failed, and said."""
        ...


class _CpuOnly:
    """Without a session's policy: straight to the CPU."""

    def targets(self, settings: PipelineSettings) -> Sequence[PipelineSettings]:
        return [build.after_gpu_failure(settings)]

    def cannot(self, device: str, exc: BaseException) -> None:  # pragma: no cover
        pass


@dataclass
class _Pane:
    spec: PaneSpec
    pipeline: FrameProcessor
    stages: SourceStages
    totals: AgreementTotals = field(default_factory=AgreementTotals)
    warm_size: tuple[int, int] | None = None


class CompareRunner:
    """Feeds each frame to every pane in turn and measures agreement with the reference.

    ``draw``: also render each pane's overlays (``result.annotated``), for a GUI.
    ``image_of``: which image of a result PSNR/SSIM compare (default: the image the
    pane's task outputs, ``Task.output_image``; detectors output none, so
    output image, none for detectors). ``stages``: per-source stages after the task
    (core/stages/source_stages.py), a chain of its own for every pane (a tracker per
    pane: does INT8 change the tracks?), run on each frame in order before the pane is
    measured against the reference, reset by ``reset_stages`` (a restart, a seek); with
    ``draw`` a pane with stages draws after them, so its overlay shows what they added.
    A pane whose GPU fails (out of memory, a driver error) goes on from the same frame
    where ``failover`` says, the session's one policy (core/sessions/failover.py: another
    GPU of the comparison, else the CPU; without it: the CPU), and ``on_message`` is
    told (``notes`` keeps it).
    """

    def __init__(
        self,
        panes: Sequence[PaneSpec],
        *,
        reference: int | str = 0,
        draw: bool = False,
        image_of: ImageOf | None = None,
        stages: StageFactory | None = None,
        on_message: Callable[[str], None] | None = None,
        failover: PaneFailover | None = None,
    ) -> None:
        self.reference = check_panes(panes, reference)
        self._failover = failover or _CpuOnly()
        self.draw = draw
        self._image_of = image_of
        self._on_message = on_message
        self.notes: list[str] = []
        self._panes: list[_Pane] = []
        try:
            for spec in panes:
                self._panes.append(
                    _Pane(spec, build.pane_pipeline(spec.settings), SourceStages(stages))
                )
        except BaseException:
            self.close()
            raise

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(p.spec.label for p in self._panes)

    @property
    def specs(self) -> tuple[PaneSpec, ...]:
        return tuple(p.spec for p in self._panes)

    def update(self, pane: int, **changes: object) -> None:
        """Change a pane's thresholds, class filter or overlay (FramePipeline.update)."""
        self._panes[pane].pipeline.update(**changes)

    def reset_totals(self) -> None:
        """Start the running agreement afresh (after a seek, or a threshold change)."""
        for p in self._panes:
            p.totals = AgreementTotals()

    def reset_stages(self) -> None:
        """The next frame does not follow the last (a restart, a seek): every pane's
        stages forget what they saw."""
        for p in self._panes:
            p.stages.reset()

    def _run_pane(self, pane: _Pane, frame: Frame, decode_ms: float) -> FrameResult:
        size = (frame.width, frame.height)
        try:
            if pane.warm_size != size:  # untimed warm-up, see the module doc
                pane.pipeline.infer(frame, StageTimes())
                pane.warm_size = size
            t0 = now_ms()
            result = pane.pipeline.infer(frame, StageTimes(decode=decode_ms))
        except GpuError as exc:  # the warm-up's too: a GPU that fails at a frame's first call
            if not pane.pipeline.settings.device.startswith("cuda"):
                raise
            self._move(pane, exc, frame.index)
            return self._run_pane(pane, frame, decode_ms)
        if self.draw and not pane.stages:
            pane.pipeline.draw(result, copy=True)  # each pane draws on its own copy
        own_ms = now_ms() - t0
        result.times.e2e = own_ms if math.isnan(decode_ms) else decode_ms + own_ms
        return result

    def _move(self, pane: _Pane, exc: GpuError, index: int) -> None:
        """The pane's pipeline on the next device the failover policy gives (another GPU
        of the comparison, else the CPU with ONNX Runtime), from frame ``index`` on."""
        failed = pane.pipeline
        device = failed.settings.device
        build.close_quietly([failed])  # a broken CUDA context fails its own teardown
        targets = self._failover.targets(replace(pane.spec.settings, device=device))
        for target in targets:
            try:
                pane.pipeline = build.pane_pipeline(target)
            except FrameLensError as again:
                if target is targets[-1]:
                    raise
                self._failover.cannot(target.device, again)
                continue
            break
        pane.warm_size = None
        where = pane.pipeline.settings.device
        where = "the CPU" if where == "cpu" else where
        text = f"{pane.spec.label}: {device} failed ({exc}); going on on {where} from frame {index}"
        self.notes.append(text)
        if self._on_message is not None:
            self._on_message(text)

    def _image(self, pane: _Pane, result: FrameResult) -> Image | None:
        if self._image_of is not None:
            return self._image_of(result)
        return pane.pipeline.task.output_image(result.output)

    def step(self, frame: Frame, decode_ms: float = math.nan) -> CompareStep:
        """Process one frame in every pane; returns per-pane results and agreement."""
        results = [self._run_pane(p, frame, decode_ms) for p in self._panes]
        for pane, result in zip(self._panes, results, strict=True):
            pane.stages(result)  # in frame order: the panes run on one worker, in turn
            if self.draw and pane.stages:  # the overlay shows what the stages added (IDs)
                draw_after_stages(pane.pipeline, result, copy=True)
                if not math.isnan(result.times.draw):
                    result.times.e2e += result.times.draw
        ref = results[self.reference]
        ref_task = self._panes[self.reference].pipeline.task
        ref_image = self._image(self._panes[self.reference], ref)
        out = []
        for pane, result in zip(self._panes, results, strict=True):
            match = pane.totals.add(ref_task.agree(ref.output, result.output))
            image = self._image(pane, result)
            metrics = None
            if ref_image is not None and image is not None:
                metrics = image_agreement(ref_image, image)
            out.append(PaneResult(pane.spec.label, result, match, replace(pane.totals), metrics))
        return CompareStep(frame, tuple(out), self.reference)

    def close(self) -> None:
        for p in self._panes:
            p.pipeline.close()
        self._panes.clear()

    def __enter__(self) -> CompareRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LockstepWorker:
    """A CompareRunner as the executor's one worker: each frame through every pane in
    turn (never side by side, see the module doc), while the executor decodes ahead."""

    def __init__(self, runner: CompareRunner) -> None:
        self.runner = runner

    def run(self, batch: Sequence[tuple[Frame, float]]) -> list[CompareStep]:
        return [self.runner.step(frame, decode_ms) for frame, decode_ms in batch]

    def update(self, **changes: object) -> None:
        for pane in range(len(self.runner.labels)):
            self.runner.update(pane, **changes)

    def close(self) -> None:
        self.runner.close()
