"""Lossless exports, for evidence work: decoding returns exactly the BGR pixels computed.

- ``OUT.mkv`` with lossless: FFV1 (FFmpeg's lossless intra codec) in ``bgr0``, no
  colour conversion on the way in or out; provenance in the container's tags.
- ``DIR/`` (a path ending in a separator, or an existing folder): one PNG per frame,
  ``frame_000100.png`` ... named by the frame's index in its source (0-based, as
  ``--start`` counts; 8-bit RGB, as PNG stores colour), and ``provenance.json`` with the
  run's metadata, each file's source index and timestamp.

Both write to a staging file or folder and appear complete on close() or not at all,
like the lossy VideoExporter, whose write/close/abort they share.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any, Protocol

import av
import cv2
from framelens.core.errors import ExportError
from framelens.core.stages.sinks.atomic import AtomicFile, StrPath, error_text
from framelens.core.stages.sinks.atomic_dir import AtomicDir
from framelens.core.stages.sinks.video import VideoExporter
from framelens.core.types import Image

PROVENANCE = "provenance.json"


class FrameExporter(Protocol):
    """What a run writes its frames to: the lossy VideoExporter or a lossless one."""

    path: Path
    frames_written: int
    encoder_name: str

    def write(self, image: Image, pts_s: float, index: int | None = None) -> None:
        """``index``: the frame's index in its source (PNG folders are named by it)."""
        ...

    def close(self) -> Path: ...

    def abort(self) -> None: ...


def is_folder_target(path: StrPath) -> bool:
    text = os.fspath(path)
    return text.endswith(("/", os.sep)) or Path(text).is_dir()


def _check_frame(path: Path, image: Image, width: int, height: int) -> None:
    if image.shape != (height, width, 3) or image.dtype.name != "uint8":
        raise ExportError(
            f"cannot write {path}: frame {image.shape} {image.dtype} does not match "
            f"{width}x{height} BGR uint8"
        )


class FfvExporter:
    """FFV1 in Matroska, bgr0: bit-exact BGR frames."""

    def __init__(
        self, path: StrPath, *, width: int, height: int, fps: float, metadata: Mapping[str, str]
    ) -> None:
        target = Path(path)
        if target.suffix.lower() != ".mkv":
            raise ExportError(
                f"cannot write {target} losslessly: use OUT.mkv (FFV1) or a folder DIR/ (PNGs)"
            )
        if width <= 0 or height <= 0 or not (fps > 0 and math.isfinite(fps)):
            raise ExportError(f"cannot write {target}: bad size {width}x{height} or fps {fps}")
        self.width, self.height = width, height
        self.frames_written = 0
        self.encoder_name = "ffv1"  # no audio: the frames are the evidence
        self._file = AtomicFile(target)
        self.path: Path = self._file.target
        self._last_pts = -1
        self._t0: float | None = None
        try:
            self._out: Any = av.open(str(self._file.tmp), "w", format="matroska")
            self._out.metadata.update(dict(metadata))
            rate = Fraction(fps).limit_denominator(1001)
            self._stream: Any = self._out.add_stream("ffv1", rate=rate)
            self._stream.width, self._stream.height = width, height
            self._stream.pix_fmt = "bgr0"
            # Matroska keeps milliseconds; the encoder too, else it rounds every frame's
            # time to a tick of the average rate (a variable-rate source's gaps lost)
            self._stream.time_base = Fraction(1, 1000)
            self._stream.codec_context.time_base = Fraction(1, 1000)
            self._out.start_encoding()
        except (av.FFmpegError, OSError, ValueError) as exc:
            self.abort()
            raise ExportError(f"cannot write {self.path}: {error_text(exc)}") from None

    def write(self, image: Image, pts_s: float, index: int | None = None) -> None:
        _check_frame(self.path, image, self.width, self.height)
        if self._t0 is None:
            self._t0 = pts_s
        pts = max(round((pts_s - self._t0) * 1000), self._last_pts + 1)
        self._last_pts = pts
        try:
            frame = av.VideoFrame.from_ndarray(image, format="bgr24").reformat(format="bgr0")
            frame.pts = pts
            frame.time_base = Fraction(1, 1000)
            self._out.mux(self._stream.encode(frame))
        except (av.FFmpegError, OSError) as exc:
            self.abort()
            raise ExportError(f"cannot write {self.path}: {error_text(exc)}") from None
        self.frames_written += 1

    def close(self) -> Path:
        if self.frames_written == 0:
            self.abort()
            raise ExportError(f"cannot write {self.path}: no frames were written")
        try:
            self._out.mux(self._stream.encode(None))
            self._out.close()
        except (av.FFmpegError, OSError) as exc:
            self.abort()
            raise ExportError(f"cannot write {self.path}: {error_text(exc)}") from None
        return self._file.commit()

    def abort(self) -> None:
        out, self._out = getattr(self, "_out", None), None
        if out is not None:
            with contextlib.suppress(av.FFmpegError, OSError):  # thrown away anyway
                out.close()
        self._file.discard()


