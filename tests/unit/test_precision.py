"""FP16 and INT8 variants of YOLOX-Nano on the person sample, measured against FP32.

CI runs a reduced INT8 calibration (CI_CALIBRATION); the full one (50 frames) is
measured by benchmarks/precision_cpu.py. Agreement is scored on every 5th frame of
the whole video with framelens.core.stages.tasks.detect.agreement, at confidence 0.3.
The INT8 variant measured here is the session's (``yolox_int8``, tests/conftest.py),
built in this module's cache folder; other modules reuse it instead of calibrating again.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnx
import pytest
from framelens.cli import main
from framelens.core.errors import Cancelled, ConfigError
from framelens.core.geometry import Letterbox
from framelens.core.models.catalog import resolve_model
from framelens.core.pipeline import build
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.precision import (
    PRECISIONS,
    CalibrationSettings,
    SensitivityReport,
    VariantInfo,
    cached_variant,
    prepare_variant,
)
from framelens.core.stages.engines.onnxruntime_cpu import OnnxRuntimeEngine
from framelens.core.stages.preprocess.cpu import Preprocessor
from framelens.core.stages.sources import open_source
from framelens.core.stages.tasks import DetectParams
from framelens.core.stages.tasks.detect.agreement import AgreementTotals
from framelens.core.stages.tasks.detect.decoders import make_decoder
from framelens.core.types import Detections, Frame
from int8_variant import CALIBRATION as CI_CALIBRATION
from int8_variant import SharedInt8
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4")
SPEC = resolve_model("yolox-nano")
CONF = 0.3
EVAL_STEP = 5

Tensors = list[npt.NDArray[np.float32]]


@pytest.fixture(scope="module")
def cache_root(yolox_int8: SharedInt8) -> Path:
    """The cache folder the session's INT8 variant was built in (nothing else writes it)."""
    return yolox_int8.cache_root


@pytest.fixture(scope="module")
def eval_frames() -> tuple[Tensors, list[Letterbox]]:
    tensors: Tensors = []
    geometries: list[Letterbox] = []
    with open_source(SAMPLE) as source:
        pre: Preprocessor | None = None
        for frame in source:
            if frame.index % EVAL_STEP:
                continue
            pre = pre or Preprocessor(SPEC, frame.width, frame.height)
            tensors.append(pre(frame.image).copy())
            geometries.append(pre.geometry)
    assert len(tensors) == 279  # 1394 frames
    return tensors, geometries


def detect(path: Path, frames: tuple[Tensors, list[Letterbox]]) -> list[Detections]:
    decode = make_decoder(SPEC)
    with OnnxRuntimeEngine(path, spinning=False) as engine:
        return [
            decode(engine.infer(t), [g], CONF, 0.45, None)[0]
            for t, g in zip(frames[0], frames[1], strict=True)
        ]


def agreement(ref: list[Detections], test: list[Detections]) -> AgreementTotals:
    totals = AgreementTotals()
    for r, t in zip(ref, test, strict=True):
        totals.add_frame(r, t)
    return totals


@pytest.fixture(scope="module")
def fp32_detections(eval_frames: tuple[Tensors, list[Letterbox]]) -> list[Detections]:
    dets = detect(SPEC.path, eval_frames)
    assert sum(len(d) for d in dets) > 250  # the sample shows people in most frames
    return dets


@pytest.fixture(scope="module")
def int8(yolox_int8: SharedInt8) -> tuple[VariantInfo, list[tuple[str, float]]]:
    """prepare_variant(SPEC, "int8", source=SAMPLE, settings=CI_CALIBRATION) into
    cache_root, and what it reported on the way (built once per session)."""
    assert yolox_int8.variant.spec.name == SPEC.name and CI_CALIBRATION.conf == CONF
    return yolox_int8.variant, yolox_int8.progress


def test_fp32_is_the_bundled_model_itself() -> None:
    assert PRECISIONS == ("fp32", "fp16", "int8")
    v = prepare_variant(SPEC, "fp32")
    assert (v.path, v.spec, v.report) == (SPEC.path, SPEC, None)


