"""A saved video wall (.flwall): written and read back as the user left it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from framelens.core.errors import ConfigError, ExportError
from framelens.core.sessions.wall_layout import WallLayout, load_wall_layout, save_wall_layout


def test_a_wall_reads_back_with_its_sources_and_grid_and_moves_with_its_folder(
    tmp_path: Path,
) -> None:
    """Files beside or below the layout are stored relative to it, so the folder can move;
    others stay absolute; addresses and camera indexes are kept as given."""
    footage = tmp_path / "site"
    (footage / "north").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere.mp4"
    specs = (
        str(footage / "gate.mp4"),
        str(footage / "north" / "door.mkv"),
        str(elsewhere),
        "rtsp://127.0.0.1:8554/cam",
        "0",
    )
    path = save_wall_layout(footage / "site.flwall", WallLayout(specs, "3x3"))
    stored = json.loads(path.read_text())
    assert stored["sources"][:2] == ["gate.mp4", "north/door.mkv"]
    assert stored["sources"][2] == str(elsewhere.resolve())
    assert load_wall_layout(path) == WallLayout(
        (str(footage.resolve() / "gate.mp4"), str(footage.resolve() / "north" / "door.mkv"),
         str(elsewhere.resolve()), "rtsp://127.0.0.1:8554/cam", "0"),
        "3x3",
    )  # fmt: skip
    moved = shutil.move(str(footage), str(tmp_path / "archive"))
    again = load_wall_layout(Path(moved) / "site.flwall")
    assert again.sources[0] == str((tmp_path / "archive").resolve() / "gate.mp4")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x00\x01 not text", "not a FrameLens wall layout"),
        (b"{not json", r"not a FrameLens wall layout \(not JSON\)"),
        (b'{"sources": ["a.mp4"]}', "not a FrameLens wall layout"),
        (b'{"framelens_wall": 7, "sources": ["a.mp4"]}', "format 7 is not known"),
        (b'{"framelens_wall": 1, "sources": []}', "non-empty list"),
        (b'{"framelens_wall": 1, "sources": ["a.mp4", " "]}', "non-empty list"),
        (b'{"framelens_wall": 1, "sources": ["a.mp4"], "layout": "5x5"}', "unknown layout"),
    ],
)
def test_a_file_that_is_not_a_wall_layout_is_refused_in_one_line(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "broken.flwall"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=message) as caught:
        load_wall_layout(path)
    assert "\n" not in str(caught.value)


def test_a_layout_that_cannot_be_written_leaves_nothing_and_says_why(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="cannot write"):
        save_wall_layout(tmp_path / "missing" / "wall.flwall", WallLayout(("a.mp4",)))
    with pytest.raises(ExportError, match="at least one source"):
        save_wall_layout(tmp_path / "wall.flwall", WallLayout(()))
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ConfigError, match="cannot read wall layout"):
        load_wall_layout(tmp_path / "wall.flwall")


def test_a_link_in_the_footage_folder_stays_a_link_beside_the_layout(tmp_path: Path) -> None:
    """A camera's file linked into the folder (from a NAS, say) is stored by its name in
    the folder, not by where the link points, so the layout still moves with the folder."""
    nas = tmp_path / "nas"
    nas.mkdir()
    (nas / "x.mp4").write_bytes(b"")
    footage = tmp_path / "site"
    footage.mkdir()
    (footage / "gate.mp4").symlink_to(nas / "x.mp4")
    path = save_wall_layout(footage / "site.flwall", WallLayout((str(footage / "gate.mp4"),)))
    assert json.loads(path.read_text())["sources"] == ["gate.mp4"]
    with pytest.raises(ExportError, match="cannot be empty"):
        save_wall_layout(footage / "other.flwall", WallLayout(("",)))


def test_a_file_named_like_a_camera_beside_the_layout_reads_back_as_that_file(
    tmp_path: Path,
) -> None:
    """A video called ``0`` beside the layout is stored as ``./0``: read back, it is that
    file again, not camera 0 (which stays ``0``)."""
    (tmp_path / "0").write_bytes(b"")
    path = save_wall_layout(tmp_path / "site.flwall", WallLayout((str(tmp_path / "0"), "0")))
    assert json.loads(path.read_text())["sources"] == ["./0", "0"]
    assert load_wall_layout(path).sources == (str(tmp_path.resolve() / "0"), "0")
