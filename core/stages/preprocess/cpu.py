"""CPU preprocessing: letterbox resize, colour order, scaling, HWC->CHW into a reused tensor."""

from __future__ import annotations

import cv2
import numpy as np
import numpy.typing as npt
from framelens.core.geometry import InputGeometry, Letterbox
from framelens.core.models.spec import ModelSpec, input_geometry
from framelens.core.types import Image


class Preprocessor:
    """Turns a BGR frame into the model's input tensor. The tensor is allocated once.

    The letterbox resize is bilinear in float32 (OpenCV's INTER_LINEAR on float input,
    half-pixel centres), with no rounding back to 8 bits: exactly what the GPU's fused
    kernel computes, so the CPU and GPU pipelines see the same tensor (OpenCV's 8-bit
    resize uses 11-bit fixed-point weights, which a GPU cannot reproduce portably, and
    on this video such off-by-one pixels flipped detections near the threshold).

    The returned tensor is reused on the next call: consume it before calling again.
    """

    def __init__(
        self, spec: ModelSpec, src_w: int, src_h: int, geometry: InputGeometry | None = None
    ) -> None:
        """``geometry``: where the frame goes in the input (the task's; by default the
        letterbox of ``spec``)."""
        self.spec = spec
        self.src_w, self.src_h = src_w, src_h
        g = geometry if geometry is not None else input_geometry(spec, src_w, src_h)
        h, w, nw, nh = g.input_h, g.input_w, g.new_w, g.new_h
        self.input_h, self.input_w = h, w
        self.geometry: Letterbox = g.letterbox
        self._new_size = (nw, nh)
        self._source = np.empty((src_h, src_w, 3), dtype=np.float32)
        self._canvas = np.full((h, w, 3), spec.pad_value, dtype=np.float32)
        self._resized = np.empty((nh, nw, 3), dtype=np.float32)
        self._tensor = np.empty((1, 3, h, w), dtype=np.float32)

    def __call__(self, image: Image) -> npt.NDArray[np.float32]:
        if image.shape[1] != self.src_w or image.shape[0] != self.src_h:
            raise ValueError(
                f"frame is {image.shape[1]}x{image.shape[0]}, preprocessor built for "
                f"{self.src_w}x{self.src_h}"
            )
        nw, nh = self._new_size
        px, py = int(self.geometry.pad_x), int(self.geometry.pad_y)
        region = self._canvas[py : py + nh, px : px + nw]
        if (nw, nh) == (self.src_w, self.src_h):
            region[...] = image
        else:
            np.copyto(self._source, image)
            # cv2 writes only into contiguous dst arrays, so resize into a reused one.
            cv2.resize(self._source, (nw, nh), dst=self._resized, interpolation=cv2.INTER_LINEAR)
            region[...] = self._resized
        src = self._canvas
        if self.spec.color_order == "rgb":
            src = src[..., ::-1]
        # HWC -> CHW in the reused tensor, scaled in place.
        np.copyto(self._tensor[0], src.transpose(2, 0, 1))
        if self.spec.input_scale != 1.0:
            self._tensor *= np.float32(self.spec.input_scale)
        return self._tensor
