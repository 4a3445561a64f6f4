"""A run's plan: every choice the builder makes, made once, each with its reason.

    PipelineSettings (what the user asked for)
        ──build.plan──> Plan (frozen): the graph (precision variant, batch-N rewrite),
                        the backend, the path (GPU pipeline / host CUDA / CPU), the
                        workers, the batch, the decoder of each source -- and why
        ──build.workers_for──> the pipelines; a session opens each source as planned

``framelens run -v`` prints ``Plan.lines()``, the run's JSON summary holds
``Plan.as_json()``, and the window's status bar shows the lines in its tooltip, so a user
sees why a run took the path it took (no NVDEC for a turned video, TensorRT not usable on
this GPU, the CPU because CUDA is missing) before asking. What only running can tell (a
GPU pipeline that fails to build, NVDEC refusing a codec) is said in the run's notes,
beside the plan it departed from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from framelens.core.pipeline.settings import PipelineSettings

__all__ = ["Choice", "Plan"]


@dataclass(frozen=True)
class Choice:
    """One decision of the plan: what was chosen, and why."""

    value: str
    why: str

    def line(self, what: str) -> str:
        return f"{what}: {self.value} ({self.why})"


@dataclass(frozen=True)
class Plan:
    """What a run of ``asked`` computes with: ``settings`` is what the pipelines are
    built for (the precision's graph, a backend that can run here, the batch, the
    threads); ``asked`` stays what the user asked for."""

    asked: PipelineSettings
    settings: PipelineSettings
    graph: Choice
    backend: Choice
    path: Choice  # "gpu pipeline" | "host pipeline, cuda inference" | "cpu pipeline"
    workers: Choice
    batch: Choice
    decoders: tuple[tuple[str, Choice], ...] = ()  # (source, its decoder)
    worker_count: int = 1
    worker_settings: PipelineSettings | None = None  # each worker's (CPU: one thread each)
    moves: tuple[Choice, ...] = ()  # where the sources went after a device failed, and why
    engine: Choice | None = None  # ONNX Runtime's CUDA options (engine_plan.py); None elsewhere

    @property
    def on_gpu_pipeline(self) -> bool:
        return self.path.value == "gpu pipeline"

    def lines(self) -> list[str]:
        """The plan as a user reads it, one decision a line."""
        out = [
            self.graph.line("model"),
            self.backend.line("backend"),
            self.path.line("path"),
            self.workers.line("workers"),
            self.batch.line("batch"),
        ]
        if self.engine is not None:
            out.append(self.engine.line("engine options"))
        out += [choice.line(f"decoder of {source}") for source, choice in self.decoders]
        out += [choice.line("moved to") for choice in self.moves]
        return out

    def as_json(self) -> dict[str, Any]:
        def pair(choice: Choice) -> dict[str, str]:
            return {"value": choice.value, "why": choice.why}

        out: dict[str, Any] = {
            "model": pair(self.graph),
            "backend": pair(self.backend),
            "path": pair(self.path),
            "workers": pair(self.workers),
            "batch": pair(self.batch),
            "decoders": [{"source": s, **pair(c)} for s, c in self.decoders],
        }
        if self.engine is not None:
            out["engine"] = pair(self.engine)
        if self.moves:
            out["moves"] = [pair(c) for c in self.moves]
        return out