def _own_files(folder: Path) -> set[str]:
    """The files an earlier PNG export left in ``folder`` (it has our provenance.json):
    a new export may replace those, never anything else."""
    if not (folder / PROVENANCE).is_file():
        return set()
    own = {PROVENANCE}
    own |= {p.name for p in folder.glob("frame_*.png") if p.stem[6:].isdigit()}
    return own


class PngFolderExporter:
    """One PNG per frame in a folder, plus provenance.json."""

    def __init__(self, path: StrPath, *, width: int, height: int, meta: Mapping[str, Any]) -> None:
        self.width, self.height = width, height
        self.frames_written = 0
        self.encoder_name = "png"
        self._meta = dict(meta)
        self._pts: list[float] = []
        self._numbers: list[int] = []  # each file's number: its source index
        self._seen: set[int] = set()
        target = Path(os.fspath(path).rstrip("/" + os.sep) or ".")
        self._dir = AtomicDir(target, _own_files(target))
        self.path: Path = self._dir.target

    def write(self, image: Image, pts_s: float, index: int | None = None) -> None:
        _check_frame(self.path, image, self.width, self.height)
        number = self.frames_written if index is None else index
        if number in self._seen:
            raise ExportError(f"cannot write {self.path}: frame {number} given twice")
        name = self._dir.tmp / f"frame_{number:06d}.png"
        ok, png = cv2.imencode(".png", image)
        try:  # written here, not by OpenCV, so a failure says why (a full disk)
            if not ok:
                raise OSError(f"cannot encode {name.name}")
            name.write_bytes(png.tobytes())
        except OSError as exc:
            self.abort()
            raise ExportError(
                f"cannot write {name.name} in {self.path}: {error_text(exc)}"
            ) from None
        self._pts.append(pts_s)
        self._numbers.append(number)
        self._seen.add(number)
        self.frames_written += 1

    def close(self) -> Path:
        if self.frames_written == 0:
            self.abort()
            raise ExportError(f"cannot write {self.path}: no frames were written")
        record = {
            **self._meta, "frames": self.frames_written, "index": self._numbers,
            "pts_s": self._pts,
        }  # fmt: skip
        try:
            (self._dir.tmp / PROVENANCE).write_text(json.dumps(record, indent=2) + "\n")
        except OSError as exc:
            self.abort()
            raise ExportError(f"cannot write {self.path}: {error_text(exc)}") from None
        return self._dir.commit()

    def abort(self) -> None:
        self._dir.discard()


def open_exporter(
    path: StrPath,
    *,
    lossless: bool,
    width: int,
    height: int,
    fps: float,
    meta: Mapping[str, Any],
    tags: Mapping[str, str],
    **video: Any,
) -> FrameExporter:
    """The exporter ``path`` asks for: a folder of PNGs (``DIR/``), FFV1 (``.mkv`` with
    ``lossless``) or the encoded video (VideoExporter, ``video`` its options)."""
    if is_folder_target(path):
        return PngFolderExporter(path, width=width, height=height, meta=meta)
    if lossless:
        return FfvExporter(path, width=width, height=height, fps=fps, metadata=tags)
    return VideoExporter(path, width=width, height=height, fps=fps, metadata=tags, **video)
