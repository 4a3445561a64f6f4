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


def _flavour_version(name: str) -> str:
    """A TensorRT flavour's version, when it imports and is the real library (the type
    stubs install a ``tensorrt`` folder with no library in it)."""
    from framelens.core.stages.engines.tensorrt_flavour import installed_flavours

    for flavour in installed_flavours():
        if flavour.name == name:
            return flavour.version
    return "not available"


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
        return f"in FFmpeg, but does not open here ({_reason(exc)})"
    return "yes"


def _reason(exc: BaseException) -> str:
    """FFmpeg's reason in words, whole: "Operation not permitted" rather than the errno
    and the call it came from."""
    text = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
    return str(text).strip() or type(exc).__name__


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
    """The TensorRT flavours installed, the GPU's compute capability and whether their
    engines can run here, or why not."""
    try:
        from framelens.core.gpu.context import cuda_usable, get_context
        from framelens.core.stages.engines.tensorrt_flavour import (
            flavour_for_gpu,
            installed_flavours,
        )

        flavours = installed_flavours()
        if not flavours:
            from framelens.core.stages.engines.tensorrt_plans import tensorrt_unavailable

            return f"not usable ({tensorrt_unavailable()})"
        names = ", ".join(f.label for f in flavours)
        aot = [f for f in flavours if f.ahead_of_time]
        builds = f"; builds ahead of time for {', '.join(aot[0].targets)}" if aot else ""
        if cuda_usable("cuda:0") is not None:
            return f"{names}: no GPU here to run engines{builds}"
        gpu = get_context("cuda:0").properties
        cc = f"compute capability {gpu.compute_capability[0]}.{gpu.compute_capability[1]}"
        flavour, reason = flavour_for_gpu(gpu.compute_capability)
        if flavour is None:
            return f"{names}: engines cannot run on {gpu.name} ({reason}){builds}"
        return f"{flavour.label}: engines run on {gpu.name}, {cc}{builds}"
    except Exception as exc:  # doctor reports, it never fails
        return f"not usable ({type(exc).__name__}: {exc})"


def _trackers() -> str:
    from framelens.core.stages.tracking.registry import trackers_uncompiled

    why = trackers_uncompiled()
    if why is None:
        return f"ByteTrack and OC-SORT compiled (numba {_version('numba')})"
    return f"numpy references, the same IDs at 10-40x the time: {why}"


def diagnose() -> dict[str, str]:
    from framelens.core import __version__
    from framelens.core.pipeline.devices import onnxruntime_providers

    gpu = _nvidia_smi()
    has_gpu = shutil.which("nvidia-smi") is not None and not gpu.startswith(("nvidia-smi", "no "))
    try:
        import av

        hwdecoders = ", ".join(c for c in ("h264_cuvid", "hevc_cuvid") if c in av.codecs_available)
    except ImportError:
        hwdecoders = ""
    if hwdecoders and not has_gpu:  # FFmpeg was built with them; nothing here runs them
        hwdecoders = f"no GPU here (FFmpeg has {hwdecoders})"
    report = {
        "framelens": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "gpu": gpu,
        "cuda compiler": shutil.which("nvcc") or "nvcc not found",
        "pycuda": _version("pycuda"),
        "pycuda OpenGL interop": _gl_interop(),
        "GPU pipeline (cuda:0)": _gpu_pipeline(),
        "tensorrt": _flavour_version("tensorrt"),
        "tensorrt-rtx": _flavour_version("tensorrt-rtx"),
        "TensorRT backend": _tensorrt_backend(),
        "onnxruntime": _version("onnxruntime"),
        "onnxruntime providers": ", ".join(onnxruntime_providers()) or "none",
        "PyAV": _version("av"),
        "PyNvVideoCodec": _version("PyNvVideoCodec"),
        "NVDEC (FFmpeg cuvid)": hwdecoders or "no",
        "NVENC (h264_nvenc)": _codec_opens("h264_nvenc"),
        "libx264": _codec_opens("libx264"),
        "opencv": _version("cv2"),
        "trackers": _trackers(),
    }
    report["verdict"] = verdict(report)
    return report


def verdict(report: dict[str, str]) -> str:
    """One line at the end: where FrameLens runs here, and why not the GPU pipeline."""
    providers = report.get("onnxruntime providers", "")
    cuda = "CUDAExecutionProvider" in providers
    gpu_line = report.get("GPU pipeline (cuda:0)", "")
    runs = ["CUDA (ONNX Runtime)" if cuda else "CPU (ONNX Runtime)"]
    if report.get("TensorRT backend", "").startswith(("tensorrt ", "tensorrt-rtx ")) and (
        ": engines run on" in report["TensorRT backend"]
    ):
        runs.append("TensorRT")
    gpu = report.get("gpu", "")
    if gpu_line == "usable":
        gpu_part = "GPU pipeline: yes (NVDEC, CUDA kernels, device buffers)"
    elif gpu.startswith(("no ", "nvidia-smi")):  # the first reason: no GPU at all
        gpu_part = (
            f"GPU pipeline: no, because there is {gpu}"
            if gpu.startswith("no ")
            else (f"GPU pipeline: no, because {gpu}")
        )
    else:
        why = gpu_line.removeprefix("not usable (").removesuffix(")") or "unknown"
        gpu_part = f"GPU pipeline: no, because {why}"
    encoder = "NVENC" if report.get("NVENC (h264_nvenc)") == "yes" else "libx264"
    return f"runs on: {', '.join(runs)}; {gpu_part}; exports encode with {encoder}"
