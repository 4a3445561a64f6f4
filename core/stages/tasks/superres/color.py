"""Super-resolution's colour arithmetic on the host: the frame into a model's input and
the model's output back into a BGR frame. The CUDA kernels (kernels/sr_color.cu) compute
the same steps on the device.

Y-channel models (ESPCN, FSRCNN), exactly:

1. the frame is padded to a multiple of the scale (its last column and row repeated,
   as OpenCV's BORDER_REPLICATE; models that pixel-unshuffle their input need it);
2. OpenCV ``COLOR_BGR2YCrCb``; the model's input is Y / 255 as float32, (1, 1, h, w);
3. the output Y is ``clip(round(255 * out), 0, 255)`` as uint8;
4. Cr and Cb are resized to the output size by ``cv2.resize(..., INTER_CUBIC)``;
5. ``COLOR_YCrCb2BGR`` of the merged planes, cut back to exactly scale x the frame's
   size (the padding's output goes).

Colour models (ESRGAN, Real-ESRGAN and most user exports): the cropped frame in the
model's channel order, times ``input_scale`` (1/255 for 0..1 models), (1, 3, h, w); the
output clipped to 0..1 and rounded to uint8 the same way, and cut back the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt
from framelens.core.models.spec import ModelSpec
from framelens.core.types import Image

F32 = npt.NDArray[np.float32]


def cropped_size(width: int, height: int, scale: int) -> tuple[int, int]:
    """The largest multiple of ``scale`` in (width, height): what a region of interest
    and a known-original downscale (bicubic_downscale) are cut to."""
    return width - width % scale, height - height % scale


def padded_size(width: int, height: int, scale: int) -> tuple[int, int]:
    """The (width, height) a whole frame is padded to before the model: the smallest
    multiple of ``scale`` holding it."""
    return -(-width // scale) * scale, -(-height // scale) * scale


def output_size(width: int, height: int, scale: int) -> tuple[int, int]:
    """The (width, height) of the upscaled frame: exactly ``scale`` x the frame's."""
    return width * scale, height * scale


Region = tuple[int, int, int, int]
"""(x, y, width, height) of a frame in source pixels: the part super-resolution upscales."""


def clamp_region(region: Region | None, width: int, height: int, scale: int) -> Region | None:
    """``region`` inside a ``width`` x ``height`` frame, cropped to a multiple of
    ``scale`` and at least ``scale`` square; None (the whole frame) for no region or one
    outside the frame."""
    if region is None:
        return None
    x, y, w, h = (int(v) for v in region)
    x0, y0 = max(0, min(x, width)), max(0, min(y, height))
    x1, y1 = max(0, min(x + w, width)), max(0, min(y + h, height))
    if x1 <= x0 or y1 <= y0:
        return None
    w, h = max(scale, x1 - x0), max(scale, y1 - y0)
    w, h = min(w - w % scale, width - width % scale), min(h - h % scale, height - height % scale)
    x0, y0 = min(x0, width - w), min(y0, height - h)  # a region at the edge moves inside
    if (x0, y0, w, h) == (0, 0, width, height):
        return None
    return x0, y0, w, h


def to_uint8(values: F32) -> npt.NDArray[np.uint8]:
    """A model's 0..1 output as 8-bit levels: clip(round(255 * out))."""
    levels: npt.NDArray[np.uint8] = np.clip(np.rint(values * np.float32(255.0)), 0, 255).astype(
        np.uint8
    )
    return levels


@dataclass(slots=True)
class SrInput:
    """What the decode step needs of a frame besides the model's output: the size of
    what was upscaled (``width`` x ``height``; the output is scale x that), the padded
    size the model saw (``padded``, (width, height); None: unpadded) and, for Y-channel
    models, the Cr and Cb planes (uint8, padded size)."""

    width: int
    height: int
    chroma: npt.NDArray[np.uint8] | None = None  # (2, h, w): the Cr and Cb planes
    region: Region | None = None  # the part of the frame upscaled; None: all of it
    padded: tuple[int, int] | None = None

    @property
    def model_size(self) -> tuple[int, int]:
        """(width, height) of the model's input."""
        return self.padded if self.padded is not None else (self.width, self.height)


