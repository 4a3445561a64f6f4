"""The bundled catalogue, and recognition of users' ONNX models."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from framelens.core.errors import ModelError
from framelens.core.models.catalog import (
    DEFAULT_MODEL,
    load_catalog,
    model_sha256,
    read_labels,
    resolve_model,
)
from framelens.core.models.inspect import inspect_model
from onnx_factory import constant_model, ultralytics_metadata, yolov5_repo_metadata

ROOT = Path(__file__).resolve().parents[2]
SHARED_SUMS = Path("/work/shared/models/SHA256SUMS")
COCO = [f"c{i}" for i in range(80)]


def zeros(*shape: int) -> npt.NDArray[np.float32]:
    return np.zeros(shape, np.float32)


# ------------------------------------------------------------------ catalogue


def test_catalogue_entries() -> None:
    cat = load_catalog()
    assert next(iter(cat)) == DEFAULT_MODEL == "yolox-nano"
    yolox, yunet = cat["yolox-nano"], cat["yunet"]
    assert (yolox.layout, yolox.task, yolox.input_size) == ("yolox", "detect", (416, 416))
    assert (yolox.color_order, yolox.input_scale, yolox.letterbox, yolox.pad_value) == (
        "bgr",
        1.0,
        "topleft",
        114,
    )
    assert (
        len(yolox.labels) == 80 and yolox.labels[0] == "person" and yolox.label(79) == "toothbrush"
    )
    assert (yunet.layout, yunet.task, yunet.labels, yunet.dynamic_input) == (
        "yunet",
        "faces",
        ("face",),
        True,
    )
    for spec in cat.values():
        assert spec.path.is_file() and spec.licence == "Apache-2.0" and spec.origin


def test_catalogue_agrees_with_the_files() -> None:
    """What the catalogue says fits what the ONNX files declare."""
    for spec in load_catalog().values():
        seen = inspect_model(spec.path, layout=spec.layout)
        assert (seen.task, len(seen.labels)) == (spec.task, len(spec.labels))
        if not spec.dynamic_input:
            assert seen.input_size == spec.input_size


def test_licences_file_names_every_model() -> None:
    text = (ROOT / "models" / "LICENSES.md").read_text()
    for spec in load_catalog().values():
        assert spec.path.name in text


def test_aliases_and_unknown_names() -> None:
    assert resolve_model("yunet_s").name == "yunet"
    assert resolve_model("yolox").name == "yolox-nano"
    with pytest.raises(ModelError, match="unknown model 'nope'"):
        resolve_model("nope")
    with pytest.raises(ModelError, match="does not exist"):
        resolve_model("missing/model.onnx")


def test_catalogue_model_options_must_agree(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="--layout yolov5"):
        resolve_model("yolox-nano", layout="yolov5")
    with pytest.raises(ModelError, match="faces"):
        resolve_model("yolox-nano", task="faces")
    few = tmp_path / "few.txt"
    few.write_text("a\nb\n")
    with pytest.raises(ModelError, match="2 labels"):
        resolve_model("yolox-nano", labels_file=str(few))
    many = tmp_path / "many.txt"
    many.write_text("\n".join(f"n{i}" for i in range(80)))
    assert resolve_model("yolox-nano", labels_file=str(many)).labels[5] == "n5"


def test_model_sha256_matches_and_follows_changes(tmp_path: Path) -> None:
    pairs = (line.split() for line in SHARED_SUMS.read_text().splitlines() if line)
    sums = {name: digest for digest, name in pairs}
    for spec in load_catalog().values():
        if spec.path.name in sums:
            assert model_sha256(spec.path) == sums[spec.path.name]
    f = tmp_path / "w.onnx"
    f.write_bytes(b"one")
    assert model_sha256(f) == hashlib.sha256(b"one").hexdigest()
    f.write_bytes(b"two!")
    os.utime(f, ns=(1, 10**18))  # a different mtime even on a coarse clock
    assert model_sha256(f) == hashlib.sha256(b"two!").hexdigest()


def test_read_labels_formats(tmp_path: Path) -> None:
    lines = tmp_path / "l.txt"
    lines.write_text("# classes\ncat\n\ndog house\n")
    assert read_labels(lines) == ("cat", "dog house")
    js = tmp_path / "l.json"
    js.write_text(json.dumps(["a", "b"]))
    assert read_labels(js) == ("a", "b")
    js.write_text(json.dumps({"1": "b", "0": "a"}))
    assert read_labels(js) == ("a", "b")
    py = tmp_path / "names.txt"
    py.write_text("{0: 'person', 1: 'bicycle'}")
    assert read_labels(py) == ("person", "bicycle")
    py.write_text("{0: 'a', 2: 'c'}")
    with pytest.raises(ModelError, match="without gaps"):
        read_labels(py)
    with pytest.raises(ModelError, match="cannot read labels"):
        read_labels(tmp_path / "none.txt")


# ------------------------------------------------------- Ultralytics metadata


@pytest.mark.parametrize("n", [3, 80])
def test_ultralytics_yolov8(tmp_path: Path, n: int) -> None:
    names = [f"k{i}" for i in range(n)]
    meta = ultralytics_metadata(names, model="YOLOv8n", imgsz=(320, 320))
    path = constant_model(tmp_path / "best.onnx", {"output0": zeros(1, 4 + n, 2100)}, metadata=meta)
    spec = resolve_model(str(path))
    assert (spec.name, spec.layout, spec.task, spec.labels) == (
        "best",
        "yolov8",
        "detect",
        tuple(names),
    )
    assert (spec.color_order, spec.input_scale, spec.letterbox, spec.pad_value) == (
        "rgb",
        1 / 255,
        "center",
        114,
    )
    assert spec.input_size == (320, 320) and "YOLOv8n" in spec.description


def test_ultralytics_dynamic_input_uses_imgsz(tmp_path: Path) -> None:
    meta = ultralytics_metadata(COCO, imgsz=(480, 640))
    path = constant_model(
        tmp_path / "dyn.onnx",
        {"output0": zeros(1, 84, 6300)},
        input_shape=("batch", 3, "height", "width"),
        output_dims={"output0": ("batch", 84, "anchors")},
        metadata=meta,
    )
    spec = resolve_model(str(path))
    assert (spec.layout, spec.input_size, spec.dynamic_input) == ("yolov8", (480, 640), False)


def test_yolov5_repo_metadata(tmp_path: Path) -> None:
    path = constant_model(
        tmp_path / "v5.onnx", {"output0": zeros(1, 6300, 85)}, metadata=yolov5_repo_metadata(COCO)
    )
    spec = resolve_model(str(path))
    assert (spec.layout, spec.color_order, spec.letterbox) == ("yolov5", "rgb", "center")


@pytest.mark.parametrize(
    "meta",
    [
        ultralytics_metadata(COCO, model="YOLOv10n", end2end=True),
        ultralytics_metadata(COCO, model="YOLO11n", nms=True),
    ],
    ids=["end2end", "nms"],
)
def test_ultralytics_end2end(tmp_path: Path, meta: dict[str, str]) -> None:
    path = constant_model(tmp_path / "e2e.onnx", {"output0": zeros(1, 300, 6)}, metadata=meta)
    assert resolve_model(str(path)).layout == "end2end"


def test_ultralytics_other_tasks_are_refused(tmp_path: Path) -> None:
    meta = ultralytics_metadata(COCO, task="segment")
    path = constant_model(tmp_path / "seg.onnx", {"output0": zeros(1, 116, 2100)}, metadata=meta)
    with pytest.raises(ModelError, match="'segment' model"):
        resolve_model(str(path))


def test_metadata_class_count_must_fit_the_shape(tmp_path: Path) -> None:
    meta = ultralytics_metadata(["a", "b"])
    path = constant_model(tmp_path / "m.onnx", {"output0": zeros(1, 84, 2100)}, metadata=meta)
    with pytest.raises(ModelError, match="lists 2 classes"):
        resolve_model(str(path))


# ------------------------------------------------------ models nothing describes


def test_ambiguous_shape_is_refused_with_what_was_found(tmp_path: Path) -> None:
    path = constant_model(
        tmp_path / "model.onnx", {"output": zeros(1, 3549, 85)}, input_shape=(1, 3, 416, 416)
    )
    with pytest.raises(ModelError) as err:
        resolve_model(str(path))
    msg = str(err.value)
    assert "output 'output' is [1, 3549, 85]" in msg
    assert "YOLOX and YOLOv5 share this shape" in msg
    assert "choose the layout (yolox or yolov5: --layout" in msg and "model.onnx.toml" in msg
    assert "'Output layout' in the import dialog" in msg  # the GUI user is told too
    # Saying the layout settles it; the class count follows from the shape.
    spec = resolve_model(str(path), layout="yolox")
    assert (spec.layout, spec.labels[:2], len(spec.labels)) == ("yolox", ("class0", "class1"), 80)


def test_yolov8_shape_without_metadata_needs_a_layout(tmp_path: Path) -> None:
    path = constant_model(tmp_path / "m.onnx", {"output0": zeros(1, 84, 2100)})
    with pytest.raises(ModelError, match=r"choose the layout \(yolov8: --layout"):
        resolve_model(str(path))
    assert resolve_model(str(path), layout="yolov8").color_order == "rgb"


def test_layout_that_contradicts_the_shape(tmp_path: Path) -> None:
    path = constant_model(tmp_path / "m.onnx", {"output": zeros(1, 2100, 85)})
    with pytest.raises(ModelError, match="layout yolov8 needs"):
        resolve_model(str(path), layout="yolov8")
    with pytest.raises(ModelError, match="layout end2end needs"):
        resolve_model(str(path), layout="end2end")
    labels = tmp_path / "three.txt"
    labels.write_text("a\nb\nc\n")
    with pytest.raises(ModelError, match="80 classes, but there are 3 labels"):
        resolve_model(str(path), layout="yolov5", labels_file=str(labels))
    with pytest.raises(ModelError, match="unknown layout"):
        resolve_model(str(path), layout="ssd")


def test_task_that_contradicts_the_layout(tmp_path: Path) -> None:
    path = constant_model(tmp_path / "m.onnx", {"output": zeros(1, 2100, 85)})
    with pytest.raises(ModelError, match="'detect' model"):
        resolve_model(str(path), layout="yolov5", task="faces")
    assert resolve_model(str(path), layout="yolov5", task="detect").task == "detect"


def test_labels_file_overrides_metadata(tmp_path: Path) -> None:
    meta = ultralytics_metadata(["a", "b", "c"])
    path = constant_model(tmp_path / "m.onnx", {"output0": zeros(1, 7, 2100)}, metadata=meta)
    labels = tmp_path / "labels.txt"
    labels.write_text("x\ny\nz\n")
    assert resolve_model(str(path), labels_file=str(labels)).labels == ("x", "y", "z")
    labels.write_text("x\ny\n")
    with pytest.raises(ModelError, match="2 labels"):
        resolve_model(str(path), labels_file=str(labels))


def test_sidecar(tmp_path: Path) -> None:
    path = constant_model(tmp_path / "custom.onnx", {"output": zeros(1, 2100, 7)})
    (tmp_path / "names.txt").write_text("cat\ndog\n")
    (tmp_path / "custom.onnx.toml").write_text(
        'layout = "yolov5"\nlabels_file = "names.txt"\ncolor_order = "bgr"\n'
        'input_scale = 1.0\nletterbox = "topleft"\npad_value = 0\ndescription = "my cats"\n'
    )
    spec = resolve_model(str(path))
    assert (spec.layout, spec.labels, spec.description) == ("yolov5", ("cat", "dog"), "my cats")
    assert (spec.color_order, spec.input_scale, spec.letterbox, spec.pad_value) == (
        "bgr",
        1.0,
        "topleft",
        0,
    )
    # Explicit arguments beat the sidecar.
    with pytest.raises(ModelError, match="layout yolov8 needs"):
        resolve_model(str(path), layout="yolov8")
    spec = resolve_model(str(path), layout="yolox")
    assert (spec.layout, spec.labels, spec.color_order) == ("yolox", ("cat", "dog"), "bgr")


def test_sidecar_mistakes_are_named(tmp_path: Path) -> None:
    path = constant_model(tmp_path / "m.onnx", {"output": zeros(1, 2100, 85)})
    side = tmp_path / "m.onnx.toml"
    side.write_text('layuot = "yolox"\n')
    with pytest.raises(ModelError, match="unknown keys \\['layuot'\\]"):
        resolve_model(str(path))
    side.write_text('layout = "yolox"\ncolor_order = "rgba"\n')
    with pytest.raises(ModelError, match="color_order must be"):
        resolve_model(str(path))
    side.write_text("layout = [\n")
    with pytest.raises(ModelError, match=r"cannot read m\.onnx\.toml"):
        resolve_model(str(path))


# ------------------------------------------------------------- not our models


def test_malformed_files(tmp_path: Path) -> None:
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00\xffnot a model at all" * 10)
    with pytest.raises(ModelError, match=r"junk\.onnx is not a valid ONNX model"):
        resolve_model(str(junk))
    good = constant_model(tmp_path / "good.onnx", {"output": zeros(1, 2100, 85)})
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(ModelError, match=r"cut\.onnx is not a valid ONNX model"):
        resolve_model(str(cut))
    with pytest.raises(ModelError, match="does not exist"):
        resolve_model(str(tmp_path / "gone.onnx"))


def test_non_image_and_classifier_models(tmp_path: Path) -> None:
    vec = constant_model(
        tmp_path / "vec.onnx", {"y": zeros(1, 4)}, input_name="x", input_shape=(1, 10)
    )
    with pytest.raises(ModelError, match=r"input 'x' is \[1, 10\] — not an image model"):
        resolve_model(str(vec))
    gray = constant_model(
        tmp_path / "gray.onnx", {"y": zeros(1, 2100, 85)}, input_shape=(1, 1, 64, 64)
    )
    with pytest.raises(ModelError, match="not an image model"):
        resolve_model(str(gray), layout="yolov5")
    cls = constant_model(tmp_path / "cls.onnx", {"logits": zeros(1, 1000)})
    with pytest.raises(
        ModelError, match=r"output 'logits' is \[1, 1000\], which fits no detection"
    ):
        resolve_model(str(cls))
    with pytest.raises(ModelError, match="layout yolov8 needs"):
        resolve_model(str(cls), layout="yolov8")
