"""The task seam: a task FrameLens does not have, added by a test alone, runs through the
product's own session, settings and writers on the CPU path.

The task (tests/unit/classify_task.py: a per-frame colour classifier on a tiny ONNX graph)
touches no product file; it is made known by one registry call. Its twin on the device
path is tests/gpu/test_task_seam_gpu.py. Also: the built-in tasks come from the registry
(their kinds, parameters and defaults), and nothing outside core/stages/tasks/ tests a
task's type or compares its name.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from classify_task import KIND, ClassifyParams, ClassifyTask, classifier_spec, colour_frames
from framelens.core.errors import ModelError
from framelens.core.models.catalog import DEFAULT_MODEL, DEFAULT_SUPERRES_MODEL, resolve_model
from framelens.core.pipeline import build
from framelens.core.pipeline.settings import PipelineSettings, with_changes
from framelens.core.sessions.runs import run_to_outputs
from framelens.core.sessions.session import Session, SessionOptions
from framelens.core.stages.tasks import (
    DetectParams,
    SuperResParams,
    registered,
    task_for,
    task_kind,
)
from media_factory import encode_frames

ROOT = Path(__file__).resolve().parents[2]
FRAMES = 12


@pytest.fixture
def classifier(tmp_path: Path) -> Iterator[PipelineSettings]:
    """The classifier registered for the test, and settings that run it on the CPU."""
    with registered(KIND, ClassifyTask, "colour classification"):
        yield PipelineSettings(classifier_spec(tmp_path / "classifier.onnx"))


@pytest.fixture
def colours(tmp_path: Path) -> tuple[str, list[str]]:
    """A video of solid blue, green and red frames, and each frame's colour."""
    images, names = colour_frames(FRAMES)
    return str(encode_frames(tmp_path / "colours.mp4", images)), names


def test_a_task_added_by_a_test_classifies_every_frame_of_a_session(
    classifier: PipelineSettings, colours: tuple[str, list[str]]
) -> None:
    video, names = colours
    assert isinstance(classifier.params, ClassifyParams)  # the registry's defaults
    got: dict[int, str] = {}
    with Session([video], classifier, options=SessionOptions(draw="none")) as session:
        for result in session.results():
            got[result.frame.index] = result.output.name
        assert session.path == "cpu pipeline"
    assert got == dict(enumerate(names))


def test_a_task_added_by_a_test_writes_its_outputs_and_its_overlay(
    classifier: PipelineSettings, colours: tuple[str, list[str]], tmp_path: Path
) -> None:
    video, names = colours
    out, export = tmp_path / "classes.json", tmp_path / "annotated.mp4"
    settings = with_changes(classifier, {"min_score": 0.5})  # its own parameter, live
    summary = run_to_outputs(video, settings, detections=str(out), export=str(export))
    written = json.loads(out.read_text())
    assert [f["class"] for f in written["frames"]] == names
    assert all(f["score"] >= 0.5 for f in written["frames"])
    assert written["meta"]["task"] == KIND and written["meta"]["model"] == "colour-classifier"
    assert summary.frames == FRAMES
    assert export.stat().st_size > 0


def test_its_parameters_apply_from_the_next_frame(
    classifier: PipelineSettings, colours: tuple[str, list[str]]
) -> None:
    """A min_score above any softmax of three channel means leaves frames unclassified."""
    video, _ = colours
    pipeline = build.host_pipeline(classifier)
    try:
        from framelens.core.stages.sources import open_source

        with open_source(video) as source:
            frame = source.read()
            assert frame is not None
            assert pipeline.process(frame).output.label >= 0
            pipeline.update(min_score=0.99)
            assert pipeline.process(frame).output.label == -1
    finally:
        pipeline.close()


def test_a_task_not_registered_is_one_clear_error(tmp_path: Path) -> None:
    spec = classifier_spec(tmp_path / "classifier.onnx")
    with pytest.raises(ModelError, match="no 'classify' task"):
        task_for(spec)
    with pytest.raises(ModelError, match="no 'classify' task"):
        build.host_pipeline(PipelineSettings(spec))


def test_the_built_in_tasks_come_from_the_registry() -> None:
    detector, upscaler = resolve_model(DEFAULT_MODEL), resolve_model(DEFAULT_SUPERRES_MODEL)
    assert PipelineSettings(detector).params == task_kind("detect").default_params()
    assert PipelineSettings(upscaler).params == SuperResParams()
    # a model of another task given the previous model's parameters gets its own defaults
    assert PipelineSettings(upscaler, params=DetectParams(conf=0.9)).params == SuperResParams()
    switched = replace(PipelineSettings(detector, params=DetectParams(conf=0.9)), model=upscaler)
    assert switched.params == SuperResParams()
    assert task_kind("superres").produces_image and not task_kind("detect").produces_image
    assert task_kind("faces").task is task_kind("detect").task


BRANCHES = (
    r'isinstance([a-z_.]*, *\(DetectionTask\|SuperResTask\)\|task == "\|task != "'
    r'\|\.task == \|"superres"\|"detect"'
)


def test_no_task_kind_branches_outside_the_tasks_folder() -> None:
    """The seam's rule: core/stages/tasks/ is the one place that knows each kind of
    task; pipelines, sessions, precision, the CLI and the GUI ask a task (or its registry
    entry) what it does. Model metadata (core/models/: which task a model file is, the
    catalogue's defaults) sits below the tasks and names them as data."""
    found = subprocess.run(
        ["grep", "-rn", BRANCHES, "core", "app", "gui", "--include=*.py"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    ).stdout.splitlines()  # fmt: skip
    outside = [
        line for line in found if not line.startswith(("core/stages/tasks/", "core/models/"))
    ]
    assert outside == []


def test_host_and_device_preprocessors_share_one_interface_and_one_layout() -> None:
    """The CPU and CUDA preprocessors of a frame size are the same interface
    (core/stages/preprocess/base.py) and place the frame alike: the geometry each hands
    the task's decoding is the same letterbox. (tests/gpu compares their tensors.)"""
    from framelens.core.gpu.kernels import PreprocessLayout
    from framelens.core.stages.preprocess.base import DevicePreprocessor, HostPreprocessor
    from framelens.core.stages.preprocess.cuda import CudaFramePreprocessor

    detector = resolve_model(DEFAULT_MODEL)
    task = task_for(detector)
    for w, h in ((1920, 1080), (640, 480), (333, 777)):
        host = task.preprocessor(w, h, task.default_params())
        layout = PreprocessLayout.from_spec(detector, w, h, geometry=task.input_geometry(w, h))
        device = CudaFramePreprocessor(None, layout)  # type: ignore[arg-type]  # no GPU here
        assert isinstance(host, HostPreprocessor) and isinstance(device, DevicePreprocessor)
        assert (host.src_w, host.src_h) == (device.src_w, device.src_h) == (w, h)
        assert host.geometry == device.geometry
    upscaler = task_for(resolve_model(DEFAULT_SUPERRES_MODEL))
    assert isinstance(upscaler.preprocessor(64, 48, SuperResParams()), HostPreprocessor)
