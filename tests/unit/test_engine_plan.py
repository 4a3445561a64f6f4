"""The CUDA engine options a run is planned with (core/pipeline/engine_plan.py) and the INT8
super-resolution graph they are chosen for (core/precision/conv_check.py).

Issue 29: INT8 ESRGAN failed at warm-up on the H200 ("Conv node
'generator/F_1_1_1/BiasAdd_token_85' ... C: 64 kernel channels: 3"). The Q/DQ graph is
sound (the structural checks below hold on it, and ONNX Runtime's CPU runs it close to
FP32); ONNX Runtime's NHWC Conv on CUDA misreads a Q/DQ weight beside a constant float
bias, so the plan keeps such graphs in NCHW and says why. tests/gpu/test_superres_gpu.py
runs the same graph on the CUDA provider."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.models.spec import ModelSpec
from framelens.core.pipeline import build
from framelens.core.pipeline.engine_plan import CUDA_GRAPH_WHY
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.precision import CalibrationSettings, VariantInfo, prepare_variant
from framelens.core.precision.conv_check import conv_problems, conv_views, nhwc_misread_convs
from framelens.core.stages.tasks.superres.metrics import psnr
from media_factory import sample_frames
from onnx import numpy_helper
from onnx_factory import heavy_superres_model

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
ESRGAN = ROOT.parent / "shared" / "models" / "esrgan_thick_x2.onnx"
CALIBRATION = CalibrationSettings(frames=4, sensitivity_frames=2, patch=32)


@pytest.fixture(scope="module")
def heavy(tmp_path_factory: pytest.TempPathFactory) -> ModelSpec:
    return resolve_model(str(heavy_superres_model(tmp_path_factory.mktemp("m") / "sr.onnx")))


@pytest.fixture(scope="module")
def int8(heavy: ModelSpec, tmp_path_factory: pytest.TempPathFactory) -> VariantInfo:
    """The INT8 graph the product makes of an ESRGAN-like model (calibrated on the
    sample's frames, as the precision switch does)."""
    cache = tmp_path_factory.mktemp("cache")
    return prepare_variant(heavy, "int8", source=str(SAMPLE), settings=CALIBRATION, cache_dir=cache)


def cpu_session(path: Path) -> object:
    import onnxruntime as ort

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def test_the_int8_sr_graph_is_sound_and_upscales_close_to_fp32_on_the_cpu(
    heavy: ModelSpec, int8: VariantInfo
) -> None:
    model = onnx.load(str(int8.path))
    onnx.checker.check_model(model, full_check=True)  # full_check: strict shape inference
    assert conv_problems(model) == []
    views = conv_views(model)
    assert len(views) == 4 and all(v.input_channels is not None for v in views)
    quantized = [v for v in views if not v.weight_constant]
    assert quantized, "the search kept every convolution in float"
    for view in quantized:  # per output channel: axis 0, one scale each
        assert view.weight_axis == 0 and view.weight_scales == view.weight_shape[0]
        assert view.bias_shape == (view.weight_shape[0],) and view.bias_constant
    image = sample_frames(SAMPLE, (400,))[0][100:164, 300:364]  # a frame it was not calibrated on
    x = np.ascontiguousarray(image[..., ::-1].transpose(2, 0, 1)[None], np.float32) / 255
    want = cpu_session(heavy.path).run(None, {"input": x})[0]  # type: ignore[attr-defined]
    got = cpu_session(int8.path).run(None, {"input": x})[0]  # type: ignore[attr-defined]
    assert got.shape == want.shape == (1, 3, 128, 128)

    def as_image(y: np.ndarray) -> np.ndarray:
        return (np.clip(y[0].transpose(1, 2, 0), 0, 1) * 255 + 0.5).astype(np.uint8)

    assert psnr(as_image(want), as_image(got)) >= 40.0


def test_the_structural_check_finds_a_weight_quantized_along_the_wrong_axis(
    int8: VariantInfo,
) -> None:
    """The check is not vacuous: per-channel scales along the input channels (axis 1)
    and a weight whose input channels do not fit are both said."""
    model = onnx.load(str(int8.path))
    inits = {i.name: i for i in model.graph.initializer}
    dq = next(
        n for n in model.graph.node
        if n.op_type == "DequantizeLinear"
        and any(a.name == "axis" for a in n.attribute)
        and len(inits[n.input[0]].dims) == 4
    )  # fmt: skip
    for attr in dq.attribute:
        if attr.name == "axis":
            attr.i = 1
    weight = inits[dq.input[0]]
    w = numpy_helper.to_array(weight)
    weight.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(w[:, :1]), weight.name))
    problems = conv_problems(model)
    assert any("along axis 1, not 0" in p for p in problems), problems
    assert any("channels, weight" in p for p in problems), problems


