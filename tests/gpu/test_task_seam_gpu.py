"""The task seam on the device path: the third task of tests/unit/test_task_seam.py (a
per-frame colour classifier defined in tests/unit/classify_task.py, registered by one
registry call) runs on the GPU pipeline with no code of its own for the device: the
standard device half (core/stages/tasks/device.py) lays its frames out by its geometry
with the fused CUDA kernel, runs the engine on device buffers and decodes on the host
with the task's own ``decode``. It must classify what the CPU path classifies, from
NVDEC frames and from host frames, with and without display frames.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from framelens.core.gpu.context import GpuContext
from framelens.core.pipeline import build
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.session import Session, SessionOptions
from framelens.core.stages.tasks import registered
from framelens.core.stages.tasks.device import BatchDevice
from framelens.core.types import Frame, StageTimes

pytestmark = pytest.mark.gpu

UNIT = Path(__file__).resolve().parents[1] / "unit"
FRAMES = 26  # not a multiple of 4: the last batch of four is short
SIDE = 128  # NVDEC decodes H.264 from 48 x 16 up: a small video, not a tiny one


@pytest.fixture(scope="module")
def seam() -> ModuleType:
    """tests/unit/classify_task.py, the task as a test defines it."""
    if str(UNIT) not in sys.path:
        sys.path.insert(0, str(UNIT))
    return importlib.import_module("classify_task")


@pytest.fixture
def classifier(seam: ModuleType, tmp_path: Path) -> Iterator[PipelineSettings]:
    with registered(seam.KIND, seam.ClassifyTask, "colour classification"):
        yield PipelineSettings(seam.classifier_spec(tmp_path / "classifier.onnx"))


@pytest.fixture
def colours(seam: ModuleType, tmp_path: Path) -> tuple[str, list[str], list[np.ndarray]]:
    media = importlib.import_module("media_factory")
    images, names = seam.colour_frames(FRAMES, SIDE)
    return str(media.encode_frames(tmp_path / "colours.mp4", images)), names, images


def classes(settings: PipelineSettings, video: str, pixels: bool) -> dict[int, tuple[str, float]]:
    """Each frame's (class, score) from the product's session on ``settings.device``."""
    got: dict[int, tuple[str, float]] = {}
    options = SessionOptions(draw="none", pixels=pixels)
    with Session([video], settings, options=options) as session:
        for result in session.results():
            got[result.frame.index] = (result.output.name, result.output.score)
            if pixels and settings.device.startswith("cuda"):
                assert result.frame.device is not None  # the RGBA display frame
        path = session.path
    if settings.device.startswith("cuda"):
        assert path.startswith("gpu pipeline"), path
    return got


@pytest.mark.parametrize(("pixels", "batch"), [(False, 1), (True, 1), (False, 4)])
def test_a_task_added_by_a_test_runs_on_the_gpu_pipeline(
    gpu_ctx: GpuContext,
    classifier: PipelineSettings,
    colours: tuple[str, list[str], list[np.ndarray]],
    pixels: bool,
    batch: int,
) -> None:
    """NVDEC frames, with display frames or without, one frame or four per engine call
    (a short last batch padded): the classes of the CPU path."""
    video, names, _ = colours
    cpu = classes(classifier, video, pixels)
    on_gpu = PipelineSettings(classifier.model, device="cuda:0", batch=batch)
    gpu = classes(on_gpu, video, pixels)
    assert [gpu[i][0] for i in range(FRAMES)] == names
    assert [cpu[i][0] for i in range(FRAMES)] == names
    for i in range(FRAMES):  # NVDEC's colour conversion against FFmpeg's: close, not equal
        assert abs(gpu[i][1] - cpu[i][1]) < 0.02, (i, gpu[i], cpu[i])


def test_host_frames_on_the_device_half_equal_the_host_pipeline(
    gpu_ctx: GpuContext,
    classifier: PipelineSettings,
    colours: tuple[str, list[str], list[np.ndarray]],
) -> None:
    """Frames a camera would give (uploaded, not NVDEC's) through the standard device
    half: the same classes and scores as the host pipeline on the same pixels."""
    _, names, images = colours
    host = build.host_pipeline(classifier)
    gpu = build.gpu_pipelines(PipelineSettings(classifier.model, device="cuda:0"), 1)[0]
    try:
        assert isinstance(getattr(gpu, "device_half", None), BatchDevice)
        for i, image in enumerate(images):
            want = host.infer(Frame(image, i, 0.0), StageTimes()).output
            got = gpu.infer(Frame(image, i, 0.0), StageTimes())
            assert got.output.name == want.name == names[i]
            assert abs(got.output.score - want.score) < 1e-3  # the same float arithmetic
            assert got.times.inference > 0
            shown = got.frame.image  # the display frame, downloaded
            assert shown is not None and shown.shape == image.shape
    finally:
        host.close()
        gpu.close()