class SrPreprocessor:
    """A BGR frame -> the model's input tensor (reused: consume it before the next call),
    and the frame's ``SrInput`` (``geometry``) for the decode step. With a ``region``
    (clamped by ``clamp_region``) only that part of the frame goes in; without one the
    whole frame does, padded to a multiple of the scale (``padded_size``)."""

    def __init__(
        self, spec: ModelSpec, src_w: int, src_h: int, region: Region | None = None
    ) -> None:
        self.spec = spec
        self.src_w, self.src_h = src_w, src_h
        if src_w < 1 or src_h < 1:
            raise ValueError(f"a {src_w}x{src_h} frame has no pixels to upscale")
        w, h = src_w, src_h
        self.region = clamp_region(region, src_w, src_h, spec.scale)
        self._x, self._y = 0, 0
        if self.region is not None:
            self._x, self._y, w, h = self.region
        self.input_w, self.input_h = w, h
        pw, ph = padded_size(w, h, spec.scale)
        self.padded = (pw, ph) if (pw, ph) != (w, h) else None
        self._tensor = np.empty((1, spec.channels, ph, pw), dtype=np.float32)
        self.geometry = SrInput(w, h, region=self.region, padded=self.padded)

    def __call__(self, image: Image) -> F32:
        if image.shape[1] != self.src_w or image.shape[0] != self.src_h:
            raise ValueError(
                f"frame is {image.shape[1]}x{image.shape[0]}, preprocessor built for "
                f"{self.src_w}x{self.src_h}"
            )
        x, y = self._x, self._y
        crop = image[y : y + self.input_h, x : x + self.input_w]
        if self.padded is not None:
            pw, ph = self.padded
            crop = np.asarray(
                cv2.copyMakeBorder(
                    crop, 0, ph - self.input_h, 0, pw - self.input_w, cv2.BORDER_REPLICATE
                ),
                dtype=np.uint8,
            )
        chroma = None
        if self.spec.channels == 1:
            ycrcb = cv2.cvtColor(crop, cv2.COLOR_BGR2YCrCb)
            np.divide(ycrcb[..., 0], np.float32(255.0), out=self._tensor[0, 0])  # Y / 255
            chroma = np.ascontiguousarray(ycrcb[..., 1:].transpose(2, 0, 1), dtype=np.uint8)
        else:
            src = crop[..., ::-1] if self.spec.color_order == "rgb" else crop
            np.copyto(self._tensor[0], src.transpose(2, 0, 1))
            self._tensor *= np.float32(self.spec.input_scale)
        self.geometry = SrInput(self.input_w, self.input_h, chroma, self.region, self.padded)
        return self._tensor


def merge_output(spec: ModelSpec, out: F32, frame: SrInput) -> Image:
    """One frame's model output (C, sH, sW of the padded input) as the upscaled BGR
    uint8 frame, exactly scale x the frame (the padding's output cut off)."""
    s = spec.scale
    mw, mh = frame.model_size
    want = (mh * s, mw * s)
    if out.ndim != 3 or out.shape[0] != spec.channels or out.shape[1:] != want:
        raise ValueError(
            f"{spec.name}: output {list(out.shape)}, expected "
            f"[{spec.channels}, {want[0]}, {want[1]}] for a {mw}x{mh} input"
        )
    return _cut(_merge(spec, out, frame, want), frame.width * s, frame.height * s)


def _cut(image: Image, width: int, height: int) -> Image:
    if image.shape[1] == width and image.shape[0] == height:
        return image
    return np.ascontiguousarray(image[:height, :width])


def _merge(spec: ModelSpec, out: F32, frame: SrInput, want: tuple[int, int]) -> Image:
    if spec.channels == 1:
        assert frame.chroma is not None, "a Y-channel frame keeps its chroma"
        merged = np.empty((*want, 3), dtype=np.uint8)
        merged[..., 0] = to_uint8(out[0])
        for i in (1, 2):  # plane by plane: OpenCV's 2-channel cubic path rounds otherwise
            merged[..., i] = cv2.resize(
                frame.chroma[i - 1], (want[1], want[0]), interpolation=cv2.INTER_CUBIC
            )
        return np.asarray(cv2.cvtColor(merged, cv2.COLOR_YCrCb2BGR), dtype=np.uint8)
    # colour models: 0..1 out (input_scale 1/255) or 0..255 (input_scale 1)
    levels = out / np.float32(255.0 * spec.input_scale)
    image = to_uint8(levels).transpose(1, 2, 0)
    if spec.color_order == "rgb":
        image = image[..., ::-1]
    return np.ascontiguousarray(image)


def bicubic_upscale(image: Image, scale: int) -> Image:
    """The baseline every model is measured against: the frame, INTER_CUBIC, scale x."""
    h, w = image.shape[:2]
    up = cv2.resize(image, (w * scale, h * scale), interpolation=cv2.INTER_CUBIC)
    return np.asarray(up, dtype=np.uint8)


def bicubic_downscale(image: Image, scale: int) -> Image:
    """A frame cropped to a multiple of ``scale`` and shrunk by it (INTER_CUBIC): the
    low-resolution input whose original is known (compare's quality numbers)."""
    h, w = image.shape[:2]
    cw, ch = cropped_size(w, h, scale)
    down = cv2.resize(image[:ch, :cw], (cw // scale, ch // scale), interpolation=cv2.INTER_CUBIC)
    return np.asarray(down, dtype=np.uint8)
