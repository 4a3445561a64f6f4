"""Batches on ONNX Runtime's CUDA provider through IOBinding on device buffers.

Real frames preprocessed on the CPU (core.preprocess), uploaded as one contiguous
(N, 3, H, W) batch with pycuda: batches of 1, 3 and 8 (and 3 and 1 again, after the
output buffers grew) must be one ``run_with_iobinding`` each and give every frame what
it gets alone. YOLOX-Nano's batch variant has outputs whose only dynamic dim is the
batch (bound to our own buffers, grown to the batch); YuNet's outputs have other
dynamic dims too (allocated by ONNX Runtime): both ways are covered.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from framelens.core.errors import EngineError, ModelError
from framelens.core.geometry import Letterbox
from framelens.core.gpu.context import GpuContext
from framelens.core.models.catalog import resolve_model
from framelens.core.models.spec import ModelSpec
from framelens.core.precision.batch import batch_variant
from framelens.core.stages.engines.base import DeviceEngine
from framelens.core.stages.engines.onnxruntime_cpu import OnnxRuntimeEngine
from framelens.core.stages.engines.onnxruntime_cuda import OnnxRuntimeCudaEngine
from framelens.core.stages.preprocess.cpu import Preprocessor
from framelens.core.stages.sources.file import FileSource
from framelens.core.stages.tasks.detect.decoders import make_decoder
from framelens.core.types import Detections, Image

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
FRAMES = (0, 240, 290, 300, 315, 330, 345, 420)
BATCHES = (1, 3, 8, 3, 1)  # growing, then smaller batches in the grown buffers
CONF, IOU = 0.25, 0.45
FULL_FP32 = {"use_tf32": "0"}  # as tests/gpu/test_engine_device.py: no TF32 drift

F32 = npt.NDArray[np.float32]


@pytest.fixture(scope="module")
def images() -> list[Image]:
    found: dict[int, Image] = {}
    with FileSource(SAMPLE) as src:
        for frame in src:
            if frame.index in FRAMES:
                found[frame.index] = frame.image.copy()
            if len(found) == len(FRAMES):
                break
    assert len(found) == len(FRAMES)
    return [found[i] for i in FRAMES]


@pytest.fixture(scope="module")
def cuda_provider() -> None:
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip(f"this ONNX Runtime has no CUDA provider ({ort.get_available_providers()})")


def cuda_engine(path: Path, ctx: GpuContext, stream: Any) -> OnnxRuntimeCudaEngine:
    """A CUDA engine in full fp32 when this ONNX Runtime knows the option, else default."""
    try:
        return OnnxRuntimeCudaEngine(path, ctx, stream, cuda_options=FULL_FP32)
    except (EngineError, ModelError) as exc:
        if "tf32" not in str(exc).lower():
            raise
    return OnnxRuntimeCudaEngine(path, ctx, stream)


class DeviceBatches:
    """Host batches copied to device allocations of their own, freed at the end."""

    def __init__(self, ctx: GpuContext) -> None:
        self.ctx = ctx
        self._allocs: list[Any] = []

    def upload(self, batch: F32) -> int:
        import pycuda.driver as cuda

        host = np.ascontiguousarray(batch)
        with self.ctx.active():
            alloc = cuda.mem_alloc(host.nbytes)
            cuda.memcpy_htod(alloc, host)
        self._allocs.append(alloc)
        return int(alloc)

    def free(self) -> None:
        with self.ctx.active():
            for alloc in self._allocs:
                alloc.free()
        self._allocs = []


@pytest.fixture
def device_batches(gpu_ctx: GpuContext) -> Iterator[DeviceBatches]:
    made = DeviceBatches(gpu_ctx)
    yield made
    made.free()


class CountedRuns:
    """Counts ``run_with_iobinding`` calls by wrapping the session's bound method (an
    observation: the run itself is ONNX Runtime's)."""

    def __init__(self, engine: OnnxRuntimeCudaEngine) -> None:
        session = engine._session
        real = session.run_with_iobinding
        self.calls = 0

        def run_with_iobinding(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return real(*args, **kwargs)

        session.run_with_iobinding = run_with_iobinding


def prepared(spec: ModelSpec, images: list[Image]) -> tuple[list[F32], list[Letterbox]]:
    h, w = images[0].shape[:2]
    pre = Preprocessor(spec, w, h)
    return [pre(image).copy() for image in images], [pre.geometry] * len(images)


def assert_same(got: Detections, want: Detections, where: str) -> None:
    assert len(got) == len(want), f"{where}: {len(got)} detections, alone {len(want)}"
    assert got.class_ids.tolist() == want.class_ids.tolist(), where
    np.testing.assert_allclose(got.boxes, want.boxes, rtol=0, atol=1e-3, err_msg=where)
    np.testing.assert_allclose(got.scores, want.scores, rtol=0, atol=1e-5, err_msg=where)
    if want.landmarks is not None:
        assert got.landmarks is not None, where
        np.testing.assert_allclose(got.landmarks, want.landmarks, rtol=0, atol=1e-3, err_msg=where)


def assert_close(got: npt.NDArray[Any], want: npt.NDArray[Any], rel: float, what: str) -> None:
    """Within ``rel`` of the output's own scale (max |want|, at least 1e-3)."""
    assert got.shape == want.shape and got.dtype == want.dtype, what
    scale = max(float(np.abs(want).max()), 1e-3)
    worst = float(np.abs(got.astype(np.float64) - want).max())
    assert worst <= rel * scale, f"{what}: off by {worst:.3g}, {worst / scale:.2e} of {scale:.3g}"


@pytest.mark.parametrize("model", ["yolox-nano", "yunet"])
def test_device_batches_equal_batch_1_frame_by_frame(
    gpu_ctx: GpuContext,
    gpu_stream: Any,
    cuda_provider: None,
    images: list[Image],
    device_batches: DeviceBatches,
    tmp_path: Path,
    model: str,
) -> None:
    import pycuda.driver as cuda

    spec = batch_variant(resolve_model(model), cache_dir=tmp_path)  # YuNet: itself
    tensors, geometries = prepared(spec, images)
    with (
        OnnxRuntimeEngine(spec.path, threads=2) as cpu,
        cuda_engine(spec.path, gpu_ctx, gpu_stream) as gpu,
    ):
        assert isinstance(gpu, DeviceEngine) and gpu.batch is None
        decode = make_decoder(spec, gpu.output_names)
        # the reference: batch 1 on the device, frame by frame (and the CPU agrees)
        alone: list[list[npt.NDArray[Any]]] = []
        want: list[Detections] = []
        for t, g in zip(tensors, geometries, strict=True):
            outs = gpu.infer_device(device_batches.upload(t), t.shape, t.dtype)
            alone.append([o.host.copy() for o in outs])
            want.append(decode(alone[-1], [g], CONF, IOU, None)[0])
            for got, ref in zip(alone[-1], cpu.infer(t), strict=True):
                assert_close(got, ref, 1e-3, f"{model} cuda vs cpu")
        assert sum(len(d) for d in want) > 0, f"{model}: nothing detected, a vacuous test"

        counted = CountedRuns(gpu)
        for n in BATCHES:
            calls_before = counted.calls
            for start in range(0, len(tensors), n):
                chunk = np.concatenate(tensors[start : start + n])
                k = len(chunk)
                before = counted.calls
                outs = gpu.infer_device(device_batches.upload(chunk), chunk.shape, chunk.dtype)
                assert counted.calls == before + 1, f"{model}: one run per batch of {k}"
                assert [o.name for o in outs] == gpu.output_names
                assert all(o.shape[0] == k and o.host.shape[0] == k for o in outs)
                got = decode([o.host for o in outs], geometries[start : start + n], CONF, IOU, None)
                for i in range(k):
                    frame = start + i
                    where = f"{model} batch {n} ({k}), frame {FRAMES[frame]}"
                    for out, ref in zip(outs, alone[frame], strict=True):
                        assert_close(out.host[i], ref[0], 1e-4, f"{where} {out.name}")
                    assert_same(got[i], want[frame], where)
                # the device copy of an output holds what its host copy holds
                back = np.empty_like(outs[0].host)
                with gpu_ctx.active():
                    cuda.memcpy_dtoh(back, outs[0].ptr)
                np.testing.assert_array_equal(back, outs[0].host)
            runs = counted.calls - calls_before
            assert runs == -(-len(tensors) // n), f"{model}: {runs} runs for batches of {n}"


def test_a_fixed_batch_graph_on_the_device_refuses_another_batch_in_one_line(
    gpu_ctx: GpuContext,
    gpu_stream: Any,
    cuda_provider: None,
    device_batches: DeviceBatches,
) -> None:
    spec = resolve_model("yolox-nano")  # the bundled graph: batch 1 only
    batch = np.zeros((3, 3, 416, 416), np.float32)
    ptr = device_batches.upload(batch)
    with cuda_engine(spec.path, gpu_ctx, gpu_stream) as gpu:
        assert gpu.batch == 1 and not gpu.accepts_batch(3)
        counted = CountedRuns(gpu)
        with pytest.raises(EngineError, match=r"fixed batch of 1 .* batch of 3") as err:
            gpu.infer_device(ptr, batch.shape, batch.dtype)
        assert "\n" not in str(err.value) and counted.calls == 0
        with pytest.raises(EngineError, match=r"fixed batch of 1 .* batch of 3"):
            gpu.infer(batch)
        (out,) = gpu.infer_device(ptr, (1, 3, 416, 416), np.float32)  # batch 1 still runs
        assert out.shape == (1, 3549, 85) and counted.calls == 1


def test_a_batch_of_frames_of_two_sizes_equals_each_size_alone(
    gpu_ctx: GpuContext, images: list[Image]
) -> None:
    """Several sources of different sizes in one run: the GPU pipeline takes a batch
    that mixes them (one engine call per size) and gives each frame what a batch of its
    own size gives it."""
    import cv2
    from framelens.core.models.catalog import DEFAULT_MODEL
    from framelens.core.pipeline import build
    from framelens.core.pipeline.settings import PipelineSettings
    from framelens.core.types import Frame, StageTimes

    small = [np.ascontiguousarray(cv2.resize(im, (640, 360))) for im in images[:4]]
    mixed = [images[4], small[0], images[5], small[1]]  # 768x432 and 640x360 in turns
    settings = PipelineSettings(resolve_model(DEFAULT_MODEL), device="cuda:0", batch=4)
    pipeline = build.gpu_pipelines(settings, 1)[0]
    try:
        together = pipeline.infer_batch(
            [Frame(im, i, 0.0, source_id=i % 2) for i, im in enumerate(mixed)],
            [StageTimes() for _ in mixed],
        )
        alone = [pipeline.infer(Frame(im, i, 0.0), StageTimes()) for i, im in enumerate(mixed)]
    finally:
        pipeline.close()
    assert [r.frame.source_id for r in together] == [0, 1, 0, 1]
    for a, b in zip(together, alone, strict=True):
        assert (a.frame.width, a.frame.height) == (b.frame.width, b.frame.height)
        assert len(a.output) == len(b.output)
        assert np.allclose(a.output.boxes, b.output.boxes, atol=0.05)
