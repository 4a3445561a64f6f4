"""What a run reports when it ends: typed records, turned into JSON at the edge only.

``framelens run`` prints ``RunSummary.as_json()``; the GUI's export, the archive and the
benchmarks read the attributes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["DeviceSummary", "EngineCalls", "Ran", "RunSummary", "SourceSummary"]


PER_DEVICE = (
    "each device has its own plan (devices[i].plan); model, backend, path, workers and "
    "batch here are the first device's, the decoders every source's"
)


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
    tracks: int | None = None  # distinct tracks its results carried (None: no tracker)
    analytics: dict[str, Any] | None = None  # counts by line and zone (docs/analytics.md)
    dropped: int | None = None  # frames not taken in time (played as a camera: --realtime)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "name": self.name, "frames": self.frames}
        if self.dropped is not None:
            out["dropped"] = self.dropped
        if self.tracks is not None:
            out["tracks"] = self.tracks
        if self.analytics is not None:
            out["analytics"] = self.analytics
        if self.p50_ms is not None:
            out["p50_ms"], out["p99_ms"] = self.p50_ms, self.p99_ms
        if self.error is not None:
            out["error"] = self.error
        else:
            out["outputs"] = list(self.outputs)
        return out


@dataclass(frozen=True)
class Ran:
    """How a device's workers ran (the last ones, after a move): the path in words (a
    single source's decoder included), the backend, the frames per engine call asked
    for, the inference workers, and the plan they followed (core/pipeline/plan.py, as
    JSON)."""

    path: str
    backend: str
    batch: int
    workers: int
    plan: dict[str, Any] | None = None


@dataclass(frozen=True)
class EngineCalls:
    """Engine calls over every device a session used, and the frames in them."""

    calls: int = 0
    frames: int = 0

    @property
    def mean_batch(self) -> float:
        """The batch the load gave (frames per call)."""
        return round(self.frames / self.calls, 2) if self.calls else 0.0


@dataclass(frozen=True)
class DeviceSummary:
    """What one device's session did (a process sends it back to the parent): its
    sources' outcomes (``ids``: their numbers in the run), the frames written and how
    fast (``span``: the perf_counter span its results came in), the median stage
    times, its engine calls, how it ran, and what it said."""

    device: str  # the device it was given (``moved_to``: where it went on after a failure)
    ids: tuple[int, ...]
    outcomes: tuple[SourceSummary, ...]
    frames: int
    fps: float
    span: tuple[float, float]
    stage_ms: dict[str, float]
    calls: EngineCalls
    ran: Ran
    encoder: str | None = None
    notes: tuple[str, ...] = ()
    moved_to: tuple[str, ...] = ()

    @property
    def sources(self) -> tuple[str, ...]:
        """Its sources' names."""
        return tuple(s.name for s in self.outcomes)

    @property
    def mean_batch(self) -> float:
        return self.calls.mean_batch

    @property
    def path(self) -> str:
        return self.ran.path

    def as_json(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "sources": list(self.sources),
            "frames": self.frames,
            "fps": self.fps,
            "mean_batch": self.mean_batch,
            "path": self.path,
            "moved_to": list(self.moved_to),
            "plan": self.ran.plan,
        }


@dataclass(frozen=True)
class RunSummary:
    """A whole run: every device's part (one for a run on one device) and what the run
    was asked (``model``, ``precision``, ``device``: the devices, or where a one-source
    run ended). ``fps`` counts the frames over the time they were being processed;
    ``wall_s`` is the whole call (engines built, sources opened, outputs closed). The
    rest is read from the parts: how the first device ran stands for the run."""

    devices: tuple[DeviceSummary, ...]
    model: str
    precision: str
    device: str
    wall_s: float = 0.0
    variant: dict[str, Any] | None = field(default=None)
    tracker: dict[str, Any] | None = None  # the tracker that ran and its parameters

    @property
    def sources(self) -> tuple[SourceSummary, ...]:
        """Every source's outcome, in the run's order."""
        by_id = {i: s for d in self.devices for i, s in zip(d.ids, d.outcomes, strict=True)}
        return tuple(by_id[i] for i in sorted(by_id))

    @property
    def frames(self) -> int:
        return sum(d.frames for d in self.devices)

    @property
    def fps(self) -> float:
        """Over the span frames were processed (the devices run at once), not over the
        setup: engines built, decoders opened and outputs closed are in wall_s."""
        if len(self.devices) == 1:  # over its own frames' span, as RunStats measures it
            return self.devices[0].fps
        span = max(d.span[1] for d in self.devices) - min(d.span[0] for d in self.devices)
        return round(self.frames / span, 2) if span > 0 else 0.0

    @property
    def _first(self) -> DeviceSummary:
        return self.devices[0]

    @property
    def stage_ms(self) -> dict[str, float]:
        return self._first.stage_ms

    @property
    def path(self) -> str:
        return self._first.ran.path

    @property
    def backend(self) -> str:
        return self._first.ran.backend

    @property
    def batch(self) -> int:
        return self._first.ran.batch

    @property
    def plan(self) -> dict[str, Any] | None:
        """The run's plan: every choice and why (after a move, the move's). Several
        devices: each has its own (``devices[i].plan`` in the JSON); this one holds the
        first device's choices with every device's decoders, and says so."""
        first = self._first.ran.plan
        if len(self.devices) == 1 or first is None:
            return first
        decoders = [d for part in self.devices for d in (part.ran.plan or {}).get("decoders", [])]
        return {**first, "decoders": decoders, "per_device": PER_DEVICE}

    @property
    def encoder(self) -> str | None:
        return self._first.encoder

    @property
    def mean_batch(self) -> float:
        calls = EngineCalls(
            sum(d.calls.calls for d in self.devices), sum(d.calls.frames for d in self.devices)
        )
        return calls.mean_batch

    @property
    def inference_workers(self) -> int:
        return sum(d.ran.workers for d in self.devices)

    @property
    def notes(self) -> tuple[str, ...]:
        return tuple(n for d in self.devices for n in d.notes)

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
        sources = self.sources
        if len(sources) == 1:
            out["source"] = sources[0].source
        out.update(
            sources=[s.as_json() for s in sources],
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
        if self.tracker is not None:
            out["tracker"] = self.tracker
        if len(self.devices) > 1:
            out["devices"] = [d.as_json() for d in self.devices]
        return out
