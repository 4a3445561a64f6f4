"""What super-resolution hands on: its parameters and its output (the upscaled frame,
on the host or the device); shared by the task (task.py) and its device half
(device.py)."""

from __future__ import annotations

from dataclasses import dataclass

from framelens.core.stages.tasks.superres.color import Region
from framelens.core.types import DeviceImage, Image


@dataclass(frozen=True)
class SuperResParams:
    """``tile``: the largest input side run at once (0: chosen from the model and the
    device); read when a pipeline is built. ``region``: (x, y, width, height) in source
    pixels, the only part upscaled (region-of-interest mode; None: the whole frame),
    changeable while a pipeline runs."""

    tile: int = 0
    region: Region | None = None


class Upscaled:
    """One frame's super-resolution output: the upscaled frame, on the host (``image``,
    BGR) or in device memory (``device``, RGBA; the GPU path: ``image`` downloads it on
    first use); both None when no model ran. ``region``: the part of the source frame
    upscaled (None: the whole frame, scale x its size)."""

    __slots__ = ("_image", "device", "region", "scale")

    def __init__(
        self,
        image: Image | None,
        scale: int,
        *,
        device: DeviceImage | None = None,
        region: Region | None = None,
    ) -> None:
        self._image = image
        self.device = device
        self.scale = scale
        self.region = region

    @property
    def image(self) -> Image | None:
        if self._image is None and self.device is not None:
            self._image = self.device.to_host_bgr()
        return self._image

    @property
    def size(self) -> tuple[int, int] | None:
        """(width, height) of the upscaled frame, without downloading it."""
        if self.device is not None:
            return int(self.device.width), int(self.device.height)
        if self._image is not None:
            return int(self._image.shape[1]), int(self._image.shape[0])
        return None

    def __len__(self) -> int:  # frames with output count like frames with detections
        return 0 if self._image is None and self.device is None else 1

    def __repr__(self) -> str:
        return f"Upscaled(scale={self.scale}, size={self.size}, region={self.region})"
