"""Preprocess -> engine -> postprocess -> draw for one frame at a time.

A FramePipeline is owned by one thread. Threads that overlap decoding, inference
and encoding live in runner.py; the GUI's player drives a FramePipeline too.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field, replace
from typing import Protocol

from framelens.core.models.spec import ModelSpec
from framelens.core.stages.draw.opencv import OverlayStyle, annotate
from framelens.core.stages.engines import create_engine
from framelens.core.stages.engines.base import Engine
from framelens.core.stages.preprocess.cpu import Preprocessor
from framelens.core.stages.tasks.detect.decoders import make_decoder
from framelens.core.stages.timing import stage
from framelens.core.types import Frame, FrameResult, StageTimes


@dataclass(frozen=True)
class PipelineSettings:
    """Everything that decides what a run computes. Thresholds may change mid-run."""

    model: ModelSpec
    conf: float = 0.25
    iou: float = 0.45
    classes: frozenset[int] | None = None
    backend: str = "onnxruntime"
    device: str = "cpu"
    precision: str = "fp32"
    threads: int | None = None
    overlay: OverlayStyle = field(default_factory=OverlayStyle)


ENGINE_FIELDS = ("model", "backend", "device", "precision", "threads")
"""Settings a pipeline is built for; changing one needs a new pipeline."""


def with_changes(settings: PipelineSettings, changes: dict[str, object]) -> PipelineSettings:
    """``settings`` with threshold/class/overlay ``changes``; ValueError for engine fields."""
    fixed = set(ENGINE_FIELDS) & changes.keys()
    if fixed:
        raise ValueError(f"{sorted(fixed)} need a new pipeline")
    return replace(settings, **changes)  # type: ignore[arg-type]


def same_engine(a: PipelineSettings, b: PipelineSettings) -> bool:
    """True when a pipeline built for ``a`` serves ``b`` by update() alone."""
    return all(getattr(a, k) == getattr(b, k) for k in ENGINE_FIELDS)


def with_precision_model(settings: PipelineSettings) -> PipelineSettings:
    """Settings whose model is the graph of their precision: precision lives in the graph,
    so fp16 loads the cached (or freshly converted) variant; int8 must have been prepared
    on a source (core.precision), and its spec passed in, else a one-line ConfigError."""
    if settings.precision == "fp32":
        return settings
    from framelens.core.precision import model_for

    return replace(settings, model=model_for(settings.model, settings.precision))


class FrameProcessor(Protocol):
    """What the runner and the player need of a pipeline: the CPU one below, or the GPU one
    (core/gpu/pipeline.py), which takes frames that live in device memory."""

    # True when it takes frames in device memory (core.gpu.decode): the player then feeds
    # it from NVDEC instead of a host decoder
    takes_device_frames: bool

    @property
    def settings(self) -> PipelineSettings: ...

    def infer(self, frame: Frame, times: StageTimes) -> FrameResult: ...

    def draw(self, result: FrameResult, *, copy: bool = True) -> FrameResult: ...

    def process(self, frame: Frame, decode_ms: float = math.nan) -> FrameResult: ...

    def update(self, **changes: object) -> None: ...

    def close(self) -> None: ...


class FramePipeline:
    """One frame in, one FrameResult out. Buffers are allocated per source size, once."""

    takes_device_frames = False

    def __init__(self, settings: PipelineSettings, *, spinning: bool = True) -> None:
        settings = with_precision_model(settings)
        self._settings = settings
        self._lock = threading.Lock()
        self.engine: Engine = create_engine(
            settings.model.path,
            backend=settings.backend,
            device=settings.device,
            threads=settings.threads,
            spinning=spinning,
            precision=settings.precision,
            spec=settings.model,
        )
        self._decode = make_decoder(settings.model)
        self._pre: Preprocessor | None = None

    @property
    def settings(self) -> PipelineSettings:
        return self._settings

    def update(self, **changes: object) -> None:
        """Change thresholds, class filter or overlay style; applies from the next frame.

        The model, backend, device and precision need a new FramePipeline.
        """
        with self._lock:
            self._settings = with_changes(self._settings, changes)

    def _preprocessor(self, frame: Frame) -> Preprocessor:
        pre = self._pre
        if pre is None or (pre.src_w, pre.src_h) != (frame.width, frame.height):
            pre = self._pre = Preprocessor(self._settings.model, frame.width, frame.height)
        return pre

    def infer(self, frame: Frame, times: StageTimes) -> FrameResult:
        """Preprocess, run the engine and decode; no drawing."""
        s = self._settings
        pre = self._preprocessor(frame)
        with stage(times, "preprocess"):
            tensor = pre(frame.image)
        with stage(times, "inference"):
            outputs = self.engine.infer(tensor)
        with stage(times, "postprocess"):
            dets = self._decode(outputs, [pre.geometry], s.conf, s.iou, s.classes)[0]
        return FrameResult(frame, dets, times)

    def draw(self, result: FrameResult, *, copy: bool = True) -> FrameResult:
        s = self._settings
        with stage(result.times, "draw"):
            result.annotated = annotate(
                result.frame.image, result.detections, s.model.labels, s.overlay, copy=copy
            )
        return result

    def process(
        self, frame: Frame, decode_ms: float = math.nan, *, draw: bool = True
    ) -> FrameResult:
        times = StageTimes(decode=decode_ms)
        result = self.infer(frame, times)
        if draw:
            self.draw(result)
        return result

    def close(self) -> None:
        self.engine.close()
