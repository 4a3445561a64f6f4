"""Where each source's frames are decoded, and why: NVDEC straight into device memory
for a video file that GPU pipelines take as stored, else the host (PyAV, OpenCV for a
camera, the image-folder reader), which GPU pipelines upload as they do a camera's. The
plan (core/pipeline/build.py) says each source's choice; core/sessions/opening.py opens
it so, and the player reopens its source when new pipelines want frames elsewhere."""

from __future__ import annotations

from pathlib import Path

from framelens.core.errors import GpuError
from framelens.core.pipeline.plan import Choice
from framelens.core.pipeline.processor import FrameProcessor
from framelens.core.stages.sources import Source, names_a_file, open_source, source_kind
from framelens.core.stages.sources.display import AS_STORED
from framelens.core.stages.sources.file import display_of
from framelens.core.stages.sources.suffixes import IMAGE_SUFFIXES

__all__ = [
    "DECODE_BUFFERS",
    "decode_pool",
    "decoder_choice",
    "decodes_on_device",
    "open_frames",
    "source_device",
]

DECODE_BUFFERS = 12  # NV12 frames in flight: the decode queue, the workers and one being read


def decoder_choice(spec: str, on_gpu: bool, *, shared: bool = False) -> Choice:
    """Where ``spec``'s frames are decoded, and why: the plan's choice for each source
    (core/sessions/opening.py opens it so). ``on_gpu``: for GPU pipelines; ``shared``:
    every frame goes through several pipelines in turn (compare's panes).

    One policy wherever NVDEC cannot be set up when the source opens (no CUDA stream on
    the device, no memory for its frame buffers) and the host can read the file: it is
    decoded on the host for the same GPU pipelines, which upload host frames as they do
    a camera's, and the run's notes say so. The workers are kept: nothing is rebuilt (an
    engine build or a TensorRT plan load), the CUDA preprocessing and display kernels
    stay, and a GPU that is really broken fails its first batch, where the session's
    failover moves its sources (another GPU, else the CPU). Rebuilding them as host
    pipelines with CUDA inference, as runs once did, was never measured faster and
    preprocesses on the CPU."""
    if shared:
        return Choice(
            "cpu",
            "every pane takes each frame in turn, on whichever device it runs, and the "
            "view keeps the frames: decoded once on the host",
        )
    if not on_gpu:
        return Choice("cpu", f"{_host_reader(spec)}: host pipelines take host frames")
    if decodes_on_device(spec):
        return Choice(
            "nvdec",
            "a video file as stored: decoded straight into device memory (where NVDEC "
            "cannot be set up, on the host for the same GPU pipelines)",
        )
    if names_a_file(spec):
        if _is_image(spec):
            return Choice("cpu", "a still image is read on the host (NVDEC decodes video)")
        return Choice("cpu", f"{display_of(spec)} for display: the host makes the picture shown")
    return Choice("cpu", "a camera, stream or image folder is decoded on the host")


def _host_reader(spec: str) -> str:
    """What reads ``spec``'s frames on the host (core/stages/sources/open_source)."""
    kind = source_kind(spec)
    if kind == "folder":
        return "the image-folder reader loads each image (OpenCV)"
    if kind == "camera":
        return "OpenCV reads the camera"
    return "PyAV decodes"


def decodes_on_device(spec: str) -> bool:
    """True for video files (NVDEC decodes them); cameras, streams, folders decode on the
    host, and so do videos shown otherwise than stored (a phone's portrait video turned,
    non-square pixels): the host makes the picture shown, and the GPU pipeline takes
    host frames as it takes a camera's."""
    if not names_a_file(spec) or _is_image(spec):
        return False
    return display_of(spec) == AS_STORED


def _is_image(spec: str) -> bool:
    return Path(spec).suffix.lower() in IMAGE_SUFFIXES


def source_device(pipeline: FrameProcessor | None, spec: str) -> str | None:
    """The device whose NVDEC should decode ``spec`` for ``pipeline``; None: the host."""
    if pipeline is None or not pipeline.takes_device_frames:
        return None
    return pipeline.settings.device if decodes_on_device(spec) else None


def decode_pool(workers: int, batch: int) -> int:
    """NVDEC's frame buffers for ``workers`` inference workers taking batches of ``batch``:
    the decode queue (4), every worker's batch and the two that wait beside them, one
    being read; never fewer than DECODE_BUFFERS."""
    return max(DECODE_BUFFERS, 4 + (workers + 2) * batch + 1)


def open_frames(spec: str, pipeline: FrameProcessor | None, workers: int) -> tuple[Source, str]:
    """The source of ``spec`` decoded where ``pipeline`` wants its frames, and the name of
    its decoder: NVDEC into device memory for GPU pipelines and video files (which falls
    back to PyAV and says why), else on the host. GpuError when no CUDA decoder can be
    set up at all. ``workers``: the inference workers its frames are shared by (NVDEC's
    buffers are counted for them)."""
    device = source_device(pipeline, spec)
    if device is None:
        source = open_source(spec)
        wanted = pipeline is not None and pipeline.takes_device_frames
        why = source.fallback_reason if wanted else None
        return source, f"cpu ({why})" if why else "cpu"
    from framelens.core.gpu.buffers import cuda_driver, cuda_message
    from framelens.core.gpu.context import get_context
    from framelens.core.stages.sources.nvdec import open_gpu_source

    ctx = get_context(device)
    try:
        with ctx.active():
            stream = cuda_driver().Stream()
    except Exception as exc:
        raise GpuError(f"CUDA stream: {cuda_message(exc)}") from exc
    batch = pipeline.settings.batch if pipeline is not None else 1
    source = open_gpu_source(spec, ctx, stream, pool_size=decode_pool(workers, batch))
    name = source.decoder_name
    if source.fallback_reason:
        name += f" ({source.fallback_reason})"
    return source, name
