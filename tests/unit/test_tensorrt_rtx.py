"""TensorRT for RTX, for real, on a machine without a GPU: engines built ahead of time.

CI installs tensorrt-rtx-cu13 (the dev extra) and builds YOLOX-Nano and YuNet in each
precision graph (FP32, the FP16 graph, the INT8 Q/DQ graph) for RTX compute
capabilities; the lines printed to the terminal give sizes and build times. Running
the plans needs an RTX GPU: tests/gpu covers what the H200 allows (the refusal and the
fallback to ONNX Runtime CUDA).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from framelens.core.cache import variants_dir
from framelens.core.errors import Cancelled, EngineError, ModelError
from framelens.core.models.catalog import resolve_model
from framelens.core.pipeline import build
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.precision import CalibrationSettings
from framelens.core.stages.engines.tensorrt_flavour import (
    Flavour,
    import_flavour,
    installed_flavours,
    parse_targets,
)
from framelens.core.stages.engines.tensorrt_plans import PLAN_FILE, BuildFor, cached_plan
from framelens.core.tools import engine_prebuild as engines
from int8_variant import SharedInt8

rtx = next((f for f in installed_flavours() if f.name == "tensorrt-rtx"), None)
pytestmark = pytest.mark.skipif(rtx is None, reason="tensorrt-rtx-cu13 is not installed")

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4")
QUICK_INT8 = CalibrationSettings(frames=2, sensitivity_frames=1, max_search_steps=1)
"""YuNet's INT8 graph for the build (what is tested is the engine built from it, not the
calibration); YOLOX-Nano's is the session's (tests/conftest.py), copied into the cache."""
TARGETS = "sm_86,sm_89"  # two RTX generations: Ampere and Ada


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("framelens-cache")


def calibration_for(
    model: str, precision: str, cache: Path, request: pytest.FixtureRequest
) -> CalibrationSettings:
    """The calibration an INT8 build of ``model`` is asked for; YOLOX-Nano's graph is then
    found in ``cache``, as a second build of an engine finds the graph of the first."""
    if model != "yolox-nano" or precision != "int8":
        return QUICK_INT8
    shared: SharedInt8 = request.getfixturevalue("yolox_int8")
    shared.copy_into(cache)
    return shared.settings


def test_the_flavour_is_detected_with_its_targets_and_where_it_runs() -> None:
    assert rtx is not None
    assert import_flavour().name in {"tensorrt", "tensorrt-rtx"}
    assert rtx.label.startswith("tensorrt-rtx ") and rtx.ahead_of_time
    assert {"sm_75", "sm_86", "sm_89", "sm_120"} <= set(rtx.targets)
    assert rtx.cannot_run((8, 6)) is None and rtx.cannot_run((12, 0)) is None
    refused = rtx.cannot_run((9, 0))  # the H200
    assert refused is not None and "compute capability 9.0" in refused and "\n" not in refused
    assert parse_targets("sm_86, 8.9,89", rtx) == ("sm_86", "sm_89")
    with pytest.raises(EngineError, match="cannot build for sm_90"):
        parse_targets("sm_90", rtx)


@pytest.mark.parametrize("model", ["yolox-nano", "yunet"])
@pytest.mark.parametrize("precision", ["fp32", "fp16", "int8"])
def test_engines_are_built_ahead_of_time_in_every_precision(
    model: str,
    precision: str,
    cache: Path,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
) -> None:
    calibration = calibration_for(model, precision, cache, request)
    seen: list[tuple[str, float]] = []
    done = engines.build_engine(
        model,
        precision,
        calibration=SAMPLE,
        targets=TARGETS,
        on_progress=lambda text, f: seen.append((text, f)),
        calibration_settings=calibration,
        cache_dir=cache,
    )
    assert done.built and done.precision == precision
    assert done.built_for == "sm_86, sm_89" and done.flavour == rtx.label  # type: ignore[union-attr]
    plan = (done.entry / PLAN_FILE).read_bytes()
    assert len(plan) == done.size > 100_000  # a real serialized engine
    fractions = [f for _, f in seen]
    assert fractions == sorted(fractions) and fractions[-1] == pytest.approx(1.0)
    assert any(text.startswith("engine: ") for text, _ in seen)  # TensorRT's own phases
    with capsys.disabled():
        print(f"\n  built {done.line()}")
    again = engines.build_engine(
        model, precision, calibration=SAMPLE, targets=TARGETS,
        calibration_settings=calibration, cache_dir=cache,
    )  # fmt: skip
    assert not again.built and again.entry == done.entry


def test_a_cancelled_build_stops_and_caches_nothing(tmp_path: Path) -> None:
    cancel = threading.Event()
    phases: list[str] = []

    def progress(text: str, _fraction: float) -> None:
        phases.append(text)
        if text.startswith("engine: "):
            cancel.set()  # as Ctrl+C or the dialog's Cancel does, mid-build

    with pytest.raises(Cancelled):
        engines.build_engine(
            "yolox-nano", "fp32", calibration=SAMPLE, targets="sm_86",
            on_progress=progress, cancel=cancel, cache_dir=tmp_path,
        )  # fmt: skip
    assert phases  # it had started
    assert engines.engines_list(tmp_path) == []


def test_a_truncated_or_foreign_plan_is_rebuilt_never_loaded(tmp_path: Path) -> None:
    assert rtx is not None
    spec = resolve_model("yolox-nano")
    target = BuildFor(("sm_86",))
    _, _, built, entry = cached_plan(rtx, spec.path, target, "fp32", spec, cache_dir=tmp_path)
    assert built
    plan = entry / PLAN_FILE
    plan.write_bytes(plan.read_bytes()[:1000])  # truncated (a full disk, a killed copy)
    data, _, built, again = cached_plan(rtx, spec.path, target, "fp32", spec, cache_dir=tmp_path)
    assert built and again == entry and len(data) > 100_000
    # a plan made by another version of the flavour is another entry: not loaded here
    older = Flavour(rtx.name, rtx.module, "1.6.0.0")
    _, _, built, old_entry = cached_plan(older, spec.path, target, "fp32", spec, cache_dir=tmp_path)
    assert built and old_entry != entry
    _, _, built, found = cached_plan(rtx, spec.path, target, "fp32", spec, cache_dir=tmp_path)
    assert not built and found == entry


def test_parse_errors_name_the_node(tmp_path: Path) -> None:
    assert rtx is not None
    import onnx
    from onnx import TensorProto, helper

    node = helper.make_node("NoSuchOp", ["x"], ["y"], name="mystery", domain="")
    graph = helper.make_graph(
        [node], "bad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "bad.onnx"
    onnx.save(model, str(path))
    with pytest.raises(ModelError, match=r"node 0 \(mystery, NoSuchOp\)") as err:
        cached_plan(rtx, path, BuildFor(("sm_86",)), "fp32", None, cache_dir=tmp_path)
    assert "\n" not in str(err.value)


def test_tensorrt_where_its_flavour_cannot_run_falls_back_to_onnxruntime(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On the H200 (9.0) TensorRT-RTX refuses to run: a run asked for TensorRT goes on with
    ONNX Runtime CUDA and says why in one line."""
    monkeypatch.setattr(build, "tensorrt_reason", lambda device: rtx.cannot_run((9, 0)))  # type: ignore[union-attr]
    notes: list[str] = []
    settings = PipelineSettings(resolve_model("yolox-nano"), backend="tensorrt", device="cuda:0")
    used = build.usable_backend(settings, notes.append)
    assert used.backend == "onnxruntime" and used.device == "cuda:0"
    assert len(notes) == 1 and "compute capability 9.0" in notes[0]
    assert notes[0].endswith("running ONNX Runtime CUDA")


