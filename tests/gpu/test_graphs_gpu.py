"""ONNX Runtime's CUDA runs replayed as CUDA graphs (core/stages/engines/onnxruntime_graphs.py).

An engine with graphs must give what an engine without them gives, call after call,
with fresh inputs and with batch sizes interleaved (each its own graph); its capture
must not break a thread that makes CUDA calls meanwhile (the reason ONNX Runtime's own
global-mode capture was never used), and an engine whose stream waits for the NULL
stream must say why it takes no graphs.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from framelens.core.gpu.context import GpuContext
from framelens.core.models.catalog import resolve_model
from framelens.core.precision.batch import batch_variant
from framelens.core.stages.engines.onnxruntime_cuda import OnnxRuntimeCudaEngine
from framelens.core.stages.engines.onnxruntime_graphs import WARM_RUNS
from framelens.core.stages.tasks.detect.agreement import AgreementTotals
from graph_models import gemm_model

pytestmark = pytest.mark.gpu

FULL_FP32 = {"use_tf32": "0"}


@pytest.fixture(scope="module")
def cuda_provider() -> None:
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip(f"this ONNX Runtime has no CUDA provider ({ort.get_available_providers()})")


def stream(ctx: GpuContext, non_blocking: bool = True) -> Any:
    import pycuda.driver as cuda

    with ctx.active():
        return cuda.Stream(flags=1 if non_blocking else 0)


class Inputs:
    """Random batches uploaded to device allocations of their own."""

    def __init__(self, ctx: GpuContext) -> None:
        self.ctx = ctx
        self.rng = np.random.default_rng(7)
        self._allocs: list[Any] = []

    def make(self, n: int) -> tuple[npt.NDArray[np.float32], int]:
        import pycuda.driver as cuda

        host = self.rng.uniform(0, 255, (n, 3, 416, 416)).astype(np.float32)
        with self.ctx.active():
            alloc = cuda.mem_alloc(host.nbytes)
            cuda.memcpy_htod(alloc, host)
        # a copy from pageable memory may still be landing when the call returns, and the
        # engines' non-blocking streams do not wait for it
        self.ctx.synchronize()
        self._allocs.append(alloc)
        return host, int(alloc)

    def free(self) -> None:
        with self.ctx.active():
            for alloc in self._allocs:
                alloc.free()


def outputs(engine: OnnxRuntimeCudaEngine, ptr: int, shape: tuple[int, ...]) -> list[Any]:
    return [o.host.copy() for o in engine.infer_device(ptr, shape, np.float32)]


def test_replayed_runs_equal_plain_runs_call_after_call(
    gpu_ctx: GpuContext, cuda_provider: None, tmp_path: Path
) -> None:
    """YOLOX-Nano's batch variant, batch sizes 1, 3 and 8 interleaved over many calls with
    fresh inputs: every call of the engine with graphs equals the engine without, and
    once each size was seen WARM_RUNS times, it is replayed."""
    spec = batch_variant(resolve_model("yolox-nano"), cache_dir=tmp_path)
    inputs = Inputs(gpu_ctx)
    sizes = [1, 3, 8, 1, 3, 1, 8, 3, 1, 1, 8, 3] * 2
    try:
        with (
            OnnxRuntimeCudaEngine(
                spec.path, gpu_ctx, stream(gpu_ctx), cuda_options=FULL_FP32, graphs=True
            ) as graphed,
            OnnxRuntimeCudaEngine(
                spec.path, gpu_ctx, stream(gpu_ctx), cuda_options=FULL_FP32
            ) as plain,
        ):
            assert graphed.graphs_why_not is None
            assert plain.graphs_why_not == "off"
            for call, n in enumerate(sizes):
                host, ptr = inputs.make(n)
                shape = host.shape
                got, want = outputs(graphed, ptr, shape), outputs(plain, ptr, shape)
                for g, w in zip(got, want, strict=True):
                    assert g.shape == w.shape
                    scale = max(float(np.abs(w).max()), 1e-3)
                    worst = float(np.abs(g.astype(np.float64) - w).max())
                    assert worst <= 1e-4 * scale, f"call {call} (batch {n}): off by {worst:.3g}"
                assert graphed.graphs_why_not is None, graphed.graphs_why_not
            assert set(graphed.graph_shapes) == {(n, 3, 416, 416) for n in (1, 3, 8)}
            assert sizes.count(1) > WARM_RUNS  # each size did get past its plain runs
    finally:
        inputs.free()


@pytest.mark.parametrize("graphs", [True, False], ids=["graphs", "no-graphs"])
def test_captures_do_not_break_the_decoders_and_pools_beside_them(
    gpu_ctx: GpuContext, cuda_provider: None, graphs: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """While engines make their first runs (and, with graphs, their captures), two threads
    do what the product's other threads do: one decodes the sample through NVDEC (the GPU
    source, looping), one makes a device pool, copies into it from the host and closes it
    (a context-wide wait). None of their calls fails, no process dies, and every engine's
    graphs are captured all the same. Graphs off too: ONNX Runtime's first runs capture a
    stream of their own (cuDNN, most likely), and before the pools' waits were kept apart from
    ONNX Runtime's runs (core/gpu/graphs.py, SYNC_GATE) this killed the process on the
    H200 (a segfault in cuCtxSynchronize), graphs on or off."""
    import pycuda.driver as cuda
    from framelens.core.gpu.buffers import DevicePool
    from framelens.core.stages.sources.nvdec import open_gpu_source

    spec = resolve_model("yolox-nano")
    sample = Path(__file__).resolve().parents[2] / "resources" / "samples"
    video = sample / "one-by-one-person-detection.mp4"
    inputs = Inputs(gpu_ctx)
    stop = threading.Event()
    failures: list[str] = []
    counts = {"decoded": 0, "pools": 0}

    def decode() -> None:
        try:
            while not stop.is_set():
                with open_gpu_source(video, gpu_ctx, stream(gpu_ctx, non_blocking=False)) as src:
                    for frame in src:
                        with frame:
                            frame.ready.synchronize()
                        counts["decoded"] += 1
                        if stop.is_set():
                            return
        except Exception as exc:
            failures.append(f"decoder: {exc}")

    def pools() -> None:
        host = np.ones(1 << 20, np.uint8)
        try:
            while not stop.is_set():
                pool = DevicePool.linear(gpu_ctx, host.nbytes, 2, kind="busy")
                with gpu_ctx.active():
                    cuda.memcpy_htod(pool.buffers[0].ptr, host)
                pool.close()
                counts["pools"] += 1
        except Exception as exc:
            failures.append(f"pools: {exc}")

    threads = [threading.Thread(target=t, daemon=True) for t in (decode, pools)]
    for thread in threads:
        thread.start()
    try:
        for _ in range(3):  # fresh engines: several captures while the threads run
            with OnnxRuntimeCudaEngine(
                spec.path, gpu_ctx, stream(gpu_ctx), graphs=graphs
            ) as engine:
                for _ in range(WARM_RUNS + 3):
                    host, ptr = inputs.make(1)
                    outputs(engine, ptr, host.shape)
                if graphs:
                    assert engine.graphs_why_not is None, engine.graphs_why_not
                    assert engine.graph_shapes == ((1, 3, 416, 416),)
    finally:
        stop.set()
        for thread in threads:
            thread.join(20)
        inputs.free()
    assert not any(t.is_alive() for t in threads), "a decoder or pool thread hangs"
    assert not failures, failures[0]
    assert counts["decoded"] > 10 and counts["pools"] > 10, counts
    # a pool's failed wait or free is logged, not raised (the caller goes on): none here
    failed = [
        r.getMessage()
        for r in caplog.records
        if r.name == "framelens.core.gpu.buffers" and r.levelno >= logging.WARNING
    ]
    assert not failed, failed[0]


def test_an_engine_on_a_blocking_stream_takes_no_graphs_and_says_why(
    gpu_ctx: GpuContext, cuda_provider: None
) -> None:
    spec = resolve_model("yolox-nano")
    inputs = Inputs(gpu_ctx)
    try:
        with OnnxRuntimeCudaEngine(
            spec.path, gpu_ctx, stream(gpu_ctx, non_blocking=False), graphs=True
        ) as engine:
            assert engine.graphs_why_not is not None
            assert "NULL stream" in engine.graphs_why_not
            for _ in range(WARM_RUNS + 2):
                host, ptr = inputs.make(1)
                outputs(engine, ptr, host.shape)
            assert engine.graph_shapes == ()
    finally:
        inputs.free()


def test_the_gpu_pipeline_detects_the_same_with_graphs_as_without(
    cuda_provider: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`framelens run`'s GPU pipeline on the bundled sample's first 90 frames: with
    FRAMELENS_CUDA_GRAPHS=1 the plan says CUDA graphs, and every frame's detections equal
    those of a run with FRAMELENS_CUDA_GRAPHS=0."""
    from framelens.core.pipeline import build
    from framelens.core.pipeline.settings import PipelineSettings

    settings = PipelineSettings(resolve_model("yolox-nano"), device="cuda:0")
    monkeypatch.setenv("FRAMELENS_CUDA_GRAPHS", "1")
    planned = build.plan(settings)
    assert planned.engine is not None and "CUDA graphs" in planned.engine.value
    runs = {}
    for flag in ("1", "0"):
        monkeypatch.setenv("FRAMELENS_CUDA_GRAPHS", flag)
        runs[flag] = _detections(settings, 90)
    assert sum(len(d) for d in runs["0"].values()) > 20
    assert sorted(runs["1"]) == sorted(runs["0"]) == list(range(90))
    totals = AgreementTotals()  # as test_gpu_pipeline: a borderline score may flip
    for index, want in runs["0"].items():
        totals.add_frame(want, runs["1"][index])
    assert totals.f1 >= 0.99, totals.as_dict()
    assert totals.mean_iou >= 0.99, totals.as_dict()


