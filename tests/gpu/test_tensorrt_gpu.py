"""The TensorRT backend on a GPU whose installed TensorRT flavour runs it: TensorRT 10/11
anywhere, TensorRT-RTX on RTX GPUs. Skipped, with the reason, where none does (the H200
with TensorRT-RTX: test_tensorrt_rtx_gpu.py tests the refusal and the fallback there)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from framelens.core.gpu.context import GpuContext
from framelens.core.models.catalog import resolve_model
from framelens.core.stages.engines.onnxruntime_cpu import OnnxRuntimeEngine
from framelens.core.stages.preprocess.cpu import Preprocessor
from framelens.core.stages.sources.file import FileSource
from framelens.core.stages.tasks.detect.agreement import AgreementTotals
from test_gpu_pipeline import detections_by_frame

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4")


@pytest.fixture(scope="module")
def trt(gpu_ctx: GpuContext) -> Any:
    from framelens.core.stages.engines.tensorrt_flavour import flavour_for_gpu

    flavour, reason = flavour_for_gpu(gpu_ctx.properties.compute_capability)
    if flavour is None:
        pytest.skip(reason or "no TensorRT flavour runs this GPU")
    return flavour.module


def test_engine_is_built_once_cached_and_equals_onnx_runtime(
    trt: Any, gpu_ctx: GpuContext, tmp_path: Path
) -> None:
    from framelens.core.stages.engines.tensorrt import TensorRtEngine

    spec = resolve_model("yolox-nano")
    with FileSource(SAMPLE) as source:
        source.seek(300)
        frame = source.read()
    assert frame is not None
    tensor = Preprocessor(spec, frame.width, frame.height)(frame.image).copy()
    first = TensorRtEngine(spec.path, gpu_ctx, spec=spec, cache_dir=tmp_path)
    try:
        assert first.built
        (got,) = first.infer(tensor)
    finally:
        first.close()
    again = TensorRtEngine(spec.path, gpu_ctx, spec=spec, cache_dir=tmp_path)
    try:
        assert not again.built  # the plan came from the cache
        (cached,) = again.infer(tensor)
    finally:
        again.close()
    with OnnxRuntimeEngine(spec.path, threads=2) as cpu:
        (want,) = cpu.infer(tensor)
    scale = float(np.abs(want).max())
    worst = float(np.abs(got - want).max())
    print(f"TensorRT fp32 vs ONNX Runtime CPU: max |diff| {worst:.3g} of {scale:.3g}")
    assert worst <= 1e-2 * scale  # TF32 may be on in TensorRT's fp32 convolutions
    assert np.array_equal(got, cached)
    # a static shape on TensorRT-RTX replays as one CUDA graph; the same numbers each call
    if first.cuda_graphs:
        print("TensorRT-RTX: whole-graph CUDA graph capture on")


def test_a_static_engine_replays_as_a_cuda_graph_where_the_flavour_can(
    trt: Any, gpu_ctx: GpuContext, tmp_path: Path
) -> None:
    """TensorRT-RTX (runtime config, WHOLE_GRAPH_CAPTURE) captures a static-shape
    engine once and replays it: the results of repeated calls on new inputs equal the
    uncaptured first call's. TensorRT 10/11 have no such switch (cuda_graphs False)."""
    from framelens.core.stages.engines.tensorrt import TensorRtEngine

    spec = resolve_model("yolox-nano")
    rng = np.random.default_rng(3)
    inputs = [rng.random((1, 3, 416, 416), dtype=np.float32) for _ in range(4)]
    engine = TensorRtEngine(spec.path, gpu_ctx, spec=spec, cache_dir=tmp_path)
    try:
        expect_graphs = hasattr(trt, "CudaGraphStrategy")
        assert engine.cuda_graphs == expect_graphs
        first = [engine.infer(x)[0] for x in inputs]
        again = [engine.infer(x)[0] for x in inputs]  # replays
    finally:
        engine.close()
    for a, b in zip(first, again, strict=True):
        assert np.array_equal(a, b)
    assert not np.array_equal(first[0], first[1])  # each call saw its own input


def test_gpu_pipeline_on_tensorrt_detects_what_the_cpu_pipeline_detects(
    trt: Any, gpu_ctx: GpuContext
) -> None:
    cpu = detections_by_frame("cpu", 120)
    gpu = detections_by_frame("cuda:0", 120, backend="tensorrt")
    totals = AgreementTotals()
    for index in range(120):
        totals.add_frame(cpu[index], gpu[index])
    print(f"TensorRT GPU pipeline vs CPU: {totals.as_dict()}")
    assert totals.f1 >= 0.98
