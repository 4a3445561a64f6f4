"""A PNG of the current frame (annotated or not), written atomically."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
from framelens.core.errors import ExportError
from framelens.core.stages.sinks.atomic import StrPath, check_target, write_bytes_atomic
from framelens.core.types import Image


def save_snapshot(image: Image, path: StrPath) -> Path:
    """Save a BGR uint8 image as PNG at ``path`` and return the absolute path."""
    target = Path(path)
    if target.suffix.lower() != ".png":
        raise ExportError(f"cannot write {target}: snapshots are saved as .png")
    check_target(target)  # a missing directory fails before the encoding work
    if image.dtype != np.uint8 or image.ndim not in (2, 3):
        raise ExportError(f"cannot write {target}: not an 8-bit image ({image.dtype})")
    # Level 1: PNG is lossless at every level; higher levels only cost time in the GUI.
    ok, buf = cv2.imencode(".png", image, [cv2.IMWRITE_PNG_COMPRESSION, 1])
    if not ok:
        raise ExportError(f"cannot write {target}: PNG encoding failed")
    written: Path = write_bytes_atomic(target, buf.tobytes())
    return written