def _detections(settings: Any, frames: int) -> dict[int, Any]:
    from framelens.core.sessions.session import Session, SessionOptions

    sample = Path(__file__).resolve().parents[2] / "resources" / "samples"
    options = SessionOptions(draw="none", pixels=False, frames=frames)
    got = {}
    with Session(
        [str(sample / "one-by-one-person-detection.mp4")], settings, options=options
    ) as session:
        for result in session.results():
            got[result.frame.index] = result.output
        assert session.path.startswith("gpu pipeline"), session.path
    return got


def test_a_conv_without_bias_before_relu_replays_right_after_other_shapes(
    gpu_ctx: GpuContext, cuda_provider: None, tmp_path: Path
) -> None:
    """ONNX Runtime fuses such a pair and reallocates a buffer of the fused kernel when
    the input's shape changes, which a graph of the earlier shape would still read:
    batches of 1 and 2 alternated, long after both were captured, equal plain runs."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    weight = numpy_helper.from_array(rng.normal(size=(8, 3, 3, 3)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["y"])],
        "conv_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 416, 416])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8, 416, 416])],
        [weight],
    )  # fmt: skip
    path = tmp_path / "conv_relu.onnx"
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path
    )
    inputs = Inputs(gpu_ctx)
    try:
        with (
            OnnxRuntimeCudaEngine(
                path, gpu_ctx, stream(gpu_ctx), cuda_options=FULL_FP32, graphs=True
            ) as graphed,
            OnnxRuntimeCudaEngine(path, gpu_ctx, stream(gpu_ctx), cuda_options=FULL_FP32) as plain,
        ):
            for call, n in enumerate([1, 2] * 8):
                host, ptr = inputs.make(n)
                got, want = outputs(graphed, ptr, host.shape), outputs(plain, ptr, host.shape)
                scale = max(float(np.abs(want[0]).max()), 1e-3)
                worst = float(np.abs(got[0].astype(np.float64) - want[0]).max())
                assert worst <= 1e-4 * scale, f"call {call} (batch {n}): off by {worst:.3g}"
            assert graphed.graphs_why_not is None, graphed.graphs_why_not
            assert set(graphed.graph_shapes) == {(1, 3, 416, 416), (2, 3, 416, 416)}
    finally:
        inputs.free()


def test_a_model_with_gemm_gets_no_graphs_and_says_why(
    gpu_ctx: GpuContext, cuda_provider: None, tmp_path: Path
) -> None:
    """Gemm's kernel regrows a buffer of ones for a larger batch, which a graph of a
    smaller batch would read freed: such a model runs plain, and the engine says why."""
    path = gemm_model(tmp_path / "gemm.onnx")
    with OnnxRuntimeCudaEngine(path, gpu_ctx, stream(gpu_ctx), graphs=True) as engine:
        assert engine.graphs_why_not is not None and "Gemm" in engine.graphs_why_not
