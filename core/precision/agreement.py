"""How the INT8 search measures a trial against FP32 on the calibration frames, per task:
detection by the F1 of its detections (the compare view's rule), super-resolution by
the PSNR of its output images (8-bit levels, as the pipeline rounds them)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from framelens.core.errors import ConfigError
from framelens.core.precision.calibration import CalibrationFrames
from framelens.core.precision.int8_settings import CalibrationSettings
from framelens.core.precision.sensitivity import Trials
from framelens.core.stages.tasks import AnyTask, DetectParams
from framelens.core.stages.tasks.detect.agreement import AgreementTotals
from framelens.core.stages.tasks.superres.color import to_uint8
from framelens.core.stages.tasks.superres.metrics import psnr
from framelens.core.types import Detections

MIN_REFERENCE_DETECTIONS = 10
"""Fewer FP32 detections than this on the calibration frames make F1 meaningless; the
agreement threshold is then lowered (down to 0.05) until there are enough."""

PSNR_CAP_DB = 100.0
"""Identical outputs have an infinite PSNR; a frame counts at most this in the mean."""


class Agreement(Protocol):
    """A trial's agreement with FP32: higher is better, ``target`` is what the search
    aims for."""

    metric: str  # "f1" or "psnr_db" (SensitivityReport.agreement_metric)
    target: float
    conf: float  # the detection threshold it was measured at (NaN for images)
    reference_count: int  # FP32 detections it was measured on (0 for images)

    def of_trial(self, int8: frozenset[str]) -> float:
        """The agreement when exactly ``int8`` convolutions run quantized."""

    def of_session(self, session: Any) -> float:
        """The agreement of a final INT8 graph's ONNX Runtime session."""


def agreement(
    ref: Sequence[Detections], test: Sequence[Detections], task: AnyTask
) -> AgreementTotals:
    """The task's agreement (the compare view's rule), summed over the frames."""
    totals = AgreementTotals()
    for r, t in zip(ref, test, strict=True):
        totals.add(task.agree(r, t))
    return totals


class DetectionAgreement:
    """F1 of the detections against FP32's at ``conf`` (lowered when FP32 finds too few)."""

    metric = "f1"

    def __init__(
        self, trials: Trials, frames: CalibrationFrames, settings: CalibrationSettings
    ) -> None:
        self._task = trials.task
        self._trials, self._frames = trials, frames
        self.target = settings.agreement_target
        self._iou = settings.nms_iou
        conf = settings.conf
        while True:
            ref = trials.detections(frozenset(), frames, conf, self._iou)
            if sum(len(d) for d in ref) >= MIN_REFERENCE_DETECTIONS or conf <= 0.05:
                break
            conf = max(0.05, conf / 2)
        self.conf, self._reference = conf, ref
        self.reference_count = sum(len(d) for d in ref)

    def of_trial(self, int8: frozenset[str]) -> float:
        dets = self._trials.detections(int8, self._frames, self.conf, self._iou)
        return agreement(self._reference, dets, self._task).f1

    def of_session(self, session: Any) -> float:
        name = session.get_inputs()[0].name
        params = DetectParams(self.conf, self._iou)
        dets = [
            self._task.decode(session.run(None, {name: t}), [g], params)[0]
            for t, g in zip(self._frames.tensors, self._frames.geometries, strict=True)
        ]
        return agreement(self._reference, dets, self._task).f1


class ImageAgreement:
    """Mean PSNR (dB, capped at PSNR_CAP_DB) of the output images' 8-bit levels against
    FP32's, over the calibration patches."""

    metric = "psnr_db"
    conf = math.nan
    reference_count = 0

    def __init__(
        self, trials: Trials, frames: CalibrationFrames, settings: CalibrationSettings
    ) -> None:
        self._trials, self._frames = trials, frames
        self.target = settings.psnr_target_db
        self._divisor = np.float32(255.0 * trials.task.spec.input_scale)
        self._reference = [self._levels(o[0]) for o in trials.outputs(frozenset(), frames.tensors)]

    def _levels(self, out: npt.NDArray[Any]) -> npt.NDArray[np.uint8]:
        """A (1, C, H, W) output as the (H, W, C) 8-bit image the pipeline would make."""
        image = np.asarray(out, dtype=np.float32)[0].transpose(1, 2, 0) / self._divisor
        return np.ascontiguousarray(to_uint8(image))

    def _mean_psnr(self, outputs: Sequence[npt.NDArray[Any]]) -> float:
        values = [
            min(PSNR_CAP_DB, psnr(ref, self._levels(out)))
            for ref, out in zip(self._reference, outputs, strict=True)
        ]
        return float(np.mean(values))

    def of_trial(self, int8: frozenset[str]) -> float:
        return self._mean_psnr([o[0] for o in self._trials.outputs(int8, self._frames.tensors)])

    def of_session(self, session: Any) -> float:
        name = session.get_inputs()[0].name
        return self._mean_psnr([session.run(None, {name: t})[0] for t in self._frames.tensors])


def agreement_for(
    trials: Trials, frames: CalibrationFrames, settings: CalibrationSettings
) -> Agreement:
    """The measure of the trials' task (its ``int8_measure``)."""
    measure = trials.task.int8_measure
    if measure == "f1":
        return DetectionAgreement(trials, frames, settings)
    if measure == "psnr":
        return ImageAgreement(trials, frames, settings)
    raise ConfigError(f"{trials.task.spec.name}: INT8 has no agreement measure for this task")
