"""A stage after the tracker that notes each frame's latency: paced.py's probe.

Chained after the run's tracker through the product's per-source stage slot
(core/stages/source_stages.py), in the run's own processes: for every result of its
source it appends ``index pts e2e_ms t_ms`` to ``FOLDER/<source number>.txt`` (a line at
a time, so a process that ends leaves complete lines). ``e2e_ms`` is the result's
end-to-end time, from the frame's release by its paced source
(core/stages/sources/paced.py) to here; ``t_ms`` is ``time.perf_counter()`` in ms, the
clock every process of the machine shares (Linux CLOCK_MONOTONIC).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

__all__ = ["LatencyProbe", "read_probe"]


class _Probe:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._fh: IO[str] | None = None

    def __call__(self, result: Any) -> None:
        if self._fh is None:
            self._fh = open(self._path, "a", buffering=1)  # noqa: SIM115 (kept open)
        frame = result.frame
        self._fh.write(
            f"{frame.index} {frame.pts:.4f} {result.times.e2e:.3f} "
            f"{time.perf_counter() * 1000.0:.3f}\n"
        )

    def reset(self) -> None:
        pass


@dataclass(frozen=True)
class LatencyProbe:
    """The stage factory (picklable: a run's processes make their sources' probes)."""

    folder: str

    def __call__(self, number: int) -> Sequence[_Probe]:
        return [_Probe(Path(self.folder) / f"{number}.txt")]


def read_probe(folder: str, number: int) -> dict[str, np.ndarray]:
    """Source ``number``'s lines as arrays: index, pts, e2e (ms), t (ms)."""
    path = Path(folder) / f"{number}.txt"
    rows = np.loadtxt(path, ndmin=2) if path.is_file() and path.stat().st_size else None
    if rows is None or rows.size == 0:
        rows = np.zeros((0, 4))
    return {
        "index": rows[:, 0].astype(np.int64),
        "pts": rows[:, 1],
        "e2e": rows[:, 2],
        "t": rows[:, 3],
    }