def _cli(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-m", "framelens", "engines", *args],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "FRAMELENS_CACHE_DIR": str(cache)},
    )  # fmt: skip


def test_cli_engines_build_list_clear(tmp_path: Path) -> None:
    import os

    # `run --precision fp16` converts the FP16 graph (ONNX Runtime runs it on the CPU)
    root = Path(__file__).resolve().parents[2]
    sample = root / "resources" / "samples" / "one-by-one-person-detection.mp4"
    ran = subprocess.run(
        [sys.executable, "-m", "framelens", "run", str(sample), "--precision", "fp16",
         "--device", "cpu", "--frames", "2", "--quiet"],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "FRAMELENS_CACHE_DIR": str(tmp_path)},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    graphs = sorted(variants_dir(tmp_path).glob("*fp16*/*.onnx"))
    assert len(graphs) == 1
    made = graphs[0].stat().st_mtime_ns
    built = _cli("build", "yolox-nano", "--precision", "fp16", "--target", "sm_89", cache=tmp_path)
    assert built.returncode == 0, built.stderr
    assert "yolox-nano fp16: tensorrt-rtx" in built.stdout and "built in" in built.stdout
    listed = _cli("list", cache=tmp_path)
    lines = listed.stdout.strip().splitlines()
    assert (
        len(lines) == 1 and "yolox-nano  fp16  tensorrt-rtx 1." in lines[0] and "sm_89" in lines[0]
    )
    wrong = _cli("build", "yolox-nano", "--target", "sm_90", cache=tmp_path)
    assert wrong.returncode == 2 and "Traceback" not in wrong.stderr
    assert len(wrong.stderr.strip().splitlines()) == 1 and "sm_90" in wrong.stderr
    cleared = _cli("clear", cache=tmp_path)
    assert cleared.returncode == 0 and cleared.stdout.startswith("removed 1 plan(s)")
    assert _cli("list", cache=tmp_path).stdout.strip() == ""
    # engines only: the FP16 graph the run made (and the plan was built from) stays
    assert sorted(variants_dir(tmp_path).glob("*fp16*/*.onnx")) == graphs
    assert graphs[0].stat().st_mtime_ns == made


