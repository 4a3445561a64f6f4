"""The host pipeline: preprocess -> engine -> task decode -> draw, a batch per engine call.

Frames live in host memory (PyAV, cameras, streams, folders); the engine is ONNX Runtime
on the CPU, or on CUDA with host tensors when the GPU pipeline cannot run. Built by
core/pipeline/build.py, which has resolved the precision variant and created the engine.
Threads that overlap decoding, inference and output live in core/pipeline/execute.py.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from framelens.core.pipeline.processor import PipelineBase
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.stages.engines.base import Engine
from framelens.core.stages.preprocess.base import HostPreprocessor
from framelens.core.stages.tasks import AnyTask
from framelens.core.stages.tasks.base import stack_batch
from framelens.core.types import Frame, FrameResult, StageTimes


class FramePipeline(PipelineBase):
    """Host frames in, FrameResults out. Preprocessors are made per source size, once."""

    takes_device_frames = False

    def __init__(self, settings: PipelineSettings, engine: Engine, task: AnyTask) -> None:
        super().__init__(settings, task)
        self.engine = engine
        self._pre: list[tuple[Hashable, HostPreprocessor[Any]]] = []

    def _preprocessor(self, slot: int, frame: Frame, params: Any) -> HostPreprocessor[Any]:
        """The preprocessor of a batch position (each owns the tensor it returns and the
        geometry it hands the task's decoding), the task's, made again when the frame
        size (or what else the task's ``preprocess_key`` names) changes."""
        w, h = frame.width, frame.height
        key = self._task.preprocess_key(w, h, params)
        if slot < len(self._pre) and self._pre[slot][0] == key:
            return self._pre[slot][1]
        pre = self._task.preprocessor(w, h, params)
        if slot < len(self._pre):
            self._pre[slot] = (key, pre)
        else:
            self._pre.append((key, pre))
        return pre

    def infer_batch(
        self, frames: Sequence[Frame], times_each: Sequence[StageTimes]
    ) -> list[FrameResult]:
        """Preprocess each frame, run the engine once on the batch, decode; no drawing."""
        s, timer = self._settings, self._host_timer
        pres = [self._preprocessor(i, f, s.params) for i, f in enumerate(frames)]
        with timer.stage("preprocess"):
            batch = stack_batch([pre(f.image) for pre, f in zip(pres, frames, strict=True)])
        with timer.stage("inference"):
            outputs = self.engine.infer(batch)
        with timer.stage("postprocess"):
            decoded = self._task.decode(outputs, [p.geometry for p in pres], s.params)
        timer.collect(times_each)
        return [
            FrameResult(f, out, t) for f, out, t in zip(frames, decoded, times_each, strict=True)
        ]

    def close(self) -> None:
        self.engine.close()
