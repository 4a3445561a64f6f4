"""Files whose timestamps are not a frame rate's multiples, made with PyAV for the
frame-exact tests: every frame carries its own index as blocks (``stamp_index``), so a
test tells which frame it got from the pixels alone; FFmpeg (ffprobe) is the oracle for
how many frames each file holds and when each one is shown."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np
import numpy.typing as npt
from media_factory import read_index, stamp_index

SIZE = (96, 48)  # 12 blocks of 8 pixels: indices up to 4095

FFPROBE = shutil.which("ffprobe")
FFMPEG = shutil.which("ffmpeg")


@dataclass(frozen=True)
class Made:
    """A generated file and what reading it must give."""

    path: Path
    frames: int
    stored: tuple[int, int]  # width, height as stored (the blocks are read at this size)
    turns: int = 0  # quarter turns the display matrix turns it by (players show it upright)
    first: int = 0  # the stamp of its first frame (a cut starts later)


def encodable(codec: str) -> bool:
    try:
        av.codec.Codec(codec, "w")
    except (av.codec.codec.UnknownCodecError, ValueError):
        return False
    return True


def write_stamped(
    path: Path,
    pts: Sequence[int],
    time_base: Fraction,
    *,
    codec: str = "libx264",
    options: dict[str, str] | None = None,
    size: tuple[int, int] = SIZE,
    turns: int = 0,
    pixel_aspect: Fraction | None = None,
    pictures: Sequence[npt.NDArray[np.uint8]] | None = None,
) -> Made:
    """Frame i (content: i) shown at ``pts[i]`` x ``time_base``; ``pictures``: real
    frames (of ``size``) to stamp, else a plain gradient."""
    width, height = size
    pix_fmt = "rgb8" if codec == "gif" else "yuv420p"
    with av.open(str(path), "w") as out:
        rate = round(1 / (time_base * (pts[1] - pts[0]))) if len(pts) > 1 else 25
        stream = out.add_stream(codec, rate=rate, options=options or {})
        stored = (height, width) if turns % 2 else (width, height)
        stream.width, stream.height = stored
        stream.pix_fmt = pix_fmt
        stream.codec_context.time_base = time_base
        stream.time_base = time_base
        if turns:
            stream.set_display_rotation(90 * turns)  # counterclockwise, as FFmpeg's
        if pixel_aspect is not None:
            stream.codec_context.sample_aspect_ratio = pixel_aspect
        for i, t in enumerate(pts):
            image = stamp_index(i, width, height)
            if pictures is not None:
                image[8:] = pictures[i][8:]  # the picture below the row of blocks
            image = np.ascontiguousarray(np.rot90(image, -turns))
            frame = av.VideoFrame.from_ndarray(image, format="bgr24").reformat(format=pix_fmt)
            frame.pts, frame.time_base = t, time_base
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return Made(path, len(pts), (width, height), turns)


def content(image: npt.NDArray[np.uint8], made: Made) -> int:
    """The index a frame shows, read at the size it was stamped at (a frame shown with
    square pixels is wider or taller than stored; a turned one is read upright)."""
    width, height = made.stored
    if image.shape[:2] != (height, width):
        image = cv2.resize(image, (width, height), interpolation=cv2.INTER_AREA)
    return read_index(image) - made.first


def uneven_gif(
    path: Path, frames: int = 41, pictures: Sequence[npt.NDArray[np.uint8]] | None = None
) -> Made:
    """An animated GIF whose delays alternate 8 and 9 centiseconds (GIF's time base)."""
    pts = [sum(8 + k % 2 for k in range(i)) for i in range(frames)]
    size = (pictures[0].shape[1], pictures[0].shape[0]) if pictures else SIZE
    return write_stamped(path, pts, Fraction(1, 100), codec="gif", size=size, pictures=pictures)


def rate_change(path: Path, frames: int = 90) -> Made:
    """30 fps for the first half, then 15 fps (a phone or screen recording saving power),
    a keyframe every 10 frames (a seek starts from one)."""
    half = frames // 2
    pts = [i if i < half else half + 2 * (i - half) for i in range(frames)]
    return write_stamped(path, pts, Fraction(1, 30), options={"g": "10"})


def jittered(path: Path, frames: int = 60) -> Made:
    """25 fps with every timestamp a few milliseconds early or late (a capture card)."""
    rng = random.Random(7)
    pts = [i * 40 + rng.randint(-6, 6) if i else 0 for i in range(frames)]
    return write_stamped(path, pts, Fraction(1, 1000))


def ffmpeg_made(made: Made, path: Path, *args: str, seek: str | None = None) -> Made:
    """``made`` re-encoded or cut by the FFmpeg command line (``args``: its output
    options; ``seek``: ``-ss`` before the input): files as FFmpeg writes them, edit lists
    and MPEG-TS included. How many
    frames it holds and the stamp of the first: as FFmpeg's libraries decode it."""
    assert FFMPEG is not None
    start = ["-ss", seek] if seek else []
    command = [FFMPEG, "-v", "error", "-y", *start, "-i", str(made.path), *args, str(path)]
    subprocess.run(command, check=True, timeout=120)
    with av.open(str(path)) as container:
        stamps = [read_index(f.to_ndarray(format="bgr24")) for f in container.decode(video=0)]
    return Made(path, len(stamps), made.stored, made.turns, stamps[0])


def with_tone(made: Made, path: Path, start_s: float, end_s: float) -> Made:
    """``made`` with an AAC sound track, silent but for a 440 Hz tone in [start_s, end_s)."""
    assert FFMPEG is not None
    tone = f"aevalsrc=if(between(t\\,{start_s}\\,{end_s})\\,sin(2*PI*440*t)\\,0):s=48000:d=6"
    command = [
        FFMPEG, "-v", "error", "-y", "-i", str(made.path), "-f", "lavfi", "-i", tone,
        "-map", "0:v", "-map", "1:a", "-c:v", "copy", "-c:a", "aac", str(path),
    ]  # fmt: skip
    subprocess.run(command, check=True, timeout=120)
    return Made(path, made.frames, made.stored, made.turns, made.first)


def loudness(path: Path, start_s: float, end_s: float) -> float:
    """The RMS level of ``path``'s sound in [start_s, end_s) (1.0: full scale)."""
    with av.open(str(path)) as container:
        chunks = [
            (float(f.pts * f.time_base), f.to_ndarray().reshape(-1), f.sample_rate)
            for f in container.decode(audio=0)
        ]
    picked = [
        samples[max(0, round((start_s - t) * rate)) : max(0, round((end_s - t) * rate))]
        for t, samples, rate in chunks
    ]
    joined = np.concatenate(picked)
    return float(np.sqrt(np.mean(joined.astype(np.float64) ** 2))) if joined.size else 0.0


def ffprobe_frames(path: Path) -> list[float]:
    """FFmpeg's own reading of ``path``: each decoded frame's time, in seconds."""
    assert FFPROBE is not None
    done = subprocess.run(
        [FFPROBE, "-v", "error", "-select_streams", "v:0", "-show_entries",
         "frame=pts_time,best_effort_timestamp_time", "-of", "json", str(path)],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    frames = json.loads(done.stdout)["frames"]
    return [float(f.get("pts_time", f.get("best_effort_timestamp_time", "nan"))) for f in frames]


def ffprobe_count(path: Path) -> int:
    """``ffprobe -count_frames``: how many frames FFmpeg decodes from ``path``."""
    assert FFPROBE is not None
    done = subprocess.run(
        [FFPROBE, "-v", "error", "-count_frames", "-select_streams", "v:0",
         "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", str(path)],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    return int(done.stdout.split()[0].strip(","))  # MPEG-TS repeats it per program
