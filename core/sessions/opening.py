"""Opening a source for the workers that take its frames: the one place, for every consumer.

    the plan's decoder of the source (core/pipeline/decoding.py ``decoder_choice``: NVDEC
    for GPU pipelines and a video file as stored, else the host, and why)
      ──SourceOpener.open──> the Source, decoded there, and its decoder's name

The session (core/sessions/session.py) opens its sources with it, so do its failover
(core/sessions/failover.py, on the device the sources move to), playback
(core/sessions/playback/player.py, on open and when a model swap wants another decoder)
and comparison (core/sessions/compare/, core/sessions/compare_view.py: the panes share
each frame, so it is decoded on the host). One policy where NVDEC cannot be set up (no
CUDA stream on the device, no memory for its frame buffers) and the host can read the
file: it is decoded on the host for the same GPU pipelines, which upload host frames as
they do a camera's, and the user is told once; the other sources of those workers then
go to the host without trying again. Nothing is rebuilt (decoding.decoder_choice says why).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from framelens.core.errors import FrameLensError
from framelens.core.pipeline import build, decoding
from framelens.core.pipeline.plan import Choice, Plan
from framelens.core.pipeline.processor import FrameProcessor
from framelens.core.stages.sources import Source, names_a_file
from framelens.core.stages.sources.file import frame_count_of

__all__ = ["Opened", "SourceOpener", "run_length"]


def run_length(specs: Sequence[str], start: int = 0, frames: int | None = None) -> int | None:
    """The frames a session over ``specs`` hands out in all, from frame ``start`` and at
    most ``frames`` of each, known before anything is opened: a file's count as a run
    numbers its frames (file.frame_count_of: probed once and cached), a camera's, a
    stream's or a folder's only from ``frames``; None when a source's length is not
    known."""
    total = 0
    for spec in specs:
        count = frame_count_of(spec) if names_a_file(spec) else None
        if count is None:
            if frames is None:
                return None
            total += frames
        else:
            left = max(0, count - start)
            total += left if frames is None else min(frames, left)
    return total


@dataclass(frozen=True)
class Opened:
    """A source opened for its workers and the name of its decoder (with why where it is
    not the fastest: ``nvdec``, ``pyav-cpu (…)``, ``cpu``)."""

    source: Source
    decoder: str

    @property
    def pair(self) -> tuple[Source, str]:
        return self.source, self.decoder


class SourceOpener:
    """Opens sources for the workers whose first pipeline is ``pipeline`` (None: no
    model, frames as decoded), each where ``plan`` says (its decoders; a source it does
    not list, or without a plan: ``decoding.decoder_choice`` for these pipelines, the
    plan's own rule). ``shared``: every frame goes through several pipelines in turn
    (compare's panes): the host. ``say``: told once when NVDEC cannot be set up."""

    def __init__(
        self,
        pipeline: FrameProcessor | None,
        *,
        plan: Plan | None = None,
        shared: bool = False,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self._pipeline = pipeline
        self._planned: Mapping[str, Choice] = dict(plan.decoders) if plan is not None else {}
        self._workers = plan.worker_count if plan is not None else build.GPU_WORKERS
        self._shared = shared
        self._say = say
        self.nvdec_missing: str | None = None  # why NVDEC could not be set up, once tried

    def choice(self, spec: str) -> Choice:
        """Where ``spec`` is decoded, and why (the plan's choice)."""
        planned = self._planned.get(spec)
        if planned is not None and not self._shared:
            return planned
        on_gpu = self._pipeline is not None and self._pipeline.takes_device_frames
        return decoding.decoder_choice(spec, on_gpu, shared=self._shared)

    def open(self, spec: str) -> Opened:
        """``spec`` opened where its decoder is planned; SourceError (one line) when it
        cannot be opened at all."""
        pipeline = self._pipeline
        wants_device = decoding.source_device(pipeline, spec) is not None
        nvdec = self.choice(spec).value == "nvdec" and wants_device
        failed: FrameLensError | None = None
        if nvdec and self.nvdec_missing is None:
            try:
                return Opened(*decoding.open_frames(spec, pipeline, self._workers))
            except FrameLensError as exc:  # no CUDA stream, no memory for its frame buffers
                failed = exc
        # on the host: with the pipeline where it wants host frames of this source (a GPU
        # pipeline's host source then says why it is not NVDEC's), else without. A file
        # that cannot be read at all fails here with its own error.
        source, name = decoding.open_frames(
            spec, None if wants_device or self._shared else pipeline, self._workers
        )
        if failed is not None:  # NVDEC's failure, not the source's: said once
            self.nvdec_missing = str(failed)
            if self._say is not None:
                self._say(
                    f"NVDEC not used ({failed}); decoding on the CPU, the GPU pipeline "
                    "uploads the frames"
                )
        return Opened(source, name)
