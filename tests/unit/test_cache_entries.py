"""A cache entry counts as complete only with every file it was committed with, those
in subfolders too (a model's external data in a folder of its own), and its metadata
never makes FrameLens look outside the entry."""

from __future__ import annotations

import json
from pathlib import Path

from framelens.core.cache import META_FILE, read_entry, staging


def committed(entry: Path) -> Path:
    with staging(entry) as stage:
        (stage.path / "model.onnx").write_bytes(b"graph")
        (stage.path / "weights").mkdir()
        (stage.path / "weights" / "conv.bin").write_bytes(b"w" * 64)
        return stage.commit({"kind": "test"})


def test_an_entry_missing_a_file_in_a_subfolder_is_incomplete(tmp_path: Path) -> None:
    entry = committed(tmp_path / "entry")
    meta = read_entry(entry)
    assert meta is not None and meta["files"] == ["model.onnx", "weights/conv.bin"]
    (entry / "weights" / "conv.bin").unlink()
    assert read_entry(entry) is None  # rebuilt, not loaded with its weights missing


def test_metadata_naming_a_file_outside_the_entry_makes_it_incomplete(tmp_path: Path) -> None:
    entry = committed(tmp_path / "entry")
    (tmp_path / "outside.bin").write_bytes(b"x")
    meta = json.loads((entry / META_FILE).read_text())
    meta["files"].append("../outside.bin")
    (entry / META_FILE).write_text(json.dumps(meta))
    assert read_entry(entry) is None
