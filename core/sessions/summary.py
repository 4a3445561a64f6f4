"""What a run reports when it ends: typed records, turned into JSON at the edge only.

``framelens run`` prints ``RunSummary.as_json()``; the GUI's export, the archive and the
benchmarks read the attributes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["DeviceSummary", "RunSummary", "SourceSummary"]


@dataclass(frozen=True)
class SourceSummary:
    """One source of a run: the files written, or why it stopped early (``error``:
    nothing of it was written)."""

    source: str
    name: str
    frames: int = 0
    outputs: tuple[str, ...] = ()
    error: str | None = None
    p50_ms: float | None = None  # end to end, per frame
    p99_ms: float | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "name": self.name, "frames": self.frames}
        if self.p50_ms is not None:
            out["p50_ms"], out["p99_ms"] = self.p50_ms, self.p99_ms
        if self.error is not None:
            out["error"] = self.error
        else:
            out["outputs"] = list(self.outputs)
        return out


@dataclass(frozen=True)
class DeviceSummary:
    """One device's share of a several-device run."""

    device: str
    sources: tuple[str, ...]
    frames: int
    fps: float
    mean_batch: float
    path: str
    moved_to: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["sources"], out["moved_to"] = list(self.sources), list(self.moved_to)
        return out


@dataclass(frozen=True)
class RunSummary:
    """A whole run. ``fps`` counts the frames over the time they were being processed;
    ``wall_s`` is the whole call (engines built, sources opened, outputs closed)."""

    sources: tuple[SourceSummary, ...]
    frames: int
    fps: float
    stage_ms: dict[str, float]
    path: str
    model: str
    precision: str
    backend: str
    device: str
    batch: int = 1
    mean_batch: float = 0.0
    inference_workers: int = 1
    wall_s: float = 0.0
    notes: tuple[str, ...] = ()
    encoder: str | None = None
    devices: tuple[DeviceSummary, ...] = ()
    variant: dict[str, Any] | None = field(default=None)
    plan: dict[str, Any] | None = None  # the (first) device's plan: every choice and why

    @property
    def outputs(self) -> list[str]:
        """Every file written, source after source."""
        return [path for s in self.sources for path in s.outputs]

    @property
    def ok(self) -> bool:
        """Every source ran to its end and was written."""
        return all(s.error is None for s in self.sources)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if len(self.sources) == 1:
            out["source"] = self.sources[0].source
        out.update(
            sources=[s.as_json() for s in self.sources],
            frames=self.frames,
            fps=self.fps,
            wall_s=self.wall_s,
            stage_ms=self.stage_ms,
            outputs=self.outputs,
            encoder=self.encoder,
            batch=self.batch,
            mean_batch=self.mean_batch,
            inference_workers=self.inference_workers,
            path=self.path,
            notes=list(self.notes),
            variant=self.variant,
            plan=self.plan,
            model=self.model,
            precision=self.precision,
            backend=self.backend,
            device=self.device,
        )
        if self.devices:
            out["devices"] = [d.as_json() for d in self.devices]
        return out
