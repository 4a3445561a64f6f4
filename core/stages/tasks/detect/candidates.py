"""Detection candidates: the rows of a batch's output that pass the gate, per frame.

The YOLOv5 and YOLOX layouts (B, rows, 5 + C) carry an objectness in column 4 that
bounds every class score (score = objectness x class), so rows whose objectness does
not beat the confidence threshold cannot become detections: the decoder's first step
keeps only the others. Two implementations of that step, side by side:

- ``gather_host``: numpy on the host output (the CPU path, and the GPU path's
  fallback);
- ``DeviceCandidateGather`` (candidates_cuda.py): a kernel on the device output
  (kernels/candidates.cu), so that only the passing rows cross to the host.

Both hand the decoder the same ``Candidates``: frame and row numbers ascending (the
order ``np.nonzero`` gives), the rows' values as float32, so it decodes them the same.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
Index = npt.NDArray[np.intp]


@dataclass(frozen=True)
class Candidates:
    """``values[i]`` is row ``row[i]`` of frame ``frame[i]`` of a batch of ``frames``
    frames with ``rows`` rows each; ordered by frame, then row."""

    frames: int
    rows: int
    frame: Index
    row: Index
    values: F32

    def bounds(self) -> list[tuple[int, int]]:
        """Per frame, the slice [start, stop) of its candidates."""
        edges = np.searchsorted(self.frame, np.arange(self.frames + 1))
        return [(int(edges[k]), int(edges[k + 1])) for k in range(self.frames)]

    def select(self, keep: Index) -> Candidates:
        """The candidates at positions ``keep`` (ascending), still in order."""
        return Candidates(self.frames, self.rows, self.frame[keep], self.row[keep],
                          self.values[keep])  # fmt: skip


def gather_host(batch: F32, gate: int, conf: float) -> Candidates:
    """The rows of ``batch`` (frames, rows, cols) whose column ``gate`` beats ``conf``."""
    frame, row = np.nonzero(batch[:, :, gate] > conf)
    return Candidates(int(batch.shape[0]), int(batch.shape[1]), frame, row, batch[frame, row])


def from_flat(flat: npt.NDArray[np.int32], values: F32, frames: int, rows: int) -> Candidates:
    """Candidates gathered in any order, each with its flat row number
    (frame * rows + row): sorted into the host's order."""
    order = np.argsort(flat, kind="stable")
    flat64 = flat[order].astype(np.intp)
    return Candidates(frames, rows, flat64 // rows, flat64 % rows,
                      np.ascontiguousarray(values[order], dtype=np.float32))  # fmt: skip
