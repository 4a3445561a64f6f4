"""Clips for the archive tests: short cuts of the bundled person sample (real frames,
real people, so the detections compared are not empty), encoded with keyframes every
``gop`` frames, and a corrupt file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from media_factory import encode_frames, sample_frames

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"


def sample_clip(path: Path, start: int, frames: int, *, gop: int = 10) -> str:
    images = sample_frames(SAMPLE, tuple(range(start, start + frames)))
    return str(encode_frames(path, images, gop=gop))


def corrupt_clip(path: Path) -> str:
    """A file named like a video whose bytes are not one (a camera's card gone bad)."""
    path.write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 8)
    return str(path)


def json_rows(path: Path | str, source: str) -> list[dict[str, Any]]:
    """A detections JSON's detections as Parquet rows (the columns the archive holds,
    model and precision from its meta, the track ID when the run tracked)."""
    data = json.loads(Path(path).read_text())
    rows = []
    for frame in data["frames"]:
        for det in frame["detections"]:
            x1, y1, x2, y2 = det["box"]
            rows.append(
                {
                    "source": source, "frame": frame["index"], "pts": frame["pts"],
                    "class_id": det["class_id"], "label": det["label"], "score": det["score"],
                    "x1": x1, "y1": y1, "x2": x2, "y2": y2,
                    "model": data["model"], "precision": data["precision"],
                    "track_id": det.get("track_id"),  # a tracked run's; else null
                }
            )  # fmt: skip
    return rows


def parquet_rows(output_dir: Path | str) -> list[dict[str, Any]]:
    """Every row of a batch's Parquet dataset, read by pyarrow.dataset, sorted."""
    import pyarrow.dataset as pads

    table = pads.dataset(str(Path(output_dir) / "detections"), format="parquet").to_table()
    return sorted(table.to_pylist(), key=_order)


def _order(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["source"], row["frame"], -row["score"], row["x1"])


def sorted_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=_order)


def leftovers(folder: Path | str) -> list[str]:
    """Temporaries of unfinished writers anywhere under ``folder``."""
    return sorted(str(p) for p in Path(folder).rglob("*") if ".partial-" in p.name)
