"""The player's model and precision choice without Qt (core/sessions/playback/choice.py):
the policy the GUI's controller only forwards to, with real models, real variants
built into a cache of the test's and the bundled sample video."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from framelens.core.models.catalog import resolve_model
from framelens.core.models.spec import ModelSpec
from framelens.core.pipeline.devices import backend_choices
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.precision import CalibrationSettings, prepare_variant
from framelens.core.precision.jobs import PrecisionJob, prepare_job
from framelens.core.precision.report import SensitivityReport
from framelens.core.sessions.playback.choice import PlaybackChoice

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4")
SMALL = CalibrationSettings(frames=4, sensitivity_frames=1, max_search_steps=4, threads=1)


@dataclass
class Driver:
    """What the GUI's controller is to a PlaybackChoice, without Qt: it records what it
    is asked, and runs each precision job for real when the test says so."""

    runs: list[PipelineSettings] = field(default_factory=list)
    models: list[ModelSpec | None] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    chosen: list[str] = field(default_factory=list)  # to be remembered
    failed: list[tuple[str, str]] = field(default_factory=list)
    restore_failed: list[str] = field(default_factory=list)
    jobs: list[tuple[PrecisionJob, ModelSpec, str | None, CalibrationSettings]] = field(
        default_factory=list
    )

    def run(self, settings: PipelineSettings) -> None:
        self.runs.append(settings)

    def model_changed(self, spec: ModelSpec | None) -> None:
        self.models.append(spec)

    def precision_changed(
        self, precision: str, report: SensitivityReport | None, chosen: bool
    ) -> None:
        self.changed.append(precision)
        if chosen:
            self.chosen.append(precision)

    def precision_failed(self, precision: str, message: str, restoring: bool) -> None:
        self.failed.append((precision, message))
        if restoring:
            self.restore_failed.append(precision)

    def prepare(
        self,
        job: PrecisionJob,
        spec: ModelSpec,
        source: str | None,
        calibration: CalibrationSettings,
    ) -> None:
        self.jobs.append((job, spec, source, calibration))

    def finish(self, choice: PlaybackChoice, job: PrecisionJob) -> None:
        """Run ``job`` as the controller's thread does, and report back as it does."""
        (_, spec, source, calibration) = next(j for j in self.jobs if j[0] is job)
        prepare_job(
            job, spec, source, calibration, on_progress=lambda _text, _fraction: None,
            on_ready=lambda variant: choice.variant_ready(job.token, variant),
            on_failed=lambda message: choice.variant_failed(job.token, message),
        )  # fmt: skip


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cache of the test's holding YOLOX-Nano's FP16 and INT8 (calibrated on SAMPLE)."""
    root = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FRAMELENS_CACHE_DIR", str(root))
        spec = resolve_model("yolox-nano")
        prepare_variant(spec, "fp16")
        prepare_variant(spec, "int8", source=SAMPLE, settings=SMALL)
        yield root


@pytest.fixture
def playing(cache: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[PlaybackChoice, Driver]:
    """YOLOX-Nano chosen at FP32, the sample video open."""
    monkeypatch.setenv("FRAMELENS_CACHE_DIR", str(cache))
    driver = Driver()
    choice = PlaybackChoice(driver)
    choice.calibration = SMALL
    choice.source = SAMPLE
    choice.use_model(resolve_model("yolox-nano"))
    return choice, driver


def test_a_variant_runs_while_the_model_as_chosen_is_kept(
    playing: tuple[PlaybackChoice, Driver],
) -> None:
    choice, driver = playing
    chosen = resolve_model("yolox-nano")
    assert driver.runs[-1].model.path == chosen.path and driver.models == [chosen]
    choice.set_precision("fp16")
    assert choice.preparing == "fp16" and driver.runs[-1].precision == "fp32"  # not yet
    driver.finish(choice, driver.jobs[-1][0])
    ran = driver.runs[-1]
    assert ran.precision == "fp16" and ran.model.path != chosen.path  # the FP16 graph
    assert driver.changed == ["fp16"] and choice.preparing is None
    base = choice.base_settings()
    assert base is not None and base.model.path == chosen.path and base.precision == "fp32"
    choice.set_precision("fp32")  # back at once: nothing to prepare
    assert driver.runs[-1].model.path == chosen.path and driver.changed[-1] == "fp32"


def test_a_newer_precision_choice_supersedes_the_one_being_prepared(
    playing: tuple[PlaybackChoice, Driver],
) -> None:
    choice, driver = playing
    choice.set_precision("int8")  # calibrating would take a while...
    first = driver.jobs[-1][0]
    choice.set_precision("fp16")  # ...the user changed their mind
    second = driver.jobs[-1][0]
    assert first.cancel.is_set() and not choice.is_current(first.token)
    driver.finish(choice, second)
    assert choice.precision == "fp16" and driver.changed == ["fp16"]
    runs = len(driver.runs)
    driver.finish(choice, first)  # the cancelled calibration reports late: ignored
    assert choice.precision == "fp16" and driver.changed == ["fp16"]
    assert driver.failed == [] and len(driver.runs) == runs


def test_a_model_switch_at_int8_takes_the_variant_from_the_cache_only_else_fp32(
    playing: tuple[PlaybackChoice, Driver],
) -> None:
    choice, driver = playing
    choice.set_precision("int8", cached_only=True)  # as a saved INT8 is restored
    driver.finish(choice, driver.jobs[-1][0])
    assert choice.precision == "int8" and driver.runs[-1].precision == "int8"
    runs = len(driver.runs)
    yunet = resolve_model("yunet")
    choice.use_model(yunet)
    job = driver.jobs[-1][0]
    assert job.precision == "int8" and job.cached_only  # calibrating is the user's call
    assert len(driver.runs) == runs  # the player keeps the old model until it is known
    driver.finish(choice, job)
    ran = driver.runs[-1]
    assert ran.model.path == yunet.path and ran.precision == "fp32"  # the switch goes on
    assert choice.precision == "fp32" and driver.changed[-1] == "fp32"
    assert driver.failed == [
        ("int8", "INT8 of yunet is not prepared for this video yet: choose INT8 to calibrate it")
    ]


def test_a_model_switch_at_fp16_prepares_the_new_models_fp16(
    playing: tuple[PlaybackChoice, Driver],
) -> None:
    choice, driver = playing
    choice.set_precision("fp16")
    driver.finish(choice, driver.jobs[-1][0])
    yunet = resolve_model("yunet")
    choice.use_model(yunet)
    job = driver.jobs[-1][0]
    assert job.precision == "fp16" and not job.cached_only and job.fallback
    driver.finish(choice, job)
    ran = driver.runs[-1]
    assert ran.precision == "fp16" and ran.model.name == "yunet" and ran.model.path != yunet.path
    base = choice.base_settings()
    assert base is not None and base.model.path == yunet.path


def test_int8_needs_an_open_video(cache: Path) -> None:
    driver = Driver()
    choice = PlaybackChoice(driver)
    choice.use_model(resolve_model("yolox-nano"))
    choice.set_precision("int8")
    assert driver.failed == [("int8", "open a video first: INT8 is calibrated on its frames")]
    assert driver.jobs == [] and driver.runs == []  # nothing open: nothing to run yet
    choice.set_precision("fp64")
    assert driver.failed[-1] == ("fp64", "unknown precision 'fp64'")


def test_a_backend_that_cannot_run_here_is_refused_with_its_reason() -> None:
    driver = Driver()
    choice = PlaybackChoice(driver)
    choice.use_model(resolve_model("yolox-nano"))
    tensorrt = next(c for c in backend_choices() if c.id == "tensorrt")
    said = choice.set_backend("tensorrt")
    if tensorrt.unavailable is not None:  # this machine: no TensorRT that runs
        assert said == f"{tensorrt.label} cannot be used: {tensorrt.unavailable}"
    else:  # a GPU machine: TensorRT needs a CUDA device first
        assert said == "TensorRT runs on NVIDIA GPUs: choose a CUDA device first"
    assert choice.backend == "onnxruntime" and choice.settings is not None
    assert choice.settings.backend == "onnxruntime"
    assert choice.set_backend("onnx") == "unknown backend 'onnx'"


def test_the_users_choice_is_the_one_remembered_once_active(
    playing: tuple[PlaybackChoice, Driver],
) -> None:
    choice, driver = playing
    choice.choose_precision("fp16")
    assert driver.chosen == []  # not yet: it is being prepared
    driver.finish(choice, driver.jobs[-1][0])
    assert choice.precision == "fp16" and driver.chosen == ["fp16"]
    choice.set_precision("fp32")  # not the user's choice (a fallback, say): not remembered
    assert driver.changed[-1] == "fp32" and driver.chosen == ["fp16"]


def test_a_model_switch_while_fp16_is_prepared_runs_the_new_models_fp16(
    playing: tuple[PlaybackChoice, Driver],
) -> None:
    choice, driver = playing
    choice.choose_precision("fp16")
    first = driver.jobs[-1][0]
    yunet = resolve_model("yunet")
    choice.use_model(yunet)  # before YOLOX's FP16 is ready
    second = driver.jobs[-1][0]
    assert first.cancel.is_set() and second is not first and second.precision == "fp16"
    driver.finish(choice, first)  # YOLOX's FP16 reports late: never run for yunet
    driver.finish(choice, second)
    ran = driver.runs[-1]
    assert ran.model.name == "yunet" and ran.precision == "fp16"
    assert ran.model.path != yunet.path and choice.precision == "fp16"


def test_a_saved_int8_is_looked_up_in_the_cache_once_a_video_opens(cache: Path) -> None:
    driver = Driver()
    choice = PlaybackChoice(driver)
    choice.calibration = SMALL
    choice.use_model(resolve_model("yolox-nano"))
    choice.restore_precision("int8")
    assert choice.restoring == "int8" and driver.jobs == []  # no video: nothing to look up
    choice.source = SAMPLE
    choice.source_opening()
    job = driver.jobs[-1][0]
    assert job.precision == "int8" and job.cached_only  # never calibrated unasked
    driver.finish(choice, job)
    assert choice.precision == "int8" and driver.chosen == ["int8"]
    assert choice.restoring is None


def test_a_saved_int8_not_in_the_cache_is_said_as_a_restore_and_tried_once(
    cache: Path,
) -> None:
    driver = Driver()
    choice = PlaybackChoice(driver)
    choice.use_model(resolve_model("yunet"))  # no INT8 of it in the cache
    choice.restore_precision("int8")
    choice.source = SAMPLE
    choice.source_opening()
    driver.finish(choice, driver.jobs[-1][0])
    assert choice.precision == "fp32" and driver.restore_failed == ["int8"]
    choice.source_opening()  # the next video: the user decides now
    assert len(driver.jobs) == 1 and choice.restoring is None


def test_the_users_choice_replaces_a_saved_int8_waiting_for_a_video(cache: Path) -> None:
    driver = Driver()
    choice = PlaybackChoice(driver)
    choice.use_model(resolve_model("yolox-nano"))
    choice.restore_precision("int8")
    choice.choose_precision("fp32")  # already active: said, and remembered
    assert driver.chosen == ["fp32"] and choice.restoring is None
    choice.source = SAMPLE
    choice.source_opening()
    assert driver.jobs == []


def test_a_region_of_interest_reaches_only_a_model_that_takes_one() -> None:
    choice = PlaybackChoice(Driver())
    choice.use_model(resolve_model("yolox-nano"))
    assert choice.update(region=(0, 0, 32, 32), conf=0.5) == {"conf": 0.5}  # no region
    assert choice.settings is not None and choice.settings.params.conf == 0.5
    choice.use_model(resolve_model("espcn-x2"))
    assert choice.update(region=(0, 0, 32, 32)) == {"region": (0, 0, 32, 32)}
    assert choice.settings is not None and choice.settings.params.region == (0, 0, 32, 32)