def test_fp16_agrees_with_fp32_and_keeps_float32_io(
    cache_root: Path,
    eval_frames: tuple[Tensors, list[Letterbox]],
    fp32_detections: list[Detections],
) -> None:
    v = prepare_variant(SPEC, "fp16", cache_dir=cache_root)
    assert not v.from_cache and v.path.is_file() and v.spec.path == v.path
    assert v.path.is_relative_to(cache_root / "variants")
    model = onnx.load(str(v.path))
    f32, f16 = onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16
    assert [i.type.tensor_type.elem_type for i in model.graph.input] == [f32]
    assert [o.type.tensor_type.elem_type for o in model.graph.output] == [f32]
    conv_weights = {n.input[1] for n in model.graph.node if n.op_type == "Conv"}
    weights = [i for i in model.graph.initializer if i.name in conv_weights]
    assert weights and all(w.data_type == f16 for w in weights)

    totals = agreement(fp32_detections, detect(v.path, eval_frames))
    assert totals.f1 >= 0.97, totals.as_dict()
    assert totals.mean_iou > 0.95

    again = prepare_variant(SPEC, "fp16", cache_dir=cache_root)
    assert again.from_cache and again.path == v.path


def _quantized_convs(model: onnx.ModelProto) -> dict[str, bool]:
    """Conv name -> whether both its input and its weights come through DequantizeLinear."""
    producer = {o: n for n in model.graph.node for o in n.output}

    def dq(tensor: str) -> bool:
        node = producer.get(tensor)
        return node is not None and node.op_type == "DequantizeLinear"

    return {
        n.name: dq(n.input[0]) and dq(n.input[1]) for n in model.graph.node if n.op_type == "Conv"
    }


def test_int8_agrees_with_fp32_with_90_percent_of_macs_in_int8(
    int8: tuple[VariantInfo, list[tuple[str, float]]],
    eval_frames: tuple[Tensors, list[Letterbox]],
    fp32_detections: list[Detections],
) -> None:
    v, _ = int8
    assert v.precision == "int8" and not v.from_cache and v.report is not None
    totals = agreement(fp32_detections, detect(v.path, eval_frames))
    assert totals.f1 >= 0.85, totals.as_dict()

    # The MAC fraction read from the graph itself, not only from the report.
    quantized = _quantized_convs(onnx.load(str(v.path)))
    macs = {layer.name: layer.macs for layer in v.report.layers}
    assert set(quantized) == set(macs)  # every Conv of YOLOX-Nano is in the report
    int8_macs = sum(macs[name] for name, q in quantized.items() if q)
    assert int8_macs / sum(macs.values()) >= 0.9
    assert int8_macs / sum(macs.values()) == pytest.approx(v.report.int8_mac_fraction)
    assert {name for name, q in quantized.items() if not q} == set(v.report.kept_float)
    # The first convolution sees the raw image and holds 14% of the MACs: it stays INT8.
    assert quantized["Conv_41"]


def test_int8_graph_is_symmetric_qdq_around_convolutions(
    int8: tuple[VariantInfo, list[tuple[str, float]]],
) -> None:
    v, _ = int8
    model = onnx.load(str(v.path))
    assert next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) >= 13
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in model.graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    qs = [n for n in model.graph.node if n.op_type == "QuantizeLinear"]
    dqs = [n for n in model.graph.node if n.op_type == "DequantizeLinear"]
    assert len(qs) > 50 and len(dqs) > len(qs)
    for q in qs:  # activations: int8, zero point 0, each Q feeds DQs only
        zp = inits[q.input[2]]
        assert zp.dtype == np.int8 and not zp.any()
        assert {c.op_type for c in consumers[q.output[0]]} == {"DequantizeLinear"}
    for node in model.graph.node:
        if node.op_type != "Conv" or not _quantized_convs(model)[node.name]:
            continue
        wdq = next(n for n in dqs if n.output[0] == node.input[1])
        weight, scale = inits[wdq.input[0]], inits[wdq.input[1]]
        assert weight.dtype == np.int8 and not inits[wdq.input[2]].any()
        assert scale.shape == (weight.shape[0],)  # per output channel
    # The head's Sigmoid/Mul/Concat/Reshape stay float: only Conv reads quantized weights,
    # and no Q/DQ sits on the output path.
    output = model.graph.output[0].name
    assert all(n.op_type != "DequantizeLinear" for n in model.graph.node if output in n.output)


