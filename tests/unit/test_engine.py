"""The ONNX Runtime engine, and the bundled models on real video frames."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import av
import cv2
import numpy as np
import pytest
from framelens.core.errors import EngineError, GpuError, ModelError
from framelens.core.models.catalog import resolve_model
from framelens.core.pipeline.build import create_engine
from framelens.core.pipeline.devices import cuda_available
from framelens.core.stages.engines.onnxruntime_cpu import OnnxRuntimeEngine
from framelens.core.stages.preprocess.cpu import Preprocessor
from framelens.core.stages.tasks.detect.decoders import make_decoder
from framelens.core.types import Image

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
PERSON_FRAME = 300  # one person walking through, mid-frame
FACE_FRAME = 330  # the same person facing the camera; cv2.FaceDetectorYN finds the face


@pytest.fixture(scope="module")
def frames() -> dict[int, Image]:
    wanted = {PERSON_FRAME, FACE_FRAME}
    found: dict[int, Image] = {}
    with av.open(str(SAMPLE)) as container:
        for i, frame in enumerate(container.decode(video=0)):
            if i in wanted:
                found[i] = frame.to_ndarray(format="bgr24")
            if len(found) == len(wanted):
                break
    return found


def test_engine_attributes() -> None:
    yolox, yunet = resolve_model("yolox-nano"), resolve_model("yunet")
    with OnnxRuntimeEngine(yolox.path, threads=1, spinning=False) as e:
        assert (e.backend, e.device, e.providers) == (
            "onnxruntime",
            "cpu",
            ["CPUExecutionProvider"],
        )
        assert (e.input_name, e.input_shape, e.output_names) == (
            "images",
            (1, 3, 416, 416),
            ["output"],
        )
        opts = e._session.get_session_options()
        assert opts.intra_op_num_threads == 1
        assert opts.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    with create_engine(yunet.path) as e:
        assert e.input_shape == (None, 3, None, None)
        assert sorted(e.output_names) == sorted(
            f"{h}_{s}" for h in ("cls", "obj", "bbox", "kps") for s in (8, 16, 32)
        )


def test_infer_errors_are_one_line() -> None:
    engine = create_engine(resolve_model("yolox-nano").path)
    with pytest.raises(EngineError, match="inference failed") as err:
        engine.infer(np.zeros((1, 3, 320, 320), np.float32))
    assert "\n" not in str(err.value) and "ONNXRuntimeError" not in str(err.value)
    assert not isinstance(err.value, GpuError)  # on the CPU it is the input's fault: no fallback
    engine.close()
    engine.close()  # twice is fine
    with pytest.raises(EngineError, match="closed"):
        engine.infer(np.zeros((1, 3, 416, 416), np.float32))


def test_on_cuda_a_run_failing_is_the_gpus_fault_unless_ort_blames_the_input() -> None:
    """A CUDA run's failure goes on on the CPU (GpuError) when the GPU failed, but a wrong
    input shape or type is the input's on any device (EngineError: the CPU would fail
    the same). The input faults are ONNX Runtime's own exceptions from real runs; the
    GPU's is ORT's runtime exception with the CUDA provider's out-of-memory text."""
    import onnxruntime as ort
    from framelens.core.stages.engines.onnxruntime_cpu import run_failure
    from onnxruntime.capi.onnxruntime_pybind11_state import RuntimeException

    session = ort.InferenceSession(str(resolve_model("yolox-nano").path))
    name = session.get_inputs()[0].name
    faults = []
    for tensor in (np.zeros((1, 3, 320, 320), np.float32), np.zeros((1, 3, 416, 416))):
        with pytest.raises(Exception) as info:
            session.run(None, {name: tensor})
        faults.append(info.value)
    for fault in faults:
        for device in ("cpu", "cuda:0"):
            error = run_failure(fault, device)
            assert type(error) is EngineError and str(error).startswith("inference failed: ")
    oom = RuntimeException(
        "[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Non-zero status code returned while "
        "running Conv node. Name:'Conv_0' Status Message: CUDA error cudaErrorMemoryAllocation"
        ":out of memory"
    )
    assert isinstance(run_failure(oom, "cuda:0"), GpuError)
    assert type(run_failure(oom, "cpu")) is EngineError


def test_backends_and_devices(tmp_path: Path) -> None:
    path = resolve_model("yolox-nano").path
    with pytest.raises(EngineError, match="TensorRT runs on NVIDIA GPUs, not on cpu"):
        create_engine(path, backend="tensorrt")
    with pytest.raises(EngineError, match="unknown backend"):
        create_engine(path, backend="openvino")
    with pytest.raises(EngineError, match="unknown device"):
        create_engine(path, device="gpu0")
    with pytest.raises(EngineError, match="threads"):
        create_engine(path, threads=0)
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"garbage" * 100)
    with pytest.raises(ModelError, match="is not a valid ONNX model"):
        create_engine(junk)
    with pytest.raises(ModelError, match="does not exist"):
        create_engine(tmp_path / "gone.onnx")


@pytest.mark.skipif(cuda_available(), reason="this ONNX Runtime has a CUDA provider")
def test_cuda_without_provider() -> None:
    with pytest.raises(EngineError, match=r"no CUDA provider \(installed: .*CPUExecutionProvider"):
        create_engine(resolve_model("yolox-nano").path, device="cuda:0")