def test_on_cuda_an_int8_sr_graph_is_planned_nchw_and_its_float_graphs_nhwc(
    heavy: ModelSpec, int8: VariantInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan's engine options, with their reasons, are what the engines get: TF32 off
    for FP32 only, NHWC for the heavy model's float graphs, NCHW for its INT8 graph (every
    convolution there has a Q/DQ weight beside a float bias), CUDA graphs of the engine's
    own capture when asked for (ONNX Runtime's option never among the provider options)."""
    monkeypatch.setattr(build, "gpu_unavailable", lambda settings: None)  # no GPU here
    monkeypatch.setenv("FRAMELENS_CUDA_GRAPHS", "1")
    fp32 = build.plan(PipelineSettings(heavy, device="cuda:0"))
    assert fp32.engine is not None
    assert fp32.engine.value == "use_tf32=0, prefer_nhwc=1, CUDA graphs"
    assert "prefer_nhwc=1: a heavy super-resolution model" in fp32.engine.why
    assert CUDA_GRAPH_WHY in fp32.engine.why
    assert any(
        line.startswith("engine options: use_tf32=0, prefer_nhwc=1, CUDA graphs")
        for line in fp32.lines()
    )
    assert fp32.as_json()["engine"]["value"] == "use_tf32=0, prefer_nhwc=1, CUDA graphs"
    assert (
        "enable_cuda_graph"
        not in build.engine_cuda_options(heavy, "fp32", device_engine=True).as_dict()
    )

    planned = build.plan(PipelineSettings(int8.spec, device="cuda:0", precision="int8"))
    assert planned.engine is not None
    assert planned.engine.value == "use_tf32=1, CUDA graphs"
    misread = len(nhwc_misread_convs(onnx.load(str(int8.path))))
    assert misread >= 1
    assert f"NCHW, not NHWC: {misread} of its convolutions have a Q/DQ weight" in planned.engine.why
    options = build.engine_cuda_options(
        planned.settings.model, "int8", device_engine=True
    ).as_dict()
    assert options == {"use_tf32": "1"}  # what its engines are made with
    assert planned.batch.value == "1"
    assert planned.batch.why.startswith("one frame per engine call: the superres task")


def test_a_heavy_sr_models_fp16_graph_gets_the_bias_fused_and_its_fp32_graph_not(
    heavy: ModelSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fuse_conv_bias was measured faster for ESRGAN's FP16 graph (61.4 -> 52.7 ms on an
    H100): the FP16 engine takes it, with its reason; FP32 keeps the plain convolution;
    a detector never asks for it."""
    monkeypatch.setenv("FRAMELENS_CUDA_GRAPHS", "1")
    monkeypatch.delenv("FRAMELENS_CUDNN_SEARCH", raising=False)
    fp16 = build.engine_cuda_options(heavy, "fp16", device_engine=True)
    assert fp16.as_dict() == {"use_tf32": "1", "prefer_nhwc": "1", "fuse_conv_bias": "1"}
    assert fp16.value == "use_tf32=1, prefer_nhwc=1, fuse_conv_bias=1, CUDA graphs"
    assert any(w.startswith("fuse_conv_bias=1: cuDNN adds the bias") for w in fp16.why)
    assert (
        "fuse_conv_bias"
        not in build.engine_cuda_options(heavy, "fp32", device_engine=True).as_dict()
    )
    detector = resolve_model(DEFAULT_MODEL)
    assert (
        "fuse_conv_bias"
        not in build.engine_cuda_options(detector, "fp16", device_engine=True).as_dict()
    )


def test_every_graph_keeps_the_exhaustive_search_unless_the_variable_says_otherwise(
    heavy: ModelSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cuDNN's heuristic plans ran ESRGAN's FP16 graph as fast a call but started a short
    run no sooner (h100-sr-startup-2026-12-06.json): every graph keeps ONNX Runtime's
    exhaustive search (its default: no option set). FRAMELENS_CUDNN_SEARCH sets the
    search for every graph (the benchmarks' A/B), said in the plan; a value it does not
    know is ignored, and the plan says so."""
    monkeypatch.delenv("FRAMELENS_CUDNN_SEARCH", raising=False)
    detector = resolve_model(DEFAULT_MODEL)
    for model, precision in ((heavy, "fp16"), (heavy, "fp32"), (detector, "fp16")):
        options = build.engine_cuda_options(model, precision, device_engine=True)
        assert "cudnn_conv_algo_search" not in options.as_dict(), (model.name, precision)
        assert not any("FRAMELENS_CUDNN_SEARCH" in w for w in options.why)

    monkeypatch.setenv("FRAMELENS_CUDNN_SEARCH", "heuristic")
    fp16 = build.engine_cuda_options(heavy, "fp16", device_engine=True)
    assert fp16.as_dict()["cudnn_conv_algo_search"] == "HEURISTIC"
    assert "cudnn_conv_algo_search=HEURISTIC: FRAMELENS_CUDNN_SEARCH=heuristic" in fp16.why
    monkeypatch.setenv("FRAMELENS_CUDNN_SEARCH", "Exhaustive")
    on_detector = build.engine_cuda_options(detector, "fp32", device_engine=True)
    assert on_detector.as_dict()["cudnn_conv_algo_search"] == "EXHAUSTIVE"

    from framelens.core.pipeline.engine_plan import cuda_options_for

    asked = {"cudnn_conv_algo_search": "HEURISTIC"}  # a task's own (none asks today)
    chosen = cuda_options_for("fp32", heavy, asked)  # the variable says EXHAUSTIVE
    assert chosen.as_dict()["cudnn_conv_algo_search"] == "EXHAUSTIVE"
    assert not any("the task asks" in w for w in chosen.why)
    monkeypatch.delenv("FRAMELENS_CUDNN_SEARCH")
    chosen = cuda_options_for("fp32", heavy, asked)
    assert chosen.as_dict()["cudnn_conv_algo_search"] == "HEURISTIC"
    assert "cudnn_conv_algo_search=HEURISTIC: the task asks for it" in chosen.why

    monkeypatch.setenv("FRAMELENS_CUDNN_SEARCH", "fastest")
    fp16 = build.engine_cuda_options(heavy, "fp16", device_engine=True)
    assert "cudnn_conv_algo_search" not in fp16.as_dict()
    assert any(
        w.startswith("FRAMELENS_CUDNN_SEARCH=fastest ignored: it takes exhaustive")
        for w in fp16.why
    )


def test_cuda_graphs_are_on_for_a_detector_and_declined_by_super_resolution(
    heavy: ModelSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unset, FRAMELENS_CUDA_GRAPHS leaves the choice to the plan: a detector's engines
    replay CUDA graphs (measured faster on an H100), super-resolution's task declines
    them, and the plan says why either way. =0 turns them off for every task (what the
    benchmarks' A/B sets), =1 on, super-resolution included."""
    detector = resolve_model(DEFAULT_MODEL)
    monkeypatch.delenv("FRAMELENS_CUDA_GRAPHS", raising=False)
    detect = build.engine_cuda_options(detector, "fp32", device_engine=True)
    assert detect.graphs and CUDA_GRAPH_WHY in detect.why
    assert detect.value == "use_tf32=0, CUDA graphs"
    sr = build.engine_cuda_options(heavy, "fp16", device_engine=True)
    assert not sr.graphs
    assert "CUDA graphs" not in sr.value
    assert any(w.startswith("no CUDA graphs: the superres task declines them") for w in sr.why)
    assert "cuda_graphs" not in sr.as_dict()  # the plan's choice, not a provider option

    monkeypatch.setenv("FRAMELENS_CUDA_GRAPHS", "0")
    for spec in (detector, heavy):
        off = build.engine_cuda_options(spec, "fp16", device_engine=True)
        assert not off.graphs
        assert "no CUDA graphs: FRAMELENS_CUDA_GRAPHS=0" in off.why
    monkeypatch.setenv("FRAMELENS_CUDA_GRAPHS", "1")
    assert build.engine_cuda_options(heavy, "fp16", device_engine=True).graphs
    assert build.engine_cuda_options(detector, "fp16", device_engine=True).graphs


def test_the_plan_claims_cuda_graphs_only_for_an_engine_that_records_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CUDA graphs are the GPU pipeline's engine's (on device buffers): a host pipeline
    with CUDA inference shows none, and why; a graph whose operators a replay would get
    wrong (Gemm) shows none, and why; a value of FRAMELENS_CUDA_GRAPHS other than 0 or 1
    is said to be ignored rather than read as either."""
    from dataclasses import replace

    from graph_models import gemm_model

    monkeypatch.delenv("FRAMELENS_CUDA_GRAPHS", raising=False)
    detector = resolve_model(DEFAULT_MODEL)
    monkeypatch.setattr(build, "gpu_unavailable", lambda settings: "no NVDEC here")
    host = build.plan(PipelineSettings(detector, device="cuda:0"))
    assert host.path.value == "host pipeline, cuda inference"
    assert host.engine is not None and host.engine.value == "use_tf32=0"
    assert "no CUDA graphs: the engine runs on host arrays" in host.engine.why
    monkeypatch.setattr(build, "gpu_unavailable", lambda settings: None)
    device = build.plan(PipelineSettings(detector, device="cuda:0"))
    assert device.path.value == "gpu pipeline"
    assert device.engine is not None and device.engine.value == "use_tf32=0, CUDA graphs"

    gemm = replace(detector, path=gemm_model(tmp_path / "gemm.onnx"))  # its operators only
    blocked = build.engine_cuda_options(gemm, "fp32", device_engine=True)
    assert not blocked.graphs
    assert any(w.startswith("no CUDA graphs: the graph has Gemm") for w in blocked.why)

    monkeypatch.setenv("FRAMELENS_CUDA_GRAPHS", "yes")
    odd = build.engine_cuda_options(detector, "fp32", device_engine=True)
    assert odd.graphs  # the default, as if unset
    assert any("FRAMELENS_CUDA_GRAPHS=yes ignored: it takes 0 or 1" in w for w in odd.why)


def test_the_plan_shows_no_engine_options_off_cuda(heavy: ModelSpec) -> None:
    planned = build.plan(PipelineSettings(heavy, device="cpu"))
    assert planned.engine is None and "engine" not in planned.as_json()
    assert not any(line.startswith("engine options") for line in planned.lines())


@pytest.mark.skipif(not ESRGAN.is_file(), reason="ESRGAN-thick x2 is not bundled")
def test_esrgans_int8_graph_is_sound_where_the_gpu_failed(tmp_path: Path) -> None:
    """The node of the H200's error, in ESRGAN's Q/DQ graph as the product's quantizer
    writes it: its weight [32, 64, 3, 3] per output channel (axis 0, 32 scales), its
    input 64 channels, its bias float: sound, and one of the convolutions NHWC misreads."""
    from framelens.core.precision.qdq import quantize_qdq

    rng = np.random.default_rng(0)
    tensors = [rng.random((1, 3, 24, 24), dtype=np.float32) for _ in range(2)]
    out = tmp_path / "int8.onnx"
    quantize_qdq(ESRGAN, out, tmp_path / "r.json", CALIBRATION, tensors=tensors, input_name="input")
    model = onnx.load(str(out))
    assert conv_problems(model) == []
    view = next(v for v in conv_views(model) if v.name == "generator/F_1_1_1/BiasAdd")
    assert (view.weight_shape, view.weight_axis, view.weight_scales) == ((32, 64, 3, 3), 0, 32)
    assert view.input_channels == 64 and view.bias_shape == (32,) and view.bias_constant
    assert "generator/F_1_1_1/BiasAdd" in nhwc_misread_convs(model)
    assert nhwc_misread_convs(onnx.load(str(ESRGAN))) == []  # the float graph is NHWC-safe


def test_host_cuda_engines_are_made_with_the_plans_options(
    heavy: ModelSpec, int8: VariantInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host pipeline's CUDA inference (where the GPU pipeline cannot run) gets the
    options the plan shows; a CPU engine none (the graph is not even read for them)."""
    from framelens.core.stages.engines import onnxruntime_cpu

    made: list[dict[str, str] | None] = []

    class Recorder:
        def __init__(self, path: object, **kwargs: object) -> None:
            made.append(kwargs["cuda_options"])  # type: ignore[arg-type]

    monkeypatch.setattr(onnxruntime_cpu, "OnnxRuntimeEngine", Recorder)
    build.create_engine(heavy.path, device="cuda:0", precision="fp32", spec=heavy)
    build.create_engine(int8.path, device="cuda:0", precision="int8", spec=int8.spec)
    build.create_engine(int8.path, device="cpu", precision="int8", spec=int8.spec)
    assert made == [{"use_tf32": "0", "prefer_nhwc": "1"}, {"use_tf32": "1"}, None]
