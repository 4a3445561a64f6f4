"""A model shipped to a process that cannot see its folder (core/models/shipping.py):
its ONNX file, external data, sidecar and labels file read in one place, and rebuilt in
another process's cache, keyed by their hash, where ONNX Runtime runs it."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from framelens.core.errors import ModelError
from framelens.core.models.catalog import resolve_model
from framelens.core.models.shipping import SHIPPED_DIR, materialise, pack_model
from onnx_factory import tiny_detector_with_external_data


def _outputs(path: Path) -> list[np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return list(session.run(None, {"images": np.zeros((1, 3, 64, 64), np.float32)}))


def test_a_model_with_external_data_and_a_sidecar_is_rebuilt_where_its_folder_is_not(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    model = tiny_detector_with_external_data(folder / "best.onnx")
    (folder / "classes.txt").write_text("cat\ndog\n", encoding="utf-8")
    (folder / "best.onnx.toml").write_text('labels_file = "classes.txt"\n', encoding="utf-8")
    spec = resolve_model(str(model))
    assert spec.labels == ("cat", "dog")
    expected = _outputs(model)

    packed = pack_model(spec)
    assert [name for name, _ in packed.files] == [
        "best.onnx", "best.data", "best.onnx.toml", "classes.txt",
    ]  # fmt: skip
    assert packed.meta == {} and len(packed.key) == 64
    shutil.rmtree(folder)  # another machine: the driver's folder is not there

    cache = tmp_path / "cache"
    local = materialise(packed, spec, cache)
    assert local == replace(spec, path=local.path)
    assert local.path.parent.parent == cache / SHIPPED_DIR
    assert local.path.parent.name.endswith(packed.key[:16])
    for name, data in packed.files:
        assert (local.path.parent / name).read_bytes() == data
    assert all(np.array_equal(a, b) for a, b in zip(_outputs(local.path), expected, strict=True))
    assert resolve_model(str(local.path)).labels == ("cat", "dog")  # the sidecar came too

    # a second worker on the same machine (or a restarted one) reuses the copy
    stamp = local.path.stat().st_mtime_ns
    again = materialise(pack_model(local), spec, cache)  # the same contents: the same key
    assert again.path == local.path and again.path.stat().st_mtime_ns == stamp
    assert sorted(p.name for p in (cache / SHIPPED_DIR).iterdir()) == [local.path.parent.name]


def test_a_shipped_file_named_out_of_its_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    model = tiny_detector_with_external_data(tmp_path / "m" / "best.onnx")
    spec = resolve_model(str(model))
    packed = pack_model(spec)
    bad = replace(packed, files=(*packed.files, ("../outside.txt", b"x")))
    with pytest.raises(ModelError, match="refused"):
        materialise(bad, spec, tmp_path / "cache")
    assert not (tmp_path / "cache" / "outside.txt").exists()
    assert not any((tmp_path / "cache" / SHIPPED_DIR).iterdir())  # no entry, no staging
