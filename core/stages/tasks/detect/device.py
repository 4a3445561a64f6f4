"""Detection's device half: the batch path (core/stages/tasks/device.py), and for
YOLOv5/YOLOX layouts the candidates kernel, which packs the rows whose objectness beats
conf so that only they are copied to the host (candidates_cuda.py); other layouts copy
their outputs to pinned host memory and decode them there."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
from framelens.core.errors import GpuError
from framelens.core.geometry import InputGeometry, Letterbox
from framelens.core.stages.engines.base import DeviceOutput
from framelens.core.stages.tasks.detect.candidates import Candidates
from framelens.core.stages.tasks.detect.candidates_cuda import DeviceCandidateGather
from framelens.core.stages.tasks.device import BatchDevice, DeviceRig
from framelens.core.types import Detections

HOST_CANDIDATES_ENV = "FRAMELENS_HOST_CANDIDATES"
"""Set to 1: copy whole detection outputs to the host and gather candidates there (the
benchmarks' A/B of the device gather)."""


class _Gated(Protocol):
    """What the device half needs of the task (task.py's DetectionTask)."""

    @property
    def candidate_gate(self) -> int | None: ...

    def check_columns(self, cols: int) -> None: ...

    def decode_candidates(
        self, cands: Candidates, geometries: Sequence[Letterbox], params: Any
    ) -> list[Detections]: ...

    def input_geometry(self, src_w: int, src_h: int) -> InputGeometry: ...

    def decode(self, outputs: Any, geometries: Any, params: Any) -> list[Any]: ...


class DetectDevice(BatchDevice):
    """Detection on the GPU: candidates gathered on the device where the layout has a
    gate (YOLOv5/YOLOX objectness)."""

    def __init__(self, rig: DeviceRig, task: _Gated) -> None:
        super().__init__(rig, task)
        self.detector = task
        self._gate = task.candidate_gate
        if os.environ.get(HOST_CANDIDATES_ENV) == "1":
            self._gate = None
        self._gather = (
            DeviceCandidateGather(rig.ctx, rig.kernels) if self._gate is not None else None
        )

    def outputs_to_host(self) -> bool:
        return self._gather is None

    def after_warm_up(self, outputs: Sequence[DeviceOutput]) -> None:
        first = outputs[0] if outputs else None
        if self._gather is not None and (
            first is None or first.dtype != np.float32 or len(first.shape) != 3
        ):  # float16 outputs (a graph converted without keep_io_types): host decode
            self._gather.close()
            self._gather, self._gate = None, None

    def gather(self, outputs: Sequence[DeviceOutput], n: int, params: Any) -> Candidates | None:
        """The first ``n`` frames' candidates, gathered on the device (the context is
        current) at the conf of ``params``, the parameters the batch decodes with;
        returns once they are on the host. None where the layout has no gate."""
        gather = self._gather
        if gather is None:
            return None
        assert self._gate is not None
        output = outputs[0]
        shape = output.shape
        spec = self.rig.spec
        if len(shape) != 3 or output.dtype != np.float32 or shape[0] < n:
            raise GpuError(
                f"{spec.name}: output {output.name} is {list(shape)} {output.dtype}; the "
                f"{spec.layout} layout reads (batch, rows, columns) float32"
            )
        self.detector.check_columns(int(shape[2]))
        return gather.gather(
            output.ptr, (n, int(shape[1]), int(shape[2])), self._gate, params.conf, self.rig.stream
        )

    def decode_gathered(
        self, gathered: Any, geometries: Sequence[Letterbox], params: Any
    ) -> list[Detections]:
        assert isinstance(gathered, Candidates)
        return self.detector.decode_candidates(gathered, geometries, params)

    def free(self) -> None:
        if self._gather is not None:
            self._gather.close()
        super().free()
