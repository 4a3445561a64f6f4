"""Small real clips for the batch tests: cut from the bundled sample (people walking)
and tests/data/bottle-detection.mp4 (bottles), re-encoded with PyAV, plus a corrupt file
(an MP4 cut inside its index: a download that stopped)."""

from __future__ import annotations

from pathlib import Path

import av
import cv2
from framelens.core.stages.sources.file import FileSource

ROOT = Path(__file__).resolve().parents[2]
PEOPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
BOTTLES = ROOT / "tests" / "data" / "bottle-detection.mp4"


def cut_clip(
    source: Path, path: Path, start: int, frames: int, size: tuple[int, int] | None = None
) -> Path:
    """``frames`` frames of ``source`` from ``start`` (resized to ``size``) as H.264."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileSource(source) as src, av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=15)
        stream.pix_fmt = "yuv420p"
        src.seek(start)
        for i in range(frames):
            frame = src.read()
            assert frame is not None, f"{source} ends before frame {start + i}"
            image = frame.image if size is None else cv2.resize(frame.image, size)
            if i == 0:
                stream.height, stream.width = image.shape[:2]
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def write_corrupt(clip: Path, path: Path) -> Path:
    """The first 2% of ``clip``: its index cut, no frame readable."""
    data = clip.read_bytes()
    path.write_bytes(data[: len(data) // 50])
    return path