@pytest.mark.skipif(not cuda_available(), reason="needs onnxruntime-gpu and a GPU")
def test_cuda_engine() -> None:
    with create_engine(resolve_model("yolox-nano").path, device="cuda") as e:
        assert e.device == "cuda:0" and e.providers[0] == "CUDAExecutionProvider"


def test_yolox_finds_the_person(frames: dict[int, Image]) -> None:
    spec = resolve_model("yolox-nano")
    image = frames[PERSON_FRAME]
    h, w = image.shape[:2]
    pre = Preprocessor(spec, w, h)
    with create_engine(spec.path, threads=2) as engine:
        outputs = engine.infer(pre(image))
    decode = make_decoder(spec)
    dets = decode(outputs, [pre.geometry], 0.25, 0.45, None)[0]
    people = dets.select(dets.class_ids == spec.labels.index("person"))
    assert len(people) >= 1 and people.scores[0] > 0.5
    x1, y1, x2, y2 = people.boxes[0]
    # A standing person: taller than wide, most of the frame's height, inside it.
    assert 0 <= x1 < x2 <= w and 0 <= y1 < y2 <= h
    assert (y2 - y1) > 0.6 * h and 1.5 < (y2 - y1) / (x2 - x1) < 4
    # The class filter keeps only what was asked for.
    assert len(decode(outputs, [pre.geometry], 0.25, 0.45, frozenset({2}))[0]) == 0
    assert len(decode(outputs, [pre.geometry], 0.25, 0.45, frozenset({0}))[0]) == len(people)


def test_yunet_matches_opencv(frames: dict[int, Image]) -> None:
    """Same file, same unscaled input: our decode must equal cv2.FaceDetectorYN's."""
    image = frames[FACE_FRAME]
    h, w = image.shape[:2]
    # input_size >= the frame, so neither side rescales (OpenCV feeds the frame as is).
    spec = replace(resolve_model("yunet"), input_size=(w, w))
    pre = Preprocessor(spec, w, h)
    with create_engine(spec.path) as engine:
        decode = make_decoder(spec, engine.output_names)
        dets = decode(engine.infer(pre(image)), [pre.geometry], 0.5, 0.3, None)[0]
    ref = cv2.FaceDetectorYN.create(str(spec.path), "", (w, h), 0.5, 0.3, 5000)
    _, faces = ref.detect(image)
    assert faces is not None and len(dets) == len(faces) >= 1
    ref_boxes = faces[:, :4].copy()
    ref_boxes[:, 2:] += ref_boxes[:, :2]
    np.testing.assert_allclose(dets.boxes, ref_boxes, atol=0.05)
    np.testing.assert_allclose(dets.scores, faces[:, 14], atol=1e-4)
    assert dets.landmarks is not None
    np.testing.assert_allclose(dets.landmarks.reshape(-1, 10), faces[:, 4:14], atol=0.05)


def test_yunet_default_size_is_well_formed(frames: dict[int, Image]) -> None:
    spec = resolve_model("yunet")
    image = frames[FACE_FRAME]
    pre = Preprocessor(spec, image.shape[1], image.shape[0])
    assert (pre.input_h, pre.input_w) == (384, 640)
    with create_engine(spec.path) as engine:
        dets = make_decoder(spec)(engine.infer(pre(image)), [pre.geometry], 0.3, 0.3, None)[0]
    assert dets.landmarks is not None and dets.landmarks.shape == (len(dets), 5, 2)
    assert len(dets) >= 1 and set(dets.class_ids.tolist()) == {0}


def test_cuda_fp32_means_full_fp32_not_tf32() -> None:
    from framelens.core.stages.engines.onnxruntime_cpu import providers_for

    available = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    device, providers = providers_for("cuda:1", available, {"user_compute_stream": "7"})
    assert device == "cuda:1"
    name, options = providers[0]
    assert name == "CUDAExecutionProvider" and providers[1] == "CPUExecutionProvider"
    assert options == {"device_id": 1, "use_tf32": "0", "user_compute_stream": "7"}


def test_a_worker_that_fails_to_load_closes_the_ones_built_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run or the player builds one pipeline per worker; if a later one cannot load
    (a model deleted meanwhile, memory running out), the earlier ones are released."""
    from framelens.core.pipeline import build
    from framelens.core.pipeline.frame_pipeline import FramePipeline
    from framelens.core.pipeline.settings import PipelineSettings

    closed: list[FramePipeline] = []
    real_close = FramePipeline.close

    def recording_close(self: FramePipeline) -> None:
        closed.append(self)
        real_close(self)

    monkeypatch.setattr(FramePipeline, "close", recording_close)
    good = PipelineSettings(resolve_model("yolox-nano"))
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not an onnx file")
    bad = replace(good, model=replace(good.model, path=broken))
    calls = 0
    real_host_pipeline = build.host_pipeline

    def third_fails(settings: PipelineSettings, **kw: bool) -> FramePipeline:
        nonlocal calls
        calls += 1
        return real_host_pipeline(bad if calls == 3 else settings, **kw)

    monkeypatch.setattr(build, "host_pipeline", third_fails)
    with pytest.raises(ModelError) as failure:
        build.workers(good, extra=2)
    assert len(closed) == 2
    assert "\n" not in str(failure.value)
    built = build.workers(good)
    assert len(built.pipelines) >= 1 and not closed[2:]
    built.close()
