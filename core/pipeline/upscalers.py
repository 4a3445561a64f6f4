"""A super-resolution model as a function of images, built where every pipeline is built:
for detections enlarged (crops) and one frame's quality against bicubic."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from framelens.core.errors import ConfigError
from framelens.core.pipeline.build import host_pipeline
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.stages.tasks import produces_image
from framelens.core.stages.tasks.superres.crops import (
    DEFAULT_MARGIN,
    MAX_CROPS,
    CropUpscaler,
    HostUpscaler,
    host_upscaler,
)
from framelens.core.stages.tasks.superres.frame_quality import FrameQuality, frame_quality
from framelens.core.types import Image

__all__ = ["crop_upscaler", "measure_frame_quality", "sr_upscaler"]


def sr_upscaler(settings: PipelineSettings) -> HostUpscaler:
    """The super-resolution model of ``settings`` (its precision, device and backend) as
    a function of images: a BGR image in, the upscaled image out. Close it when done.
    ConfigError for a model that is not a super-resolution model."""
    if not produces_image(settings.model):
        raise ConfigError(f"{settings.model.name} is not a super-resolution model")
    # built where every pipeline is (build.py): the precision variant, the device's
    # engine and the task's tiling; the upscaler runs the pipeline's task and engine
    pipeline = host_pipeline(replace(settings, batch=1, params=None), spinning=False)
    try:
        return host_upscaler(pipeline.task, pipeline.engine, pipeline.settings.device)
    except BaseException:
        pipeline.close()
        raise


def crop_upscaler(
    settings: PipelineSettings,
    *,
    margin: float = DEFAULT_MARGIN,
    max_crops: int = MAX_CROPS,
    buckets: Sequence[int] | None = None,
) -> CropUpscaler:
    """Detections enlarged by the super-resolution model of ``settings`` (see
    core/stages/tasks/superres/crops.py). Close it when done."""
    return CropUpscaler(sr_upscaler(settings), margin=margin, max_crops=max_crops, buckets=buckets)


def measure_frame_quality(image: Image, settings: PipelineSettings) -> FrameQuality:
    """PSNR and SSIM of ``settings``' model (at its precision) and of bicubic against
    ``image``, shrunk by the model's scale and upscaled again (compare's method on one
    frame), always the whole frame: the task's default parameters, not ``settings``'
    (a region of interest, say). Builds the model for the call: a fraction of a second,
    run it off the GUI thread."""
    with sr_upscaler(settings) as upscaler:
        return frame_quality(image, upscaler, upscaler.scale)
