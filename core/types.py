"""The data that flows through the pipeline: frames, detections, stage times, results."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

Image = npt.NDArray[np.uint8]
"""An HxWx3 uint8 image in BGR order (OpenCV's convention)."""


class DeviceImage(Protocol):
    """A frame that lives in device memory (the GPU path); downloaded only when asked."""

    @property
    def width(self) -> int: ...

    @property
    def height(self) -> int: ...

    def to_host_bgr(self) -> Image: ...


@dataclass(frozen=True, slots=True)
class PixelsNotKept:
    """The frame of a result made without pixels (a run that writes only detections):
    its size is known, its pixels were never converted for display."""

    width: int
    height: int

    def to_host_bgr(self) -> Image:
        raise RuntimeError("this run keeps no frame pixels (it writes only detections)")


class Frame:
    """One decoded frame. ``index`` is the source frame index, ``pts`` seconds, and
    ``source_id`` which source of a run it came from (0 when there is one source).
    ``arrived``: when a paced source released it (a file played as a camera delivers:
    core/stages/sources/paced.py), on ``now_ms``'s clock; None for a frame read when
    asked for. End-to-end times count from it when it is known.

    On the CPU path ``image`` is the host BGR array. On the GPU path the pixels stay
    in device memory (``device``) and ``image`` downloads them on first use, so only
    the sinks that need host pixels (export, snapshot) pay for the copy.
    """

    __slots__ = ("_image", "arrived", "device", "index", "pts", "source_id")

    def __init__(
        self,
        image: Image | None,
        index: int,
        pts: float,
        *,
        device: DeviceImage | None = None,
        source_id: int = 0,
    ) -> None:
        if image is None and device is None:
            raise ValueError("a Frame needs an image or a device image")
        self._image = image
        self.device = device
        self.index = index
        self.pts = pts
        self.source_id = source_id
        self.arrived: float | None = None

    @property
    def image(self) -> Image:
        if self._image is None:
            assert self.device is not None
            self._image = self.device.to_host_bgr()
        return self._image

    @property
    def on_host(self) -> bool:
        """True when ``image`` is already a host array (no download needed)."""
        return self._image is not None

    @property
    def width(self) -> int:
        if self._image is not None:
            return int(self._image.shape[1])
        assert self.device is not None
        return int(self.device.width)

    @property
    def height(self) -> int:
        if self._image is not None:
            return int(self._image.shape[0])
        assert self.device is not None
        return int(self.device.height)

    def holding(self, image: Image | None = None, *, device: DeviceImage | None = None) -> Frame:
        """The same frame (index, pts, source, release time) with its pixels held
        elsewhere: a result's converted picture, or a host copy of device pixels. A result
        that made its frame anew without ``arrived`` lost its end-to-end latency."""
        frame = Frame(image, self.index, self.pts, device=device, source_id=self.source_id)
        frame.arrived = self.arrived
        return frame

    def release(self, stream: Any = None) -> None:
        """Give back what holds the pixels early (a dropped frame): a host frame holds
        nothing pooled; an NVDEC frame hands its buffer back to the decoder's pool."""
        del stream

    def __repr__(self) -> str:
        where = "host" if self._image is not None else "device"
        return f"Frame(index={self.index}, pts={self.pts:.3f}, {self.width}x{self.height} {where})"


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """What is known about a source once it is open."""

    uri: str
    kind: str  # "file" | "camera" | "stream" | "folder"
    width: int
    height: int
    fps: float
    frame_count: int | None  # None when unknown (camera, live stream)
    codec: str = ""
    seekable: bool = False
    has_audio: bool = False
    duration: float | None = None  # seconds to the end of the last frame, when known


def _empty_f32(*shape: int) -> npt.NDArray[np.float32]:
    return np.zeros(shape, dtype=np.float32)


@dataclass(slots=True)
class Detections:
    """Boxes of one frame as parallel arrays (supervision's pattern).

    boxes: (N, 4) float32 x1, y1, x2, y2 in source pixels.
    scores: (N,) float32. class_ids: (N,) int32.
    landmarks: (N, 5, 2) float32 for face models, else None.
    track_ids: (N,) int64 when a tracker ran (core/stages/tracking): the box's track,
        numbered from 1 per source; -1 for a box that belongs to no confirmed track
        (yet). None when no tracker ran.
    trails: when a tracker ran with trails on, one (k, 2) float32 array per box: the
        centre points of its track's last k observations, oldest first, ending at this
        box (empty for a box with track_id -1). None otherwise.
    """

    boxes: npt.NDArray[np.float32] = field(default_factory=lambda: _empty_f32(0, 4))
    scores: npt.NDArray[np.float32] = field(default_factory=lambda: _empty_f32(0))
    class_ids: npt.NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    landmarks: npt.NDArray[np.float32] | None = None
    track_ids: npt.NDArray[np.int64] | None = None
    trails: tuple[npt.NDArray[np.float32], ...] | None = None

    def __post_init__(self) -> None:
        n = len(self.boxes)
        if self.boxes.shape != (n, 4) or len(self.scores) != n or len(self.class_ids) != n:
            raise ValueError("Detections arrays must have equal length N and boxes (N, 4)")
        if self.landmarks is not None and self.landmarks.shape != (n, 5, 2):
            raise ValueError("landmarks must be (N, 5, 2)")
        if self.track_ids is not None and self.track_ids.shape != (n,):
            raise ValueError("track_ids must be (N,)")
        if self.trails is not None and len(self.trails) != n:
            raise ValueError("trails must have one entry per box")

    def __len__(self) -> int:
        return len(self.boxes)

    def select(self, mask: npt.NDArray[np.bool_] | npt.NDArray[np.intp]) -> Detections:
        """A subset by boolean mask or index array."""
        trails = self.trails
        if trails is not None:
            keep = np.arange(len(self))[mask]
            trails = tuple(trails[int(i)] for i in keep)
        return Detections(
            self.boxes[mask],
            self.scores[mask],
            self.class_ids[mask],
            None if self.landmarks is None else self.landmarks[mask],
            None if self.track_ids is None else self.track_ids[mask],
            trails,
        )

    @staticmethod
    def empty(with_landmarks: bool = False) -> Detections:
        return Detections(landmarks=_empty_f32(0, 5, 2) if with_landmarks else None)


STAGES = (
    "decode", "preprocess", "inference", "postprocess", "track", "display", "draw", "encode",
    "e2e",
)  # fmt: skip
"""Stage names in pipeline order; each means the same work on the CPU and the GPU path:

decode      the source's read (PyAV, NVDEC) of one frame
preprocess  letterbox, colour order, scaling, HWC->CHW into the model input
inference   the engine call (for a batch: the whole call, recorded on each of its frames)
postprocess the task's decoding (boxes, NMS)
track       the per-source stages after the task: the tracker, then lines and zones
            and the heatmap (core/stages/source_stages.py; results taken together
            share their call's time); not part of e2e, which ends when the task's
            result is ready
display     the frame made ready for the screen: the GPU's RGBA kernel (the CPU path shows
            BGR as it is); the window adds its canvas's upload and paint
draw        the task's overlay drawn into the frame (export, snapshots)
encode      the exporter's write
e2e         decode start to result ready (a paced source's frame: its release to result
            ready, its waits in the queues included)
"""


@dataclass(slots=True)
class StageTimes:
    """Milliseconds spent in each stage for one frame. NaN = stage did not run."""

    decode: float = math.nan
    preprocess: float = math.nan
    inference: float = math.nan
    postprocess: float = math.nan
    track: float = math.nan
    display: float = math.nan
    draw: float = math.nan
    encode: float = math.nan
    e2e: float = math.nan

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


TaskOutput = Any
"""What a task produces for one frame: Detections (detection), Upscaled
(super-resolution). Only the task and the sinks made for it look inside, so it is not
narrowed here (core/stages/tasks imports this module, not the other way round)."""


@dataclass(slots=True)
class FrameResult:
    """Everything the sinks (canvas, plots, exporter, JSON writer) receive for a frame.

    ``output`` is the task's (core/stages/tasks); only the task and the sinks made for
    it look inside.
    """

    frame: Frame
    output: TaskOutput
    times: StageTimes
    annotated: Image | None = None  # the frame with overlays, when drawing ran
    events: tuple[Any, ...] = ()  # what per-source stages saw happen (analytics' Event)
    # what per-source stages lay on the frame, each with ``paint(image)`` on a host BGR
    # image (in place): ``layers`` under the task's overlay (the heatmap, drawn when the
    # overlay style's ``style_key`` flag is on), ``marks`` over it (analytics'
    # ZonesPicture: the lines and zones with their counts)
    layers: tuple[Any, ...] = ()
    marks: tuple[Any, ...] = ()