def inspector_json(layers: list[tuple[str, str, str]]) -> str:
    """The engine inspector's JSON at ProfilingVerbosity.DETAILED, as TensorRT writes it
    (a GPU writes it beside the plan the first time it runs the engine): one layer per
    (name, ONNX nodes joined by U+001E, input datatype)."""
    return json.dumps(
        {
            "Layers": [
                {
                    "Name": name,
                    "LayerType": "CaskConvolution",
                    "Inputs": [{"Name": "in", "Location": "Device", "Format/Datatype": fmt}],
                    "Outputs": [{"Name": "out", "Location": "Device", "Format/Datatype": fmt}],
                    "Metadata": "\x1e".join(f"[ONNX Layer: {n}]" for n in nodes.split(",")),
                }
                for name, nodes, fmt in layers
            ],
            "Bindings": ["images", "output"],
        }
    )


def test_the_layer_list_of_a_run_plan_says_which_quantized_convs_ran_in_float(
    tmp_path: Path,
) -> None:
    from framelens.core.stages.engines.tensorrt_layers import (
        kept_in_float,
        layer_precisions,
        plan_layer_precisions,
    )
    from framelens.core.stages.engines.tensorrt_plans import LAYERS_FILE

    assert rtx is not None
    spec = resolve_model("yolox-nano")
    _, _, built, entry = cached_plan(
        rtx, spec.path, BuildFor(("sm_86",)), "fp32", spec, cache_dir=tmp_path
    )
    assert built
    assert plan_layer_precisions(spec.path, tmp_path) is None  # no GPU has run it yet
    text = inspector_json(
        [
            (
                "/stem/conv/Conv + /stem/act/Relu",
                "/stem/conv/Conv,/stem/act/Relu",
                "Int8 NC/32HW32",
            ),
            ("/head/cls/Conv", "/head/cls/Conv", "Half format NHWC8"),
            ("/head/reg/Conv", "/head/reg/Conv", "Float format NCHW"),
        ]
    )
    (entry / LAYERS_FILE).write_text(text)  # as the engine's first run on a GPU leaves it
    found = plan_layer_precisions(spec.path, tmp_path)
    assert found == {
        "/stem/conv/Conv": "int8",
        "/stem/act/Relu": "int8",
        "/head/cls/Conv": "fp16",
        "/head/reg/Conv": "fp32",
    }
    quantized = ["/stem/conv/Conv", "/head/cls/Conv", "/head/reg/Conv"]
    assert kept_in_float(found, quantized) == {"/head/cls/Conv", "/head/reg/Conv"}
    # another graph's plans say nothing about this one
    assert plan_layer_precisions(resolve_model("yunet").path, tmp_path) is None
    # a plan built with layer names only carries no precisions
    assert layer_precisions(json.dumps({"Layers": ["/stem/conv/Conv"]})) == {}
