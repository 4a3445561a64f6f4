"""Calibration frames: N frames spread over the user's source, preprocessed as inference does."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from framelens.core.errors import Cancelled, SourceError
from framelens.core.models.spec import ModelSpec
from framelens.core.stages.sources import Source, open_source
from framelens.core.stages.tasks import kind_of
from framelens.core.types import Frame

MIN_FRAMES = 2


@dataclass(frozen=True)
class CalibrationFrames:
    """Model-ready tensors of the calibration frames, with what is needed to decode them."""

    tensors: list[npt.NDArray[np.float32]]  # (1, C, H, W) each, own copies
    geometries: list[Any]  # what the task's decode needs of each: detection's Letterbox
    indices: list[int]  # source frame indices
    digest: str  # SHA-256 of the decoded frames and their indices: the cache identity
    source: str

    def __len__(self) -> int:
        return len(self.tensors)

    def subset(self, count: int) -> CalibrationFrames:
        """``count`` of the frames, spread evenly over them (for the sensitivity scores)."""
        picks = spread_indices(len(self), min(count, len(self)))
        return CalibrationFrames(
            [self.tensors[i] for i in picks],
            [self.geometries[i] for i in picks],
            [self.indices[i] for i in picks],
            self.digest,
            self.source,
        )


def spread_indices(count: int, n: int) -> list[int]:
    """``n`` indices spread evenly over ``range(count)``: the middle of n equal parts."""
    if count <= 0 or n <= 0:
        return []
    if n >= count:
        return list(range(count))
    return sorted({int((i + 0.5) * count / n) for i in range(n)})


def _frames_of(
    source: Source,
    n: int,
    on_frame: Callable[[int], None],
    cancel: threading.Event | None,
) -> list[Frame]:
    info = source.info
    frames: list[Frame] = []
    if info.seekable and info.frame_count:
        for index in spread_indices(info.frame_count, n):
            if cancel is not None and cancel.is_set():
                raise Cancelled("calibration cancelled")
            source.seek(index)
            frame = source.read()
            if frame is None:
                break  # the index overstated the length; keep what was read
            frames.append(frame)
            on_frame(len(frames))
        return frames
    # Live or unsized sources: about one frame per second as they come.
    stride = max(1, round(info.fps)) if info.fps > 0 else 1
    seen = 0
    while len(frames) < n:
        if cancel is not None and cancel.is_set():
            raise Cancelled("calibration cancelled")
        frame = source.read()
        if frame is None:
            break
        if seen % stride == 0:
            frames.append(frame)
            on_frame(len(frames))
        seen += 1
    return frames


def read_calibration_frames(
    spec: ModelSpec,
    source: str,
    n: int,
    *,
    on_progress: Callable[[int, int], None] | None = None,
    cancel: threading.Event | None = None,
    patch: int = 128,
) -> CalibrationFrames:
    """Decode ``n`` frames spread over ``source`` and preprocess them for ``spec`` as its
    task's ``calibration_input`` says (a super-resolution model: the most detailed
    ``patch`` x ``patch`` square of each).

    Files and image folders are sampled evenly over their whole length (by seeking);
    cameras and streams give about one frame a second. SourceError when fewer than
    two frames could be read.
    """

    def on_frame(done: int) -> None:
        if on_progress is not None:
            on_progress(done, n)

    digest = hashlib.sha256()
    tensors: list[npt.NDArray[np.float32]] = []
    geometries: list[Any] = []
    indices: list[int] = []
    with open_source(source) as src:
        frames = _frames_of(src, n, on_frame, cancel)
        calibration_input = kind_of(spec).task.calibration_input
        for frame in frames:
            tensor, geometry = calibration_input(spec, frame.image, patch)
            tensors.append(tensor)
            geometries.append(geometry)
            indices.append(frame.index)
            digest.update(f"{frame.index}:{frame.width}x{frame.height}:".encode())
            digest.update(np.ascontiguousarray(frame.image).tobytes())
    if len(tensors) < MIN_FRAMES:
        raise SourceError(
            f"{source} gave {len(tensors)} frame(s); INT8 calibration needs at least {MIN_FRAMES}"
        )
    return CalibrationFrames(tensors, geometries, indices, digest.hexdigest(), source)
