"""Small test clips generated at test time with PyAV, so no binaries live in the repo.

Every frame carries its own index as a row of black/white blocks (``stamp_index``), so a
test can tell which frame it got from the pixels alone, even after lossy compression.
"""

from __future__ import annotations

import os
import wave
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import numpy.typing as npt

os.environ.setdefault("SVT_LOG", "1")  # SVT-AV1 prints its whole config otherwise

BITS = 12  # up to 4095 frames
_BLOCK = 8  # block side in pixels; big enough to survive heavy quantisation


def stamp_index(index: int, width: int, height: int) -> npt.NDArray[np.uint8]:
    """A BGR frame whose top row of blocks spells ``index`` in binary, plus a gradient."""
    img = np.zeros((height, width, 3), np.uint8)
    img[:, :, 1] = np.linspace(0, 120, width, dtype=np.uint8)[None, :]
    for bit in range(BITS):
        if index >> bit & 1:
            x = bit * _BLOCK
            img[0:_BLOCK, x : x + _BLOCK] = 255
    return img


def read_index(image: npt.NDArray[np.uint8]) -> int:
    """Inverse of ``stamp_index``."""
    value = 0
    for bit in range(BITS):
        x = bit * _BLOCK
        block = image[2 : _BLOCK - 2, x + 2 : x + _BLOCK - 2, 0]
        if block.mean() > 128:
            value |= 1 << bit
    return value


def write_clip(
    path: Path,
    *,
    codec: str = "libx264",
    frames: int = 60,
    fps: int = 25,
    size: tuple[int, int] = (128, 96),
    gop: int = 10,
    container_options: dict[str, str] | None = None,
    audio: bool = False,
) -> Path:
    """Encode ``frames`` stamped frames into ``path`` (container chosen by extension)."""
    width, height = size
    with av.open(str(path), "w", options=container_options or {}) as out:
        stream = out.add_stream(codec, rate=fps)
        stream.width, stream.height = width, height
        stream.pix_fmt = "yuv420p"
        stream.codec_context.gop_size = gop
        stream.codec_context.time_base = Fraction(1, fps)
        if codec == "libx265":
            stream.codec_context.options = {"x265-params": "log-level=error"}
        elif codec == "libsvtav1":
            stream.codec_context.options = {"preset": "12"}
        audio_stream = out.add_stream("aac", rate=8000) if audio else None
        for i in range(frames):
            frame = av.VideoFrame.from_ndarray(stamp_index(i, width, height), format="bgr24")
            frame.pts = i
            frame.time_base = Fraction(1, fps)
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
        if audio_stream is not None:
            samples = np.zeros((1, 8000 * frames // fps), np.float32)
            aframe = av.AudioFrame.from_ndarray(samples, format="fltp", layout="mono")
            aframe.sample_rate = 8000
            out.mux(audio_stream.encode(aframe))
            out.mux(audio_stream.encode(None))
    return path


def write_wav(path: Path) -> Path:
    """An audio-only file: a valid media file without any video stream."""
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\x00\x00" * 800)
    return path


def write_undecodable(path: Path) -> Path:
    """An AVI whose video stream is AVS2, a codec FFmpeg knows but PyAV's build can't decode.

    The clip is encoded as MPEG-4 Part 2 (FourCC FMP4) and the FourCC is rewritten in the
    stream header and the bitmap header, which is all FFmpeg uses to pick the decoder.
    """
    tmp = write_clip(path.with_suffix(".tmp.avi"), codec="mpeg4", frames=5)
    data = tmp.read_bytes()
    assert data.count(b"FMP4") == 2, "AVI layout changed; update the FourCC patch"
    path.write_bytes(data.replace(b"FMP4", b"AVS2"))
    tmp.unlink()
    return path


def sample_frames(path: Path, indices: tuple[int, ...]) -> list[npt.NDArray[np.uint8]]:
    """Copies of the frames at ``indices`` of a real video (decoded by FrameLens' file
    source, as a run decodes them), in the order given."""
    from framelens.core.stages.sources.file import FileSource

    found: dict[int, npt.NDArray[np.uint8]] = {}
    with FileSource(path) as src:
        for frame in src:
            if frame.index in indices:
                found[frame.index] = frame.image.copy()
            if len(found) == len(set(indices)):
                break
    assert len(found) == len(set(indices)), f"{path} has no frames {sorted(indices)}"
    return [found[i] for i in indices]


def encode_frames(path: Path, images: list[npt.NDArray[np.uint8]], *, rate: int = 10) -> Path:
    """Real frames as an H.264 yuv420p video (libx264 through PyAV), frame for frame."""
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=rate)
        stream.width, stream.height = images[0].shape[1], images[0].shape[0]
        stream.pix_fmt = "yuv420p"
        for image in images:
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def write_broken_folder(folder: Path, sample: Path, start: int, count: int, bad: int) -> Path:
    """An image folder of ``count`` real frames of ``sample`` whose image ``bad`` is not
    an image (a camera's card that went bad there): a source that breaks mid-run."""
    import cv2

    folder.mkdir(parents=True, exist_ok=True)
    for i, image in enumerate(sample_frames(sample, tuple(range(start, start + count)))):
        cv2.imwrite(str(folder / f"{i:03d}.jpg"), image)
    (folder / f"{bad:03d}.jpg").write_bytes(b"not a jpeg")
    return folder
