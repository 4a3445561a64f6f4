"""Letterbox geometry: where a source image sits inside the network input, and back.

The CPU preprocessing, the CUDA kernels and the task decoders use these same rules.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True, slots=True)
class Letterbox:
    """Geometry of one letterbox: source pixels -> network pixels is x * ratio + pad."""

    ratio: float
    pad_x: float
    pad_y: float
    src_width: int
    src_height: int

    def boxes_to_source(self, boxes: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Map (N, 4) xyxy boxes from network input pixels to source pixels, clipped."""
        out = boxes.astype(np.float32, copy=True)
        out[:, [0, 2]] = (out[:, [0, 2]] - self.pad_x) / self.ratio
        out[:, [1, 3]] = (out[:, [1, 3]] - self.pad_y) / self.ratio
        np.clip(out[:, [0, 2]], 0, self.src_width, out=out[:, [0, 2]])
        np.clip(out[:, [1, 3]], 0, self.src_height, out=out[:, [1, 3]])
        return out

    def points_to_source(self, points: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Map (..., 2) points from network input pixels to source pixels (not clipped)."""
        out = points.astype(np.float32, copy=True)
        out[..., 0] = (out[..., 0] - self.pad_x) / self.ratio
        out[..., 1] = (out[..., 1] - self.pad_y) / self.ratio
        return out


def letterbox_geometry(
    src_w: int, src_h: int, dst_w: int, dst_h: int, align: str
) -> tuple[float, int, int, int, int]:
    """Scale and placement of a source image inside the network input.

    Returns (ratio, new_w, new_h, pad_x, pad_y). The GPU kernels use the same rule.
    """
    ratio = min(dst_w / src_w, dst_h / src_h)
    new_w = max(1, round(src_w * ratio))
    new_h = max(1, round(src_h * ratio))
    if align == "center":
        pad_x, pad_y = (dst_w - new_w) // 2, (dst_h - new_h) // 2
    else:
        pad_x, pad_y = 0, 0
    return ratio, new_w, new_h, pad_x, pad_y


@dataclass(frozen=True, slots=True)
class InputGeometry:
    """Where a source frame goes in the network input: the input's size, the resized
    frame's size and place in it, and the letterbox that maps results back."""

    input_h: int
    input_w: int
    new_w: int
    new_h: int
    pad_x: int
    pad_y: int
    letterbox: Letterbox


def letterbox_input(
    src_w: int, src_h: int, input_h: int, input_w: int, align: str
) -> InputGeometry:
    """The geometry of a letterbox of a ``src_w`` x ``src_h`` frame into that input."""
    ratio, nw, nh, px, py = letterbox_geometry(src_w, src_h, input_w, input_h, align)
    box = Letterbox(ratio, float(px), float(py), src_w, src_h)
    return InputGeometry(input_h, input_w, nw, nh, px, py, box)
