"""What the player runs: the model chosen, its precision variant, the device and backend.

The GUI's controller forwards the user's intents here (use a model, run at FP16, on
cuda:0) and renders what comes back through a ChoiceListener; this module holds the
policy, without Qt:

- ``settings.model`` becomes the variant's graph once a precision is applied (the
  builder runs what it is given), so the model as chosen is kept beside it
  (``base_settings``: compare, the wall and export start from it);
- one precision job at a time: a newer choice supersedes the one being prepared,
  whose late reports are ignored (by its token);
- a model switch at FP16 or INT8 waits for the new model's variant (INT8 from the
  cache only: calibrating is the user's call) and, when there is none, goes on at FP32;
- INT8 is calibrated on the open video: none open, it is refused;
- the last session's precision comes back: FP16 at once, INT8 once a video opens and
  only from the cache; the choice to remember is the user's (or the restored one)
  once it is active.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Protocol

from framelens.core.errors import FrameLensError, error_message
from framelens.core.models.spec import ModelSpec
from framelens.core.pipeline.devices import backend_choices, resolve_device
from framelens.core.pipeline.settings import PipelineSettings, with_changes, without_classes
from framelens.core.precision import PRECISIONS, VariantInfo, fp32_variant
from framelens.core.precision.int8_settings import CalibrationSettings
from framelens.core.precision.jobs import PrecisionJob
from framelens.core.precision.report import SensitivityReport
from framelens.core.stages.draw.style import OverlayStyle
from framelens.core.stages.tasks.registry import kind_of, produces_image

__all__ = ["ChoiceListener", "PlaybackChoice"]


class ChoiceListener(Protocol):
    """What a PlaybackChoice asks of whoever drives it (the GUI's controller)."""

    def run(self, settings: PipelineSettings) -> None:
        """Have the player run ``settings`` (asked only while a source is open)."""

    def model_changed(self, spec: ModelSpec | None) -> None:
        """A model was chosen (None: none, frames play as decoded)."""

    def precision_changed(
        self, precision: str, report: SensitivityReport | None, chosen: bool
    ) -> None:
        """``precision`` is active (also said when a choice changed nothing); ``chosen``:
        it is what the user chose (or the last session's, restored), to be remembered."""

    def precision_failed(self, precision: str, message: str, restoring: bool) -> None:
        """``precision`` could not be had: one line ("cancelled" after a cancel);
        ``restoring``: it was the last session's choice, not one made now."""

    def prepare(
        self,
        job: PrecisionJob,
        spec: ModelSpec,
        source: str | None,
        calibration: CalibrationSettings,
    ) -> None:
        """Prepare ``job``'s variant of ``spec`` in the background (``prepare_job``) and
        report back with ``variant_ready`` or ``variant_failed`` with its token."""


class PlaybackChoice:
    """The player's model, precision, device and backend, and the policy over them."""

    def __init__(
        self, listener: ChoiceListener, *, backend: str = "onnxruntime", device: str = "cpu"
    ) -> None:
        self._listener = listener
        self.settings: PipelineSettings | None = None  # what runs: the variant's graph
        self.backend, self.device = backend, device
        self.source: str | None = None  # the open source (INT8 is calibrated on it)
        self.precision = "fp32"  # the active one: what ``settings`` hold
        self.report: SensitivityReport | None = None  # of the active INT8 variant
        self.calibration: CalibrationSettings | None = None  # None: defaults at the conf
        self._base_model: ModelSpec | None = None  # the model as chosen
        self._job: PrecisionJob | None = None
        self._token = 0
        self._asked: str | None = None  # the user's choice, until it is active or fails
        self._restoring: str | None = None  # the last session's INT8, until a video opens

    # ---- the model --------------------------------------------------------------------

    def use_model(self, spec: ModelSpec) -> None:
        """Switch model. At FP16 or INT8 (active, or being prepared for the model left)
        the new model's variant is prepared first (INT8 only from the cache); without
        one the switch goes on at FP32."""
        self._base_model = spec
        dropped = self._drop_job()  # the model left's variant: never applied to this one
        wanted = dropped.precision if dropped is not None else self.precision
        if self.settings is None:
            self.settings = PipelineSettings(spec, backend=self.backend, device=self.device)
        else:
            self.settings = replace(
                self.settings,
                model=spec,
                params=without_classes(self.settings.params),
                precision="fp32",
            )
        self.precision, self.report = "fp32", None
        self._listener.model_changed(spec)
        if wanted != "fp32":
            self._start_job(wanted, cached_only=wanted == "int8", fallback=True)
        else:
            self._run()

    def clear_model(self) -> None:
        """No model: frames play as decoded."""
        self._drop_job()
        self._base_model, self.settings = None, None
        self.precision, self.report = "fp32", None
        self._listener.model_changed(None)

    def base_settings(self) -> PipelineSettings | None:
        """The current settings at FP32: the model as chosen, not its variant."""
        if self.settings is None:
            return None
        return replace(self.settings, model=self._base(), precision="fp32")

    @property
    def superres(self) -> bool:
        """True while a super-resolution model is chosen."""
        return self.settings is not None and produces_image(self.settings.model)

    # ---- device and backend -------------------------------------------------------------

    def set_device(self, device: str) -> str | None:
        """Run on "auto", "cpu" or "cuda:N"; the one line why not, else None."""
        try:
            resolved = resolve_device(device)
        except FrameLensError as exc:
            return error_message(exc)
        if self.backend == "tensorrt" and not resolved.startswith("cuda"):
            return "TensorRT runs on NVIDIA GPUs: choose ONNX Runtime to run on the CPU"
        self.device = resolved
        if self.settings is not None and self.settings.device != resolved:
            self.settings = replace(self.settings, device=resolved)
            self._run()
        return None

    def set_backend(self, backend: str) -> str | None:
        """Run with "onnxruntime" or "tensorrt"; the one line why not, else None."""
        choice = next((c for c in backend_choices() if c.id == backend), None)
        if choice is None:
            return f"unknown backend {backend!r}"
        if choice.unavailable is not None:
            return f"{choice.label} cannot be used: {choice.unavailable}"
        if backend == "tensorrt" and not self.device.startswith("cuda"):
            return "TensorRT runs on NVIDIA GPUs: choose a CUDA device first"
        self.backend = backend
        if self.settings is not None and self.settings.backend != backend:
            self.settings = replace(self.settings, backend=backend)
            self._run()
        return None

    # ---- thresholds, classes, overlay, region -------------------------------------------

    def update(self, **changes: object) -> dict[str, object]:
        """Thresholds, classes, overlay or region changed; returns the changes the player
        is to take too: all of them but a region, which only a task whose parameters
        take one (super-resolution) is given."""
        if "region" in changes and not self.takes_region():
            changes = {k: v for k, v in changes.items() if k != "region"}
        if self.settings is not None and changes:
            self.settings = with_changes(self.settings, changes)
        return changes

    def takes_region(self) -> bool:
        """Whether a region of interest means anything: a task whose parameters take one
        (super-resolution)."""
        return self.settings is not None and hasattr(self.settings.params, "region")

    def configure(self, *, conf: float, iou: float, overlay: OverlayStyle) -> None:
        """Initial thresholds (from saved settings) before anything is open."""
        if self.settings is not None:
            params = self.settings.params
            if kind_of(self.settings.model).has_thresholds:
                params = replace(params, conf=conf, iou=iou)
            self.settings = replace(self.settings, params=params, overlay=overlay)

    # ---- precision ------------------------------------------------------------------------

    def choose_precision(self, precision: str) -> None:
        """The user's choice (the toggle, the menu): remembered once it is active."""
        self._asked, self._restoring = precision, None
        self.set_precision(precision)

    def restore_precision(self, saved: str) -> None:
        """The last session's precision: FP16 at once (quick to build); INT8 is
        calibrated per video, so it is looked up in the cache when one opens."""
        if saved == "fp16":
            self.set_precision("fp16")
        elif saved == "int8":
            self._restoring = "int8"

    @property
    def restoring(self) -> str | None:
        """The last session's precision, waiting for a video to open."""
        return self._restoring

    def source_opening(self) -> None:
        """A video is opening: the last session's INT8, if its calibration is cached."""
        if self._restoring is not None and self._job is None:
            self.set_precision(self._restoring, cached_only=True)

    @property
    def preparing(self) -> str | None:
        """The precision being prepared in the background, None when idle."""
        return self._job.precision if self._job is not None else None

    def set_precision(self, precision: str, *, cached_only: bool = False) -> None:
        """Switch to the FP32, FP16 or INT8 variant of the current model.

        A variant is prepared through the listener (``prepare``); the newer choice
        wins over one being prepared. ``cached_only``: take the variant only if it is
        cached (restoring a saved choice)."""
        p = precision.strip().lower()
        if p not in PRECISIONS:
            self._failed(p, f"unknown precision {precision!r}")
            return
        if self.settings is None:
            self._failed(p, "choose a model first")
            return
        dropped = self._drop_job()  # the newer choice wins
        # a model switch that waited on the dropped job must still reach the player
        fallback = dropped is not None and dropped.fallback
        if p == self.precision:
            if fallback:
                self._run()
            self._changed()  # say what is active
            return
        if p == "fp32":
            self._apply(fp32_variant(self._base()))
            return
        if p == "int8" and self.source is None:
            if fallback:
                self._apply(fp32_variant(self._base()))
            self._failed(p, "open a video first: INT8 is calibrated on its frames")
            return
        self._start_job(p, cached_only=cached_only, fallback=fallback)

    def cancel_precision(self) -> None:
        """Stop preparing a variant; the job reports "cancelled" (variant_failed)."""
        if self._job is not None:
            self._job.cancel.set()

    def is_current(self, token: int) -> bool:
        """Whether the job of ``token`` is the one being prepared (else superseded)."""
        return token == self._token

    def variant_ready(self, token: int, variant: VariantInfo | None) -> None:
        """A job's variant (None: asked from the cache only, and not there)."""
        job = self._take_job(token)
        if job is None:
            return  # superseded
        if variant is None:
            name, model = job.precision.upper(), self._base().name
            message = f"{name} of {model} is not prepared for this video yet: choose {name}"
            self._variant_missing(job, message + " to calibrate it")
            return
        self._apply(variant)

    def variant_failed(self, token: int, message: str) -> None:
        """A job failed (or was cancelled: "cancelled")."""
        job = self._take_job(token)
        if job is not None:
            self._variant_missing(job, message)

    def shutdown(self) -> None:
        self._drop_job()

    # ---- inside ----------------------------------------------------------------------------

    def _changed(self) -> None:
        p = self.precision
        chosen = p in (self._asked, self._restoring)
        if chosen:
            self._asked = self._restoring = None
        self._listener.precision_changed(p, self.report, chosen)

    def _failed(self, precision: str, message: str) -> None:
        restoring = precision == self._restoring
        self._asked = self._restoring = None
        self._listener.precision_failed(precision, message, restoring)

    def _run(self) -> None:
        if self.source is not None and self.settings is not None:
            self._listener.run(self.settings)

    def _base(self) -> ModelSpec:
        assert self.settings is not None
        return self._base_model or self.settings.model

    def _take_job(self, token: int) -> PrecisionJob | None:
        job = self._job
        if job is None or token != job.token:
            return None
        self._job = None
        return job

    def _drop_job(self) -> PrecisionJob | None:
        job, self._job = self._job, None
        if job is not None:
            job.cancel.set()
            self._token += 1  # whatever it still reports is ignored
        return job

    def _start_job(self, precision: str, *, cached_only: bool, fallback: bool = False) -> None:
        self._drop_job()
        self._token += 1
        job = self._job = PrecisionJob(
            precision, self._token, threading.Event(), cached_only, fallback
        )
        assert self.settings is not None
        conf = getattr(self.settings.params, "conf", CalibrationSettings().conf)
        calibration = self.calibration or CalibrationSettings(conf=conf)
        self._listener.prepare(job, self._base(), self.source, calibration)

    def _variant_missing(self, job: PrecisionJob, message: str) -> None:
        if job.fallback and self.source is not None and self.settings is not None:
            self._run()  # the model switch goes on, at FP32
            self._changed()
        self._failed(job.precision, message)

    def _apply(self, variant: VariantInfo) -> None:
        assert self.settings is not None
        self.settings = replace(self.settings, model=variant.spec, precision=variant.precision)
        self.precision, self.report = variant.precision, variant.report
        self._run()
        self._changed()
