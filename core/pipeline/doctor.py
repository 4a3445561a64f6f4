"""`framelens doctor`: what this machine offers for each pipeline stage."""

from __future__ import annotations

import importlib
import platform
import shutil
import subprocess
from fractions import Fraction
from typing import Any


def _version(module: str) -> str:
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # an absent or broken optional package is a finding, not a crash
        return f"not available ({type(exc).__name__})"
    return str(getattr(mod, "__version__", "installed"))


def _nvidia_smi() -> str:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return "no NVIDIA driver (nvidia-smi not found)"
    try:
        out = subprocess.run(
            [exe, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"nvidia-smi failed: {exc}"
    return out or "no GPU listed"


def _codec_opens(name: str) -> str:
    """Whether FFmpeg (PyAV) has the codec and it opens on this machine."""
    try:
        import av
    except ImportError:
        return "PyAV missing"
    if name not in av.codecs_available:
        return "not in this FFmpeg build"
    try:
        ctx: Any = av.CodecContext.create(name, "w")
        ctx.width, ctx.height, ctx.pix_fmt = 256, 256, "yuv420p"
        ctx.time_base = Fraction(1, 25)
        ctx.open()
    except Exception as exc:  # FFmpeg says why (no device, not permitted, ...)
        return f"present, does not open ({str(exc).splitlines()[0][:60]})"
    return "yes"


def _gl_interop() -> str:
    from framelens.core.gpu.interop import pycuda_gl_reason

    reason = pycuda_gl_reason()
    return "yes (needs an NVIDIA OpenGL context at run time)" if reason is None else reason


def _gpu_pipeline() -> str:
    """Whether NVDEC + CUDA kernels + IOBinding can run, or why not."""
    from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
    from framelens.core.pipeline.build import gpu_unavailable
    from framelens.core.pipeline.settings import PipelineSettings

    try:
        settings = PipelineSettings(resolve_model(DEFAULT_MODEL), device="cuda:0")
        reason = gpu_unavailable(settings)
    except Exception as exc:  # doctor reports, it never fails
        reason = f"{type(exc).__name__}: {exc}"
    return "usable" if reason is None else f"not usable ({reason})"


def _tensorrt_backend() -> str:
    """Whether --backend tensorrt can build and run engines here, or why not."""
    try:
        from framelens.core.stages.engines.tensorrt import tensorrt_unavailable

        reason = tensorrt_unavailable()
    except Exception as exc:  # doctor reports, it never fails
        reason = f"{type(exc).__name__}: {exc}"
    if reason is not None:
        return f"not usable ({reason})"
    return "usable (strongly typed builds; engines cached after the first build)"


def diagnose() -> dict[str, str]:
    from framelens.core import __version__
    from framelens.core.pipeline.devices import onnxruntime_providers

    try:
        import av

        hwdecoders = ", ".join(c for c in ("h264_cuvid", "hevc_cuvid") if c in av.codecs_available)
    except ImportError:
        hwdecoders = ""
    return {
        "framelens": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "gpu": _nvidia_smi(),
        "cuda compiler": shutil.which("nvcc") or "nvcc not found",
        "pycuda": _version("pycuda"),
        "pycuda OpenGL interop": _gl_interop(),
        "GPU pipeline (cuda:0)": _gpu_pipeline(),
        "tensorrt": _version("tensorrt"),
        "TensorRT backend": _tensorrt_backend(),
        "onnxruntime": _version("onnxruntime"),
        "onnxruntime providers": ", ".join(onnxruntime_providers()) or "none",
        "PyAV": _version("av"),
        "PyNvVideoCodec": _version("PyNvVideoCodec"),
        "NVDEC (FFmpeg cuvid)": hwdecoders or "no",
        "NVENC (h264_nvenc)": _codec_opens("h264_nvenc"),
        "libx264": _codec_opens("libx264"),
        "opencv": _version("cv2"),
    }
