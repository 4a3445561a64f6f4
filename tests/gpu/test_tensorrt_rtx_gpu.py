"""TensorRT-RTX on the H200: as far as it goes there, and what FrameLens does after.

TensorRT-RTX builds plans for RTX compute capabilities (7.5 .. 12.x); the H200 is 9.0.
On it: a plan built ahead of time for an RTX target is refused by the runtime (the
deserialization), FrameLens says so in one line before trying, and a run asked for
TensorRT goes on with ONNX Runtime CUDA on the GPU pipeline. Where the GPU is an RTX
one, these tests skip and test_tensorrt_gpu.py runs the engines.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from framelens.core.errors import EngineError
from framelens.core.gpu.context import GpuContext
from framelens.core.models.catalog import resolve_model
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.runs import run_to_outputs
from framelens.core.stages.engines.tensorrt_flavour import installed_flavours

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4")


@pytest.fixture(scope="module")
def refused(gpu_ctx: GpuContext) -> str:
    rtx = next((f for f in installed_flavours() if f.name == "tensorrt-rtx"), None)
    if rtx is None:
        pytest.skip("tensorrt-rtx is not installed here (carry .device/trtx0, trtx1)")
    reason = rtx.cannot_run(gpu_ctx.properties.compute_capability)
    if reason is None:
        pytest.skip(f"TensorRT-RTX runs on {gpu_ctx.properties.name}: test_tensorrt_gpu.py")
    return reason


def test_the_runtime_refuses_an_rtx_plan_and_framelens_says_so_first(
    refused: str, gpu_ctx: GpuContext, tmp_path: Path
) -> None:
    from framelens.core.stages.engines.tensorrt import TensorRtEngine
    from framelens.core.stages.engines.tensorrt_build import logger_for
    from framelens.core.stages.engines.tensorrt_flavour import import_flavour
    from framelens.core.stages.engines.tensorrt_plans import BuildFor, cached_plan

    rtx = import_flavour("tensorrt-rtx")
    spec = resolve_model("yolox-nano")
    plan, _, built, _ = cached_plan(
        rtx, spec.path, BuildFor(("sm_86", "sm_89")), "fp32", spec, cache_dir=tmp_path
    )
    assert built and len(plan) > 100_000
    log = logger_for(rtx.module)
    del log.errors[:]
    with gpu_ctx.active():
        engine = rtx.module.Runtime(log).deserialize_cuda_engine(plan)
    print(f"TensorRT-RTX deserialization on {gpu_ctx.properties.name}: {log.errors}")
    assert engine is None  # what TensorRT-RTX itself does on compute capability 9.0
    assert log.errors
    with pytest.raises(EngineError) as err:
        TensorRtEngine(spec.path, gpu_ctx, spec=spec, cache_dir=tmp_path)
    assert str(err.value) == refused and "\n" not in refused
    print(f"FrameLens: {refused}")


def test_a_tensorrt_run_goes_on_with_onnxruntime_cuda_and_says_why(
    refused: str, gpu_ctx: GpuContext
) -> None:
    notes: list[str] = []
    summary = run_to_outputs(
        SAMPLE,
        PipelineSettings(resolve_model("yolox-nano"), device="cuda:0", backend="tensorrt"),
        frames=60,
        progress=False,
        on_message=notes.append,
    )
    print(summary.path, notes)
    assert summary.frames == 60
    assert summary.path.startswith("gpu pipeline")
    assert summary.backend == "onnxruntime"
    assert [n for n in notes if n.startswith("TensorRT not used")] == [
        f"TensorRT not used ({refused}); running ONNX Runtime CUDA"
    ]
