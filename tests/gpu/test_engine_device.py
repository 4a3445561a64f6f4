"""ONNX Runtime's CUDA provider on device buffers (IOBinding) against the CPU provider.

The input tensors are real frames preprocessed on the CPU (core.preprocess) and uploaded
with pycuda, so the only difference from the CPU run is where the model runs.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from framelens.core.errors import EngineError, GpuError, ModelError
from framelens.core.gpu.context import GpuContext
from framelens.core.models.catalog import resolve_model
from framelens.core.stages.engines.onnxruntime_cpu import OnnxRuntimeEngine
from framelens.core.stages.engines.onnxruntime_cuda import OnnxRuntimeCudaEngine
from framelens.core.stages.preprocess.cpu import Preprocessor
from framelens.core.stages.sources.file import FileSource
from framelens.core.stages.tasks.detect.agreement import AgreementTotals
from framelens.core.stages.tasks.detect.decoders import make_decoder
from framelens.core.types import Image

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
FRAMES = (0, 300, 330)  # empty street, a person walking, the person facing the camera
MiB = 1 << 20
CYCLES = int(os.environ.get("FRAMELENS_LEAK_CYCLES", "200"))
ENGINE_CYCLES = int(os.environ.get("FRAMELENS_ENGINE_CYCLES", "20"))
# TF32 would trade the 1e-3 agreement for speed; this asks cuDNN/cuBLAS for full fp32.
FULL_FP32 = {"use_tf32": "0"}


@pytest.fixture(scope="module")
def images() -> dict[int, Image]:
    found: dict[int, Image] = {}
    with FileSource(SAMPLE) as src:
        for frame in src:
            if frame.index in FRAMES:
                found[frame.index] = frame.image
            if len(found) == len(FRAMES):
                break
    return found


@pytest.fixture(scope="module")
def cuda_provider() -> None:
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip(f"this ONNX Runtime has no CUDA provider ({ort.get_available_providers()})")


def cuda_engine(path: Path, ctx: GpuContext, stream: Any, **kwargs: Any) -> OnnxRuntimeCudaEngine:
    """A CUDA engine in full fp32 when this ONNX Runtime knows the option, else default."""
    try:
        return OnnxRuntimeCudaEngine(path, ctx, stream, cuda_options=FULL_FP32, **kwargs)
    except (EngineError, ModelError) as exc:
        if "tf32" not in str(exc).lower():
            raise
    return OnnxRuntimeCudaEngine(path, ctx, stream, **kwargs)


class Uploaded:
    """A host tensor copied to a fresh device allocation (freed by ``free``)."""

    def __init__(self, ctx: GpuContext, tensor: npt.NDArray[Any], stream: Any = None) -> None:
        import pycuda.driver as cuda

        self.ctx, self.shape, self.dtype = ctx, tensor.shape, tensor.dtype
        self._host = np.ascontiguousarray(tensor)
        with ctx.active():
            self.alloc = cuda.mem_alloc(self._host.nbytes)
            if stream is None:
                cuda.memcpy_htod(self.alloc, self._host)
            else:
                self._pinned = cuda.pagelocked_empty(self._host.shape, self._host.dtype)
                self._pinned[...] = self._host
                cuda.memcpy_htod_async(self.alloc, self._pinned, stream)

    @property
    def ptr(self) -> int:
        return int(self.alloc)

    def free(self) -> None:
        with self.ctx.active():
            self.alloc.free()


@pytest.fixture
def uploads(gpu_ctx: GpuContext) -> Iterator[list[Uploaded]]:
    made: list[Uploaded] = []
    yield made
    for u in made:
        u.free()


def assert_close(got: npt.NDArray[Any], want: npt.NDArray[Any], rel: float, what: str) -> None:
    """Every value within ``rel`` of the output's own scale (max |want|, at least 1e-3).

    The floor matters for outputs that are all near zero (YuNet's objectness at one
    stride peaks at ~7e-5 on a frame): there CUDA and CPU differ by float32 rounding
    (~1e-7 absolute), which is no disagreement for a score.
    """
    assert got.shape == want.shape and got.dtype == want.dtype, what
    scale = max(float(np.abs(want).max()), 1e-3)
    worst = float(np.abs(got.astype(np.float64) - want).max())
    assert worst <= rel * scale, f"{what}: off by {worst:.3g}, {worst / scale:.2e} of {scale:.3g}"


@pytest.mark.parametrize("model", ["yolox-nano", "yunet"])
def test_device_inference_equals_cpu_inference(
    gpu_ctx: GpuContext,
    gpu_stream: Any,
    cuda_provider: None,
    images: dict[int, Image],
    uploads: list[Uploaded],
    model: str,
) -> None:
    spec = resolve_model(model)
    image0 = images[FRAMES[0]]
    pre = Preprocessor(spec, image0.shape[1], image0.shape[0])
    with (
        OnnxRuntimeEngine(spec.path, threads=2) as cpu,
        cuda_engine(spec.path, gpu_ctx, gpu_stream) as gpu,
    ):
        assert gpu.providers[0] == "CUDAExecutionProvider"
        assert gpu.input_dtype == np.float32
        for index in FRAMES:
            tensor = pre(images[index]).copy()
            want = cpu.infer(tensor)
            uploads.append(Uploaded(gpu_ctx, tensor))
            got = gpu.infer_device(uploads[-1].ptr, tensor.shape, tensor.dtype)
            assert [o.name for o in got] == cpu.output_names
            for out, ref in zip(got, want, strict=True):
                assert_close(out.host, ref, 1e-3, f"{model} frame {index} {out.name}")
            # numpy in/out on the same engine still works, and agrees
            for out, ref in zip(gpu.infer(tensor), want, strict=True):
                assert_close(out, ref, 1e-3, f"{model} frame {index} numpy")


def test_input_written_on_another_stream(
    gpu_ctx: GpuContext,
    gpu_stream: Any,
    cuda_provider: None,
    images: dict[int, Image],
    uploads: list[Uploaded],
) -> None:
    import pycuda.driver as cuda

    spec = resolve_model("yolox-nano")
    image = images[300]
    tensor = Preprocessor(spec, image.shape[1], image.shape[0])(image).copy()
    with gpu_ctx.active():
        other = cuda.Stream()
    with (
        OnnxRuntimeEngine(spec.path, threads=2) as cpu,
        cuda_engine(spec.path, gpu_ctx, gpu_stream) as gpu,
    ):
        (want,) = cpu.infer(tensor)
        uploads.append(Uploaded(gpu_ctx, tensor, stream=other))
        (got,) = gpu.infer_device(uploads[-1].ptr, tensor.shape, np.float32, stream=other)
        assert_close(got.host, want, 1e-3, "input from another stream")
        # the device copy of the output is readable on the caller's stream
        back = np.empty_like(want)
        with gpu_ctx.active():
            cuda.memcpy_dtoh_async(back, got.ptr, other)
            other.synchronize()
        np.testing.assert_array_equal(back, got.host)


def test_fp16_graph_takes_fp16_input(
    gpu_ctx: GpuContext,
    gpu_stream: Any,
    cuda_provider: None,
    images: dict[int, Image],
    uploads: list[Uploaded],
    tmp_path: Path,
) -> None:
    float16 = pytest.importorskip("onnxconverter_common.float16")
    import onnx

    spec = resolve_model("yolox-nano")
    fp16 = tmp_path / "yolox_fp16_io.onnx"
    onnx.save(float16.convert_float_to_float16(onnx.load(spec.path), keep_io_types=False), fp16)
    decode = make_decoder(spec)
    with (
        OnnxRuntimeEngine(spec.path, threads=2) as cpu,
        cuda_engine(fp16, gpu_ctx, gpu_stream) as gpu,
    ):
        assert gpu.input_dtype == np.float16
        totals = AgreementTotals()
        worst_score = 0.0
        for index, image in sorted(images.items()):
            prep = Preprocessor(spec, image.shape[1], image.shape[0])
            tensor = prep(image).copy()
            half = tensor.astype(np.float16)
            uploads.append(Uploaded(gpu_ctx, half))
            with pytest.raises(EngineError, match="takes float16 input"):
                gpu.infer_device(uploads[-1].ptr, tensor.shape, np.float32)
            (got,) = gpu.infer_device(uploads[-1].ptr, half.shape, np.float16)
            (want,) = cpu.infer(tensor)
            assert got.dtype == np.float16 and got.host.shape == want.shape
            raw = float(np.abs(got.host.astype(np.float32) - want).max())
            # fp16 arithmetic moves raw outputs (tensor cores, fp16 accumulation): what
            # must hold is that the detections are those of the fp32 model
            ours = decode([got.host.astype(np.float32)], [prep.geometry], 0.3, 0.45, None)[0]
            ref = decode([want], [prep.geometry], 0.3, 0.45, None)[0]
            match = totals.add_frame(ref, ours)
            worst_score = max(worst_score, *match.score_diffs, 0.0)
            print(f"fp16 on cuda, frame {index}: raw max |diff| {raw:.3g}, {match}")
        print(f"fp16 on cuda vs fp32 on cpu: {totals.as_dict()}")
        assert totals.tp > 0 and totals.f1 == 1.0
        assert worst_score < 0.05


def test_misuse_is_a_one_line_engine_error(
    gpu_ctx: GpuContext, gpu_stream: Any, cuda_provider: None, uploads: list[Uploaded]
) -> None:
    spec = resolve_model("yolox-nano")
    tensor = np.zeros((1, 3, 416, 416), np.float32)
    uploads.append(Uploaded(gpu_ctx, tensor))
    gpu = cuda_engine(spec.path, gpu_ctx, gpu_stream)
    with pytest.raises(EngineError, match=r"^input shape \(1, 3, 320, 320\) does not fit"):
        gpu.infer_device(uploads[-1].ptr, (1, 3, 320, 320), np.float32)
    with pytest.raises(EngineError, match="takes float32 input") as info:
        gpu.infer_device(uploads[-1].ptr, tensor.shape, np.float16)
    assert "\n" not in str(info.value)
    gpu.close()
    gpu.close()
    with pytest.raises(EngineError, match="closed"):
        gpu.infer_device(uploads[-1].ptr, tensor.shape, np.float32)
    with pytest.raises(ModelError, match="does not exist"):
        OnnxRuntimeCudaEngine(ROOT / "nope.onnx", gpu_ctx, gpu_stream)


def test_the_cuda_provider_running_out_of_memory_is_a_gpu_error(cuda_provider: None) -> None:
    """ONNX Runtime's CUDA provider on host frames (the path when the GPU pipeline cannot
    run) out of memory mid-run: a GpuError, so that a run goes on on the CPU, rather
    than an EngineError that ends it. The arena is capped at 64 MiB; YuNet (dynamic
    shapes, 0.3 MB of weights) loads in that and a batch of 16 at 1024x1024 needs far
    more. A frame of it runs on the CPU: it is the GPU that failed, not the input."""
    spec = resolve_model("yunet")
    tensor = np.zeros((16, 3, 1024, 1024), np.float32)
    capped = {"gpu_mem_limit": str(64 * MiB), **FULL_FP32}
    gpu = OnnxRuntimeEngine(spec.path, device="cuda", cuda_options=capped)
    try:
        with pytest.raises(GpuError, match=r"^inference failed: ") as info:
            gpu.infer(tensor)
        assert "\n" not in str(info.value)
    finally:
        gpu.close()
    with OnnxRuntimeEngine(spec.path) as cpu:
        assert cpu.infer(tensor[:1])[0].shape[0] == 1


def _settled(ctx: GpuContext) -> int:
    gc.collect()
    ctx.synchronize()
    return ctx.memory_used()


@pytest.mark.slow
def test_binding_cycles_leak_no_device_memory(
    gpu_ctx: GpuContext, gpu_stream: Any, cuda_provider: None, uploads: list[Uploaded]
) -> None:
    """``CYCLES`` times on one session: bind (output buffers, page-locked staging), run,
    close. Tolerance as in test_decode: 16 MiB for granularity and caches."""
    from framelens.core.stages.engines.onnxruntime_cuda import DeviceBinding

    spec = resolve_model("yunet")  # dynamic outputs: ORT-allocated and staged
    tensor = np.zeros((1, 3, 320, 320), np.float32)
    uploads.append(Uploaded(gpu_ctx, tensor))
    with cuda_engine(spec.path, gpu_ctx, gpu_stream) as gpu:
        session = gpu._session

        def cycle() -> None:
            binding = DeviceBinding(session, gpu_ctx, gpu_stream)
            binding.run(uploads[-1].ptr, tensor.shape, np.float32)
            binding.close()

        for _ in range(3):
            cycle()
        before = _settled(gpu_ctx)
        for _ in range(CYCLES):
            cycle()
        grown = _settled(gpu_ctx) - before
    assert grown <= 16 * MiB, f"{grown / MiB:.1f} MiB more after {CYCLES} binding cycles"


@pytest.mark.slow
def test_engine_cycles_leak_no_device_memory(
    gpu_ctx: GpuContext, gpu_stream: Any, cuda_provider: None, uploads: list[Uploaded]
) -> None:
    """``ENGINE_CYCLES`` (default 20: a cycle took 2.3 s on an H100 in 2026-12) times: create the
    CUDA engine, run once on the device, close. After 2 warm-up cycles (cuDNN/cuBLAS
    load once per process and keep their workspaces), closing a session must give its
    memory arena and output buffers back; 32 MiB tolerance for the libraries' caches,
    where a leaked arena (>= the 1.2 MB output, usually tens of MiB) per cycle shows."""
    spec = resolve_model("yolox-nano")
    tensor = np.zeros((1, 3, 416, 416), np.float32)
    uploads.append(Uploaded(gpu_ctx, tensor))

    def cycle() -> None:
        with cuda_engine(spec.path, gpu_ctx, gpu_stream) as gpu:
            gpu.infer_device(uploads[-1].ptr, tensor.shape, np.float32)

    for _ in range(2):
        cycle()
    before = _settled(gpu_ctx)
    for _ in range(ENGINE_CYCLES):
        cycle()
    grown = _settled(gpu_ctx) - before
    assert grown <= 32 * MiB, f"{grown / MiB:.1f} MiB more after {ENGINE_CYCLES} engine cycles"


@pytest.mark.parametrize(("precision", "tf32"), [("fp32", "0"), ("fp16", "1")])
def test_an_fp32_graph_keeps_fp32_and_an_fp16_graph_allows_tf32(
    gpu_ctx: GpuContext, precision: str, tf32: str
) -> None:
    """FP32 means FP32 (the agreement with the CPU above needs it); an FP16 graph gains
    nothing from forbidding TF32, and cuDNN then found no plan for ESRGAN's FP16
    convolutions (211 ms a call against 54, issue 29): the product's engines as built."""
    from framelens.core.models.catalog import DEFAULT_MODEL
    from framelens.core.pipeline import build
    from framelens.core.pipeline.settings import PipelineSettings

    settings = build.resolve(
        PipelineSettings(resolve_model(DEFAULT_MODEL), device="cuda:0", precision=precision)
    )
    pipeline = build.gpu_pipelines(settings, 1, resolved=True)[0]
    host = build.host_pipeline(settings, resolved=True)
    try:
        engines = [getattr(pipeline, "engine", None), getattr(host, "engine", None)]
        for engine in engines:
            assert isinstance(engine, OnnxRuntimeEngine), type(engine)
            assert engine.cuda_provider_options.get("use_tf32") == tf32
    finally:
        pipeline.close()
        host.close()