def test_int8_sensitivity_report(
    int8: tuple[VariantInfo, list[tuple[str, float]]], cache_root: Path
) -> None:
    v, progress = int8
    report = v.report
    assert report is not None
    assert len(report.layers) == 113
    ranked = report.ranked()
    assert ranked[0].kept_float  # the most sensitive layer is kept in float
    assert all(layer.sensitivity >= 0 for layer in report.layers)
    assert report.int8_mac_fraction >= report.min_int8_mac_fraction == 0.9
    assert report.calibration_frames == 16 and report.agreement_conf == CONF
    assert report.search[0].float_layers == 0 and report.search[0].int8_mac_fraction == 1.0
    assert any(layer.equalized for layer in report.layers)  # depthwise equalisation

    assert SensitivityReport.from_json(report.to_json()) == report
    data = json.loads(report.to_json())
    assert data["int8_mac_fraction"] == pytest.approx(report.int8_mac_fraction)
    table = report.table()
    assert ranked[0].name in table and "INT8 MACs" in table and "float" in table

    fractions = [f for _, f in progress]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert any("sensitivity" in text for text, _ in progress)

    again = prepare_variant(
        SPEC, "int8", source=SAMPLE, settings=CI_CALIBRATION, cache_dir=cache_root
    )
    assert again.from_cache and again.path == v.path and again.report == report


def test_int8_cancel_from_another_thread_leaves_no_cache_entry(tmp_path: Path) -> None:
    """As the GUI does it: calibration in a worker thread, cancel from the UI thread."""
    cancel, measuring = threading.Event(), threading.Event()
    outcome: list[BaseException | VariantInfo] = []

    def on_progress(text: str, _: float) -> None:
        if "sensitivity" in text:
            measuring.set()

    def work() -> None:
        try:
            outcome.append(
                prepare_variant(
                    SPEC,
                    "int8",
                    source=SAMPLE,
                    settings=CI_CALIBRATION,
                    on_progress=on_progress,
                    cancel=cancel,
                    cache_dir=tmp_path,
                )
            )
        except BaseException as exc:
            outcome.append(exc)
            measuring.set()

    worker = threading.Thread(target=work)
    worker.start()
    measuring.wait()
    cancel.set()
    worker.join()
    assert len(outcome) == 1 and isinstance(outcome[0], Cancelled)
    assert list((tmp_path / "variants").iterdir()) == []


def test_int8_needs_a_source() -> None:
    with pytest.raises(ConfigError, match="calibrate"):
        prepare_variant(SPEC, "int8")
    with pytest.raises(ConfigError, match="calibrat"):
        build.host_pipeline(PipelineSettings(model=SPEC, precision="int8"))
    with pytest.raises(ConfigError, match="frames"):
        prepare_variant(SPEC, "int8", source=SAMPLE, settings=CalibrationSettings(frames=1))


def test_cached_variant_finds_prepared_variants_and_builds_nothing(
    int8: tuple[VariantInfo, list[tuple[str, float]]], tmp_path: Path, cache_root: Path
) -> None:
    empty = tmp_path / "empty-cache"
    assert cached_variant(SPEC, "fp16", cache_dir=empty) is None
    assert cached_variant(SPEC, "int8", source=SAMPLE, cache_dir=empty) is None
    assert not empty.exists()  # looked, wrote nothing
    assert cached_variant(SPEC, "int8", cache_dir=cache_root) is None  # no source: unknown
    assert cached_variant(SPEC, "fp32", cache_dir=empty) is not None
    built, _ = int8
    found = cached_variant(
        SPEC, "int8", source=SAMPLE, settings=CI_CALIBRATION, cache_dir=cache_root
    )
    assert found is not None and found.from_cache
    assert found.path == built.path
    assert found.report is not None and built.report is not None
    assert found.report.kept_float == built.report.kept_float
    other = CalibrationSettings(frames=16, sensitivity_frames=3, conf=0.5)  # another key
    assert cached_variant(SPEC, "int8", source=SAMPLE, settings=other, cache_dir=cache_root) is None


