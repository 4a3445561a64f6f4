"""Bandwidth of the fused preprocessing kernel against a device-to-device copy of the same bytes.

The kernel's traffic is counted as the frame read once (NV12: w*h*3/2 bytes, BGR:
w*h*3) plus the tensor written once (3*H*W*itemsize). The reference is
``cuda.memcpy_dtod_async`` moving the same total: a copy of half as many bytes,
read and written. Both are timed the same way: CUDA events around batches of
launches that a busy-wait kernel holds back until the whole batch is queued (so
Python's launch overhead stays out of the numbers), buffers rotated over several
times the L2 size (so the cache does not serve the inputs), after a warm-up;
the per-launch time of each batch is kept and the median reported.

A downscaling letterbox does not touch every source row (1080 -> 360 rows reads
about two rows in three), so the kernel can move fewer bytes than counted and
its figure can come out above a streaming kernel's; ``bytes_read`` is the
counted figure, as the issue's metric asks.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from framelens.core.gpu.kernels import GpuKernels, PreprocessLayout
from framelens.core.models.spec import TASK_OF_LAYOUT, ModelSpec

if TYPE_CHECKING:
    from framelens.core.gpu.context import GpuContext

_ENQUEUE_ALLOWANCE_S = 60e-6
"""Host time allowed per queued launch when sizing the busy-wait (pycuda is ~10-20 us)."""


def _timed_batches(
    cuda: Any,
    kernels: GpuKernels,
    stream: Any,
    launch: Callable[[int], None],
    *,
    repeats: int,
    batch: int,
    clock_hz: float,
    warmup: int = 10,
) -> tuple[list[float], int]:
    """Per-launch milliseconds of each batch, and how many batches outran their hold."""
    for i in range(warmup):
        launch(i)
    stream.synchronize()
    start, stop = cuda.Event(), cuda.Event()
    hold_s = 1e-3 + batch * _ENQUEUE_ALLOWANCE_S
    per_launch: list[float] = []
    starved = 0
    n = 0
    while n < repeats:
        count = min(batch, repeats - n)
        kernels.spin(int(hold_s * clock_hz), stream)
        t0 = time.perf_counter()
        start.record(stream)
        for j in range(count):
            launch(n + j)
        stop.record(stream)
        if time.perf_counter() - t0 > hold_s:
            starved += 1  # the GPU may have idled inside this batch: hold longer
            hold_s *= 2
        stop.synchronize()
        per_launch.append(stop.time_since(start) / count)
        n += count
    return per_launch, starved


def measure_preprocess_bandwidth(
    ctx: GpuContext,
    width: int = 1920,
    height: int = 1080,
    repeats: int = 200,
    *,
    source: str = "nv12",
    input_size: tuple[int, int] = (640, 640),
    dtype: str = "float16",
    letterbox: str = "topleft",
    batch: int = 20,
    kernels: GpuKernels | None = None,
) -> dict[str, Any]:
    """Time the fused preprocessing of a ``width`` x ``height`` frame into a model input of
    ``input_size`` (height, width), and a copy of the same bytes.

    ``source``: "nv12" or "bgr". Returns a dict: source, width, height, input_h,
    input_w, dtype, bytes_read, bytes_written, bytes_total, kernel_us and copy_us
    (median per launch), kernel_gbps and copy_gbps (bytes_total / time),
    ratio (kernel_gbps / copy_gbps, the issue's metric: target >= 0.5),
    peak_copy_gbps (a 1 GiB copy, read + written), buffers (sets rotated),
    l2_bytes, batches_starved (batches whose queueing outran the hold; should be
    0), repeats, device, kernels_origin.
    """
    import pycuda.driver as cuda

    if source not in ("nv12", "bgr"):
        raise ValueError(f"source must be nv12 or bgr, not {source!r}")
    if source == "nv12" and (width % 2 or height % 2):
        raise ValueError("NV12 frames have even sizes")
    with ctx.active():
        k = kernels if kernels is not None else GpuKernels(ctx)
        spec = ModelSpec(
            name="bench",
            path=Path("bench.onnx"),
            layout="yolox",
            task=TASK_OF_LAYOUT["yolox"],
            input_size=input_size,
            letterbox=letterbox,
        )
        layout = PreprocessLayout.from_spec(spec, width, height, dtype)
        in_bytes = width * height * 3 // 2 if source == "nv12" else width * height * 3
        out_bytes = layout.nbytes
        total = in_bytes + out_bytes
        attrs = ctx.device.get_attributes()
        l2 = int(attrs.get(cuda.device_attribute.L2_CACHE_SIZE, 50 << 20))
        clock_hz = float(attrs[cuda.device_attribute.CLOCK_RATE]) * 1e3
        sets = max(2, min(64, -(-4 * l2 // total)))

        rng = np.random.default_rng()
        host = rng.integers(0, 256, in_bytes, dtype=np.uint8)
        inputs = [cuda.to_device(host) for _ in range(sets)]
        outputs = [cuda.mem_alloc(out_bytes) for _ in range(sets)]
        half = total // 2
        copy_src = [cuda.mem_alloc(half) for _ in range(sets)]
        copy_dst = [cuda.mem_alloc(half) for _ in range(sets)]
        for buf in copy_src:
            cuda.memcpy_htod(buf, host[: min(half, in_bytes)])
        stream = cuda.Stream()

        def run_kernel(i: int) -> None:
            src, dst = int(inputs[i % sets]), int(outputs[i % sets])
            if source == "nv12":
                k.preprocess_nv12(
                    src, width, src + width * height, width, width, height, dst, layout, stream
                )
            else:
                k.preprocess_bgr(src, width * 3, width, height, dst, layout, stream)

        def run_copy(i: int) -> None:
            cuda.memcpy_dtod_async(copy_dst[i % sets], copy_src[i % sets], half, stream)

        kernel_ms, starved_k = _timed_batches(
            cuda, k, stream, run_kernel, repeats=repeats, batch=batch, clock_hz=clock_hz
        )
        copy_ms, starved_c = _timed_batches(
            cuda, k, stream, run_copy, repeats=repeats, batch=batch, clock_hz=clock_hz
        )

        big = 1 << 30
        peak_src, peak_dst = cuda.mem_alloc(big), cuda.mem_alloc(big)
        cuda.memset_d8(peak_src, 0x5A, big)

        def run_peak(_: int) -> None:
            cuda.memcpy_dtod_async(peak_dst, peak_src, big, stream)

        peak_ms, _ = _timed_batches(
            cuda, k, stream, run_peak, repeats=10, batch=5, clock_hz=clock_hz, warmup=2
        )
        for buf in (*inputs, *outputs, *copy_src, *copy_dst, peak_src, peak_dst):
            buf.free()

    k_ms, c_ms, p_ms = (statistics.median(v) for v in (kernel_ms, copy_ms, peak_ms))
    kernel_gbps = total / (k_ms * 1e-3) / 1e9
    copy_gbps = 2 * half / (c_ms * 1e-3) / 1e9
    return {
        "source": source,
        "width": width,
        "height": height,
        "input_h": layout.input_h,
        "input_w": layout.input_w,
        "dtype": dtype,
        "bytes_read": in_bytes,
        "bytes_written": out_bytes,
        "bytes_total": total,
        "kernel_us": k_ms * 1e3,
        "copy_us": c_ms * 1e3,
        "kernel_gbps": kernel_gbps,
        "copy_gbps": copy_gbps,
        "ratio": kernel_gbps / copy_gbps,
        "peak_copy_gbps": 2 * big / (p_ms * 1e-3) / 1e9,
        "buffers": sets,
        "l2_bytes": l2,
        "batches_starved": starved_k + starved_c,
        "repeats": repeats,
        "device": ctx.properties.name,
        "kernels_origin": ", ".join(f"{n}: {o}" for n, o in sorted(k.origin.items())),
    }
