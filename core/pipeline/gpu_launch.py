"""Setting up a GPU run: the frame source and the pipelines, or the reason it cannot be."""

from __future__ import annotations

import os
from pathlib import Path

from framelens.core.errors import FrameLensError, GpuError
from framelens.core.gpu.buffers import cuda_driver, cuda_message
from framelens.core.gpu.context import get_context
from framelens.core.pipeline.frame_pipeline import PipelineSettings
from framelens.core.pipeline.gpu_pipeline import GpuFramePipeline
from framelens.core.stages.sources import Source, open_source

GPU_WORKERS = 2  # two streams, two threads: upload/preprocess of N+1 overlaps inference of N
DECODE_BUFFERS = 12  # NV12 frames in flight: the decode queue, the workers and one being read


def gpu_pipelines(
    settings: PipelineSettings,
    count: int = GPU_WORKERS,
    *,
    spinning: bool = True,
    non_blocking: bool = True,
) -> list[GpuFramePipeline]:
    """``count`` GPU pipelines on their own streams; GpuError when the GPU path is unusable."""
    ctx = get_context(settings.device) if settings.device != "auto" else get_context(0)
    built: list[GpuFramePipeline] = []
    try:
        for _ in range(count):
            built.append(
                GpuFramePipeline(settings, ctx, spinning=spinning, non_blocking=non_blocking)
            )
            built[-1].warm_up()  # cuDNN's first-run cost while the model loads
    except BaseException:
        for p in built:
            p.close()
        raise
    return built


def decodes_on_device(spec: str) -> bool:
    """True for video files (NVDEC decodes them); cameras, streams, folders decode on the host."""
    return os.path.isfile(spec) and Path(spec).suffix.lower() not in {".png", ".jpg", ".jpeg"}


def open_gpu_frames(spec: str, settings: PipelineSettings) -> tuple[Source, str]:
    """A source of frames for the GPU pipelines and the name of its decoder.

    Video files decode with NVDEC into device memory (core.gpu.decode, which falls back
    to PyAV and says why); cameras, streams and folders give host frames, which the
    pipelines upload.
    """
    if decodes_on_device(spec):
        from framelens.core.stages.sources.nvdec import open_gpu_source

        ctx = get_context(settings.device)
        cuda = cuda_driver()
        try:
            with ctx.active():
                stream = cuda.Stream()
        except Exception as exc:
            raise GpuError(f"CUDA stream: {cuda_message(exc)}") from exc
        source = open_gpu_source(spec, ctx, stream, pool_size=DECODE_BUFFERS)
        name = source.decoder_name
        if source.fallback_reason:
            name += f" ({source.fallback_reason})"
        return source, name
    host: Source = open_source(spec)
    return host, "cpu"


def gpu_unavailable(settings: PipelineSettings) -> str | None:
    """Why the GPU pipeline cannot run for these settings, or None."""
    if not settings.device.startswith("cuda"):
        return f"device is {settings.device}"
    try:
        get_context(settings.device)
        from framelens.core.pipeline.gpu_pipeline import kernels_for

        kernels_for(get_context(settings.device))
    except FrameLensError as exc:
        return str(exc)
    return None