def test_pipeline_runs_the_prepared_variants(
    int8: tuple[VariantInfo, list[tuple[str, float]]],
    cache_root: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FRAMELENS_CACHE_DIR", str(cache_root))
    with open_source(SAMPLE) as source:
        source.seek(300)
        frame = source.read()
    assert isinstance(frame, Frame)
    v, _ = int8
    for settings in (
        PipelineSettings(model=v.spec, precision="int8", params=DetectParams(conf=CONF)),
        PipelineSettings(
            model=SPEC, precision="fp16", params=DetectParams(conf=CONF)
        ),  # from the cache
    ):
        pipeline = build.host_pipeline(settings)
        try:
            result = pipeline.process(frame, draw=False)
        finally:
            pipeline.close()
        assert pipeline.settings.model.path.is_relative_to(cache_root)
        assert [SPEC.label(int(c)) for c in result.output.class_ids] == ["person"]


def test_cli_run_int8_prints_the_sensitivity_table(
    int8: tuple[VariantInfo, list[tuple[str, float]]],
    cache_root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("FRAMELENS_CACHE_DIR", str(cache_root))
    dets = tmp_path / "dets.json"
    args = ["run", SAMPLE, "--precision", "int8", "--start", "300", "--frames", "4", "--quiet"]
    args += ["--conf", str(CONF), "--calibration-frames", "16", "--sensitivity-frames", "3"]
    assert main([*args, "--device", "cpu", "--detections", str(dets)]) == 0
    out, err = capsys.readouterr()
    summary = json.loads(out)
    v, _ = int8
    assert summary["precision"] == "int8"
    assert summary["variant"]["from_cache"] and summary["variant"]["path"] == str(v.path)
    assert summary["variant"]["int8_mac_fraction"] >= 0.9
    assert "INT8 layer sensitivity (cached)" in err and "INT8 MACs" in err
    assert v.report is not None and v.report.kept_float[0] in err
    data = json.loads(dets.read_text())
    assert data["meta"]["precision"] == "int8" and len(data["frames"]) == 4

    assert main(["run", SAMPLE, "--precision", "int8", "--calibration-frames", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "at least 2 frames" in err


def test_a_new_target_reuses_the_cached_sensitivity(
    int8: tuple[VariantInfo, list[tuple[str, float]]], cache_root: Path
) -> None:
    v, _ = int8
    stages: list[str] = []
    looser = CalibrationSettings(frames=16, sensitivity_frames=3, conf=CONF, agreement_target=0.8)
    other = prepare_variant(
        SPEC,
        "int8",
        source=SAMPLE,
        settings=looser,
        on_progress=lambda text, _: stages.append(text),
        cache_dir=cache_root,
    )
    assert not other.from_cache and other.path != v.path
    assert not any("sensitivity" in s or "calibrating" in s for s in stages)
    assert other.report is not None and v.report is not None
    assert [x.sensitivity for x in other.report.layers] == [x.sensitivity for x in v.report.layers]
    assert other.report.agreement_target == 0.8


def test_switching_to_int8_again_on_the_same_video_reads_no_frame(
    yolox_int8: SharedInt8, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guide's promise: once a video was calibrated, the next switch to INT8 is
    immediate. The first prepare on a file decodes its calibration frames (they are the
    entry's key); later ones find the entry by the file (path, size, time) and decode
    nothing, until the file changes."""
    import os
    import shutil

    import framelens.core.precision as precision

    cache = tmp_path / "cache"
    yolox_int8.copy_into(cache)  # calibrated before, in this cache
    clip = tmp_path / "clip.mp4"
    shutil.copyfile(SAMPLE, clip)
    reads: list[str] = []
    real_read = precision.read_calibration_frames

    def counting_read(*args: object, **kwargs: object) -> object:
        reads.append(str(args[1]))
        return real_read(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(precision, "read_calibration_frames", counting_read)

    def switch() -> tuple[VariantInfo, list[str]]:
        seen: list[str] = []
        variant = prepare_variant(
            SPEC, "int8", source=str(clip), settings=CI_CALIBRATION,
            on_progress=lambda text, _: seen.append(text), cache_dir=cache,
        )  # fmt: skip
        return variant, seen

    first, seen = switch()
    assert first.from_cache and first.path.parent.name == yolox_int8.variant.path.parent.name
    assert reads == [str(clip)] and any(t.startswith("reading calibration frames") for t in seen)
    second, seen = switch()
    assert second.from_cache and second.path == first.path
    assert second.report is not None and second.report.kept_float == first.report.kept_float  # type: ignore[union-attr]
    assert reads == [str(clip)] and seen == []  # nothing decoded, nothing to report
    # restoring the last session's choice (cached_variant) reads nothing either
    restored = cached_variant(SPEC, "int8", source=str(clip), settings=CI_CALIBRATION,
                              cache_dir=cache)  # fmt: skip
    assert restored is not None and restored.path == first.path and len(reads) == 1
    # other settings are another variant: the frames are read for them
    other = CalibrationSettings(frames=16, sensitivity_frames=3, conf=0.5)
    assert cached_variant(SPEC, "int8", source=str(clip), settings=other, cache_dir=cache) is None
    assert len(reads) == 2
    # the file changed on disk: its frames are read again (the same pixels: the same entry)
    st = clip.stat()
    os.utime(clip, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    third, _ = switch()
    assert third.path == first.path and len(reads) == 3
