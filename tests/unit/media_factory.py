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


def encode_frames(
    path: Path,
    images: list[npt.NDArray[np.uint8]],
    *,
    rate: int = 10,
    gop: int | None = None,
    turns: int = 0,
    pixel_aspect: Fraction | None = None,
    faststart: bool = False,
) -> Path:
    """Real frames as an H.264 yuv420p video (libx264 through PyAV), frame for frame;
    ``gop``: a keyframe every that many frames (default: libx264's). ``turns``: stored
    turned that many quarter turns clockwise, with the display matrix that turns them
    back (as a phone records portrait video), so that players show ``images``.
    ``pixel_aspect``: the stream's sample aspect ratio (its pixels' width for 1 high).
    ``faststart``: an MP4's index first, so that it plays as it downloads."""
    stored = [np.ascontiguousarray(np.rot90(image, -turns)) for image in images]
    options = {"movflags": "faststart"} if faststart else {}
    with av.open(str(path), "w", options=options) as out:
        stream = out.add_stream("libx264", rate=rate)
        stream.width, stream.height = stored[0].shape[1], stored[0].shape[0]
        stream.pix_fmt = "yuv420p"
        if gop is not None:
            stream.codec_context.gop_size = gop
        if turns % 4:
            stream.set_display_rotation(90 * (turns % 4))  # counterclockwise, as FFmpeg's
        if pixel_aspect is not None:
            stream.codec_context.sample_aspect_ratio = pixel_aspect
        for image in stored:
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def sample_clips(
    folder: Path, sample: Path, starts: tuple[int, ...], frames: int, *, rate: int = 10
) -> list[str]:
    """Clips of ``frames`` real frames of ``sample`` from each of ``starts``, as H.264
    files ``clip0.mp4``, ``clip1.mp4``... in ``folder`` (sources with their own content)."""
    paths = []
    for n, start in enumerate(starts):
        images = sample_frames(sample, tuple(range(start, start + frames)))
        paths.append(str(encode_frames(folder / f"clip{n}.mp4", images, rate=rate)))
    return paths


def write_broken_folder(folder: Path, sample: Path, start: int, count: int, bad: int) -> Path:
    """An image folder of ``count`` real frames of ``sample`` whose image ``bad`` is not
    an image (a camera's card that went bad there): a source that breaks mid-run."""
    import cv2

    folder.mkdir(parents=True, exist_ok=True)
    for i, image in enumerate(sample_frames(sample, tuple(range(start, start + count)))):
        cv2.imwrite(str(folder / f"{i:03d}.jpg"), image)
    (folder / f"{bad:03d}.jpg").write_bytes(b"not a jpeg")
    return folder


# --- broken inputs (the fuzz corpus, tests/unit/test_fuzz_inputs.py) ---------------------

TRUNCATE_AT = (0.02, 0.05, 0.1, 0.2, 0.3, 0.45, 0.6, 0.75, 0.9, 0.99)
"""Fractions of a faststart MP4 (ftyp, moov, mdat) where ``write_truncated`` cuts it:
the first ones inside the index (moov), the others inside the frames (mdat)."""


def write_truncated(clip: Path, path: Path, fraction: float) -> Path:
    """``clip`` cut short after ``fraction`` of its bytes (a download that stopped)."""
    data = clip.read_bytes()
    path.write_bytes(data[: int(len(data) * fraction)])
    return path


def mp4_boxes(data: bytes) -> dict[str, tuple[int, int]]:
    """The top-level boxes of an MP4: type -> (offset, size)."""
    boxes: dict[str, tuple[int, int]] = {}
    at = 0
    while at + 8 <= len(data):
        size = int.from_bytes(data[at : at + 4], "big")
        boxes[data[at + 4 : at + 8].decode("latin-1")] = (at, size)
        if size < 8:
            break
        at += size
    return boxes


def write_bit_flipped(
    clip: Path, path: Path, *, seed: int, flips: int, region: tuple[int, int] | None = None
) -> Path:
    """``clip`` with ``flips`` single bits inverted at random (seeded) offsets within
    ``region`` (start, end) of its bytes, the whole file by default: a bad disk or
    transfer."""
    import random

    data = bytearray(clip.read_bytes())
    rng = random.Random(seed)
    start, end = region or (0, len(data))
    for _ in range(flips):
        data[rng.randrange(start, end)] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))
    return path


def write_mjpeg_avi(path: Path, *, frames: int = 3, size: tuple[int, int] = (64, 48)) -> Path:
    """Stamped frames as Motion JPEG in AVI: every frame carries its own size (JPEG SOF0)."""
    width, height = size
    with av.open(str(path), "w") as out:
        stream = out.add_stream("mjpeg", rate=10)
        stream.width, stream.height = width, height
        stream.pix_fmt = "yuvj420p"
        for i in range(frames):
            frame = av.VideoFrame.from_ndarray(stamp_index(i, width, height), format="bgr24")
            frame.pts = i
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return path


def write_huge_frame_header(
    path: Path, width: int = 16384, height: int = 16384, *, from_frame: int = 0
) -> Path:
    """A small MJPEG AVI whose frames from ``from_frame`` on claim ``width`` x ``height``
    in their JPEG header (SOF0), and with ``from_frame`` 0 its AVI headers too (main
    header, the stream's frame rectangle and bitmap header): a decoder that believes
    them allocates a frame of that size (16K x 16K: 256 megapixels, ~400 MB as YUV, ~800
    MB as BGR) for 64x48 worth of data. From a later frame on: the picture size jumps
    mid-stream."""
    import struct

    small = write_mjpeg_avi(path.with_suffix(".small.avi"), frames=max(3, from_frame + 2))
    data = bytearray(small.read_bytes())
    small.unlink()
    if from_frame == 0:
        avih = data.find(b"avih")
        struct.pack_into("<II", data, avih + 8 + 32, width, height)  # dwWidth, dwHeight
        strh = data.find(b"strh")
        struct.pack_into("<hhhh", data, strh + 8 + 48, 0, 0, width & 0x7FFF, height & 0x7FFF)
        strf = data.find(b"strf")
        struct.pack_into("<ii", data, strf + 8 + 4, width, height)  # biWidth, biHeight
    at, seen = 0, 0
    while (at := data.find(b"\xff\xc0", at)) >= 0:  # SOF0: length, precision, height, width
        if seen >= from_frame:
            struct.pack_into(">HH", data, at + 5, height, width)
        at, seen = at + 2, seen + 1
    assert seen > from_frame, "no JPEG frame header to patch; update the patch"
    path.write_bytes(bytes(data))
    return path


def write_y4m_header(path: Path, width: int, height: int) -> Path:
    """A YUV4MPEG2 file whose plain-text header declares ``width`` x ``height`` raw
    frames, followed by one small frame's worth of bytes."""
    head = f"YUV4MPEG2 W{width} H{height} F25:1 Ip A1:1 C420jpeg\nFRAME\n".encode()
    path.write_bytes(head + bytes(64 * 48 * 3 // 2))
    return path


def write_size_change(path: Path, sizes: tuple[tuple[int, int], ...], frames: int = 6) -> Path:
    """One MPEG-TS stream whose picture size changes mid-stream: encodes of ``sizes``
    (``frames`` stamped frames each) joined byte for byte, as a live feed that switches
    resolution does."""
    parts = []
    for i, size in enumerate(sizes):
        part = write_clip(path.with_suffix(f".part{i}.ts"), frames=frames, size=size, gop=3)
        parts.append(part.read_bytes())
        part.unlink()
    path.write_bytes(b"".join(parts))
    return path
